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
        List { offsets: Ints::of(&self.offsets), bytes: &self.bytes }
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
            let (from, to) = (this.member_offsets.get(i), new_bytes.len() as u64);
            new_bytes.extend_from_slice(&this.member_bytes[from as usize..this.member_offsets.get(end) as usize]);
            new_offsets.extend(this.member_offsets.range(i + 1..end + 1).map(|o| o - from + to));
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

/// Where each member of an updated automaton comes from, by its new rank: `old`, the old rank of a member kept
/// (`NONE` for an added string that was not a member), and `added`, the index in `add` of the first copy of an
/// added string (`NONE` for a kept member not added again). A member may have both (added again).
pub(super) struct Origins {
    pub(super) old: Vec<u32>,
    pub(super) added: Vec<u32>,
}

/// The origins of the members of `a`, the update of the old member list `old` by the changes `c` computed from
/// `add` (the strings or segments as given, duplicates included). The new rank of every kept old member follows
/// from the changes alone (no member is compared: the old ones stay in order between the changes), an added
/// string's by a binary search. `None` if `a` does not have the expected members (the caller compiles in full).
pub(super) fn origins(a: &Automaton, old: &List, add: &[&[u8]], c: &Changes) -> Option<Origins> {
    let k_old = old.len();
    let n = a.member_offsets.len() - 1;
    if n + c.removed.len() != k_old + c.adding.len() || add.len() >= NONE as usize {
        return None;
    }
    let mut from_old = vec![NONE; n];
    // The kept old members in rank order, old member `o` at new rank `o - (removed before o) + (added before
    // o)`; an added string goes before the old member at its insertion point.
    let (mut r_removed, mut r_added) = (0usize, 0usize);
    for o in 0..k_old {
        while r_added < c.ins.len() && c.ins[r_added] <= o {
            r_added += 1;
        }
        if r_removed < c.removed.len() && c.removed[r_removed] == o {
            r_removed += 1;
            continue;
        }
        let r = o - r_removed + r_added;
        debug_assert_eq!(*a.member(r), *old.get(o));
        from_old[r] = o as u32;
    }
    // Every added string's first copy (the last written wins: walk the copies backwards).
    let mut added = vec![NONE; n];
    for (i, s) in add.iter().enumerate().rev() {
        added[rank_of(a, s)?] = i as u32;
    }
    let complete = from_old.iter().zip(&added).all(|(&o, &i)| o != NONE || i != NONE);
    complete.then_some(Origins { old: from_old, added })
}

/// The values of the members of an update by rank: an added string's first copy's value in `add_values`, else
/// the kept member's old value (`old_values` by old rank).
pub(super) fn updated_values(o: &Origins, old_values: &[u64], add_values: &[u64]) -> Vec<u64> {
    o.old
        .iter()
        .zip(&o.added)
        .map(|(&old, &i)| if i != NONE { add_values[i as usize] } else { old_values[old as usize] })
        .collect()
}

/// The rank of member `s` of `a` (members are sorted and distinct), if it is one.
pub(super) fn rank_of(a: &Automaton, s: &[u8]) -> Option<usize> {
    let n = a.member_offsets.len() - 1;
    let member = |i: usize| a.member(i);
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if *member(mid) < *s {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < n && *member(lo) == *s).then_some(lo)
}
