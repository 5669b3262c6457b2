//! Phase 1: the new member list. Runs of old members are copied between the changes, their offsets shifted.

use super::*;

/// The sorted, distinct members of the new set and how they relate to the old ones.
pub(super) struct Members {
    pub(super) offsets: Vec<u64>,
    pub(super) bytes: Vec<u8>,
    /// Old member index to new index (`NONE` for a removed member).
    pub(super) old_to_new: Vec<u32>,
    /// The new index of each added string (in the order of `adding`, so ascending).
    pub(super) added_at: Vec<u32>,
    /// Runs of old members copied unchanged: (old range start, old range end, new index of the start).
    pub(super) runs: Vec<(usize, usize, usize)>,
}

impl Members {
    pub(super) fn list(&self) -> List<'_> {
        List { offsets: &self.offsets, bytes: &self.bytes }
    }
}

/// The new list: `adding` (sorted, distinct non-members) inserted at `ins` (their insertion points among the old
/// members), the old members `removed` (ascending) left out; `n_bytes` is the new list's byte total.
pub(super) fn members(this: &Automaton, adding: &[&[u8]], ins: &[usize], removed: &[usize], n_bytes: usize) -> Members {
    let k_old = this.member_offsets.len() - 1;
    let k_new = k_old - removed.len() + adding.len();
    let mut new_offsets: Vec<u64> = Vec::with_capacity(k_new + 1);
    let mut new_bytes: Vec<u8> = Vec::with_capacity(n_bytes);
    let mut old_to_new = vec![NONE; k_old];
    let mut added_at: Vec<u32> = Vec::with_capacity(adding.len());
    // Runs of old members copied unchanged: (old range start, old range end, new index of the start).
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    new_offsets.push(0);
    {
        let (mut a, mut r) = (0usize, 0usize);
        let mut i = 0usize;
        while i <= k_old {
            // Added strings that go before old member i.
            while a < adding.len() && ins[a] == i {
                added_at.push((new_offsets.len() - 1) as u32);
                new_bytes.extend_from_slice(adding[a]);
                new_offsets.push(new_bytes.len() as u64);
                a += 1;
            }
            if i == k_old {
                break;
            }
            if r < removed.len() && removed[r] == i {
                r += 1;
                i += 1;
                continue;
            }
            // A run of old members up to the next change.
            let mut end = k_old;
            if a < adding.len() {
                end = end.min(ins[a]);
            }
            if r < removed.len() {
                end = end.min(removed[r]);
            }
            let end = end.max(i + 1);
            let base = new_offsets.len() - 1;
            // The run moves from old offset `from` to new offset `to`, down when members before it were
            // removed: shifted as `o - from + to` (offsets ascend, so `o >= from`; no wrapping).
            let (from, to) = (this.member_offsets[i], new_bytes.len() as u64);
            new_bytes.extend_from_slice(&this.member_bytes[from as usize..this.member_offsets[end] as usize]);
            new_offsets.extend(this.member_offsets[i + 1..=end].iter().map(|&o| o - from + to));
            for (j, slot) in old_to_new[i..end].iter_mut().enumerate() {
                *slot = (base + j) as u32;
            }
            runs.push((i, end, base));
            i = end;
        }
    }
    debug_assert_eq!(new_offsets.len(), k_new + 1);
    Members { offsets: new_offsets, bytes: new_bytes, old_to_new, added_at, runs }
}
