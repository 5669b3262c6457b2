//! Incremental updates (`Automaton::with_changes`): the result is byte for byte the automaton a full compile of
//! the resulting set gives, on real vocabularies, for random sets and random batches of additions and removals.
mod common;

use common::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::Arc;
use trie::{Automaton, CompileOptions, End, ErrorKind, Render, Template, Vocabulary};

/// `add ++ (set − (remove − add))`: the list whose full compile `with_changes` must equal.
fn expected_list(set: &[Vec<u8>], add: &[Vec<u8>], remove: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let add_set: BTreeSet<&Vec<u8>> = add.iter().collect();
    let gone: BTreeSet<&Vec<u8>> = remove.iter().filter(|r| !add_set.contains(r)).collect();
    let rest: BTreeSet<&Vec<u8>> = set.iter().filter(|s| !gone.contains(s)).collect();
    add.iter().cloned().chain(rest.into_iter().cloned()).collect()
}

/// Applies the changes both ways and compares; returns the updated automaton (or the shared error kind).
fn check(
    vocab: &Arc<Vocabulary>,
    name: &str,
    set: &[Vec<u8>],
    add: &[Vec<u8>],
    remove: &[Vec<u8>],
    options: &CompileOptions,
) -> Result<Option<Automaton>, TestCaseError> {
    let old = Automaton::compile(vocab.clone(), set, options).unwrap();
    let before = old.to_bytes();
    let got = old.with_changes(add, remove, options);
    prop_assert_eq!(&old.to_bytes(), &before, "{}: the old automaton changed", name);
    let list = expected_list(set, add, remove);
    let want = Automaton::compile(vocab.clone(), &list, options);
    match (got, want) {
        (Ok(g), Ok(w)) => {
            prop_assert!(g.to_bytes() == w.to_bytes(), "{}: differs from a full compile ({:?} vs {:?})", name, g, w);
            prop_assert_eq!(g.dropped(), w.dropped());
            Ok(Some(g))
        }
        (Err(g), Err(w)) => {
            prop_assert_eq!(g.kind(), w.kind(), "{}: {} / {}", name, g, w);
            Ok(None)
        }
        (g, w) => Err(TestCaseError::fail(format!("{name}: {:?} vs {:?}", g.err(), w.err()))),
    }
}

/// A random batch: some members of `set` (and strings that are not), some new strings, prefixes and extensions
/// of members, the empty string, duplicates.
fn batch(rng: &mut SmallRng, set: &[Vec<u8>], n: usize, fresh: &[String]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for _ in 0..n {
        let pick = rng.gen_range(0..10);
        let member = set[rng.gen_range(0..set.len())].clone();
        out.push(match pick {
            0..=2 => member,
            3 => {
                let mut m = member;
                let cut = rng.gen_range(0..=m.len());
                m.truncate(cut);
                m
            }
            4 => {
                let mut m = member;
                m.extend_from_slice(fresh[rng.gen_range(0..fresh.len())].as_bytes());
                m
            }
            5 => Vec::new(),
            6 if !out.is_empty() => out[rng.gen_range(0..out.len())].clone(),
            _ => fresh[rng.gen_range(0..fresh.len())].as_bytes().to_vec(),
        });
    }
    out
}

