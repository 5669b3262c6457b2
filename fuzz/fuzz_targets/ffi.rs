//! Random sequences of C API calls, made from Rust through the `extern "C"` functions: NULL pointers with
//! non-zero lengths, short buffers, huge lengths (over `isize::MAX` bytes, which the library must refuse
//! before touching memory), out-of-range tokens, kinds, EOG ids and states, extra retains and frees.
//! Only calls within the documented contract are made (no dangling handles, no buffer shorter than the
//! length passed unless the length is impossible). Checked after every call:
//! - no call returns `TRIE_ERR_PANIC`; `trie_last_error` is always a readable C string;
//! - failing calls leave out-pointers NULL / 0 and write nothing into caller buffers (sentinels checked);
//! - masks equal the allowed lists; batch rows equal single masks; advance agrees with the allowed list;
//! - every handle is freed at the end (LeakSanitizer reports a leaked reference).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::ffi::CStr;
use std::ptr::{null, null_mut};
use trie::ffi::trie_status::*;
use trie::ffi::*;

#[derive(Arbitrary, Debug)]
enum Len {
    Exact,
    Zero,
    Short(u8),
    /// Over `isize::MAX / 4` elements: must be refused before any access.
    Huge,
}

#[derive(Arbitrary, Debug)]
enum Op {
    VocabNew {
        tokens: Vec<Vec<u8>>,
        kinds: Option<Vec<u32>>,
        eog: Vec<i32>,
        n_vocab: u16,
        null_bytes: bool,
        null_lens: bool,
        null_token: Option<u8>,
        huge_n: bool,
    },
    Compile {
        vocab: u8,
        null_vocab: bool,
        strings: Vec<Vec<u8>>,
        null_strings: bool,
        null_lens: bool,
        null_string: Option<u8>,
        options: Option<bool>,
        null_out: bool,
    },
    RetainVocab(u8),
    FreeVocab(u8),
    RetainAutomaton(u8),
    FreeAutomaton(u8),
    AutomatonVocab(u8),
    Allowed {
        a: u8,
        state: u32,
        known: Option<u8>,
        null_tokens: bool,
        null_n: bool,
    },
    Mask {
        a: u8,
        state: u32,
        known: Option<u8>,
        len: Len,
        extra: u8,
        null_mask: bool,
    },
    MaskBatch {
        a: u8,
        states: Vec<u32>,
        known: bool,
        rows: Len,
        row_words: i8,
        null_states: bool,
        null_mask: bool,
    },
    MaskRows {
        rows: Vec<(Option<u8>, u32, bool)>,
        extra_words: u8,
        short: bool,
        null_mask: bool,
    },
    Advance {
        a: u8,
        state: u32,
        known: Option<u8>,
        token: i32,
        pick: Option<u16>,
        null_next: bool,
    },
    Forced {
        a: u8,
        state: u32,
        known: Option<u8>,
        bytes_cap: Len,
        tokens_cap: Len,
        null_outs: u8,
    },
    VocabToken {
        v: u8,
        token: i32,
        null_out: u8,
    },
    EogIds {
        v: u8,
        null_out: u8,
    },
    Dropped {
        a: u8,
        null_out: u8,
    },
    Accessors {
        a: u8,
        v: u8,
        state: u32,
    },
    StatusStr(i32),
}

struct Pool {
    vocabs: Vec<*mut trie_vocab>,
    automata: Vec<*mut trie_automaton>,
    /// States seen per automaton pointer (valid ones).
    states: Vec<(usize, u32)>,
}

