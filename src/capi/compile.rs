//! Compiling: sets of strings, changes to a compiled set, token sequences; saving, loading and reference counting automata.

use super::*;

/// Compiles the set `strings[i]` (`lens[i]` bytes each; arbitrary bytes; duplicates, prefixes and the empty
/// string allowed; NULL is fine for an empty string) against `vocab`. `options` may be NULL (defaults; else
/// initialised with [`trie_options_init`]). The strings are not kept. On success `*out` is a new automaton
/// (holding its own reference to `vocab`) to free with [`trie_automaton_free`]; on failure `*out` is NULL.
/// Errors: `TRIE_ERR_EMPTY_SET`, `TRIE_ERR_UNREACHABLE_STRING` (the message names the strings), `TRIE_ERR_LIMIT_EXCEEDED` (32-bit limits, `max_states`, `max_bytes`),
/// `TRIE_ERR_INVALID_ARGUMENT` (options without a valid `struct_size`).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `options` NULL or a `trie_options` of `struct_size` bytes;
/// non-NULL arrays must hold `n_strings` elements; each `strings[i]` must hold `lens[i]` bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_compile(
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    n_strings: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let set = byte_strings(strings, lens, n_strings, "strings", "lens")?;
        let opts = trie_options::read(options)?;
        let a = Automaton::compile(vocab, &set, &opts)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Builds a new automaton for the set of `automaton` with the strings `add[i]` (`add_lens[i]` bytes) added and
/// `remove[i]` (`remove_lens[i]` bytes) removed, equal to a full [`trie_compile`] of the resulting set but built
/// from `automaton` (the rows no change touches are copied; fast for vocabularies that spell every byte with a
/// single-byte token, otherwise a full compile). `automaton` is unchanged and stays valid: sequences decoding on
/// it go on. The resulting set is (members - remove) + add: removing a non-member does nothing, a string in both
/// lists stays, duplicates merge; [`trie_automaton_dropped`] of the result lists indices into `add`. `options`
/// may be NULL (defaults) and bounds the new set as in [`trie_compile`]. On success `*out` is a new automaton
/// (holding its own reference to the vocabulary) to free with [`trie_automaton_free`]; on failure `*out` is
/// NULL. Errors: `TRIE_ERR_EMPTY_SET` (nothing remains), `TRIE_ERR_UNREACHABLE_STRING` (an added string; the
/// message names it by its index in `add`), `TRIE_ERR_LIMIT_EXCEEDED`, `TRIE_ERR_INVALID_ARGUMENT`,
/// `TRIE_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `options` NULL or a `trie_options` of `struct_size` bytes;
/// non-NULL arrays must hold `n_add` (`n_remove`) elements; each string must hold its length in bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_with(
    automaton: *const trie_automaton,
    add: *const *const u8,
    add_lens: *const usize,
    n_add: usize,
    remove: *const *const u8,
    remove_lens: *const usize,
    n_remove: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let a = try_ref(automaton)?;
        let add = byte_strings(add, add_lens, n_add, "add", "add_lens")?;
        let remove = byte_strings(remove, remove_lens, n_remove, "remove", "remove_lens")?;
        let opts = trie_options::read(options)?;
        let b = a.with_changes(&add, &remove, &opts)?;
        out.write(arc_to_ptr(Arc::new(b)));
        Ok(())
    })
}

/// Saves `automaton` to `path` (UTF-8; written atomically and durably: a new temporary file with a unique name,
/// flushed to disk, renamed over `path`; an existing file is replaced, never rewritten, so automata loaded from it
/// keep working, and concurrent saves to one path leave one complete file). The file holds
/// the frozen arrays and the fingerprint of the vocabulary: [`trie_automaton_load`] maps it back without
/// compiling. Errors: `TRIE_ERR_IO`, `TRIE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `path` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_save(automaton: *const trie_automaton, path: *const c_char) -> trie_status {
    guard(|| {
        let a = try_ref(automaton)?;
        a.save(path_str(path)?)
    })
}

/// Loads an automaton saved by [`trie_automaton_save`] for use with `vocab` (which it keeps alive): the file is
/// memory-mapped (processes loading the same file share its pages) and checked, header, checksum and every
/// array, so a damaged or crafted file is an error, never a crash. Errors: `TRIE_ERR_IO`;
/// `TRIE_ERR_MALFORMED_FILE`; `TRIE_ERR_VOCAB_MISMATCH` when the file was compiled against another vocabulary.
/// On failure `*out` is NULL. The file is memory-mapped: it must not change while loaded (truncating it makes the next access to a lost
/// page raise SIGBUS, which kills the process; rewriting it in place can make masks wrong or calls fail with
/// `TRIE_ERR_PANIC`). The save functions never change an existing file: they rename a new one over it, so what
/// was loaded from the old one keeps working. Replace files the same way (write a new file, then `rename`).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `path` NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_load(
    vocab: *const trie_vocab,
    path: *const c_char,
    out: *mut *mut trie_automaton,
) -> trie_status {
    load_with(vocab, path, out, |vocab, path| Automaton::load(vocab, path))
}

