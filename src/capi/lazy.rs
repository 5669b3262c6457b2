//! Loading a saved automaton lazily: the checks made on first use instead of at load.

use super::*;

/// Like [`trie_automaton_load`], with the checks made on first use instead of at load
/// ([`Automaton::load_lazy`]), so that loading costs milliseconds whatever the file's size. At load: the header,
/// the section table, the checksum of the header and of the file's block hashes, the sizes of the arrays; then,
/// once each, a state's row, chain, member and mask row the first time the state is used, every block of the
/// file (2 KiB from format version 8 on, 64 KiB before) against its hash the first time it is read, and the
/// whole automaton the first time a member is looked up by rank or the automaton is changed. A state whose part of the file fails its check behaves as an invalid
/// one: `TRIE_ERR_MALFORMED_FILE` from `trie_advance` and the mask fills, empty or false from the other queries;
/// a damaged or crafted file is never a crash, but it is noticed when the damaged part is used, not at load.
/// Files with a template and files of format version 1 are checked whole at load. The same status codes as
/// [`trie_automaton_load`]: `TRIE_ERR_IO`, `TRIE_ERR_MALFORMED_FILE` (a damaged header, checksum of the block
/// hashes, sizes), `TRIE_ERR_VOCAB_MISMATCH`, `TRIE_ERR_NULL_ARGUMENT`. On failure `*out` is NULL. The file must not
/// change while loaded (see [`trie_automaton_load`]).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `path` NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_load_lazy(
    vocab: *const trie_vocab,
    path: *const c_char,
    out: *mut *mut trie_automaton,
) -> trie_status {
    load_with(vocab, path, out, |vocab, path| Automaton::load_lazy(vocab, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;
    use std::ffi::CString;
    use std::ptr;

    fn toy() -> *mut trie_vocab {
        let texts: Vec<Vec<u8>> =
            ["a", "b", "c", "d", "e", "ab", "abc", "bc"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let mut toks = texts;
        toks.push(b"</s>".to_vec());
        let mut kinds = vec![TokenKind::Normal; 8];
        kinds.push(TokenKind::Control);
        let v = Vocabulary::new(toks, kinds, &[8], None).unwrap();
        arc_to_ptr(Arc::new(v))
    }

    fn load(v: *const trie_vocab, path: &std::path::Path) -> (trie_status, *mut trie_automaton) {
        let c = CString::new(path.to_str().unwrap()).unwrap();
        let mut out = 1 as *mut trie_automaton;
        let st = unsafe { trie_automaton_load_lazy(v, c.as_ptr(), &mut out) };
        (st, out)
    }

    #[test]
    fn loads_lazily_with_the_eager_checks_and_status_codes() {
        let v = toy();
        let vocab = unsafe { try_clone_arc(v) }.unwrap();
        let a = Automaton::compile(vocab, &["abcab", "abd", "bc", "e"], &CompileOptions::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("trie-capi-lazy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("set.trie");
        a.save(&path).unwrap();

        let (st, b) = load(v, &path);
        assert_eq!(st, trie_status::TRIE_OK);
        let handle = b;
        let b = unsafe { try_ref(handle) }.unwrap();
        assert!(b.is_lazy());
        for s in 0..a.n_states() as u32 {
            assert_eq!(a.allowed(State(s)), b.allowed(State(s)), "state {s}");
            for t in 0..9 {
                assert_eq!(a.advance(State(s), t).ok(), b.advance(State(s), t).ok(), "state {s} token {t}");
            }
        }
        unsafe { trie_automaton_free(handle) };

        // A damaged block of a larger file: loads (only the header, the block hashes and the arrays' ends are
        // checked), then the states that read the block fail with MALFORMED_FILE, the others work; never a crash.
        let big: Vec<String> = (0..20_000u32)
            .map(|i| (0..12).map(|k| (b'a' + ((i.wrapping_mul(2_654_435_761) >> (k * 2)) % 5) as u8) as char).collect())
            .collect();
        let big = Automaton::compile(unsafe { try_clone_arc(v) }.unwrap(), &big, &CompileOptions::default()).unwrap();
        let good = big.to_bytes();
        let body_end = u64::from_ne_bytes(good[56..64].try_into().unwrap()) as usize;
        assert!(body_end > 4 << 16, "several blocks");
        let vocab = unsafe { try_clone_arc(v) }.unwrap();
        let at = (4096..body_end)
            .step_by(4096)
            .find(|&i| {
                let mut b = good.clone();
                b[i] ^= 0x55;
                Automaton::from_bytes_lazy(vocab.clone(), &b).is_ok()
            })
            .expect("a block that a lazy load does not read");
        let mut bytes = good.clone();
        bytes[at] ^= 0x55;
        let bad = dir.join("bad.trie");
        std::fs::write(&bad, &bytes).unwrap();
        let (st, b) = load(v, &bad);
        assert_eq!(st, trie_status::TRIE_OK);
        let mut row = [0u32; 1];
        let (mut ok, mut malformed) = (0, 0);
        for s in 0..big.n_states() as u32 {
            match unsafe { crate::capi::trie_mask(b, s, row.as_mut_ptr(), 1) } {
                trie_status::TRIE_OK => ok += 1,
                trie_status::TRIE_ERR_MALFORMED_FILE => malformed += 1,
                other => panic!("state {s}: {other:?}"),
            }
        }
        assert!(ok > 0 && malformed > 0, "{ok} states work, {malformed} are malformed");
        unsafe { trie_automaton_free(b) };
        // The header damaged: refused at load.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&bad, &bytes).unwrap();
        let (st, b) = load(v, &bad);
        assert_eq!((st, b), (trie_status::TRIE_ERR_MALFORMED_FILE, ptr::null_mut()));

        let (st, b) = load(v, &dir.join("missing.trie"));
        assert_eq!((st, b), (trie_status::TRIE_ERR_IO, ptr::null_mut()));
        let other = {
            let mut toks: Vec<Vec<u8>> = ["a", "b", "c"].iter().map(|s| s.as_bytes().to_vec()).collect();
            toks.push(b"</s>".to_vec());
            let kinds = vec![TokenKind::Normal, TokenKind::Normal, TokenKind::Normal, TokenKind::Control];
            arc_to_ptr(Arc::new(Vocabulary::new(toks, kinds, &[3], None).unwrap()))
        };
        let (st, b) = load(other, &path);
        assert_eq!((st, b), (trie_status::TRIE_ERR_VOCAB_MISMATCH, ptr::null_mut()));
        let (st, b) = load(ptr::null(), &path);
        assert_eq!((st, b), (trie_status::TRIE_ERR_NULL_ARGUMENT, ptr::null_mut()));
        let c = CString::new(path.to_str().unwrap()).unwrap();
        let mut out = ptr::null_mut();
        assert_eq!(unsafe { trie_automaton_load_lazy(v, ptr::null(), &mut out) }, trie_status::TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(
            unsafe { trie_automaton_load_lazy(v, c.as_ptr(), ptr::null_mut()) },
            trie_status::TRIE_ERR_NULL_ARGUMENT
        );
        unsafe {
            crate::capi::trie_vocab_free(other);
            crate::capi::trie_vocab_free(v);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
