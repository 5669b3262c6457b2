//! Loads arbitrary bytes as a saved vocabulary and as a saved automaton (built with `--cfg fuzzing`, the loader
//! skips its checksum, so damaged arrays reach the validation behind it). Whatever loads must then be safe to
//! use: every reachable state's allowed list, mask, transitions and forced continuation are computed without a
//! panic or a hang. For a loaded automaton (over the good vocabulary below) the mask also agrees with the allowed
//! list: its validation checks every state's tokens and precomputed rows. A loaded vocabulary's index is only
//! checked to stay in bounds (its agreement with the token bytes rests on the checksum, see `Vocabulary::load`),
//! so a set compiled against a crafted one must be safe to use, not right. Seeds (fuzz/seeds/load) are saved
//! files of the vocabulary below, made by `cargo test --test integration file_format::write_fuzz_seeds -- --ignored`.
//!
//! The same bytes are also loaded lazily (`from_bytes_lazy`: every state checked on first use; under the fuzzer
//! the block hashes are not checked either, so every input is a crafted file whose hashes were made valid again),
//! and both ways over a byte-level vocabulary (every byte a token), whose large automata keep no rows for their
//! unary states (`src/automaton/derived.rs`, format version 4; the `derived-*` seeds) and store their integer
//! arrays at packed widths (`src/util/packed.rs`, format version 5; the `packed-*` seeds: a section's element size
//! is its width, so a crafted one reads the same bytes as other numbers), and whose branching states with short
//! rows keep only their byte children (format version 6; the `byterows-*` seeds), and whose members are front-coded
//! (each stored as the bytes after its prefix shared with the member before, format version 7, `src/automaton/
//! front.rs`; the `front-*` seeds: a crafted shared length decodes other members; the `v8-*` seeds are sets
//! written as format version 8, its checksum blocks 2 KiB), and whose ascending arrays (row offsets, chain bases and
//! members, member offsets) are block bases plus narrow deltas or lengths (format version 9, `src/automaton/
//! ascending.rs`; the `blocked-*` seeds: a crafted base, delta or length reads other numbers, a lazy load checks
//! each block on first use), with token ids and targets at packed widths: a derived row is computed from
//! the other states' rows, so a crafted file must give an error, or a wrong row at worst, never a panic, an out-of-bounds
//! read or a hang. A lazily loaded automaton may refuse a state (`MalformedFile`) where an
//! eager load refuses the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use trie::{Automaton, State, Step, TokenKind, Vocabulary};

/// The seeds' vocabulary: single letters, a few longer tokens, a multi-byte character, two ids for "ab", an EOG.
pub fn vocab() -> Arc<Vocabulary> {
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

/// The seeds' byte-level vocabulary (tests/file_format.rs `byte_vocab`): every byte, "ab", "abc", "tool", an EOG.
pub fn byte_vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.extend([b"ab".to_vec(), b"abc".to_vec(), b"tool".to_vec(), b"</s>".to_vec()]);
        let mut kinds = vec![TokenKind::Normal; tokens.len()];
        kinds[259] = TokenKind::Control;
        Arc::new(Vocabulary::new(tokens, kinds, &[259], None).unwrap())
    })
    .clone()
}

/// Every reachable state (at most 2,000) queried; `consistent`: masks agree with allowed lists; `lazy`: a state
/// may be refused as malformed.
fn exercise(a: &Automaton, consistent: bool) {
    walk(a, consistent, false)
}

fn walk(a: &Automaton, consistent: bool, lazy: bool) {
    let words = a.mask_words();
    let mut row = vec![0u32; words];
    let mut seen = HashSet::new();
    let mut stack = vec![a.start(), State::FINISHED];
    while let Some(s) = stack.pop() {
        if !seen.insert(s) || seen.len() > 2000 {
            continue;
        }
        let allowed = a.allowed(s);
        if let Err(e) = a.fill_bitmask(s, &mut row) {
            assert!(lazy && e.kind() == trie::ErrorKind::MalformedFile, "{e}");
            continue;
        }
        let ones: usize = row.iter().map(|w| w.count_ones() as usize).sum();
        if consistent {
            assert_eq!(ones, allowed.len(), "mask and allowed list of state {s:?}");
        }
        let _ = (a.is_accepting(s), a.depth(s), a.forced(s), a.forced_bytes(s));
        for &t in allowed.iter() {
            if let Ok(Step::Next(n)) = a.advance(s, t) {
                stack.push(n);
            }
        }
    }
    // The member table (decoded from front-coded members: a crafted shared length gives other bytes, never a panic).
    for r in 0..a.n_members().min(64) + 1 {
        let _ = a.member_bytes(r);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Vocabulary::from_bytes(data) {
        let v = Arc::new(v);
        for id in 0..v.n_vocab() as u32 {
            let _ = (v.token_bytes(id), v.kind(id), v.is_text_token(id));
        }
        if let Ok(a) = Automaton::compile(v.clone(), &["ab", "abc", "é"], &Default::default()) {
            exercise(&a, false);
        }
    }
    for v in [vocab(), byte_vocab()] {
        if let Ok(a) = Automaton::from_bytes(v.clone(), data) {
            exercise(&a, true);
        }
        if let Ok(a) = Automaton::from_bytes_lazy(v, data) {
            walk(&a, true, true);
        }
    }
});