/// The body of [`trie_automaton_load`] and [`trie_automaton_load_lazy`]: the
/// arguments checked, the file read by `load`, the automaton handed out through `out` (NULL on failure).
///
/// # Safety
/// As for [`trie_automaton_load`].
pub(super) unsafe fn load_with(
    vocab: *const trie_vocab,
    path: *const c_char,
    out: *mut *mut trie_automaton,
    load: impl FnOnce(Arc<Vocabulary>, &str) -> Result<Automaton>,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let a = load(vocab, path_str(path)?)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Compiles token sequences instead of strings: the automaton allows exactly the token paths `sequences[i]`
/// (`lens[i]` ids each; NULL is fine for an empty sequence), each followed by an end-of-generation token. Pass
/// the model tokenizer's own tokenization of every member (e.g. `llama_tokenize` without special tokens) to
/// allow only canonical tokenizations. Every id must be a text token of `vocab` (else
/// `TRIE_ERR_INVALID_ARGUMENT` naming the sequence and position). `options` as for [`trie_compile`]
/// (`max_states`, `max_bytes`; `drop_unreachable` does not apply). On failure `*out` is NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; non-NULL arrays must hold `n_sequences` elements; each
/// `sequences[i]` must hold `lens[i]` ids.
#[no_mangle]
pub unsafe extern "C" fn trie_compile_tokens(
    vocab: *const trie_vocab,
    sequences: *const *const i32,
    lens: *const usize,
    n_sequences: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let ptrs = slice(sequences, n_sequences, "sequences")?;
        let lens = slice(lens, n_sequences, "lens")?;
        let mut seqs: Vec<Vec<TokenId>> = Vec::with_capacity(n_sequences);
        for (i, (&p, &n)) in ptrs.iter().zip(lens).enumerate() {
            let ids = if n == 0 {
                &[][..]
            } else if p.is_null() {
                return Err(Error::new(
                    ErrorKind::NullArgument,
                    format!("sequences[{i}] is NULL but lens[{i}] is {n}"),
                ));
            } else {
                slice(p, n, "sequences")?
            };
            let ids: Vec<TokenId> = ids
                .iter()
                .enumerate()
                .map(|(j, &t)| {
                    TokenId::try_from(t)
                        .map_err(|_| Error::invalid(format!("token {j} of sequence {i} is negative ({t})")))
                })
                .collect::<Result<_>>()?;
            seqs.push(ids);
        }
        let opts = trie_options::read(options)?;
        let a = Automaton::compile_tokens(vocab, &seqs, &opts)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Adds a reference to `automaton` and returns it (NULL for NULL). Free each reference with
/// [`trie_automaton_free`].
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_retain(automaton: *const trie_automaton) -> *mut trie_automaton {
    if automaton.is_null() {
        return std::ptr::null_mut();
    }
    boundary(|| try_clone_arc(automaton).map_or(std::ptr::null_mut(), arc_to_ptr))
}

/// Drops a reference to `automaton` (NULL: no-op); the last one frees it (and its reference to the vocabulary).
///
/// # Safety
/// `automaton` must be NULL or a live automaton reference, freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_free(automaton: *mut trie_automaton) {
    if automaton.is_null() {
        return;
    }
    boundary(|| free_arc(automaton));
}

/// A new reference to the vocabulary of `automaton` (NULL for NULL); free it with [`trie_vocab_free`].
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_vocab(automaton: *const trie_automaton) -> *mut trie_vocab {
    boundary(|| match try_ref(automaton) {
        Ok(a) => arc_to_ptr(a.vocab().clone()),
        Err(_) => std::ptr::null_mut(),
    })
}

/// The number of token ids of the automaton's vocabulary (the mask width in bits). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_vocab(automaton: *const trie_automaton) -> usize {
    boundary(|| try_ref(automaton).map(|a| a.vocab().n_vocab()).unwrap_or(0))
}

/// The number of 32-bit words of one bitmask row: `(n_vocab + 31) / 32`. 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_mask_words(automaton: *const trie_automaton) -> usize {
    boundary(|| try_ref(automaton).map(|a| a.mask_words()).unwrap_or(0))
}

/// The number of states (valid states are `0..n` and `TRIE_STATE_FINISHED`). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_states(automaton: *const trie_automaton) -> usize {
    boundary(|| try_ref(automaton).map(|a| a.n_states()).unwrap_or(0))
}

/// The number of distinct strings the automaton can produce (dropped ones excluded). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_members(automaton: *const trie_automaton) -> usize {
    boundary(|| try_ref(automaton).map(|a| a.n_members()).unwrap_or(0))
}

/// Heap bytes held by the automaton, not counting its shared vocabulary ([`trie_vocab_memory_usage`]). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_memory_usage(automaton: *const trie_automaton) -> usize {
    boundary(|| try_ref(automaton).map(|a| a.memory_usage()).unwrap_or(0))
}

/// The input indices (positions in the `strings` given to [`trie_compile`]) of the strings dropped as
/// unreachable with `drop_unreachable`, ascending, without copying (they live as long as the automaton). On
/// failure `*indices` is NULL and `*n_indices` 0.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `indices` and `n_indices` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_dropped(
    automaton: *const trie_automaton,
    indices: *mut *const usize,
    n_indices: *mut usize,
) -> trie_status {
    guard(|| {
        out_view(indices, n_indices, ("indices", "n_indices"), || {
            let a = try_ref(automaton)?;
            Ok((a.dropped().as_ptr(), a.dropped().len()))
        })
    })
}
