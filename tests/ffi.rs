//! Tests of the C ABI (`trie::ffi`) through the rlib: every function, every bad input, outputs left untouched on
//! failure, reference counting, the header's version macros. (tests/c/ holds the same checks in C, run under
//! AddressSanitizer and valgrind by ctest.)
#![allow(clippy::undocumented_unsafe_blocks)]

mod common;

use common::asset;
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};
use trie::ffi::trie_status::*;
use trie::ffi::*;

fn last_error() -> String {
    unsafe { CStr::from_ptr(trie_last_error()) }.to_str().unwrap().to_string()
}

/// Tokens a b c d e ab abc bc </s> (control, EOG 8); mask width 40.
fn toy() -> *mut trie_vocab {
    let texts: [&[u8]; 9] = [b"a", b"b", b"c", b"d", b"e", b"ab", b"abc", b"bc", b"</s>"];
    let ptrs: Vec<*const u8> = texts.iter().map(|t| t.as_ptr()).collect();
    let lens: Vec<usize> = texts.iter().map(|t| t.len()).collect();
    let mut kinds = [TRIE_TOKEN_NORMAL; 9];
    kinds[8] = TRIE_TOKEN_CONTROL;
    let eog = [8i32];
    let mut v = null_mut();
    let st = unsafe { trie_vocab_new_ex(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 9, eog.as_ptr(), 1, 40, &mut v) };
    assert_eq!(st, TRIE_OK, "{}", last_error());
    v
}

fn compile(v: *const trie_vocab, set: &[&[u8]], options: Option<&trie_options>) -> (trie_status, *mut trie_automaton) {
    let ptrs: Vec<*const u8> = set.iter().map(|s| s.as_ptr()).collect();
    let lens: Vec<usize> = set.iter().map(|s| s.len()).collect();
    let mut a = 1usize as *mut trie_automaton;
    let opts = options.map_or(null(), |o| o as *const trie_options);
    let st = unsafe { trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), set.len(), opts, &mut a) };
    if st != TRIE_OK {
        assert!(a.is_null(), "*out must be NULL on failure");
    }
    (st, a)
}

fn allowed(a: *const trie_automaton, s: trie_state) -> Vec<i32> {
    let mut n = 0usize;
    assert_eq!(
        unsafe { trie_allowed(a, s, null_mut(), 0, &mut n) },
        if n == 0 { TRIE_OK } else { TRIE_ERR_BUFFER_TOO_SMALL }
    );
    let mut out = vec![-1i32; n];
    assert_eq!(unsafe { trie_allowed(a, s, out.as_mut_ptr(), n, &mut n) }, TRIE_OK);
    assert_eq!(out.len(), n);
    out
}

#[test]
fn version_and_status_strings() {
    let v = unsafe { CStr::from_ptr(trie_version()) }.to_str().unwrap();
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    assert_eq!(TRIE_VERSION_STRING, env!("CARGO_PKG_VERSION"));
    // trie_sampler_name: one static "trie" (its address identifies trie_llama.h's sampler stages)
    assert_eq!(unsafe { CStr::from_ptr(trie_sampler_name()) }.to_bytes(), b"trie");
    assert_eq!(trie_sampler_name(), trie_sampler_name());
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/trie.h")).unwrap();
    for (name, value) in [
        ("MAJOR", env!("CARGO_PKG_VERSION_MAJOR")),
        ("MINOR", env!("CARGO_PKG_VERSION_MINOR")),
        ("PATCH", env!("CARGO_PKG_VERSION_PATCH")),
    ] {
        assert!(header.contains(&format!("#define TRIE_VERSION_{name} {value}\n")), "TRIE_VERSION_{name}");
    }
    for s in 0..=13 {
        let text = unsafe { CStr::from_ptr(trie_status_str(s)) }.to_str().unwrap();
        assert_ne!(text, "unknown status");
    }
    for s in [14, -1, i32::MAX, i32::MIN] {
        assert_eq!(unsafe { CStr::from_ptr(trie_status_str(s)) }.to_str().unwrap(), "unknown status");
    }
    assert_eq!(TRIE_STATE_FINISHED, u32::MAX);
    assert_eq!(TRIE_ERR_INVALID_STATE as i32, 12);
    // Every function of src/capi/ is declared in the header.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/capi");
    let mut src = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            src += &std::fs::read_to_string(&path).unwrap();
        }
    }
    assert!(src.contains("extern \"C\" fn trie_vocab_free("), "no C functions read from {dir}");
    for line in src.lines().filter(|l| l.contains("extern \"C\" fn ")) {
        let name = line.split("fn ").nth(1).unwrap().split('(').next().unwrap();
        assert!(
            header.contains(&format!(" {name}(")) || header.contains(&format!("*{name}(")),
            "{name} missing from trie.h"
        );
    }
}

