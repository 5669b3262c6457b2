//! The tool search (`trie::sets::search`) over a catalog of 100,000 generated tools, the size of the registries it
//! serves: every tool is found first by its own description's rare words and by a regex of its name; results are
//! the same from threads sharing one index; k, ties and a query that matches nothing behave as documented; the
//! index agrees with a direct computation of BM25 for random queries.

use proptest::prelude::*;
use std::sync::Arc;
use trie::sets::search::{tokens, Mode, SearchLimits, ToolSearch, BM25_B, BM25_K1};

const VERBS: [&str; 8] = ["get", "set", "list", "delete", "create", "update", "search", "send"];
const NOUNS: [&str; 10] = ["user", "order", "invoice", "weather", "email", "file", "ticket", "price", "map", "song"];

/// Tool `i`: a name from a verb, a noun and the number; a description with the words, a code word unique to it.
fn catalog(n: usize) -> String {
    let tools: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let (v, o) = (VERBS[i % 8], NOUNS[(i / 8) % 10]);
            serde_json::json!({"type": "function", "function": {
                "name": format!("{v}{}_{i}", o[..1].to_uppercase() + &o[1..]),
                "description": format!("{v} the {o} of an account, code word zq{i}x"),
                "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}})
        })
        .collect();
    serde_json::to_string(&tools).unwrap()
}

#[test]
fn a_100000_tool_catalog_finds_each_tool() {
    let s = Arc::new(ToolSearch::from_json(catalog(100_000).as_bytes(), SearchLimits::default()).unwrap());
    assert_eq!(s.names().len(), 100_000);
    assert_eq!(s.names()[17], "setInvoice_17");
    for i in [0usize, 17, 4_242, 99_999] {
        let hits = s.search(Mode::Bm25, &format!("please use zq{i}x now"), 3).unwrap();
        assert_eq!(hits.len(), 1, "only tool {i} has that word");
        assert_eq!(hits[0].tool, i);
        let hits = s.search(Mode::Regex, &format!("_{i}$"), 3).unwrap();
        assert_eq!(hits.iter().map(|h| h.tool).collect::<Vec<_>>(), vec![i]);
    }
    // camelCase names are split: "deleteOrder" answers "delete order", every such tool ties, list order first.
    let hits = s.search(Mode::Bm25, "delete order", 5).unwrap();
    assert_eq!(hits.iter().map(|h| h.tool).collect::<Vec<_>>(), vec![11, 91, 171, 251, 331]);
    assert!(s.search(Mode::Bm25, "nothing matches this", 5).unwrap().is_empty());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.search(Mode::Bm25, &format!("zq{}x send", 1000 + t), 10).unwrap())
        })
        .collect();
    for (t, h) in threads.into_iter().enumerate() {
        let hits = h.join().unwrap();
        assert_eq!(hits[0].tool, 1000 + t);
        assert_eq!(hits, s.search(Mode::Bm25, &format!("zq{}x send", 1000 + t), 10).unwrap());
    }
}

/// BM25 computed directly from the documents (no postings), for comparison.
fn direct(docs: &[Vec<String>], query: &str) -> Vec<(usize, f64)> {
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| d.len()).sum::<usize>() as f64 / n;
    let mut terms = tokens(query);
    terms.sort();
    terms.dedup();
    let mut out = vec![];
    for (i, d) in docs.iter().enumerate() {
        let mut score = 0.0;
        for t in &terms {
            let tf = d.iter().filter(|w| *w == t).count() as f64;
            let df = docs.iter().filter(|d| d.contains(t)).count() as f64;
            if tf > 0.0 {
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                score += idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * d.len() as f64 / avg));
            }
        }
        if score > 0.0 {
            out.push((i, score));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn bm25_matches_the_formula(
        texts in prop::collection::vec(prop::collection::vec(0usize..12, 0..12), 1..30),
        query in prop::collection::vec(0usize..14, 1..6),
        k in 1usize..40,
    ) {
        let word = |w: usize| format!("w{w}");
        let tools: Vec<(String, String)> = texts.iter().enumerate()
            .map(|(i, ws)| (format!("t{i}"), ws.iter().map(|&w| word(w)).collect::<Vec<_>>().join(" "))).collect();
        let docs: Vec<Vec<String>> = tools.iter().map(|(n, t)| tokens(n).into_iter().chain(tokens(t)).collect()).collect();
        let s = ToolSearch::new(tools, SearchLimits::default()).unwrap();
        let q = query.iter().map(|&w| word(w)).collect::<Vec<_>>().join(" ");
        let got = s.search(Mode::Bm25, &q, k).unwrap();
        let want = direct(&docs, &q);
        prop_assert_eq!(got.len(), want.len().min(k));
        for (g, (i, score)) in got.iter().zip(&want) {
            prop_assert!((g.score - score).abs() < 1e-9, "{} vs {}", g.score, score);
            // equal scores may come in either order only when they are equal to within rounding
            if g.tool != *i {
                prop_assert!((g.score - s.search(Mode::Bm25, &q, 40).unwrap().iter().find(|h| h.tool == *i).unwrap().score).abs() < 1e-9);
            }
        }
    }
}