fn bytes_of(set: &[String]) -> Vec<Vec<u8>> {
    set.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Vocabularies of the property test: byte-level BPE (the fast path), SentencePiece with byte fallback, and
/// one that lacks some single bytes (pruning and explicit tails: the full-compile path).
const VOCABS: &[&str] = &["qwen2", "llama-spm", "gemma-4", "phi-3"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Property: for random sets (multi-byte UTF-8, prefixes, duplicates, the empty string) and random batches of
    /// additions and removals, `with_changes` equals a full compile of the resulting set, byte for byte, on real
    /// vocabularies; applying several batches in a row stays equal too.
    #[test]
    fn updates_equal_full_compiles(seed in any::<u64>(), k in 1usize..300, n_add in 0usize..12, n_remove in 0usize..12) {
        let set = bytes_of(&random_set(seed, k, 4));
        let fresh = random_set(seed ^ 0x9e37, 50, 3);
        let mut rng = SmallRng::seed_from_u64(seed);
        for &name in VOCABS {
            let vocab = gguf_vocab(name);
            let add = batch(&mut rng, &set, n_add, &fresh);
            let remove = batch(&mut rng, &set, n_remove, &fresh);
            let options = CompileOptions::new().drop_unreachable(true);
            let Some(updated) = check(&vocab, name, &set, &add, &remove, &options)? else { continue };
            // A second batch on the updated automaton.
            let now: Vec<Vec<u8>> = expected_list(&set, &add, &remove);
            let add2 = batch(&mut rng, &now, n_add, &fresh);
            let remove2 = batch(&mut rng, &now, n_remove + 1, &fresh);
            let got = updated.with_changes(&add2, &remove2, &options);
            // `updated` dropped nothing it was given in `now` except unreachable strings: compare against the
            // members it can produce.
            let members: Vec<Vec<u8>> = now.iter().enumerate().filter(|(i, _)| !updated.dropped().contains(i)).map(|(_, s)| s.clone()).collect();
            let want = Automaton::compile(vocab.clone(), &expected_list(&members, &add2, &remove2), &options);
            match (got, want) {
                (Ok(g), Ok(w)) => prop_assert!(g.to_bytes() == w.to_bytes(), "{}: second batch differs", name),
                (Err(g), Err(w)) => prop_assert_eq!(g.kind(), w.kind()),
                (g, w) => return Err(TestCaseError::fail(format!("{name}: second batch {:?} vs {:?}", g.err(), w.err()))),
            }
        }
    }
}

/// The 4,000 tool names of data/tools.txt.
fn tool_names() -> Vec<String> {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/tools.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn tool_names_one_at_a_time() {
    let vocab = gguf_vocab("qwen2");
    let tools = tool_names();
    let set = bytes_of(&tools[..3000]);
    let options = CompileOptions::new();
    let mut a = Automaton::compile(vocab.clone(), &set, &options).unwrap();
    let mut members: BTreeSet<Vec<u8>> = set.iter().cloned().collect();
    for (i, t) in tools[3000..3040].iter().enumerate() {
        let add = vec![t.as_bytes().to_vec()];
        let remove = vec![tools[i * 7].as_bytes().to_vec()];
        a = a.with_changes(&add, &remove, &options).unwrap();
        members.insert(add[0].clone());
        members.remove(&remove[0]);
        let list: Vec<Vec<u8>> = members.iter().cloned().collect();
        let full = Automaton::compile(vocab.clone(), &list, &options).unwrap();
        assert!(a.to_bytes() == full.to_bytes(), "step {i}");
    }
}

#[test]
fn multibyte_cities() {
    let cities: Vec<Vec<u8>> = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/cities-utf8.txt"))
        .unwrap()
        .lines()
        .map(|l| l.as_bytes().to_vec())
        .collect();
    for &name in VOCABS {
        let vocab = gguf_vocab(name);
        let options = CompileOptions::new().drop_unreachable(true);
        let (set, extra) = cities.split_at(40);
        check(&vocab, name, set, extra, &set[..10], &options).unwrap();
        check(&vocab, name, set, &[], &set[5..], &options).unwrap();
    }
}

#[test]
fn semantics_of_odd_changes() {
    let vocab = gguf_vocab("qwen2");
    let o = CompileOptions::new();
    let a = Automaton::compile(vocab.clone(), &["alpha", "beta"], &o).unwrap();
    // Removing a non-member does nothing; adding a member does nothing.
    let b = a.with_changes(&["alpha"], &["gamma"], &o).unwrap();
    assert!(b.to_bytes() == a.to_bytes());
    // A string in both lists stays.
    let b = a.with_changes(&["gamma"], &["gamma", "beta"], &o).unwrap();
    assert_eq!(b.n_members(), 2);
    assert!(b.to_bytes() == Automaton::compile(vocab.clone(), &["alpha", "gamma"], &o).unwrap().to_bytes());
    // Removing everything is an empty set.
    let e = a.with_changes::<&str, _>(&[], &["alpha", "beta"], &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptySet);
    // The empty string, prefixes of members.
    let b = a.with_changes(&["", "al", "alphabet"], &[] as &[&str], &o).unwrap();
    assert_eq!(b.n_members(), 5);
    let c = b.with_changes(&[] as &[&str], &["", "alpha"], &o).unwrap();
    assert!(c.to_bytes() == Automaton::compile(vocab.clone(), &["al", "alphabet", "beta"], &o).unwrap().to_bytes());
    // max_states bounds the new set.
    let e = a
        .with_changes(&["a much longer string than the others"], &[] as &[&str], &o.clone().max_states(12))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert!(e.message().contains("max_states = 12"), "{e}");
}

#[test]
fn unreachable_additions_are_named_or_dropped() {
    // phi-3 lacks single-byte tokens for some bytes: strings of those bytes cannot be produced.
    for &name in VOCABS {
        let vocab = gguf_vocab(name);
        let missing: Vec<u8> = (0..=255u8)
            .filter(|&b| Automaton::compile(vocab.clone(), &[[b]], &CompileOptions::new()).is_err())
            .collect();
        let Some(&b) = missing.first() else { continue };
        let o = CompileOptions::new();
        let a = Automaton::compile(vocab.clone(), &["alpha", "beta"], &o).unwrap();
        let bad = vec![b'x', b];
        let e = a.with_changes(&[b"ok".to_vec(), bad.clone()], &[] as &[&str], &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnreachableString, "{name}");
        assert!(e.message().contains("string 1 "), "{name}: {e}");
        let d = a
            .with_changes(&[b"ok".to_vec(), bad.clone(), bad], &[] as &[&str], &o.clone().drop_unreachable(true))
            .unwrap();
        assert_eq!(d.dropped(), &[1, 2], "{name}");
        assert_eq!(d.n_members(), 3);
        // An automaton that dropped strings updates too (by a full compile).
        let e = d.with_changes(&["gamma"], &["alpha"], &o).unwrap();
        assert!(
            e.to_bytes() == Automaton::compile(vocab.clone(), &["gamma", "beta", "ok"], &o).unwrap().to_bytes(),
            "{name}"
        );
    }
}

/// Exhaustive-ish small cases over a tiny alphabet (with a two-byte character): many sets, many batches.
#[test]
fn many_small_cases() {
    let vocab = gguf_vocab("qwen2");
    let o = CompileOptions::new();
    let mut rng = SmallRng::seed_from_u64(3);
    let alphabet: [&[u8]; 4] = [b"a", b"b", "\u{e9}".as_bytes(), b"ab"];
    let word = |rng: &mut SmallRng| -> Vec<u8> {
        (0..rng.gen_range(0..4)).flat_map(|_| alphabet[rng.gen_range(0..4)].to_vec()).collect()
    };
    for case in 0..3000 {
        let set: Vec<Vec<u8>> = (0..rng.gen_range(1..7)).map(|_| word(&mut rng)).collect();
        let add: Vec<Vec<u8>> = (0..rng.gen_range(0..4)).map(|_| word(&mut rng)).collect();
        let remove: Vec<Vec<u8>> = (0..rng.gen_range(0..4))
            .map(|_| if rng.gen_bool(0.7) { set[rng.gen_range(0..set.len())].clone() } else { word(&mut rng) })
            .collect();
        let show = |v: &[Vec<u8>]| v.iter().map(|s| String::from_utf8_lossy(s).to_string()).collect::<Vec<_>>();
        if let Err(e) = check(&vocab, "qwen2", &set, &add, &remove, &o) {
            panic!("case {case}: set {:?} add {:?} remove {:?}: {e}", show(&set), show(&add), show(&remove));
        }
    }
}

/// A set large enough that the copied rows are split into many pieces filled in parallel, and batches that
/// touch runs of chains, members and rows all over it (additions next to members, removals, both at once).
#[test]
fn large_set_in_batches() {
    let vocab = gguf_vocab("qwen2");
    let tools = tool_names();
    let names: Vec<Vec<u8>> = (0..40_000).map(|i| format!("{}_v{}", tools[i % 3000], i / 3000).into_bytes()).collect();
    let options = CompileOptions::new();
    let mut rng = SmallRng::seed_from_u64(40_000);
    let mut set = names[..30_000].to_vec();
    for round in 0..4 {
        let add: Vec<Vec<u8>> = (0..60)
            .map(|_| {
                let mut s = names[rng.gen_range(0..names.len())].clone();
                if rng.gen_bool(0.3) {
                    s.extend_from_slice(b"_x");
                }
                s
            })
            .collect();
        let remove: Vec<Vec<u8>> = (0..60).map(|_| set[rng.gen_range(0..set.len())].clone()).collect();
        let a = check(&vocab, &format!("round {round}"), &set, &add, &remove, &options).unwrap().unwrap();
        assert!(a.n_states() > 50_000, "{}", a.n_states());
        set = expected_list(&set, &add, &remove);
    }
}

/// Removing members before a run of unchanged ones moves that run's offsets down: the shift must not be computed
/// as an unsigned `new - old` (an overflow panic under debug assertions, found by the `update` fuzz target on its
/// first seed). Run in a debug build to see the difference: release arithmetic wraps to the same offsets.
#[test]
fn removals_before_unchanged_members_shift_their_offsets_down() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"</s>".to_vec());
    let mut kinds = vec![trie::TokenKind::Normal; 257];
    kinds[256] = trie::TokenKind::Control;
    let vocab = Arc::new(Vocabulary::new(tokens, kinds, &[256], None).unwrap());
    let set: Vec<Vec<u8>> = ["ab", "abc", "bd", "bdd", "c"].iter().map(|s| s.as_bytes().to_vec()).collect();
    let bytes = |l: &[&str]| l.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    for (add, remove) in
        [(vec![], vec!["ab"]), (vec!["a"], vec!["ab", "abc"]), (vec!["dd"], vec!["abc"]), (vec![], vec!["bd", "ab"])]
    {
        let got = check(&vocab, "toy", &set, &bytes(&add), &bytes(&remove), &CompileOptions::new()).unwrap();
        assert!(got.is_some(), "add {add:?}, remove {remove:?}");
    }
}