#[test]
fn vocab_new_and_bad_inputs() {
    let texts: [&[u8]; 3] = [b"x", b"", b"yz"];
    let ptrs = [texts[0].as_ptr(), null(), texts[2].as_ptr()];
    let lens = [1usize, 0, 2];
    let kinds = [TRIE_TOKEN_NORMAL, TRIE_TOKEN_UNUSED, TRIE_TOKEN_NORMAL];
    let eog = [1i32];
    let mut v = null_mut();
    unsafe {
        assert_eq!(trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v), TRIE_OK);
        assert_eq!(trie_vocab_n_tokens(v), 3);
        trie_vocab_free(v);
        assert_eq!(trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), null(), 3, null(), 0, &mut v), TRIE_OK);
        trie_vocab_free(v);

        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, null_mut()),
            TRIE_ERR_NULL_ARGUMENT
        );
        v = 1usize as *mut _;
        assert_eq!(
            trie_vocab_new(null(), lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_NULL_ARGUMENT
        );
        assert!(v.is_null());
        assert!(last_error().contains("token_bytes"), "{}", last_error());
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), null(), kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, null(), 1, &mut v),
            TRIE_ERR_NULL_ARGUMENT
        );
        let bad_lens = [1usize, 4, 2];
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), bad_lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_NULL_ARGUMENT
        );
        assert!(last_error().contains("token_bytes[1]"));
        let bad_kinds = [1u32, 7, 1];
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), bad_kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains("token_kinds[1] = 7"));
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, [-1i32].as_ptr(), 1, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, [3i32].as_ptr(), 1, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(trie_vocab_new(null(), null(), null(), 0, null(), 0, &mut v), TRIE_ERR_INVALID_ARGUMENT);
        assert_eq!(
            trie_vocab_new_ex(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, 2, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 1 << 40, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_LIMIT_EXCEEDED
        );
        assert_eq!(
            trie_vocab_new(ptrs.as_ptr(), [usize::MAX, 0, 0].as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        // Padded: id 3 exists with n_vocab 4 but is padding, never allowed, so it cannot end generation either.
        assert_eq!(
            trie_vocab_new_ex(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, [3i32].as_ptr(), 1, 4, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains("padding"), "{}", last_error());
        assert_eq!(
            trie_vocab_new_ex(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 3, eog.as_ptr(), 1, 4, &mut v),
            TRIE_OK
        );
        assert_eq!(trie_vocab_n_tokens(v), 4);
        trie_vocab_free(v);
    }
}

#[test]
fn vocab_accessors_and_refcounts() {
    let v = toy();
    unsafe {
        assert_eq!(trie_vocab_n_tokens(v), 40);
        assert_eq!(trie_vocab_n_tokens(null()), 0);
        assert!(trie_vocab_memory_usage(v) > 0);
        assert_eq!(trie_vocab_memory_usage(null()), 0);
        let (mut b, mut n) = (null(), 0usize);
        assert_eq!(trie_vocab_token(v, 6, &mut b, &mut n), TRIE_OK);
        assert_eq!(std::slice::from_raw_parts(b, n), b"abc");
        assert_eq!(trie_vocab_token(v, 39, &mut b, &mut n), TRIE_OK);
        assert_eq!(n, 0);
        for bad in [-1, 40, i32::MAX, i32::MIN] {
            assert_eq!(trie_vocab_token(v, bad, &mut b, &mut n), TRIE_ERR_INVALID_ARGUMENT);
            assert!(b.is_null() && n == 0);
        }
        assert_eq!(trie_vocab_token(null(), 0, &mut b, &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_vocab_token(v, 0, null_mut(), &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_vocab_token(v, 0, &mut b, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        let (mut ids, mut k) = (null(), 0usize);
        assert_eq!(trie_vocab_eog_ids(v, &mut ids, &mut k), TRIE_OK);
        assert_eq!(std::slice::from_raw_parts(ids, k), &[8]);
        assert_eq!(trie_vocab_eog_ids(null(), &mut ids, &mut k), TRIE_ERR_NULL_ARGUMENT);
        assert!(ids.is_null() && k == 0);
        assert_eq!(trie_vocab_eog_ids(v, null_mut(), &mut k), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_vocab_eog_ids(v, &mut ids, null_mut()), TRIE_ERR_NULL_ARGUMENT);

        let r = trie_vocab_retain(v);
        assert_eq!(r, v);
        trie_vocab_free(v);
        assert_eq!(trie_vocab_n_tokens(r), 40);
        trie_vocab_free(r);
        assert!(trie_vocab_retain(null()).is_null());
        trie_vocab_free(null_mut());
    }
}

#[test]
fn compile_and_bad_inputs() {
    let v = toy();
    let (st, a) = compile(v, &[b"abc", b"ab", b"bd"], None);
    assert_eq!(st, TRIE_OK);
    unsafe {
        assert_eq!(trie_automaton_n_vocab(a), 40);
        assert_eq!(trie_automaton_mask_words(a), 2);
        assert!(trie_automaton_n_states(a) >= 4);
        assert_eq!(trie_automaton_n_members(a), 3);
        assert!(trie_automaton_memory_usage(a) > 0);
        let (mut d, mut n) = (null(), 9usize);
        assert_eq!(trie_automaton_dropped(a, &mut d, &mut n), TRIE_OK);
        assert_eq!(n, 0);
        trie_automaton_free(a);

        let ptrs = [b"ab".as_ptr(), null()];
        let lens = [2usize, 0];
        let mut out = 1usize as *mut trie_automaton;
        assert_eq!(trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), 2, null(), &mut out), TRIE_OK);
        assert!(trie_is_accepting(out, trie_start(out)), "the empty string is a member");
        trie_automaton_free(out);
        assert_eq!(trie_compile(null(), ptrs.as_ptr(), lens.as_ptr(), 2, null(), &mut out), TRIE_ERR_NULL_ARGUMENT);
        assert!(out.is_null());
        assert_eq!(trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), 2, null(), null_mut()), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_compile(v, null(), lens.as_ptr(), 2, null(), &mut out), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_compile(v, ptrs.as_ptr(), null(), 2, null(), &mut out), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_compile(v, ptrs.as_ptr(), [2usize, 1].as_ptr(), 2, null(), &mut out), TRIE_ERR_NULL_ARGUMENT);
        assert!(last_error().contains("strings[1]"));
        assert_eq!(trie_compile(v, null(), null(), 0, null(), &mut out), TRIE_ERR_EMPTY_SET);
    }
    let (st, _) = compile(v, &[b"abz", b"ab"], None);
    assert_eq!(st, TRIE_ERR_UNREACHABLE_STRING);
    assert!(last_error().contains("\"abz\""), "{}", last_error());
    let drop = trie_options { drop_unreachable: true, ..Default::default() };
    let (st, a) = compile(v, &[b"abz", b"ab", b"ab\xff"], Some(&drop));
    assert_eq!(st, TRIE_OK);
    unsafe {
        let (mut d, mut n) = (null(), 0usize);
        assert_eq!(trie_automaton_dropped(a, &mut d, &mut n), TRIE_OK);
        assert_eq!(std::slice::from_raw_parts(d, n), &[0, 2]);
        assert_eq!(trie_automaton_n_members(a), 1);
        assert_eq!(trie_automaton_dropped(null(), &mut d, &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert!(d.is_null() && n == 0);
        assert_eq!(trie_automaton_dropped(a, null_mut(), &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_automaton_dropped(a, &mut d, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        trie_automaton_free(a);
    }
    let (st, _) = compile(v, &[b"zz"], Some(&drop));
    assert_eq!(st, TRIE_ERR_UNREACHABLE_STRING);
    unsafe {
        assert_eq!(trie_automaton_n_vocab(null()), 0);
        assert_eq!(trie_automaton_mask_words(null()), 0);
        assert_eq!(trie_automaton_n_states(null()), 0);
        assert_eq!(trie_automaton_n_members(null()), 0);
        assert_eq!(trie_automaton_memory_usage(null()), 0);
        assert!(trie_automaton_retain(null()).is_null());
        assert!(trie_automaton_vocab(null()).is_null());
        trie_automaton_free(null_mut());
        trie_vocab_free(v);
    }
}

/// Options at the very end of a readable page, followed by an unreadable one, with a garbage `struct_size`
/// (a caller that forgot `trie_options_init`): an error naming the bound, never a read past the struct (B1).
#[test]
fn options_with_a_huge_struct_size_are_refused_without_reading_past_them() {
    let v = toy();
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    // SAFETY: a fresh anonymous mapping of two pages; the second is made unreadable.
    let base = unsafe {
        libc::mmap(
            null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let guard = unsafe { (base as *mut u8).add(page) };
    assert_eq!(unsafe { libc::mprotect(guard as *mut libc::c_void, page, libc::PROT_NONE) }, 0);
    let at = unsafe { guard.sub(std::mem::size_of::<trie_options>()) } as *mut trie_options;
    let set: [&[u8]; 1] = [b"ab"];
    let (ptrs, lens) = ([set[0].as_ptr()], [set[0].len()]);
    for size in [1usize << 40, usize::MAX, 4097] {
        unsafe { at.write(trie_options { struct_size: size, ..Default::default() }) };
        let mut a = 1usize as *mut trie_automaton;
        let st = unsafe { trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), 1, at, &mut a) };
        assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT, "struct_size {size}");
        assert!(a.is_null());
        let msg = last_error();
        assert!(msg.contains(&size.to_string()) && msg.contains("4096") && msg.contains("trie_options_init"), "{msg}");
        let (mut a2, mut b) = (null_mut(), 1usize as *mut trie_automaton);
        assert_eq!(unsafe { trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), 1, null(), &mut a2) }, TRIE_OK);
        let st = unsafe { trie_automaton_with(a2, null(), null(), 0, null(), null(), 0, at, &mut b) };
        assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT, "trie_automaton_with, struct_size {size}");
        assert!(b.is_null());
        unsafe { trie_automaton_free(a2) };
    }
    // The struct's own size still works at the end of the page.
    unsafe { at.write(trie_options::default()) };
    let mut a = null_mut();
    assert_eq!(unsafe { trie_compile(v, ptrs.as_ptr(), lens.as_ptr(), 1, at, &mut a) }, TRIE_OK, "{}", last_error());
    unsafe {
        trie_automaton_free(a);
        libc::munmap(base, 2 * page);
        trie_vocab_free(v);
    }
}

#[test]
fn large_sets_and_long_strings() {
    let v = toy();
    // 1,000,000 strings (5^8 = 390,625 distinct) and one 64 KiB string.
    let strings: Vec<Vec<u8>> = (0..1_000_000usize)
        .map(|i| {
            let mut x = i;
            (0..8)
                .map(|_| {
                    let c = b"abcde"[x % 5];
                    x /= 5;
                    c
                })
                .collect()
        })
        .collect();
    let refs: Vec<&[u8]> = strings.iter().map(|s| s.as_slice()).collect();
    let (st, a) = compile(v, &refs, None);
    assert_eq!(st, TRIE_OK, "{}", last_error());
    unsafe {
        assert_eq!(trie_automaton_n_members(a), 390_625);
        trie_automaton_free(a);
    }
    let long = vec![b'a'; 65536];
    let (st, a) = compile(v, &[&long], None);
    assert_eq!(st, TRIE_OK);
    unsafe {
        assert_eq!(trie_automaton_n_states(a), 65537);
        trie_automaton_free(a);
        trie_vocab_free(v);
    }
}

#[test]
fn decode_masks_and_advance() {
    let v = toy();
    let (_, a) = compile(v, &[b"abc", b"ab", b"bd"], None);
    unsafe { trie_vocab_free(v) }; // the automaton keeps it alive
    unsafe {
        let s0 = trie_start(a);
        assert_eq!(s0, 0);
        assert_eq!(trie_start(null()), 0);
        assert_eq!(allowed(a, s0), [0, 1, 5, 6]);
        assert_eq!(allowed(a, TRIE_STATE_FINISHED), [8]);
        let mut buf = [-7i32; 8];
        let mut n = 5usize;
        assert_eq!(trie_allowed(a, 424242, buf.as_mut_ptr(), 8, &mut n), TRIE_ERR_INVALID_STATE);
        assert!(n == 0 && buf == [-7; 8]);
        assert!(last_error().contains("424242"));
        assert_eq!(trie_allowed(null(), s0, buf.as_mut_ptr(), 8, &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_allowed(a, s0, buf.as_mut_ptr(), 8, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        // A NULL buffer with room claimed is an error; a short buffer is left untouched and the size is reported.
        assert_eq!(trie_allowed(a, s0, null_mut(), 8, &mut n), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_allowed(a, s0, buf.as_mut_ptr(), 3, &mut n), TRIE_ERR_BUFFER_TOO_SMALL);
        assert!(n == 4 && buf == [-7; 8]);
        assert!(last_error().contains("allows 4 tokens"), "{}", last_error());
        assert_eq!(trie_allowed(a, s0, buf.as_mut_ptr(), 8, &mut n), TRIE_OK);
        assert_eq!((n, &buf[..5]), (4, &[0, 1, 5, 6, -7][..]));

        let mut mask = [0xAAAA_AAAAu32; 4];
        assert_eq!(trie_mask(a, s0, mask.as_mut_ptr(), 1), TRIE_ERR_BUFFER_TOO_SMALL);
        assert_eq!(mask, [0xAAAA_AAAA; 4]);
        assert_eq!(trie_mask(a, s0, mask.as_mut_ptr(), 0), TRIE_ERR_BUFFER_TOO_SMALL);
        assert_eq!(trie_mask(a, s0, null_mut(), 2), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask(null(), s0, mask.as_mut_ptr(), 2), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask(a, 99999, mask.as_mut_ptr(), 4), TRIE_ERR_INVALID_STATE);
        assert_eq!(mask, [0xAAAA_AAAA; 4]);
        assert_eq!(trie_mask(a, s0, mask.as_mut_ptr(), 4), TRIE_OK);
        assert_eq!(mask, [0x63, 0, 0, 0]);

        let mut s_ab = 77;
        assert_eq!(trie_advance(a, s0, 5, &mut s_ab), TRIE_OK);
        assert!(trie_is_accepting(a, s_ab) && !trie_is_accepting(a, s0));
        assert!(
            trie_is_accepting(a, TRIE_STATE_FINISHED) && !trie_is_accepting(a, 99999) && !trie_is_accepting(null(), 0)
        );
        let mut next = 77;
        assert_eq!(trie_advance(a, s0, 3, &mut next), TRIE_ERR_TOKEN_REJECTED);
        assert_eq!(next, 77);
        assert!(last_error().contains("\"d\""), "{}", last_error());
        assert_eq!(trie_advance(a, s0, 8, &mut next), TRIE_ERR_TOKEN_REJECTED);
        assert_eq!(trie_advance(a, s0, 20, &mut next), TRIE_ERR_TOKEN_REJECTED);
        for bad in [-1, 40, i32::MAX, i32::MIN] {
            assert_eq!(trie_advance(a, s0, bad, &mut next), TRIE_ERR_INVALID_ARGUMENT);
        }
        assert_eq!(trie_advance(a, 99999, 0, &mut next), TRIE_ERR_INVALID_STATE);
        assert_eq!(trie_advance(a, s0, 0, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_advance(null(), s0, 0, &mut next), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(next, 77);
        assert_eq!(trie_advance(a, s_ab, 8, &mut next), TRIE_OK);
        assert_eq!(next, TRIE_STATE_FINISHED);
        assert_eq!(trie_advance(a, next, 8, &mut next), TRIE_OK);
        assert_eq!(next, TRIE_STATE_FINISHED);
        assert_eq!(trie_advance(a, TRIE_STATE_FINISHED, 0, &mut next), TRIE_ERR_TOKEN_REJECTED);

        // Batches.
        let states = [s0, s_ab, TRIE_STATE_FINISHED];
        let mut rows = [0xAAAA_AAAAu32; 9];
        assert_eq!(trie_mask_batch(a, states.as_ptr(), 3, rows.as_mut_ptr(), 9, 3), TRIE_OK);
        assert_eq!(rows, [0x63, 0, 0, 0x104, 0, 0, 0x100, 0, 0]);
        let mut rows = [0xAAAA_AAAAu32; 9];
        assert_eq!(trie_mask_batch(a, states.as_ptr(), 3, rows.as_mut_ptr(), 9, 1), TRIE_ERR_BUFFER_TOO_SMALL);
        assert_eq!(trie_mask_batch(a, states.as_ptr(), 3, rows.as_mut_ptr(), 5, 2), TRIE_ERR_BUFFER_TOO_SMALL);
        assert_eq!(trie_mask_batch(a, [s0, 424242].as_ptr(), 2, rows.as_mut_ptr(), 9, 2), TRIE_ERR_INVALID_STATE);
        assert_eq!(trie_mask_batch(a, null(), 3, rows.as_mut_ptr(), 9, 3), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask_batch(a, states.as_ptr(), 3, null_mut(), 9, 3), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask_batch(null(), states.as_ptr(), 3, rows.as_mut_ptr(), 9, 3), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask_batch(a, states.as_ptr(), 3, rows.as_mut_ptr(), usize::MAX, 3), TRIE_ERR_INVALID_ARGUMENT);
        assert_eq!(
            trie_mask_batch(a, states.as_ptr(), usize::MAX / 2, rows.as_mut_ptr(), 9, 3),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(rows, [0xAAAA_AAAA; 9]);
        assert_eq!(trie_mask_batch(a, null(), 0, null_mut(), 0, 0), TRIE_OK);
        let many: Vec<trie_state> = (0..64).map(|i| if i % 2 == 1 { s_ab } else { s0 }).collect();
        let mut big = vec![0u32; 128];
        assert_eq!(trie_mask_batch(a, many.as_ptr(), 64, big.as_mut_ptr(), 128, 2), TRIE_OK);
        for (i, row) in big.chunks(2).enumerate() {
            assert_eq!(row[0], if i % 2 == 1 { 0x104 } else { 0x63 });
        }

        // Rows of different automata (and unconstrained rows) in one buffer.
        let v2 = toy();
        let (_, b) = compile(v2, &[b"e", b"de"], None);
        trie_vocab_free(v2);
        let automata = [a as *const trie_automaton, b, null(), a];
        let states = [s0, 0, 12345, s_ab];
        let mut rows = [0xAAAA_AAAAu32; 8];
        assert_eq!(trie_mask_rows(automata.as_ptr(), states.as_ptr(), 4, rows.as_mut_ptr(), 8, 2), TRIE_OK);
        assert_eq!(rows, [0x63, 0, 1 << 3 | 1 << 4, 0, u32::MAX, u32::MAX, 0x104, 0]);
        let mut rows = [0xAAAA_AAAAu32; 8];
        let bad_states = [s0, 0, 0, 424242];
        assert_eq!(
            trie_mask_rows(automata.as_ptr(), bad_states.as_ptr(), 4, rows.as_mut_ptr(), 8, 2),
            TRIE_ERR_INVALID_STATE
        );
        assert!(last_error().contains("row 3"), "{}", last_error());
        assert_eq!(
            trie_mask_rows(automata.as_ptr(), states.as_ptr(), 4, rows.as_mut_ptr(), 8, 1),
            TRIE_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(
            trie_mask_rows(automata.as_ptr(), states.as_ptr(), 4, rows.as_mut_ptr(), 7, 2),
            TRIE_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!(trie_mask_rows(null(), states.as_ptr(), 4, rows.as_mut_ptr(), 8, 2), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask_rows(automata.as_ptr(), null(), 4, rows.as_mut_ptr(), 8, 2), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_mask_rows(automata.as_ptr(), states.as_ptr(), 4, null_mut(), 8, 2), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(rows, [0xAAAA_AAAA; 8], "nothing written on failure");
        assert_eq!(trie_mask_rows(null(), null(), 0, null_mut(), 0, 0), TRIE_OK);
        let unconstrained = [null::<trie_automaton>(); 2];
        assert_eq!(
            trie_mask_rows(unconstrained.as_ptr(), states.as_ptr(), 2, rows.as_mut_ptr(), 8, 0),
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(trie_mask_rows(unconstrained.as_ptr(), states.as_ptr(), 2, rows.as_mut_ptr(), 8, 4), TRIE_OK);
        assert_eq!(rows, [u32::MAX; 8]);
        let many_a: Vec<*const trie_automaton> =
            (0..100).map(|i| if i % 3 == 0 { b as *const _ } else { a as *const _ }).collect();
        let many_s: Vec<trie_state> = (0..100).map(|i| if i % 3 == 0 { 0 } else { s_ab }).collect();
        let mut big = vec![0u32; 200];
        assert_eq!(trie_mask_rows(many_a.as_ptr(), many_s.as_ptr(), 100, big.as_mut_ptr(), 200, 2), TRIE_OK);
        for (i, row) in big.chunks(2).enumerate() {
            assert_eq!(row[0], if i % 3 == 0 { 1 << 3 | 1 << 4 } else { 0x104 }, "row {i}");
        }
        trie_automaton_free(b);

        // Reference counting.
        let r = trie_automaton_retain(a);
        assert_eq!(r, a);
        let av = trie_automaton_vocab(a);
        assert_eq!(trie_vocab_n_tokens(av), 40);
        trie_automaton_free(a);
        assert_eq!(trie_advance(r, 0, 5, &mut next), TRIE_OK);
        trie_automaton_free(r);
        assert_eq!(trie_vocab_n_tokens(av), 40);
        trie_vocab_free(av);
    }
}

#[test]
fn forced_continuations() {
    let v = toy();
    let (_, a) = compile(v, &[b"abcab", b"bd"], None);
    unsafe {
        let (mut nb, mut nt, mut forced) = (9usize, 9usize, true);
        assert_eq!(trie_forced(a, 0, null_mut(), 0, &mut nb, null_mut(), 0, &mut nt, &mut forced), TRIE_OK);
        assert!(!forced && nb == 0 && nt == 0);
        let mut s = 0;
        assert_eq!(trie_advance(a, 0, 0, &mut s), TRIE_OK);
        assert_eq!(
            trie_forced(a, s, null_mut(), 0, &mut nb, null_mut(), 0, &mut nt, &mut forced),
            TRIE_ERR_BUFFER_TOO_SMALL
        );
        assert!(forced && nb == 4 && nt == 2);
        let mut bytes = [0u8; 8];
        let mut toks = [-5i32; 8];
        assert_eq!(
            trie_forced(a, s, bytes.as_mut_ptr(), 8, &mut nb, toks.as_mut_ptr(), 1, &mut nt, &mut forced),
            TRIE_ERR_BUFFER_TOO_SMALL
        );
        assert_eq!((bytes[0], toks[0]), (0, -5));
        assert_eq!(
            trie_forced(a, s, bytes.as_mut_ptr(), 8, &mut nb, toks.as_mut_ptr(), 8, &mut nt, &mut forced),
            TRIE_OK
        );
        assert_eq!(&bytes[..nb], b"bcab");
        assert_eq!(&toks[..3], &[7, 5, -5]);
        assert_eq!(
            trie_forced(
                a,
                TRIE_STATE_FINISHED,
                bytes.as_mut_ptr(),
                8,
                &mut nb,
                toks.as_mut_ptr(),
                8,
                &mut nt,
                &mut forced
            ),
            TRIE_OK
        );
        assert!(!forced);
        let bp = bytes.as_mut_ptr();
        let tp = toks.as_mut_ptr();
        assert_eq!(trie_forced(a, 4242, bp, 8, &mut nb, tp, 8, &mut nt, &mut forced), TRIE_ERR_INVALID_STATE);
        assert_eq!(trie_forced(null(), s, bp, 8, &mut nb, tp, 8, &mut nt, &mut forced), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_forced(a, s, bp, 8, null_mut(), tp, 8, &mut nt, &mut forced), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_forced(a, s, bp, 8, &mut nb, tp, 8, null_mut(), &mut forced), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_forced(a, s, bp, 8, &mut nb, tp, 8, &mut nt, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_forced(a, s, null_mut(), 8, &mut nb, tp, 8, &mut nt, &mut forced), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_forced(a, s, bp, 8, &mut nb, null_mut(), 8, &mut nt, &mut forced), TRIE_ERR_NULL_ARGUMENT);
        trie_automaton_free(a);
        trie_vocab_free(v);
    }
}

#[test]
fn last_error_is_per_thread() {
    let v = toy();
    let (_, a) = compile(v, &[b"ab"], None);
    let mut next = 0;
    assert_eq!(unsafe { trie_advance(a, 0, 3, &mut next) }, TRIE_ERR_TOKEN_REJECTED);
    let mine = last_error();
    let a_addr = a as usize;
    std::thread::spawn(move || {
        assert_eq!(last_error(), "");
        let mut next = 0;
        assert_eq!(
            unsafe { trie_advance(a_addr as *const trie_automaton, 0, -7, &mut next) },
            TRIE_ERR_INVALID_ARGUMENT
        );
        assert!(last_error().contains("-7"));
    })
    .join()
    .unwrap();
    assert_eq!(last_error(), mine);
    unsafe {
        trie_automaton_free(a);
        trie_vocab_free(v);
    }
}

#[test]
fn files_and_bad_files() {
    let mut v = 1usize as *mut trie_vocab;
    let dir = std::env::temp_dir().join(format!("trie-ffi-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = |p: &std::path::Path| CString::new(p.to_str().unwrap()).unwrap();
    unsafe {
        assert_eq!(trie_vocab_from_gguf(null(), &mut v), TRIE_ERR_NULL_ARGUMENT);
        assert!(v.is_null());
        let missing = CString::new("/nonexistent/x.gguf").unwrap();
        assert_eq!(trie_vocab_from_gguf(missing.as_ptr(), null_mut()), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_vocab_from_gguf(missing.as_ptr(), &mut v), TRIE_ERR_IO);
        assert!(last_error().contains("/nonexistent/x.gguf"));
        let non_utf8 = CString::new(b"/tmp/\xff\xfe.gguf".to_vec()).unwrap();
        assert_eq!(trie_vocab_from_gguf(non_utf8.as_ptr(), &mut v), TRIE_ERR_INVALID_ARGUMENT);
        assert!(last_error().contains("UTF-8"));
        assert_eq!(trie_vocab_from_tokenizer_json(null(), &mut v), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_vocab_from_tokenizer_json(missing.as_ptr(), &mut v), TRIE_ERR_IO);
        assert_eq!(trie_vocab_from_tokenizer_json(non_utf8.as_ptr(), &mut v), TRIE_ERR_INVALID_ARGUMENT);
        assert_eq!(trie_vocab_from_tokenizer_json_ex(missing.as_ptr(), null(), 2, 0, &mut v), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(
            trie_vocab_from_tokenizer_json_ex(missing.as_ptr(), [-1].as_ptr(), 1, 0, &mut v),
            TRIE_ERR_INVALID_ARGUMENT
        );

        let garbage = dir.join("garbage");
        std::fs::write(&garbage, b"GGUF\x03\x00\x00\x00garbage").unwrap();
        assert_eq!(trie_vocab_from_gguf(c(&garbage).as_ptr(), &mut v), TRIE_ERR_MALFORMED_FILE);
        std::fs::write(&garbage, b"{\"model\": [1, 2").unwrap();
        assert_eq!(trie_vocab_from_tokenizer_json(c(&garbage).as_ptr(), &mut v), TRIE_ERR_MALFORMED_FILE);
        assert!(v.is_null());

        let gguf = asset("vocab/ggml-vocab-llama-bpe.gguf");
        {
            let bytes = std::fs::read(&gguf).unwrap();
            for cut in [10, 1000, 100_000, bytes.len() / 2] {
                std::fs::write(&garbage, &bytes[..cut]).unwrap();
                assert_eq!(trie_vocab_from_gguf(c(&garbage).as_ptr(), &mut v), TRIE_ERR_MALFORMED_FILE, "cut {cut}");
            }
            assert_eq!(trie_vocab_from_gguf(c(&gguf).as_ptr(), &mut v), TRIE_OK);
            assert_eq!(trie_vocab_n_tokens(v), 128_256);
            let (st, a) = compile(v, &[b"search_flights", b"book_hotel"], None);
            assert_eq!(st, TRIE_OK);
            let mut s = trie_start(a);
            let mut text = Vec::new();
            while s != TRIE_STATE_FINISHED {
                let t = *allowed(a, s).last().unwrap();
                let mut next = 0;
                assert_eq!(trie_advance(a, s, t, &mut next), TRIE_OK);
                if next != TRIE_STATE_FINISHED {
                    let (mut b, mut n) = (null(), 0);
                    assert_eq!(trie_vocab_token(v, t, &mut b, &mut n), TRIE_OK);
                    text.extend_from_slice(std::slice::from_raw_parts(b, n));
                }
                s = next;
            }
            assert!(text == b"search_flights" || text == b"book_hotel", "{:?}", String::from_utf8_lossy(&text));
            trie_automaton_free(a);
            trie_vocab_free(v);
        }
        let bert = asset("vocab/ggml-vocab-bert-bge.gguf");
        assert_eq!(trie_vocab_from_gguf(c(&bert).as_ptr(), &mut v), TRIE_ERR_UNSUPPORTED_VOCABULARY);
        if cfg!(feature = "hf") {
            let qwen = asset("tokenizers/qwen3.tokenizer.json");
            let eos = [151_645i32];
            assert_eq!(trie_vocab_from_tokenizer_json_ex(c(&qwen).as_ptr(), eos.as_ptr(), 1, 151_936, &mut v), TRIE_OK);
            assert_eq!(trie_vocab_n_tokens(v), 151_936);
            trie_vocab_free(v);
            assert_eq!(trie_vocab_from_tokenizer_json(c(&qwen).as_ptr(), &mut v), TRIE_OK);
            let (mut ids, mut n) = (null(), 0);
            assert_eq!(trie_vocab_eog_ids(v, &mut ids, &mut n), TRIE_OK);
            assert!(n >= 1, "EOG ids are inferred");
            trie_vocab_free(v);
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Every versioned struct of the C ABI follows one rule (issue 28): a larger `struct_size` (a newer header) works
/// when the fields this libtrie does not know are zero and is refused when one is set; a smaller one (an older
/// header) keeps the defaults of the fields it does not reach.
#[test]
fn versioned_structs_accept_older_and_newer_headers() {
    /// A struct followed by 16 bytes a newer header would add.
    #[repr(C)]
    struct Newer<T> {
        s: T,
        extra: [u64; 2],
    }
    let v = toy();
    let set: [&[u8]; 2] = [b"ab", b"b"];
    let (ptrs, lens) = ([set[0].as_ptr(), set[1].as_ptr()], [set[0].len(), set[1].len()]);
    unsafe {
        // trie_template
        let mut t: Newer<trie_template> = std::mem::zeroed();
        assert_eq!(trie_template_init(&mut t.s), TRIE_OK);
        t.s.struct_size = std::mem::size_of::<Newer<trie_template>>();
        let mut a = null_mut();
        assert_eq!(
            trie_compile_template(v, ptrs.as_ptr(), lens.as_ptr(), 2, &t.s, null(), &mut a),
            TRIE_OK,
            "{}",
            last_error()
        );
        trie_automaton_free(a);
        t.extra[1] = 7;
        let st = trie_compile_template(v, ptrs.as_ptr(), lens.as_ptr(), 2, &t.s, null(), &mut a);
        assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT);
        assert!(last_error().contains("does not know"), "{}", last_error());
        t.s.struct_size = 8;
        let st = trie_compile_template(v, ptrs.as_ptr(), lens.as_ptr(), 2, &t.s, null(), &mut a);
        assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT, "smaller than the first header");
        assert!(last_error().contains("trie_template_init"), "{}", last_error());

        // trie_set_config: newer (zero tail) works, a set unknown field is refused, older keeps the defaults
        let mut c: Newer<trie_set_config> = std::mem::zeroed();
        assert_eq!(trie_set_config_init(&mut c.s), TRIE_OK);
        c.s.struct_size = std::mem::size_of::<Newer<trie_set_config>>();
        let mut cache = null_mut();
        assert_eq!(trie_set_cache_new(v, &c.s, &mut cache), TRIE_OK, "{}", last_error());
        trie_set_cache_free(cache);
        c.extra[0] = 1;
        assert_eq!(trie_set_cache_new(v, &c.s, &mut cache), TRIE_ERR_INVALID_ARGUMENT);
        c.extra[0] = 0;
        // An older header that ends after set_dir: max_inline_strings keeps its default (10,000), not the 1 below.
        c.s.struct_size = std::mem::offset_of!(trie_set_config, allow_any_path);
        c.s.max_inline_strings = 1;
        assert_eq!(trie_set_cache_new(v, &c.s, &mut cache), TRIE_OK, "{}", last_error());
        let two = br#"{"strings": ["ab", "b"]}"#;
        assert_eq!(trie_set_cache_check(cache, two.as_ptr(), two.len()), TRIE_OK, "{}", last_error());
        trie_set_cache_free(cache);
        c.s.struct_size = std::mem::size_of::<trie_set_config>();
        assert_eq!(trie_set_cache_new(v, &c.s, &mut cache), TRIE_OK);
        assert_ne!(trie_set_cache_check(cache, two.as_ptr(), two.len()), TRIE_OK);
        assert!(last_error().contains("LIBTRIE_MAX_INLINE_STRINGS"), "{}", last_error());
        trie_set_cache_free(cache);
        trie_vocab_free(v);
    }
}

/// Members that carry values through the C ABI: compile, update (re-adding changes a value), the value where a
/// member is complete, the values of the possible members; bad inputs leave the outputs cleared.
#[test]
fn values_through_the_c_abi() {
    let v = toy();
    let set: [&[u8]; 3] = [b"ab", b"abd", b"ab"];
    let ptrs: Vec<*const u8> = set.iter().map(|s| s.as_ptr()).collect();
    let lens: Vec<usize> = set.iter().map(|s| s.len()).collect();
    let values = [5u64, 6, 7];
    unsafe {
        let mut a = null_mut();
        assert_eq!(
            trie_compile_with_values(v, ptrs.as_ptr(), lens.as_ptr(), values.as_ptr(), 3, null(), &mut a),
            TRIE_OK
        );
        assert!(trie_automaton_has_values(a));
        // "ab" is one token (5): its value is its first copy's.
        let mut s = 0;
        assert_eq!(trie_advance(a, trie_start(a), 5, &mut s), TRIE_OK);
        let (mut value, mut found) = (0u64, false);
        assert_eq!(trie_member_value(a, s, &mut value, &mut found), TRIE_OK);
        assert!(found && value == 5);
        assert_eq!(trie_member_value(a, trie_start(a), &mut value, &mut found), TRIE_OK);
        assert!(!found && value == 0);
        let mut got = [0u64; 2];
        let mut n = 0;
        assert_eq!(trie_possible_values(a, s, got.as_mut_ptr(), 2, &mut n), TRIE_OK);
        assert_eq!((n, got), (2, [5, 6]));
        assert_eq!(trie_possible_values(a, s, got.as_mut_ptr(), 1, &mut n), TRIE_ERR_BUFFER_TOO_SMALL);
        assert_eq!(n, 2);
        let add: [&[u8]; 1] = [b"ab"];
        let (add_ptrs, add_lens) = ([add[0].as_ptr()], [2usize]);
        let mut b = null_mut();
        let st = trie_automaton_with_values(
            a,
            add_ptrs.as_ptr(),
            add_lens.as_ptr(),
            [9u64].as_ptr(),
            1,
            null(),
            null(),
            0,
            null(),
            &mut b,
        );
        assert_eq!(st, TRIE_OK, "{}", last_error());
        assert_eq!(trie_member_value(b, s, &mut value, &mut found), TRIE_OK);
        assert!(found && value == 9);
        let mut c = 1usize as *mut trie_automaton;
        let st = trie_automaton_with(a, add_ptrs.as_ptr(), add_lens.as_ptr(), 1, null(), null(), 0, null(), &mut c);
        assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT);
        assert!(c.is_null() && last_error().contains("with_changes_and_values"), "{}", last_error());
        let mut c = 1usize as *mut trie_automaton;
        let st = trie_compile_with_values(v, ptrs.as_ptr(), lens.as_ptr(), null(), 3, null(), &mut c);
        assert_eq!(st, TRIE_ERR_NULL_ARGUMENT);
        assert!(c.is_null() && last_error().contains("values is NULL"), "{}", last_error());
        let mut t: trie_template = std::mem::zeroed();
        assert_eq!(trie_template_init(&mut t), TRIE_OK);
        let mut c = null_mut();
        let st =
            trie_compile_template_with_values(v, ptrs.as_ptr(), lens.as_ptr(), values.as_ptr(), 3, &t, null(), &mut c);
        assert_eq!(st, TRIE_OK, "{}", last_error());
        assert!(trie_automaton_has_values(c));
        assert_eq!(trie_member_value(null(), 0, &mut value, &mut found), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_member_value(a, 0, null_mut(), &mut found), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_possible_values(a, 0, null_mut(), 0, null_mut()), TRIE_ERR_NULL_ARGUMENT);
        assert!(!trie_automaton_has_values(null()));
        for x in [a, b, c] {
            trie_automaton_free(x);
        }
        trie_vocab_free(v);
    }
}
