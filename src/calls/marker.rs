//! The marker that opens a call in free text: the tokens that would finish it and go on past it in one token
//! (masked in `free`, so that a call starts at a token boundary), and how much of it the output ends with.

use crate::vocab::{TokenId, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// For each `k` in `0..trigger.len()` (bytes of the marker already written at the end of the output), the tokens
/// (ascending) that would finish the marker and go on past it in one token: `trigger[..k] + bytes(t)` contains
/// the marker followed by at least one byte. Empty for an empty marker.
pub fn straddlers(vocab: &Vocabulary, trigger: &[u8]) -> Vec<Vec<TokenId>> {
    let mut out = vec![Vec::new(); trigger.len()];
    let Some(&last) = trigger.last() else { return out };
    let mut text = Vec::new();
    for t in 0..vocab.n_listed() as TokenId {
        let b = vocab.token_bytes(t);
        if !b.contains(&last) {
            continue;
        }
        for (k, ids) in out.iter_mut().enumerate() {
            text.clear();
            text.extend_from_slice(&trigger[..k]);
            text.extend_from_slice(b);
            if find(&text, trigger).is_some_and(|i| i + trigger.len() < text.len()) {
                ids.push(t);
            }
        }
    }
    out
}

/// The tokens of a marker in a vocabulary: those whose bytes are exactly the marker (ascending), and
/// [`straddlers`].
#[derive(Debug, Default)]
pub(crate) struct Marker {
    pub(crate) ids: Vec<TokenId>,
    pub(crate) straddle: Vec<Vec<TokenId>>,
}

/// The [`Marker`] of `trigger`, computed once per vocabulary (by fingerprint) and marker in this process (a few
/// entries kept): a request's engine does not scan the vocabulary again.
pub(crate) fn cached_marker(vocab: &Vocabulary, trigger: &[u8]) -> Arc<Marker> {
    type Cache = Mutex<HashMap<(u128, Vec<u8>), Arc<Marker>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    const KEEP: usize = 32;
    if trigger.is_empty() {
        return Arc::default();
    }
    let key = (vocab.fingerprint(), trigger.to_vec());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let ids = (0..vocab.n_listed() as TokenId).filter(|&t| vocab.token_bytes(t) == trigger).collect();
    let computed = Arc::new(Marker { ids, straddle: straddlers(vocab, trigger) });
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= KEEP {
        map.clear();
    }
    map.entry(key).or_insert(computed).clone()
}

/// The first position of `needle` (not empty) in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the longest suffix of `text` that is a proper prefix of `trigger`.
pub(crate) fn tail(trigger: &[u8], text: &[u8]) -> usize {
    let top = trigger.len().saturating_sub(1).min(text.len());
    (1..=top).rev().find(|&k| text.ends_with(&trigger[..k])).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_find() {
        assert_eq!(tail(b"<tool_call>", b"Sure <tool"), 5);
        assert_eq!(tail(b"<tool_call>", b"Sure"), 0);
        assert_eq!(tail(b"<tool_call>", b"<tool_call"), 10);
        assert_eq!(tail(b"{", b"a{"), 0, "a proper prefix only: the whole marker is found, not pending");
        assert_eq!(find(b"ab<x>cd", b"<x>"), Some(2));
        assert_eq!(find(b"ab", b"abc"), None);
    }
}
