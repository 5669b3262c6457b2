//! Decoding: the start state, allowed tokens, masks (one state, a batch, rows of several automata), advancing, forced continuations.

use super::*;

/// The start state: 0 for every automaton (also for NULL).
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_start(automaton: *const trie_automaton) -> trie_state {
    boundary(|| try_ref(automaton).map(|a| a.start().0).unwrap_or(0))
}

/// Copies the tokens allowed in `state`, ascending, into `tokens` (room for `capacity` ids) and sets `*n_tokens`
/// to their number. In `TRIE_STATE_FINISHED` these are the end-of-generation ids. When `capacity` is short the
/// call returns `TRIE_ERR_BUFFER_TOO_SMALL`, still sets `*n_tokens` to the number needed, and writes nothing into
/// `tokens`: call with `tokens` NULL and `capacity` 0 to learn it. A buffer of [`trie_automaton_n_vocab`] ids is
/// always large enough. On other failures `*n_tokens` is 0.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `tokens` NULL (with `capacity` 0) or `capacity` writable ids;
/// `n_tokens` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_allowed(
    automaton: *const trie_automaton,
    state: trie_state,
    tokens: *mut i32,
    capacity: usize,
    n_tokens: *mut usize,
) -> trie_status {
    guard(|| {
        if n_tokens.is_null() {
            return Err(null("n_tokens"));
        }
        n_tokens.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let buf = slice_mut(tokens, capacity, "tokens")?;
        let allowed = a.allowed(s);
        copy_out(&allowed, buf, n_tokens, |t| t as i32, || format!("state {state} allows {} tokens", allowed.len()))
    })
}

/// Writes the bitmask of `state` into `bitmask` (`n_words` words, at least [`trie_automaton_mask_words`]):
/// token `t` is bit `t % 32` of word `t / 32`, 1 = allowed (the XGrammar / LLGuidance layout). Every one of the
/// `n_words` words is written; bits past the vocabulary are 0. Too short: `TRIE_ERR_BUFFER_TOO_SMALL`, nothing
/// written.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `bitmask` NULL or `n_words` writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask(
    automaton: *const trie_automaton,
    state: trie_state,
    bitmask: *mut u32,
    n_words: usize,
) -> trie_status {
    guard(|| {
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        // NULL with 0 words is an empty buffer: "too small", like any short buffer.
        let row = slice_mut(bitmask, n_words, "bitmask")?;
        a.fill_bitmask(s, row)
    })
}

/// Fills one bitmask row per state: row `i` is `bitmask[i * row_words .. (i + 1) * row_words]`, `row_words` at
/// least [`trie_automaton_mask_words`], `n_words` (the buffer's length) at least `n_states * row_words`. Rows
/// are filled in parallel for large batches. All states are checked before anything is written; on any error
/// nothing is written. `n_states` 0 is a no-op.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `states` NULL or `n_states` states; `bitmask` NULL or
/// `n_words` writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask_batch(
    automaton: *const trie_automaton,
    states: *const trie_state,
    n_states: usize,
    bitmask: *mut u32,
    n_words: usize,
    row_words: usize,
) -> trie_status {
    guard(|| {
        let a = try_ref(automaton)?;
        let states = slice(states as *const State, n_states, "states")?;
        if n_states == 0 {
            return Ok(());
        }
        if bitmask.is_null() {
            return Err(null("bitmask"));
        }
        let out = slice_mut(bitmask, n_words, "bitmask")?;
        for &s in states {
            check_state(a, s.0)?;
        }
        a.fill_bitmask_batch(states, out, row_words)
    })
}

/// Fills one bitmask row per `(automata[i], states[i])` pair: the batch of a serving engine whose sequences follow
/// different sets. Row `i` is `bitmask[i * row_words .. (i + 1) * row_words]`; `row_words` must be at least every
/// automaton's [`trie_automaton_mask_words`] and `n_words` (the buffer's length) at least `n_rows * row_words`. A
/// NULL `automata[i]` marks an unconstrained sequence: its row is all ones. Every pair is checked before anything
/// is written; on any error (the message names the row) nothing is written. `n_rows` 0 is a no-op. Parallel for
/// large batches.
///
/// # Safety
/// `automata` and `states` NULL or `n_rows` elements, each automaton NULL or live; `bitmask` NULL or `n_words`
/// writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask_rows(
    automata: *const *const trie_automaton,
    states: *const trie_state,
    n_rows: usize,
    bitmask: *mut u32,
    n_words: usize,
    row_words: usize,
) -> trie_status {
    guard(|| {
        let automata = slice(automata, n_rows, "automata")?;
        let states = slice(states, n_rows, "states")?;
        if n_rows == 0 {
            return Ok(());
        }
        if bitmask.is_null() {
            return Err(null("bitmask"));
        }
        let out = slice_mut(bitmask, n_words, "bitmask")?;
        let rows: Vec<(Option<&Automaton>, State)> =
            automata.iter().zip(states).map(|(&a, &s)| (try_ref_opt(a), State(s))).collect();
        Automaton::fill_bitmask_rows(&rows, out, row_words)
    })
}

