//! Sets inside an output, on the real vocabularies: templates (prefix, suffix, JSON rendering), member identity,
//! members still possible, and the hand-over of open segments (tokens crossing a segment's end).

mod common;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use trie::{Automaton, CompileOptions, End, ErrorKind, Render, State, Step, Template, TokenId, Vocabulary};

/// A 40-byte prefix and the tool-call suffix of the benchmark.
const PREFIX: &str = "<tool_call>\n{\"type\": \"function\", \"name\": ";
const SUFFIX: &str = ", \"arguments\": ";

fn tool_template(end: End) -> Template {
    Template::bare().prefix(PREFIX).suffix(SUFFIX).render(Render::JsonString).end(end)
}

fn compile(v: &Arc<Vocabulary>, set: &[String], t: &Template) -> Automaton {
    Automaton::compile_template(v.clone(), set, t, &CompileOptions::default()).unwrap()
}

/// segment bytes -> id (first input index of the member).
fn segments(set: &[String], t: &Template) -> BTreeMap<Vec<u8>, usize> {
    let mut out = BTreeMap::new();
    for (i, m) in set.iter().enumerate() {
        out.entry(t.segment(m.as_bytes()).unwrap()).or_insert(i);
    }
    out
}

/// The state after spelling `text` greedily with the longest allowed token that is a prefix of what remains.
fn spell(a: &Automaton, text: &[u8]) -> State {
    let v = a.vocab();
    let mut state = a.start();
    let mut done = 0;
    while done < text.len() {
        let rest = &text[done..];
        let t = a
            .allowed(state)
            .iter()
            .copied()
            .filter(|&t| !v.is_eog(t) && rest.starts_with(v.token_bytes(t)))
            .max_by_key(|&t| v.token_bytes(t).len())
            .unwrap_or_else(|| panic!("no allowed token spells {:?}", String::from_utf8_lossy(rest)));
        match a.advance(state, t).unwrap() {
            Step::Next(s) => state = s,
            Step::Finished => panic!("finished inside the text"),
        }
        done += v.token_bytes(t).len();
    }
    state
}

/// Every walk's output is a segment of a member whose id `member_at` reports; the JSON in it parses back to the
/// member; every member is reachable and ends with EOG.
#[test]
fn walks_produce_framed_json_members_and_name_them() {
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(700 + i as u64, 300, 4);
        let t = tool_template(End::Eog);
        let a = compile(&v, &set, &t);
        let segs = segments(&set, &t);
        assert_eq!(a.n_members(), segs.len(), "{name}");
        let mut rng = SmallRng::seed_from_u64(i as u64);
        for _ in 0..200 {
            let (text, visited) = random_walk(&a, &mut rng);
            let id = *segs.get(&text).unwrap_or_else(|| panic!("{name}: {:?}", String::from_utf8_lossy(&text)));
            let last = visited.last().unwrap().0;
            assert_eq!(a.member_at(last), Some(id), "{name}");
            let json = &text[PREFIX.len()..text.len() - SUFFIX.len()];
            let back: String = serde_json::from_slice(json).unwrap();
            assert_eq!(back, set[id], "{name}");
            for (s, before) in &visited[..visited.len() - 1] {
                // Not complete before the end (JSON strings are prefix-free, so no segment is a prefix of another).
                assert_eq!(a.member_at(*s), None, "{name}: after {:?}", String::from_utf8_lossy(before));
            }
        }
        for (seg, &id) in &segs {
            let s = spell(&a, seg);
            assert_eq!(a.member_at(s), Some(id), "{name}");
            assert_eq!(a.possible_members(s), vec![id], "{name}");
            let eog = v.eog_ids()[0];
            assert_eq!(a.advance(s, eog), Ok(Step::Finished), "{name}");
        }
    }
}

/// Raw members with a suffix: members that are prefixes of others keep their own identity.
#[test]
fn raw_members_with_prefixes_and_a_suffix() {
    let v = gguf_vocab("llama-bpe");
    let set: Vec<String> = ["ab", "abc", "ab;", "a", "b;c", "ab"].iter().map(|s| s.to_string()).collect();
    let t = Template::bare().prefix("> ").suffix(";");
    let a = compile(&v, &set, &t);
    for (seg, id) in segments(&set, &t) {
        let s = spell(&a, &seg);
        assert_eq!(a.member_at(s), Some(id), "{:?}", String::from_utf8_lossy(&seg));
    }
    // "> ab;" is complete (member 0) and still a prefix of "> ab;;" (member 2).
    let s = spell(&a, b"> ab;");
    assert_eq!(a.member_at(s), Some(0));
    assert_eq!(a.possible_members(s), vec![0, 2]);
    assert_eq!(a.possible_members(a.start()).len(), 5);
    assert_eq!(a.member_range(State::FINISHED), 0..0);
}

