//! Drafting and checking tokens for jump-forward and speculative decoding, without an engine: forced runs
//! proposed (bare sets, a template's prefix and suffix, runs crossing a member's end into the suffix), partial
//! acceptance of drafts, rollback after a rejected draft, the C ABI, and properties over real vocabularies (every
//! draft is accepted, spells exactly the bytes all possible members share, and matches `forced`).
#![allow(clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::ptr::null_mut;
use std::sync::Arc;
use trie::ffi::trie_status::*;
use trie::ffi::*;
use trie::{Automaton, CompileOptions, End, ErrorKind, History, Render, State, Step, Template, TokenId, Vocabulary};

const PREFIX: &str = "<tool_call>\n{\"name\": ";
const SUFFIX: &str = ", \"arguments\": ";

/// Tokens a b c d e ab abc bc </s> (control, EOG 8).
fn toy_vocab() -> Arc<Vocabulary> {
    let texts: [&[u8]; 9] = [b"a", b"b", b"c", b"d", b"e", b"ab", b"abc", b"bc", b"</s>"];
    let mut kinds = vec![trie::TokenKind::Normal; 9];
    kinds[8] = trie::TokenKind::Control;
    Arc::new(Vocabulary::new(texts.iter().map(|t| t.to_vec()).collect(), kinds, &[8], None).unwrap())
}

fn bytes_of(v: &Vocabulary, ids: &[TokenId]) -> Vec<u8> {
    ids.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect()
}

fn next(a: &Automaton, s: State, t: TokenId) -> State {
    match a.advance(s, t).unwrap() {
        Step::Next(n) => n,
        Step::Finished => State::FINISHED,
    }
}

/// The longest common prefix of the rests (past `text`) of the segments that begin with `text`, and whether
/// exactly one segment is left and complete: what `forced_bytes` and `Draft::complete` must say.
fn oracle(segments: &[Vec<u8>], text: &[u8]) -> (Vec<u8>, bool) {
    let rests: Vec<&[u8]> = segments.iter().filter(|s| s.starts_with(text)).map(|s| &s[text.len()..]).collect();
    assert!(!rests.is_empty(), "no segment begins with {:?}", String::from_utf8_lossy(text));
    let mut lcp = rests[0].to_vec();
    for r in &rests[1..] {
        let n = lcp.iter().zip(r.iter()).take_while(|(x, y)| x == y).count();
        lcp.truncate(n);
    }
    let complete = rests.len() == 1 && rests[0] == lcp.as_slice();
    (lcp, complete)
}

#[test]
fn forced_runs_on_a_toy_set() {
    let v = toy_vocab();
    let a = Automaton::compile(v.clone(), &["abcd", "abce", "b"], &CompileOptions::default()).unwrap();
    // At the start members part at once: nothing forced.
    assert_eq!(&*a.forced_bytes(a.start()), b"");
    let d = a.draft(a.start(), 8);
    assert!(d.tokens.is_empty() && !d.complete);
    assert_eq!(d.end_state(a.start()), a.start());
    // After "a", "bc" is shared by both members left: the run is the single longest token "bc".
    let s_a = next(&a, a.start(), 0);
    assert_eq!(&*a.forced_bytes(s_a), b"bc");
    let d = a.draft(s_a, 8);
    assert_eq!(d.tokens, vec![7]);
    assert_eq!(d.bytes, b"bc");
    assert!(!d.complete, "abcd and abce are still both possible");
    assert_eq!(a.forced(s_a), None, "forced() needs one member; forced_bytes does not");
    // After "abcd" the member is complete: an empty run that says so (only EOG may follow).
    let s = next(&a, d.end_state(s_a), 3);
    let d2 = a.draft(s, 8);
    assert!(d2.tokens.is_empty() && d2.complete);
    assert!(a.is_complete(s) && a.is_accepting(s));
    // After "ab" (token 5) of "abcd": one member left only once "d" comes; "c" is forced first.
    let s_ab = next(&a, a.start(), 5);
    assert_eq!(&*a.forced_bytes(s_ab), b"c");
    // A cut: at most 0 tokens is an empty run even where bytes are forced.
    assert!(a.draft(s_a, 0).tokens.is_empty());
    // FINISHED and invalid states: nothing forced.
    assert_eq!(&*a.forced_bytes(State::FINISHED), b"");
    assert!(a.draft(State(1 << 30), 4).tokens.is_empty());
    assert!(!a.is_complete(State::FINISHED));
}