// Templated automata: `with_changes` renders the changes and updates the segments; the result is byte for byte
// `compile_template` of `add ++ (members in segment order − remove)` (see `src/compile/incremental/templated.rs`).

/// 40 bytes: the tool-call frame before a name (as `benches/template.rs`).
const PREFIX: &str = "<tool_call>\n{\"type\": \"function\", \"name\":";

/// The templates of the tests: raw members inside quotes ending with end-of-generation, JSON strings with an open
/// end (`", "arguments": ` after the name), and the bare template.
fn templates() -> Vec<(&'static str, Template)> {
    vec![
        ("raw_quoted", Template::bare().prefix(format!("{PREFIX} \"")).suffix("\", \"arguments\": ")),
        (
            "json_open",
            Template::bare()
                .prefix(format!("{PREFIX} "))
                .suffix(", \"arguments\": ")
                .render(Render::JsonString)
                .end(End::Open),
        ),
        ("bare", Template::bare()),
    ]
}

fn segment(t: &Template, m: &[u8]) -> Option<Vec<u8>> {
    let mut s = t.prefix.clone();
    t.render_member(m, &mut s).ok()?;
    s.extend_from_slice(&t.suffix);
    Some(s)
}

/// `add ++ (members − (remove − add))`, the members being the distinct strings of `list` the automaton `a` (its
/// compile) did not drop, in the byte order of their segments.
fn expected_templated(a: &Automaton, list: &[Vec<u8>], add: &[Vec<u8>], remove: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let t = a.template().unwrap();
    let add_set: BTreeSet<Vec<u8>> = add.iter().filter_map(|m| segment(t, m)).collect();
    let gone: BTreeSet<Vec<u8>> =
        remove.iter().filter_map(|r| segment(t, r)).filter(|s| !add_set.contains(s)).collect();
    let mut rest: Vec<(Vec<u8>, Vec<u8>)> = list
        .iter()
        .enumerate()
        .filter(|(i, _)| !a.dropped().contains(i))
        .filter_map(|(_, m)| Some((segment(t, m)?, m.clone())))
        .filter(|(s, _)| !gone.contains(s))
        .collect();
    rest.sort();
    rest.dedup_by(|x, y| x.0 == y.0);
    add.iter().cloned().chain(rest.into_iter().map(|(_, m)| m)).collect()
}

