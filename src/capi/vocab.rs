//! Vocabularies: building (`trie_vocab_new*`, GGUF, tokenizer.json), saving, loading, reference counting and views.

use super::*;

pub(super) unsafe fn vocab_from_arrays(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: Option<usize>,
) -> Result<Vocabulary> {
    if n_tokens > MAX_VOCAB {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("{n_tokens} tokens exceed the limit of {MAX_VOCAB} ids"),
        ));
    }
    let tokens = byte_strings(token_bytes, token_lens, n_tokens, "token_bytes", "token_lens")?;
    let kinds: Vec<TokenKind> = if token_kinds.is_null() {
        vec![TokenKind::Normal; n_tokens]
    } else {
        slice(token_kinds, n_tokens, "token_kinds")?
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                TokenKind::from_u32(k).ok_or_else(|| {
                    Error::invalid(format!("token_kinds[{i}] = {k} is not a token kind (TRIE_TOKEN_*: 0..6)"))
                })
            })
            .collect::<Result<_>>()?
    };
    let tokens = tokens.into_iter().map(<[u8]>::to_vec).collect();
    let eog = eog_list(eog_ids, n_eog)?;
    Vocabulary::new(tokens, kinds, &eog, n_vocab)
}

pub(super) unsafe fn eog_list(eog_ids: *const i32, n_eog: usize) -> Result<Vec<TokenId>> {
    slice(eog_ids, n_eog, "eog_ids")?
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            TokenId::try_from(id)
                .map_err(|_| Error::invalid(format!("eog_ids[{i}] = {id} is negative: token ids are 0..n_vocab")))
        })
        .collect()
}

pub(super) unsafe fn check_out<T>(out: *mut *mut T) -> Result<()> {
    if out.is_null() {
        return Err(null("out"));
    }
    out.write(std::ptr::null_mut());
    Ok(())
}

/// Builds a vocabulary from the bytes of every token id `0..n_tokens` (`token_bytes[i]`, `token_lens[i]` bytes;
/// NULL is fine for an empty token), their kinds (`TRIE_TOKEN_*`; NULL: all normal) and the end-of-generation ids
/// (`eog_ids`, `n_eog`; NULL with 0 for none). The mask width is `n_tokens`; see [`trie_vocab_new_ex`] for
/// padded vocabularies. The bytes are copied. On success `*out` is a new vocabulary to free with
/// [`trie_vocab_free`]; on failure `*out` is NULL.
///
/// # Safety
/// Every non-NULL pointer must point to as many valid elements as its length says.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_new(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    trie_vocab_new_ex(token_bytes, token_lens, token_kinds, n_tokens, eog_ids, n_eog, 0, out)
}

/// Like [`trie_vocab_new`], with the mask width `n_vocab`: the model's vocabulary size when it is larger than
/// the listed tokens (padding, e.g. 151936 for Qwen2/Qwen3). Ids `n_tokens..n_vocab` are never allowed. 0 means
/// `n_tokens`; smaller than `n_tokens` is `TRIE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// As [`trie_vocab_new`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_vocab_new_ex(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let n_vocab = if n_vocab == 0 { None } else { Some(n_vocab) };
        let v = vocab_from_arrays(token_bytes, token_lens, token_kinds, n_tokens, eog_ids, n_eog, n_vocab)?;
        out.write(arc_to_ptr(Arc::new(v)));
        Ok(())
    })
}

/// Reads the tokenizer of a GGUF file (a model or a vocab-only file; only the metadata is read). The path must
/// be UTF-8 (else `TRIE_ERR_INVALID_ARGUMENT`). Errors: `TRIE_ERR_IO`, `TRIE_ERR_MALFORMED_FILE`,
/// `TRIE_ERR_UNSUPPORTED_VOCABULARY` (WordPiece). On failure `*out` is NULL.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_gguf(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    guard(|| {
        check_out(out)?;
        let path = path_str(path)?;
        let v = Vocabulary::from_gguf(path)?;
        out.write(arc_to_ptr(Arc::new(v)));
        Ok(())
    })
}

/// Reads a Hugging Face `tokenizer.json`. The end-of-generation ids are inferred from the added tokens' names
/// (`</s>`, `<|endoftext|>`, `<|im_end|>`, `<|eot_id|>`, ...) and the mask width is the largest id + 1; use
/// [`trie_vocab_from_tokenizer_json_ex`] to give them. A library built without the `hf` feature returns
/// `TRIE_ERR_UNSUPPORTED_VOCABULARY`. On failure `*out` is NULL.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_tokenizer_json(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    trie_vocab_from_tokenizer_json_ex(path, std::ptr::null(), 0, 0, out)
}

/// Like [`trie_vocab_from_tokenizer_json`], with the end-of-generation ids (`eog_ids`, `n_eog`, e.g.
/// `eos_token_id` of `generation_config.json`; `eog_ids` NULL: infer them; non-NULL with `n_eog` 0: none) and
/// the mask width `n_vocab` (the model's padded vocabulary size; 0: the largest id + 1).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `eog_ids` NULL or `n_eog` valid elements.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_tokenizer_json_ex(
    path: *const c_char,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let path = path_str(path)?;
        let eog = if eog_ids.is_null() {
            if n_eog != 0 {
                return Err(Error::new(ErrorKind::NullArgument, format!("eog_ids is NULL but n_eog is {n_eog}")));
            }
            None
        } else {
            Some(eog_list(eog_ids, n_eog)?)
        };
        let n_vocab = if n_vocab == 0 { None } else { Some(n_vocab) };
        let v = load_tokenizer_json(path, eog, n_vocab)?;
        out.write(arc_to_ptr(Arc::new(v)));
        Ok(())
    })
}