/// Brute force on every vocabulary, bare and open ends: the mask is exactly the tokens that keep the text a
/// prefix of a segment (EOG where a segment is complete, only for End::Eog); the crossing tokens are exactly the
/// text tokens that finish a segment and go on; the possible members are exactly those whose segment begins
/// with the text.
#[test]
fn masks_crossings_and_possible_members_equal_brute_force() {
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(800 + i as u64, 30, 3);
        for end in [End::Eog, End::Open] {
            let t = Template::bare().prefix("{\"name\": ").suffix("}").render(Render::JsonString).end(end);
            let a = compile(&v, &set, &t);
            let segs = segments(&set, &t);
            let mut rng = SmallRng::seed_from_u64(i as u64);
            let mut seen = BTreeSet::new();
            for _ in 0..4 {
                // Walk along a random segment.
                let (seg, _) = segs.iter().nth(rng.gen_range(0..segs.len())).unwrap();
                let mut state = a.start();
                let mut text: Vec<u8> = Vec::new();
                loop {
                    if seen.insert(text.clone()) {
                        check_state(&a, &segs, state, &text, end, name);
                    }
                    if text.len() == seg.len() {
                        break;
                    }
                    let rest = &seg[text.len()..];
                    let options: Vec<TokenId> = a
                        .allowed(state)
                        .iter()
                        .copied()
                        .filter(|&t| !v.is_eog(t) && rest.starts_with(v.token_bytes(t)))
                        .collect();
                    let tok = options[rng.gen_range(0..options.len())];
                    text.extend_from_slice(v.token_bytes(tok));
                    state = match a.advance(state, tok).unwrap() {
                        Step::Next(s) => s,
                        Step::Finished => unreachable!(),
                    };
                }
            }
        }
    }
}