fn last_error() -> String {
    let p = trie_last_error();
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(st: trie_status) -> trie_status {
    assert_ne!(st, TRIE_ERR_PANIC, "libtrie panicked: {}", last_error());
    if st != TRIE_OK {
        assert!(!last_error().is_empty(), "failure {st:?} without a message");
    }
    st
}

fn len(l: &Len, exact: usize) -> usize {
    match *l {
        Len::Exact => exact,
        Len::Zero => 0,
        Len::Short(k) => exact.saturating_sub(1 + k as usize),
        Len::Huge => usize::MAX / 2,
    }
}

impl Pool {
    fn vocab(&self, i: u8) -> *const trie_vocab {
        if self.vocabs.is_empty() {
            null()
        } else {
            self.vocabs[i as usize % self.vocabs.len()]
        }
    }
    fn automaton(&self, i: u8) -> *const trie_automaton {
        if self.automata.is_empty() {
            null()
        } else {
            self.automata[i as usize % self.automata.len()]
        }
    }
    fn state(&self, a: *const trie_automaton, state: u32, known: Option<u8>) -> u32 {
        let Some(k) = known else { return state };
        let mine: Vec<u32> = self.states.iter().filter(|(p, _)| *p == a as usize).map(|(_, s)| *s).collect();
        if mine.is_empty() {
            0
        } else {
            mine[k as usize % mine.len()]
        }
    }
}

fn allowed_of(a: *const trie_automaton, s: u32) -> Option<Vec<i32>> {
    let mut p = null();
    let mut n = 0usize;
    let st = check(unsafe { trie_allowed(a, s, &mut p, &mut n) });
    if st != TRIE_OK {
        assert!(p.is_null() && n == 0);
        return None;
    }
    Some(if n == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(p, n) }.to_vec() })
}