#[cfg(feature = "hf")]
pub(super) fn load_tokenizer_json(
    path: &str,
    eog_ids: Option<Vec<TokenId>>,
    n_vocab: Option<usize>,
) -> Result<Vocabulary> {
    Vocabulary::from_tokenizer_json(path, &crate::load::hf::HfOptions { eog_ids, n_vocab })
}

#[cfg(not(feature = "hf"))]
pub(super) fn load_tokenizer_json(
    path: &str,
    _eog_ids: Option<Vec<TokenId>>,
    _n_vocab: Option<usize>,
) -> Result<Vocabulary> {
    Err(Error::unsupported(format!(
        "cannot read {path}: this libtrie was built without tokenizer.json support (cargo feature `hf`)"
    )))
}

/// Saves `vocab` with its alignment index to `path` (UTF-8; written atomically as [`trie_automaton_save`] does), so that servers can
/// [`trie_vocab_load`] it in milliseconds instead of reading a GGUF or a tokenizer.json again. Errors:
/// `TRIE_ERR_IO`, `TRIE_ERR_INVALID_ARGUMENT` (a path that is not UTF-8 or not a file path).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `path` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_save(vocab: *const trie_vocab, path: *const c_char) -> trie_status {
    guard(|| {
        let v = try_ref(vocab)?;
        v.save(path_str(path)?)
    })
}

/// Writes the vocabulary's fingerprint to `out` (16 bytes): a digest of its mask width, token bytes, kinds and
/// end-of-generation ids. Equal fingerprints mean interchangeable vocabularies (a saved automaton loads with
/// either); a good key for caches of compiled sets.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `out` NULL or 16 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_fingerprint(vocab: *const trie_vocab, out: *mut u8) -> trie_status {
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        let v = try_ref(vocab)?;
        std::ptr::copy_nonoverlapping(v.fingerprint().to_be_bytes().as_ptr(), out, 16);
        Ok(())
    })
}

/// Loads a vocabulary saved by [`trie_vocab_save`]: the file is memory-mapped (pages shared between processes)
/// and checked, not rebuilt. Errors: `TRIE_ERR_IO`; `TRIE_ERR_MALFORMED_FILE` (truncated, corrupt, another format
/// version or byte order, not a vocabulary file). On failure `*out` is NULL. No file, as it is when loaded, can
/// crash or hang the process; the checksum detects damage, but a file crafted with a valid one can make masks
/// wrong: load files that libtrie wrote into a directory you trust. The file is memory-mapped: it must not change while loaded (truncating it makes the next access to a lost
/// page raise SIGBUS, which kills the process; rewriting it in place can make masks wrong or calls fail with
/// `TRIE_ERR_PANIC`). The save functions never change an existing file: they rename a new one over it, so what
/// was loaded from the old one keeps working. Replace files the same way (write a new file, then `rename`).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_load(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    guard(|| {
        check_out(out)?;
        let v = Vocabulary::load(path_str(path)?)?;
        out.write(arc_to_ptr(Arc::new(v)));
        Ok(())
    })
}

/// Adds a reference to `vocab` and returns it (NULL for NULL). Free each reference with [`trie_vocab_free`].
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_retain(vocab: *const trie_vocab) -> *mut trie_vocab {
    boundary(|| match try_clone_arc(vocab) {
        Ok(v) => arc_to_ptr(v),
        Err(_) => std::ptr::null_mut(),
    })
}

/// Drops a reference to `vocab` (NULL: no-op). Automata compiled from it keep it alive.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary reference, freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_free(vocab: *mut trie_vocab) {
    if vocab.is_null() {
        return;
    }
    boundary(|| free_arc(vocab));
}

/// The number of token ids, which is the mask width in bits: ids are `0..n`. 0 for NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_n_tokens(vocab: *const trie_vocab) -> usize {
    boundary(|| try_ref(vocab).map(|v| v.n_vocab()).unwrap_or(0))
}

/// Heap bytes held by the vocabulary (its token index included). 0 for NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_memory_usage(vocab: *const trie_vocab) -> usize {
    boundary(|| try_ref(vocab).map(|v| v.memory_usage()).unwrap_or(0))
}

/// The bytes token `token` stands for, without copying (`*len` may be 0: padding and control tokens may have
/// none). The view lives as long as the vocabulary. `TRIE_ERR_INVALID_ARGUMENT` for an id outside `0..n`. On
/// failure `*bytes` is NULL and `*len` 0.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `bytes` and `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_token(
    vocab: *const trie_vocab,
    token: i32,
    bytes: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    guard(|| {
        out_view(bytes, len, ("bytes", "len"), || {
            let v = try_ref(vocab)?;
            let b = v.token_bytes(v.check_id(token as i64)?);
            Ok((b.as_ptr(), b.len()))
        })
    })
}

/// The end-of-generation ids, ascending, without copying (they live as long as the vocabulary). On failure
/// `*ids` is NULL and `*n_ids` 0.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `ids` and `n_ids` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_eog_ids(
    vocab: *const trie_vocab,
    ids: *mut *const i32,
    n_ids: *mut usize,
) -> trie_status {
    guard(|| {
        out_view(ids, n_ids, ("ids", "n_ids"), || {
            let v = try_ref(vocab)?;
            Ok((as_i32_ptr(v.eog_ids()), v.eog_ids().len()))
        })
    })
}