/// Asserts `got == want`, naming the first difference (the lists can be long).
fn same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    if got != want {
        let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: {} vs {} items, first difference at {i}: {:?} vs {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

fn check_state(a: &Automaton, segs: &BTreeMap<Vec<u8>, usize>, state: State, text: &[u8], end: End, name: &str) {
    let v = a.vocab();
    let complete = segs.get(text).copied();
    let mut allowed = Vec::new();
    let mut crossing = Vec::new();
    for t in 0..v.n_vocab() as TokenId {
        if v.is_eog(t) {
            if complete.is_some() && end == End::Eog {
                allowed.push(t);
            }
            continue;
        }
        if !v.is_text_token(t) {
            continue;
        }
        let mut p = text.to_vec();
        p.extend_from_slice(v.token_bytes(t));
        if segs.range(p.clone()..).next().is_some_and(|(s, _)| s.starts_with(&p)) {
            allowed.push(t);
        }
        if end == End::Open {
            for (seg, &id) in segs.range(text.to_vec()..).take_while(|(s, _)| s.starts_with(text)) {
                if text.len() < seg.len() && p.len() > seg.len() && p.starts_with(seg) {
                    crossing.push((t, id, p.len() - seg.len()));
                }
            }
        }
    }
    let what = format!("{name} {end:?}: after {:?}", String::from_utf8_lossy(text));
    same(&a.allowed(state), &allowed, &what);
    assert_eq!(a.member_at(state), complete, "{what}");
    assert_eq!(a.is_accepting(state), complete.is_some(), "{what}");
    let got: Vec<(TokenId, usize, usize)> = a.crossing(state).iter().map(|c| (c.token, c.member, c.overflow)).collect();
    crossing.sort_unstable();
    same(&got, &crossing, &what);
    for &(t, id, overflow) in &crossing {
        let c = a.cross(state, t).unwrap();
        assert_eq!((c.member, c.overflow), (id, overflow), "{what}");
    }
    if let Some(&t) = allowed.iter().find(|&&t| !v.is_eog(t)) {
        if !crossing.iter().any(|c| c.0 == t) {
            assert_eq!(a.cross(state, t).unwrap_err().kind(), ErrorKind::TokenRejected, "{what}");
        }
    }
    let possible: Vec<usize> =
        segs.range(text.to_vec()..).take_while(|(s, _)| s.starts_with(text)).map(|p| *p.1).collect();
    let mut got = a.possible_members(state);
    got.sort_unstable();
    let mut want = possible;
    want.sort_unstable();
    assert_eq!(got, want, "{what}");
}

/// The hand-over of a tool-call name on real vocabularies: tokens that finish `"name"` + `", "arguments": `
/// and go on into the arguments' `{` exist, are reported with their overflow, and are not in the mask. Prints
/// how many there are per vocabulary.
#[test]
fn tool_call_names_hand_over_with_crossing_tokens() {
    let tools: Vec<String> = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/tools.txt"))
        .unwrap()
        .lines()
        .take(2000)
        .map(str::to_string)
        .collect();
    let t =
        Template::bare().prefix("{\"name\": ").suffix(", \"arguments\": ").render(Render::JsonString).end(End::Open);
    let mut total = 0;
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        let a = compile(&v, &tools, &t);
        let mut with_brace = 0;
        let mut count = 0;
        for (i, tool) in tools.iter().enumerate().step_by(97) {
            let seg = t.segment(tool.as_bytes()).unwrap();
            // The state one byte before the segment's end: the rest is the suffix's last byte, " ".
            let s = spell(&a, &seg[..seg.len() - 1]);
            let cross = a.crossing(s);
            assert!(cross.iter().all(|c| c.member == i), "{name}");
            let allowed = a.allowed(s);
            for c in &cross {
                let bytes = v.token_bytes(c.token);
                assert_eq!(bytes[0], b' ', "{name}");
                assert!(allowed.binary_search(&c.token).is_err(), "{name}: a crossing token is in the mask");
                if bytes[1..].starts_with(b"{") {
                    with_brace += 1;
                }
            }
            count += cross.len();
            // Pruned by what may follow (a JSON object): exactly the crossing tokens whose overflow begins with `{`.
            let braces = a.crossing_where(s, |m, overflow| m == i && overflow[0] == b'{');
            let want: Vec<_> = cross.iter().filter(|c| v.token_bytes(c.token)[1] == b'{').copied().collect();
            assert_eq!(braces, want, "{name}");
            let end = spell(&a, &seg);
            assert_eq!(a.member_at(end), Some(i));
            assert!(a.allowed(end).is_empty(), "{name}: an open segment's end allows nothing");
        }
        println!("{name}: {count} crossing tokens over 21 tool names, {with_brace} of them begin the arguments' `{{`");
        total += with_brace;
    }
    // Byte-level BPE vocabularies have " {" (and often " {\"") tokens: without the hand-over they would be lost.
    assert!(total > 0);
}

#[test]
fn open_ends_refuse_prefixes_and_bad_members_are_named() {
    let v = gguf_vocab("qwen2");
    let open = Template::bare().suffix(";").end(End::Open);
    let e = Automaton::compile_template(v.clone(), &["a", "a;b"], &open, &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("prefix"), "{e}");
    let json = Template::bare().render(Render::JsonString);
    let e =
        Automaton::compile_template(v.clone(), &[&b"ok"[..], b"\xff"], &json, &CompileOptions::default()).unwrap_err();
    assert!(e.message().contains("member 1") && e.message().contains("UTF-8"), "{e}");
    let text = Template::bare().render(Render::JsonText);
    let e = Automaton::compile_template(v.clone(), &["1", "tru"], &text, &CompileOptions::default()).unwrap_err();
    assert!(e.message().contains("member 1"), "{e}");
    let empty: &[&str] = &[];
    let e = Automaton::compile_template(v.clone(), empty, &json, &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptySet);
}

/// Mixed JSON values (an enum of a string, numbers, true, null) rendered as their JSON text.
#[test]
fn json_text_members() {
    let v = gguf_vocab("gemma-4");
    let set: Vec<String> = ["\"red\"", "1", "2.5", "true", "null", "\"1\""].iter().map(|s| s.to_string()).collect();
    let t = Template::bare().render(Render::JsonText);
    let a = compile(&v, &set, &t);
    let mut rng = SmallRng::seed_from_u64(3);
    for _ in 0..50 {
        let (text, visited) = random_walk(&a, &mut rng);
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let id = a.member_at(visited.last().unwrap().0).unwrap();
        assert_eq!(value, serde_json::from_str::<serde_json::Value>(&set[id]).unwrap());
    }
}

#[test]
fn templated_automata_save_load_and_update() {
    let v = gguf_vocab("llama-spm");
    let set = random_set(900, 200, 3);
    let t = tool_template(End::Open);
    let a = compile(&v, &set, &t);
    let dir = tempdir("template");
    let path = dir.join("t.trie");
    a.save(&path).unwrap();
    let b = Automaton::load(v.clone(), &path).unwrap();
    assert_eq!(b.template(), Some(&t));
    assert!(b.is_open());
    assert_eq!(a.to_bytes(), b.to_bytes());
    for (seg, id) in segments(&set, &t) {
        let s = spell(&b, &seg);
        assert_eq!(b.member_at(s), Some(id));
    }
    // The saved file updated (loaded eagerly and lazily): `compile_template` of `add ++ (members − remove)`, the
    // members in the order of their segments (ranks), byte for byte.
    let lazy = Automaton::load_lazy(v.clone(), &path).unwrap();
    let mut list: Vec<String> = vec!["x".into()];
    list.extend((0..b.n_members()).filter_map(|r| b.member_id(r)).map(|id| set[id].clone()).filter(|m| *m != set[0]));
    let options = CompileOptions::new().drop_unreachable(true);
    let want = Automaton::compile_template(v.clone(), &list, &t, &options).unwrap().to_bytes();
    for loaded in [&a, &b, &lazy] {
        let got = loaded.with_changes(&["x"], &[set[0].as_str()], &options).unwrap();
        assert!(got.to_bytes() == want, "the update differs from compile_template");
    }
    // A bare automaton has no template section: its bytes are those of plain compile.
    let bare = Automaton::compile_template(v.clone(), &set, &Template::bare(), &CompileOptions::default()).unwrap();
    assert_eq!(bare.template(), Some(&Template::bare()));
    let plain = Automaton::compile(v.clone(), &set, &CompileOptions::default()).unwrap();
    assert_eq!(plain.template(), None);
    assert_eq!(plain.n_states(), bare.n_states());
    std::fs::remove_dir_all(dir).unwrap();
}
