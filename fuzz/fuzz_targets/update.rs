//! Loads arbitrary bytes as a saved automaton, then updates it (`with_changes`): whatever loads must be safe to
//! update, so the loader's validation has to check everything `with_changes` relies on (members sorted and
//! distinct, member offsets inside the bytes, chains that end at their member's end). Each loaded automaton is
//! updated by removing its first and last members and a non-member and by adding strings that sort before, between
//! and after them (over the vocabulary's single-byte tokens, so the in-place path runs, and with "é", which sends
//! it to the full recompile); every result is then decoded without a panic or a hang. Built with `--cfg fuzzing`,
//! the loader skips its checksum. Seeds (fuzz/seeds/update) are the automaton files of fuzz/seeds/load, of the
//! same vocabulary.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use trie::{Automaton, CompileOptions, State, Step, TokenKind, Vocabulary};

/// The seeds' vocabulary (as in the `load` target): single letters, a few longer tokens, "é", two ids for "ab",
/// an EOG.
fn vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let texts = ["a", "b", "c", "d", "ab", "abc", "bc", "é", "ab", "</s>"];
        let mut kinds = vec![TokenKind::Normal; texts.len()];
        kinds[9] = TokenKind::Control;
        let tokens = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
        Arc::new(Vocabulary::new(tokens, kinds, &[9], Some(40)).unwrap())
    })
    .clone()
}

/// Every reachable state (at most 2000) is decoded: allowed list, mask, transitions, forced continuation.
fn exercise(a: &Automaton) {
    let mut row = vec![0u32; a.mask_words()];
    let mut seen = HashSet::new();
    let mut stack = vec![a.start(), State::FINISHED];
    while let Some(s) = stack.pop() {
        if !seen.insert(s) || seen.len() > 2000 {
            continue;
        }
        let allowed = a.allowed(s);
        a.fill_bitmask(s, &mut row).unwrap();
        let _ = (a.is_accepting(s), a.depth(s), a.forced(s));
        for &t in allowed.iter() {
            if let Ok(Step::Next(n)) = a.advance(s, t) {
                stack.push(n);
            }
        }
    }
}

/// A member of `a` found by following the first allowed token until an end is allowed (bounded), if any.
fn some_member(a: &Automaton, eog: u32, last: bool) -> Option<Vec<u8>> {
    let (mut s, mut text) = (a.start(), Vec::new());
    for _ in 0..64 {
        let allowed = a.allowed(s);
        if allowed.contains(&eog) && (!last || allowed.len() == 1) {
            return Some(text);
        }
        let t = *if last { allowed.iter().rev().find(|&&t| t != eog)? } else { allowed.iter().find(|&&t| t != eog)? };
        text.extend_from_slice(a.vocab().token_bytes(t));
        match a.advance(s, t) {
            Ok(Step::Next(n)) => s = n,
            _ => return None,
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    let Ok(a) = Automaton::from_bytes(vocab(), data) else { return };
    let first = some_member(&a, 9, false).unwrap_or_default();
    let last = some_member(&a, 9, true).unwrap_or_default();
    let options = CompileOptions::new().drop_unreachable(true);
    let adds: [&[&[u8]]; 4] = [&[b"", b"a", b"abd", b"dd"], &[b"b"], &[], &["é".as_bytes(), b"c"]];
    let removes: [&[&[u8]]; 4] = [&[&first], &[&last, b"zz"], &[&first, &last], &[]];
    for (add, remove) in adds.iter().zip(removes.iter()) {
        if let Ok(b) = a.with_changes(add, remove, &options) {
            exercise(&b);
        }
    }
});