fn run(pool: &mut Pool, op: Op) {
    unsafe {
        match op {
            Op::VocabNew { tokens, kinds, eog, n_vocab, null_bytes, null_lens, null_token, huge_n } => {
                let tokens: Vec<Vec<u8>> =
                    tokens.into_iter().take(64).map(|t| t.into_iter().take(6).collect()).collect();
                let mut ptrs: Vec<*const u8> = tokens.iter().map(|t| t.as_ptr()).collect();
                if let Some(i) = null_token {
                    if !ptrs.is_empty() {
                        let i = i as usize % ptrs.len();
                        ptrs[i] = null();
                    }
                }
                let lens: Vec<usize> = tokens.iter().map(Vec::len).collect();
                let kinds: Option<Vec<u32>> =
                    kinds.map(|k| (0..tokens.len()).map(|i| k.get(i).copied().unwrap_or(1) % 9).collect());
                let n = if huge_n { usize::MAX } else { tokens.len() };
                let mut out = 1 as *mut trie_vocab;
                let st = check(trie_vocab_new_ex(
                    if null_bytes { null() } else { ptrs.as_ptr() },
                    if null_lens { null() } else { lens.as_ptr() },
                    kinds.as_ref().map_or(null(), |k| k.as_ptr()),
                    n,
                    if eog.is_empty() { null() } else { eog.as_ptr() },
                    eog.len().min(4),
                    n_vocab as usize % 80,
                    &mut out,
                ));
                if st == TRIE_OK {
                    assert!(!out.is_null());
                    pool.vocabs.push(out);
                } else {
                    assert!(out.is_null(), "failed vocab_new left *out set");
                }
            }
            Op::Compile { vocab, null_vocab, strings, null_strings, null_lens, null_string, options, null_out } => {
                let strings: Vec<Vec<u8>> =
                    strings.into_iter().take(24).map(|s| s.into_iter().take(12).collect()).collect();
                let mut ptrs: Vec<*const u8> = strings.iter().map(|s| s.as_ptr()).collect();
                if let Some(i) = null_string {
                    if !ptrs.is_empty() {
                        let i = i as usize % ptrs.len();
                        ptrs[i] = null();
                    }
                }
                let lens: Vec<usize> = strings.iter().map(Vec::len).collect();
                let opts = options.map(|d| trie_options { drop_unreachable: d, ..Default::default() });
                let v = if null_vocab { null() } else { pool.vocab(vocab) };
                let mut out = 1 as *mut trie_automaton;
                let st = check(trie_compile(
                    v,
                    if null_strings { null() } else { ptrs.as_ptr() },
                    if null_lens { null() } else { lens.as_ptr() },
                    strings.len(),
                    opts.as_ref().map_or(null(), |o| o as *const _),
                    if null_out { null_mut() } else { &mut out },
                ));
                if null_out {
                    assert_eq!(st, TRIE_ERR_NULL_ARGUMENT);
                } else if st == TRIE_OK {
                    assert!(!out.is_null());
                    pool.automata.push(out);
                    pool.states.push((out as usize, 0));
                } else {
                    assert!(out.is_null(), "failed compile left *out set");
                }
            }
            Op::RetainVocab(i) => {
                let v = pool.vocab(i);
                let r = trie_vocab_retain(v);
                assert_eq!(r as *const _, v);
                if !r.is_null() {
                    pool.vocabs.push(r);
                }
            }
            Op::FreeVocab(i) => {
                if pool.vocabs.is_empty() {
                    trie_vocab_free(null_mut());
                } else {
                    let v = pool.vocabs.swap_remove(i as usize % pool.vocabs.len());
                    trie_vocab_free(v);
                }
            }
            Op::RetainAutomaton(i) => {
                let a = pool.automaton(i);
                let r = trie_automaton_retain(a);
                assert_eq!(r as *const _, a);
                if !r.is_null() {
                    pool.automata.push(r);
                }
            }
            Op::FreeAutomaton(i) => {
                if pool.automata.is_empty() {
                    trie_automaton_free(null_mut());
                } else {
                    let a = pool.automata.swap_remove(i as usize % pool.automata.len());
                    if !pool.automata.contains(&a) {
                        pool.states.retain(|(p, _)| *p != a as usize);
                    }
                    trie_automaton_free(a);
                }
            }
            Op::AutomatonVocab(i) => {
                let a = pool.automaton(i);
                let v = trie_automaton_vocab(a);
                assert_eq!(v.is_null(), a.is_null());
                if !v.is_null() {
                    assert_eq!(trie_vocab_n_tokens(v), trie_automaton_n_vocab(a));
                    pool.vocabs.push(v);
                }
            }
            Op::Allowed { a, state, known, null_tokens, null_n } => {
                let a = pool.automaton(a);
                let s = pool.state(a, state, known);
                let mut p = 1 as *const i32;
                let mut n = 7usize;
                let st = check(trie_allowed(
                    a,
                    s,
                    if null_tokens { null_mut() } else { &mut p },
                    if null_n { null_mut() } else { &mut n },
                ));
                if null_tokens || null_n || a.is_null() {
                    assert_eq!(st, TRIE_ERR_NULL_ARGUMENT);
                } else if st == TRIE_OK {
                    let toks = if n == 0 { &[][..] } else { std::slice::from_raw_parts(p, n) };
                    assert!(toks.windows(2).all(|w| w[0] < w[1]));
                    let nv = trie_automaton_n_vocab(a);
                    assert!(toks.iter().all(|&t| t >= 0 && (t as usize) < nv));
                } else {
                    assert_eq!(st, TRIE_ERR_INVALID_STATE);
                    assert!(p.is_null() && n == 0);
                }
            }
            Op::Mask { a, state, known, len: l, extra, null_mask } => {
                let a = pool.automaton(a);
                let s = pool.state(a, state, known);
                let words = trie_automaton_mask_words(a);
                let cap = words + (extra % 3) as usize;
                let mut buf = vec![0xA5A5_A5A5u32; cap.max(1)];
                let n = match l {
                    Len::Exact => cap,
                    other => len(&other, words),
                };
                let st = check(trie_mask(a, s, if null_mask { null_mut() } else { buf.as_mut_ptr() }, n));
                if st == TRIE_OK {
                    let allowed = allowed_of(a, s).expect("mask ok but allowed fails");
                    for t in 0..n * 32 {
                        let bit = buf[t / 32] >> (t % 32) & 1 == 1;
                        assert_eq!(bit, allowed.binary_search(&(t as i32)).is_ok(), "bit {t}");
                    }
                } else {
                    assert!(buf.iter().all(|&w| w == 0xA5A5_A5A5), "failed trie_mask wrote into the buffer");
                }
            }
            Op::MaskBatch { a, states, known, rows, row_words, null_states, null_mask } => {
                let a = pool.automaton(a);
                let mut states: Vec<u32> = states.into_iter().take(80).collect();
                if known {
                    for s in &mut states {
                        *s = pool.state(a, *s, Some(*s as u8));
                    }
                }
                let words = trie_automaton_mask_words(a);
                let rw = (words as isize + row_words as isize % 3).max(0) as usize;
                let cap = states.len() * rw;
                let mut buf = vec![0x5A5A_5A5Au32; cap.max(1)];
                let n_words = match rows {
                    Len::Exact => cap,
                    other => len(&other, cap),
                };
                let st = check(trie_mask_batch(
                    a,
                    if null_states { null() } else { states.as_ptr() },
                    states.len(),
                    if null_mask { null_mut() } else { buf.as_mut_ptr() },
                    n_words,
                    rw,
                ));
                if st == TRIE_OK && !states.is_empty() {
                    let mut row = vec![0u32; rw.max(1)];
                    for (i, &s) in states.iter().enumerate() {
                        assert_eq!(check(trie_mask(a, s, row.as_mut_ptr(), rw)), TRIE_OK);
                        assert_eq!(&buf[i * rw..(i + 1) * rw], &row[..rw], "batch row {i}");
                    }
                } else if st != TRIE_OK {
                    assert!(buf.iter().all(|&w| w == 0x5A5A_5A5A), "failed trie_mask_batch wrote into the buffer");
                }
            }
            Op::MaskRows { rows, extra_words, short, null_mask } => {
                // Rows of different automata (None: unconstrained), each state known or arbitrary.
                let rows: Vec<(*const trie_automaton, u32)> = rows
                    .into_iter()
                    .take(80)
                    .map(|(a, s, known)| match a {
                        Some(i) => {
                            let a = pool.automaton(i);
                            (a, pool.state(a, s, known.then_some(s as u8)))
                        }
                        None => (null(), s),
                    })
                    .collect();
                let widest = rows.iter().map(|&(a, _)| trie_automaton_mask_words(a)).max().unwrap_or(0);
                let rw = widest + (extra_words % 3) as usize;
                let cap = rows.len() * rw;
                let mut buf = vec![0x3C3C_3C3Cu32; cap.max(1)];
                let automata: Vec<*const trie_automaton> = rows.iter().map(|r| r.0).collect();
                let states: Vec<u32> = rows.iter().map(|r| r.1).collect();
                let n_words = if short { cap.saturating_sub(1) } else { cap };
                let st = check(trie_mask_rows(
                    automata.as_ptr(),
                    states.as_ptr(),
                    rows.len(),
                    if null_mask { null_mut() } else { buf.as_mut_ptr() },
                    n_words,
                    rw,
                ));
                if st == TRIE_OK {
                    for (i, &(a, s)) in rows.iter().enumerate() {
                        let got = &buf[i * rw..(i + 1) * rw];
                        if a.is_null() {
                            assert!(got.iter().all(|&w| w == u32::MAX), "unconstrained row {i}");
                        } else {
                            let mut row = vec![0u32; rw.max(1)];
                            assert_eq!(check(trie_mask(a, s, row.as_mut_ptr(), rw)), TRIE_OK);
                            assert_eq!(got, &row[..rw], "row {i}");
                        }
                    }
                } else {
                    assert!(buf.iter().all(|&w| w == 0x3C3C_3C3C), "failed trie_mask_rows wrote into the buffer");
                }
            }
            Op::Advance { a, state, known, token, pick, null_next } => {
                let a = pool.automaton(a);
                let s = pool.state(a, state, known);
                let allowed = allowed_of(a, s);
                let token = match (pick, &allowed) {
                    (Some(k), Some(al)) if !al.is_empty() => al[k as usize % al.len()],
                    _ => token,
                };
                let mut next = 0xFEED_u32;
                let st = check(trie_advance(a, s, token, if null_next { null_mut() } else { &mut next }));
                match st {
                    TRIE_OK => {
                        let al = allowed.expect("advance ok on a bad state");
                        assert!(al.binary_search(&token).is_ok(), "advance accepted a token not allowed");
                        if next != TRIE_STATE_FINISHED {
                            assert!((next as usize) < trie_automaton_n_states(a));
                            pool.states.push((a as usize, next));
                        } else {
                            assert!(trie_is_accepting(a, s));
                        }
                    }
                    _ => {
                        assert_eq!(next, 0xFEED, "failed advance wrote *next");
                        if let (TRIE_ERR_TOKEN_REJECTED, Some(al)) = (st, &allowed) {
                            assert!(al.binary_search(&token).is_err(), "allowed token rejected");
                        }
                    }
                }
            }
            Op::Forced { a, state, known, bytes_cap, tokens_cap, null_outs } => {
                let a = pool.automaton(a);
                let s = pool.state(a, state, known);
                let mut bytes = vec![0xCCu8; 16];
                let mut toks = vec![-7i32; 16];
                let bc = len(&bytes_cap, 16);
                let tc = len(&tokens_cap, 16);
                let (mut nb, mut nt, mut forced) = (0usize, 0usize, false);
                let st = check(trie_forced(
                    a,
                    s,
                    if null_outs & 1 != 0 && bc != 0 { null_mut() } else { bytes.as_mut_ptr() },
                    bc,
                    if null_outs & 2 != 0 { null_mut() } else { &mut nb },
                    if null_outs & 4 != 0 && tc != 0 { null_mut() } else { toks.as_mut_ptr() },
                    tc,
                    if null_outs & 8 != 0 { null_mut() } else { &mut nt },
                    if null_outs & 16 != 0 { null_mut() } else { &mut forced },
                ));
                if st == TRIE_OK && forced {
                    // The token path spells a member from s.
                    let mut t = s;
                    for &tok in &toks[..nt] {
                        assert_eq!(check(trie_advance(a, t, tok, &mut t)), TRIE_OK);
                    }
                    assert!(trie_is_accepting(a, t));
                } else if st != TRIE_OK {
                    assert!(bytes.iter().all(|&b| b == 0xCC) && toks.iter().all(|&t| t == -7));
                }
            }
            Op::VocabToken { v, token, null_out } => {
                let v = pool.vocab(v);
                let mut b = 1 as *const u8;
                let mut n = 3usize;
                let st = check(trie_vocab_token(
                    v,
                    token,
                    if null_out & 1 != 0 { null_mut() } else { &mut b },
                    if null_out & 2 != 0 { null_mut() } else { &mut n },
                ));
                if st == TRIE_OK {
                    assert!((token as usize) < trie_vocab_n_tokens(v));
                    if n > 0 {
                        let _ = std::slice::from_raw_parts(b, n).iter().map(|&x| x as usize).sum::<usize>();
                    }
                } else if null_out & 3 == 0 {
                    assert!(b.is_null() && n == 0);
                }
            }
            Op::EogIds { v, null_out } => {
                let v = pool.vocab(v);
                let mut p = 1 as *const i32;
                let mut n = 3usize;
                let st = check(trie_vocab_eog_ids(
                    v,
                    if null_out & 1 != 0 { null_mut() } else { &mut p },
                    if null_out & 2 != 0 { null_mut() } else { &mut n },
                ));
                if st == TRIE_OK && n > 0 {
                    let ids = std::slice::from_raw_parts(p, n);
                    assert!(ids.iter().all(|&e| e >= 0 && (e as usize) < trie_vocab_n_tokens(v)));
                }
            }
            Op::Dropped { a, null_out } => {
                let a = pool.automaton(a);
                let mut p = 1 as *const usize;
                let mut n = 3usize;
                let st = check(trie_automaton_dropped(
                    a,
                    if null_out & 1 != 0 { null_mut() } else { &mut p },
                    if null_out & 2 != 0 { null_mut() } else { &mut n },
                ));
                if st == TRIE_OK && n > 0 {
                    let d = std::slice::from_raw_parts(p, n);
                    assert!(d.windows(2).all(|w| w[0] < w[1]));
                }
            }
            Op::Accessors { a, v, state } => {
                let a = pool.automaton(a);
                let v = pool.vocab(v);
                let _ = (trie_vocab_n_tokens(v), trie_vocab_memory_usage(v));
                let _ = (trie_automaton_n_states(a), trie_automaton_n_members(a), trie_automaton_memory_usage(a));
                assert_eq!(trie_start(a), 0);
                let acc = trie_is_accepting(a, state);
                if a.is_null() || (state != TRIE_STATE_FINISHED && state as usize >= trie_automaton_n_states(a)) {
                    assert!(!acc);
                }
                let _ = last_error();
            }
            Op::StatusStr(s) => {
                let p = trie_status_str(s);
                assert!(!p.is_null());
                assert!(!CStr::from_ptr(p).to_bytes().is_empty());
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut pool = Pool { vocabs: Vec::new(), automata: Vec::new(), states: Vec::new() };
    for op in ops.into_iter().take(64) {
        run(&mut pool, op);
    }
    unsafe {
        for a in pool.automata.drain(..) {
            trie_automaton_free(a);
        }
        for v in pool.vocabs.drain(..) {
            trie_vocab_free(v);
        }
    }
});