/// An updated automaton and the list whose full compile it equals.
type Updated = (Automaton, Vec<Vec<u8>>);

/// Updates `old` (compiled from `list`) both ways and compares; the updated automaton and its list.
fn check_templated(
    old: &Automaton,
    list: &[Vec<u8>],
    add: &[Vec<u8>],
    remove: &[Vec<u8>],
    what: &str,
) -> Result<Option<Updated>, TestCaseError> {
    let options = CompileOptions::new().drop_unreachable(true);
    let t = old.template().unwrap().clone();
    let got = old.with_changes(add, remove, &options);
    let want_list = expected_templated(old, list, add, remove);
    let want = Automaton::compile_template(old.vocab().clone(), &want_list, &t, &options);
    match (got, want) {
        (Ok(g), Ok(w)) => {
            prop_assert!(g.to_bytes() == w.to_bytes(), "{}: differs from compile_template ({:?} vs {:?})", what, g, w);
            prop_assert_eq!(g.template(), Some(&t));
            Ok(Some((g, want_list)))
        }
        (Err(g), Err(w)) => {
            prop_assert_eq!(g.kind(), w.kind(), "{}: {} / {}", what, g, w);
            prop_assert_eq!(g.message(), w.message(), "{}", what);
            Ok(None)
        }
        (g, w) => Err(TestCaseError::fail(format!("{what}: {:?} vs {:?}", g.err(), w.err()))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Property: templated automata (raw with a suffix, JSON strings with an open end, bare), random sets and
    /// batches, on a byte-level vocabulary (the fast path) and on SentencePiece ones (full compiles, drops): the
    /// update equals `compile_template` of the resulting list, byte for byte (member ids included); a second batch
    /// on the result, and on the result saved and loaded (lazily), too.
    #[test]
    fn templated_updates_equal_full_compiles(seed in any::<u64>(), k in 1usize..150, n_add in 0usize..8, n_remove in 0usize..8) {
        let set = bytes_of(&random_set(seed, k, 4));
        let fresh = random_set(seed ^ 0x51ed, 40, 3);
        let mut rng = SmallRng::seed_from_u64(seed);
        for name in ["gpt-2", "llama-spm", "phi-3"] {
            let vocab = gguf_vocab(name);
            for (tname, t) in templates() {
                let what = format!("{name}/{tname}");
                let options = CompileOptions::new().drop_unreachable(true);
                let Ok(old) = Automaton::compile_template(vocab.clone(), &set, &t, &options) else { continue };
                let add = batch(&mut rng, &set, n_add, &fresh);
                let remove = batch(&mut rng, &set, n_remove, &fresh);
                let Some((updated, list)) = check_templated(&old, &set, &add, &remove, &what)? else { continue };
                let add2 = batch(&mut rng, &list, n_add, &fresh);
                let remove2 = batch(&mut rng, &list, n_remove + 1, &fresh);
                check_templated(&updated, &list, &add2, &remove2, &format!("{what}, second batch"))?;
                let saved = Automaton::from_bytes_lazy(vocab.clone(), &updated.to_bytes()).unwrap();
                check_templated(&saved, &list, &add2, &remove2, &format!("{what}, saved"))?;
            }
        }
    }
}

/// One tool at a time on a registry of 3,000 (qwen2, both templates): each step equals `compile_template`.
#[test]
fn templated_tools_one_at_a_time() {
    let vocab = gguf_vocab("qwen2");
    let tools = tool_names();
    let set = bytes_of(&tools[..3000]);
    for (tname, t) in templates().into_iter().take(2) {
        let mut a = Automaton::compile_template(vocab.clone(), &set, &t, &CompileOptions::new()).unwrap();
        let mut list = set.clone();
        for (i, tool) in tools[3000..3020].iter().enumerate() {
            let add = vec![tool.as_bytes().to_vec()];
            let remove = vec![tools[i * 7].as_bytes().to_vec()];
            let (b, l) = check_templated(&a, &list, &add, &remove, &format!("{tname} step {i}")).unwrap().unwrap();
            // The added tool is member 0 of the equivalent list; the remaining ones follow.
            assert_eq!(b.n_members(), a.n_members());
            (a, list) = (b, l);
        }
    }
}
