//! Drafting and checking tokens: the forced token run of a state (jump-forward, draft tokens for speculative
//! decoding) and how many tokens of a draft the set accepts.

use super::*;

/// The forced token run from `state`: tokens spelling the bytes every member still possible there continues with
/// (the rest of the only member left, a template's prefix or suffix), each the longest the current state allows,
/// at most `capacity` of them (the run is cut there: call again from `*end_state` for more). `*n_tokens` is
/// their number (0 where nothing is forced, and for `TRIE_STATE_FINISHED`); `*end_state` (may be NULL) the state
/// after them (`state` for an empty run); `*complete` (may be NULL) is true when after them the output is one
/// complete member and nothing else may follow (only end-of-generation ids, or the hand-over of an open segment):
/// an engine can finish the answer without another model step. Decode the run as one batch (jump-forward) or
/// give it to a speculative decoder as its draft. On failure `*n_tokens` is 0.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `tokens` NULL (with `capacity` 0) or `capacity` writable ids;
/// `n_tokens` writable; `end_state`, `complete` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_draft(
    automaton: *const trie_automaton,
    state: trie_state,
    tokens: *mut i32,
    capacity: usize,
    n_tokens: *mut usize,
    end_state: *mut trie_state,
    complete: *mut bool,
) -> trie_status {
    guard(|| {
        if n_tokens.is_null() {
            return Err(null("n_tokens"));
        }
        n_tokens.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let buf = slice_mut(tokens, capacity, "tokens")?;
        let d = a.draft(s, capacity);
        for (dst, &t) in buf.iter_mut().zip(&d.tokens) {
            *dst = t as i32;
        }
        n_tokens.write(d.tokens.len());
        put(end_state, d.end_state(s).0);
        put(complete, d.complete);
        Ok(())
    })
}

/// Checks a draft of any origin (a draft model, n-gram lookup, a forced run): `*n_accepted` is the length of the
/// longest prefix of `tokens` (`n` ids) that the set accepts from `state`, and `states` (may be NULL; else room for
/// `n` states) receives the state after each accepted token (`TRIE_STATE_FINISHED` after an end-of-generation
/// id where a member is complete). Nothing else changes: to roll back, go back to a state kept earlier. A rejected
/// or out-of-range token only ends the prefix; a state that does not exist is `TRIE_ERR_INVALID_STATE`
/// (`*n_accepted` 0).
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `tokens` NULL (with `n` 0) or `n` readable ids; `states` NULL or
/// `n` writable states; `n_accepted` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_validate_draft(
    automaton: *const trie_automaton,
    state: trie_state,
    tokens: *const i32,
    n: usize,
    n_accepted: *mut usize,
    states: *mut trie_state,
) -> trie_status {
    guard(|| {
        if n_accepted.is_null() {
            return Err(null("n_accepted"));
        }
        n_accepted.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let ids = slice(tokens, n, "tokens")?;
        let out = if states.is_null() { &mut [][..] } else { slice_mut(states, n, "states")? };
        // A negative id is out of range: it ends the accepted prefix like any other rejected token.
        let k = ids.iter().position(|&t| t < 0).unwrap_or(ids.len());
        let ids: Vec<TokenId> = ids[..k].iter().map(|&t| t as TokenId).collect();
        let after = a.validate_draft(s, &ids)?;
        for (dst, st) in out.iter_mut().zip(&after) {
            *dst = st.0;
        }
        n_accepted.write(after.len());
        Ok(())
    })
}