#[test]
fn partial_acceptance_and_rollback_after_a_rejected_draft() {
    let v = toy_vocab();
    let a = Automaton::compile(v.clone(), &["abcd", "abce", "b"], &CompileOptions::default()).unwrap();
    // Draft "ab" "c" "e" "d": the set takes three tokens ("abce" is complete), rejects "d".
    let states = a.validate_draft(a.start(), &[5, 2, 4, 3]).unwrap();
    assert_eq!(states.len(), 3);
    assert!(a.is_complete(states[2]));
    // An EOG id where a member is complete leads to FINISHED, which takes only more EOG ids.
    let states = a.validate_draft(a.start(), &[1, 8, 8, 0]).unwrap();
    assert_eq!(states, vec![next(&a, a.start(), 1), State::FINISHED, State::FINISHED]);
    // Out-of-range ids end the prefix; a state that does not exist is an error.
    assert_eq!(a.validate_draft(a.start(), &[5, 999]).unwrap().len(), 1);
    assert_eq!(a.validate_draft(State(1 << 30), &[5]).unwrap_err().kind(), ErrorKind::InvalidState);
    assert!(a.validate_draft(a.start(), &[]).unwrap().is_empty());

    // A speculative engine: the draft model proposes "a" "bc" "d"; the set accepts all three, but the target
    // model keeps only the first two: roll back one token and take "e" instead.
    let mut h = History::new(a.start());
    assert_eq!(h.accept_draft(&a, &[0, 7, 3]).unwrap(), 3);
    assert_eq!(h.n_accepted(), 3);
    let after_abcd = h.state();
    h.rollback(1).unwrap();
    assert_eq!(h.n_accepted(), 2);
    assert_eq!(h.state(), a.validate_draft(a.start(), &[0, 7]).unwrap()[1]);
    assert_eq!(h.accept(&a, 4).unwrap(), h.state());
    assert_ne!(h.state(), after_abcd);
    assert_eq!(h.accept(&a, 8).unwrap(), State::FINISHED);
    assert_eq!(h.accept(&a, 8).unwrap(), State::FINISHED);
    // A draft with a rejected token: only the accepted prefix is kept; the rest is not recorded.
    let mut h = History::new(a.start());
    assert_eq!(h.accept_draft(&a, &[5, 4]).unwrap(), 1, "\"e\" after \"ab\" is not in the set");
    assert_eq!(h.n_accepted(), 1);
    // A rejected single token leaves the history as it was; rolling back too far changes nothing.
    let before = h.clone();
    assert_eq!(h.accept(&a, 4).unwrap_err().kind(), ErrorKind::TokenRejected);
    assert_eq!(h, before);
    assert_eq!(h.rollback(2).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(h, before);
    h.rollback(1).unwrap();
    assert_eq!((h.state(), h.n_accepted()), (a.start(), 0));
}

/// A tool-call template: the prefix (and the JSON string's opening quote) is forced at the start; once the name is
/// unique, the run crosses the member's end into the suffix in one go and says the segment is complete.
#[test]
fn drafts_cross_a_templates_segment_boundaries() {
    let v = gguf_vocab("qwen2");
    let names = ["get_weather", "get_time", "search_flights", "search_hotels"];
    for end in [End::Eog, End::Open] {
        let t = Template::bare().prefix(PREFIX).suffix(SUFFIX).render(Render::JsonString).end(end);
        let a = Automaton::compile_template(v.clone(), &names, &t, &CompileOptions::default()).unwrap();
        let d = a.draft(a.start(), 64);
        assert_eq!(a.forced_bytes(a.start()), format!("{PREFIX}\"").as_bytes());
        assert_eq!(d.bytes, format!("{PREFIX}\"").as_bytes(), "{end:?}: the prefix and the opening quote");
        assert_eq!(bytes_of(&v, &d.tokens), d.bytes);
        assert!(!d.complete);
        assert_eq!(a.validate_draft(a.start(), &d.tokens).unwrap(), d.states);
        // The model picks "search": "_" is shared by both search_* members, then they part.
        let s = d.end_state(a.start());
        let t_search = *a.allowed(s).iter().find(|&&t| v.token_bytes(t) == b"search").expect("a 'search' token");
        let s = next(&a, s, t_search);
        assert_eq!(&*a.forced_bytes(s), b"_");
        // "_fl" makes the member unique: the rest of the name, the closing quote and the suffix are one run.
        let d = a.draft(s, 64);
        let s = d.end_state(s);
        let t_fl = *a.allowed(s).iter().find(|&&t| v.token_bytes(t) == b"fl").expect("a 'fl' token");
        let s = next(&a, s, t_fl);
        let d = a.draft(s, 64);
        assert_eq!(d.bytes, format!("ights\"{SUFFIX}").as_bytes(), "{end:?}");
        assert!(d.complete, "{end:?}: the segment is complete after the run");
        let s_end = d.end_state(s);
        assert_eq!(a.member_at(s_end), Some(2));
        match end {
            End::Eog => assert!(a.allowed(s_end).iter().all(|&t| v.is_eog(t))),
            End::Open => assert!(a.allowed(s_end).is_empty(), "an open segment hands over: no token"),
        }
        // A cut in the middle of the run: going on from its end state gives the rest.
        let d1 = a.draft(s, 2);
        assert_eq!(d1.tokens.len(), 2);
        let d2 = a.draft(d1.end_state(s), 64);
        assert_eq!([d1.tokens.clone(), d2.tokens.clone()].concat(), d.tokens);
        assert!(!d1.complete && d2.complete);
    }
}

/// Random sets and walks on real vocabularies: at every state visited, the forced bytes are the common prefix of
/// the possible members' rests; the run spells them (all of them on byte-level vocabularies), is accepted token by
/// token, matches `forced` where one member is left, and cuts and resumes to the same run; random drafts are
/// accepted exactly up to their first token the set rejects.
#[test]
fn drafts_on_real_vocabularies() {
    let cases: &[(&str, bool)] = &[("qwen2", true), ("gpt-2", true), ("llama-bpe", true), ("llama-spm", false)];
    for (ci, &(name, byte_level)) in cases.iter().enumerate() {
        let v = gguf_vocab(name);
        for seed in 0..6u64 {
            let set = random_set(seed * 7 + ci as u64, 40, 4);
            let template = match seed % 3 {
                0 => Template::bare(),
                1 => Template::bare().prefix(PREFIX).suffix(SUFFIX).render(Render::JsonString),
                _ => Template::bare().prefix("<").suffix(">").end(End::Eog),
            };
            let a = Automaton::compile_template(v.clone(), &set, &template, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{name}/{seed}: {e}"));
            let mut segments: Vec<Vec<u8>> = set.iter().map(|m| template.segment(m.as_bytes()).unwrap()).collect();
            segments.sort();
            segments.dedup();
            let mut rng = SmallRng::seed_from_u64(seed);
            for _ in 0..15 {
                let (_, visited) = random_walk(&a, &mut rng);
                for (s, text) in visited {
                    check_state(&a, &v, &segments, s, &text, byte_level, &mut rng);
                }
            }
        }
    }
}

fn check_state(
    a: &Automaton,
    v: &Vocabulary,
    segments: &[Vec<u8>],
    s: State,
    text: &[u8],
    byte_level: bool,
    rng: &mut SmallRng,
) {
    let (lcp, complete) = oracle(segments, text);
    let at = || format!("after {:?}", String::from_utf8_lossy(text));
    assert_eq!(a.forced_bytes(s), lcp.as_slice(), "{}", at());
    let d = a.draft(s, usize::MAX);
    assert_eq!(bytes_of(v, &d.tokens), d.bytes, "{}", at());
    assert!(lcp.starts_with(&d.bytes), "{}", at());
    if byte_level {
        assert_eq!(d.bytes, lcp, "{}: a byte-level vocabulary spells every forced byte", at());
    }
    assert_eq!(d.complete, complete && d.bytes == lcp, "{}", at());
    assert_eq!(a.validate_draft(s, &d.tokens).unwrap(), d.states, "{}", at());
    if let Some(f) = a.forced(s) {
        assert_eq!((d.tokens.clone(), d.bytes.clone()), (f.tokens, f.bytes), "{}", at());
    }
    if d.tokens.len() > 1 {
        let k = rng.gen_range(1..d.tokens.len());
        let d1 = a.draft(s, k);
        let d2 = a.draft(d1.end_state(s), usize::MAX);
        assert_eq!([d1.tokens, d2.tokens].concat(), d.tokens, "{}", at());
    }
    // A random draft: allowed tokens for a few steps, then maybe any token.
    let mut draft = Vec::new();
    let mut cur = s;
    let mut expect = None;
    for i in 0..6 {
        let allowed = a.allowed(cur);
        let t = if allowed.is_empty() || rng.gen_bool(0.2) {
            rng.gen_range(0..v.n_vocab() as TokenId)
        } else {
            allowed[rng.gen_range(0..allowed.len())]
        };
        draft.push(t);
        if expect.is_none() {
            match a.advance(cur, t) {
                Ok(Step::Next(n)) => cur = n,
                Ok(Step::Finished) => cur = State::FINISHED,
                Err(_) => expect = Some(i),
            }
        }
    }
    let n = expect.unwrap_or(draft.len());
    let mut h = History::new(s);
    assert_eq!(h.accept_draft(a, &draft).unwrap(), n, "{}", at());
    h.rollback(n).unwrap();
    assert_eq!(h.state(), s);
}

#[test]
fn c_abi_draft_and_validate() {
    let v = toy_vocab();
    let a = Arc::new(Automaton::compile(v, &["abcd", "abce", "b"], &CompileOptions::default()).unwrap());
    let h = Arc::into_raw(a.clone()) as *const trie_automaton;
    let s_a = next(&a, a.start(), 0);
    let mut toks = [-1i32; 4];
    let (mut n, mut end, mut complete) = (99usize, 0u32, true);
    let st = unsafe { trie_draft(h, s_a.0, toks.as_mut_ptr(), 4, &mut n, &mut end, &mut complete) };
    assert_eq!(st, TRIE_OK);
    assert_eq!((n, toks[0], end, complete), (1, 7, a.draft(s_a, 4).states[0].0, false));
    // capacity 0: an empty run, its end state the state itself; NULL end_state / complete are fine
    let st = unsafe { trie_draft(h, s_a.0, null_mut(), 0, &mut n, &mut end, null_mut()) };
    assert_eq!((st, n, end), (TRIE_OK, 0, s_a.0));
    assert_eq!(
        unsafe { trie_draft(h, s_a.0, null_mut(), 0, null_mut(), null_mut(), null_mut()) },
        TRIE_ERR_NULL_ARGUMENT
    );
    assert_eq!(
        unsafe { trie_draft(h, 1 << 30, toks.as_mut_ptr(), 4, &mut n, null_mut(), null_mut()) },
        TRIE_ERR_INVALID_STATE
    );
    assert_eq!(n, 0);
    assert_eq!(unsafe { trie_draft(h, s_a.0, null_mut(), 4, &mut n, null_mut(), null_mut()) }, TRIE_ERR_NULL_ARGUMENT);

    let draft = [5i32, 2, 4, 3];
    let mut states = [0u32; 4];
    let mut k = 99usize;
    let st = unsafe { trie_validate_draft(h, a.start().0, draft.as_ptr(), 4, &mut k, states.as_mut_ptr()) };
    assert_eq!((st, k), (TRIE_OK, 3));
    let want: Vec<u32> = a.validate_draft(a.start(), &[5, 2, 4]).unwrap().iter().map(|s| s.0).collect();
    assert_eq!(&states[..3], want.as_slice());
    // NULL states; a negative id ends the prefix
    let st = unsafe { trie_validate_draft(h, a.start().0, [5i32, -1, 2].as_ptr(), 3, &mut k, null_mut()) };
    assert_eq!((st, k), (TRIE_OK, 1));
    let st = unsafe { trie_validate_draft(h, 1 << 30, draft.as_ptr(), 4, &mut k, null_mut()) };
    assert_eq!((st, k), (TRIE_ERR_INVALID_STATE, 0));
    assert_eq!(unsafe { trie_validate_draft(h, 0, draft.as_ptr(), 4, null_mut(), null_mut()) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_validate_draft(h, 0, std::ptr::null(), 4, &mut k, null_mut()) }, TRIE_ERR_NULL_ARGUMENT);
    unsafe { trie_automaton_free(h as *mut trie_automaton) };
}