/// The state after `token` in `*next` (`TRIE_STATE_FINISHED` after an end-of-generation token). A token not
/// allowed gives `TRIE_ERR_TOKEN_REJECTED` and leaves `*next` untouched (as every failure does); an id outside
/// `0..n_vocab` gives `TRIE_ERR_INVALID_ARGUMENT`, a bad state `TRIE_ERR_INVALID_STATE`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `next` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_advance(
    automaton: *const trie_automaton,
    state: trie_state,
    token: i32,
    next: *mut trie_state,
) -> trie_status {
    guard(|| {
        if next.is_null() {
            return Err(null("next"));
        }
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let id = a.vocab().check_id(token as i64)?;
        let n = match a.advance(s, id)? {
            Step::Next(n) => n.0,
            Step::Finished => TRIE_STATE_FINISHED,
        };
        next.write(n);
        Ok(())
    })
}

/// Whether a string of the set may end in `state` (end-of-generation tokens are allowed there). True for
/// `TRIE_STATE_FINISHED`; false for NULL or an invalid state.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_is_accepting(automaton: *const trie_automaton, state: trie_state) -> bool {
    boundary(|| try_ref(automaton).map(|a| a.is_accepting(State(state))).unwrap_or(false))
}

/// The forced continuation: when exactly one string of the set remains below `state`, `*is_forced` is true,
/// `*n_bytes` is the length of the rest of its bytes and `*n_tokens` that of a token path spelling them (longest
/// tokens first; no end-of-generation token; both 0 when the string is complete). Otherwise (several strings
/// left, or `TRIE_STATE_FINISHED`) `*is_forced` is false and both lengths 0.
///
/// The bytes go to `bytes` (`bytes_cap` bytes) and the tokens to `tokens` (`tokens_cap` ids); either may be NULL
/// with a capacity of 0. When a capacity is short the call returns `TRIE_ERR_BUFFER_TOO_SMALL`, still sets
/// `*is_forced`, `*n_bytes` and `*n_tokens` to the sizes needed, and writes nothing into the buffers: call once
/// with capacities 0 to learn the sizes.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `bytes` / `tokens` NULL or as long as their capacities;
/// `n_bytes`, `n_tokens`, `is_forced` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_forced(
    automaton: *const trie_automaton,
    state: trie_state,
    bytes: *mut u8,
    bytes_cap: usize,
    n_bytes: *mut usize,
    tokens: *mut i32,
    tokens_cap: usize,
    n_tokens: *mut usize,
    is_forced: *mut bool,
) -> trie_status {
    guard(|| {
        for (p, what) in
            [(n_bytes.is_null(), "n_bytes"), (n_tokens.is_null(), "n_tokens"), (is_forced.is_null(), "is_forced")]
        {
            if p {
                return Err(null(what));
            }
        }
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let byte_buf = slice_mut(bytes, bytes_cap, "bytes")?;
        let token_buf = slice_mut(tokens, tokens_cap, "tokens")?;
        let Some(f) = a.forced(s) else {
            put(is_forced, false);
            put(n_bytes, 0);
            put(n_tokens, 0);
            return Ok(());
        };
        put(is_forced, true);
        put(n_bytes, f.bytes.len());
        put(n_tokens, f.tokens.len());
        if byte_buf.len() < f.bytes.len() || token_buf.len() < f.tokens.len() {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "the forced continuation needs {} bytes and {} tokens; the buffers hold {} and {}",
                    f.bytes.len(),
                    f.tokens.len(),
                    byte_buf.len(),
                    token_buf.len()
                ),
            ));
        }
        byte_buf[..f.bytes.len()].copy_from_slice(&f.bytes);
        for (dst, &t) in token_buf.iter_mut().zip(&f.tokens) {
            *dst = t as i32;
        }
        Ok(())
    })
}
