//! [`Automaton::with_changes`] of an automaton compiled with a template: the changes are rendered into segments
//! and applied to the member table of segments as for a bare set (the fast path, the template's end honoured),
//! then the member identity is carried over.
//!
//! The result is the automaton [`Automaton::compile_template`] gives, with the same template, for the list
//! `add ++ (members − remove)`, the members being the strings the old automaton can produce, in the byte order of
//! their segments (its ranks; members it dropped as unreachable are not members): the same arrays and member ids,
//! byte for byte. So [`Automaton::member_at`] of the result names an index into `add` for an added string (its
//! first copy; also for a string that was already a member), and `add.len() + j` for the `j`-th remaining old
//! member in rank order. A string in `remove` that the template cannot render is not a member (nothing to
//! remove); one in `add` is an error naming its index, as for `compile_template`.

use super::*;
use crate::automaton::Segments;
use crate::compile::template::render_all;
use crate::template::End;

impl Automaton {
    pub(super) fn with_changes_templated<A: AsRef<[u8]> + Sync, R: AsRef<[u8]>>(
        &self,
        add: &[A],
        remove: &[R],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        let template = self.template().expect("a templated automaton").clone();
        let budget = Budget::new(options.max_bytes);
        let (bytes, ends) = render_all(add, &template, &budget)?;
        let add_segs: Vec<&[u8]> =
            ends.iter().scan(0, |start, &end| Some(&bytes[std::mem::replace(start, end)..end])).collect();
        let remove_owned: Vec<Vec<u8>> = remove
            .iter()
            .filter_map(|r| {
                let mut seg = template.prefix.clone();
                template.render_member(r.as_ref(), &mut seg).ok()?;
                seg.extend_from_slice(&template.suffix);
                Some(seg)
            })
            .collect();
        let remove_segs: Vec<&[u8]> = remove_owned.iter().map(|s| &s[..]).collect();
        let old = List { offsets: &self.member_offsets, bytes: &self.member_bytes };
        let c = effective_changes(&old, &add_segs, &remove_segs);
        if self.fast_path_fits(&old, &c) && add.len() < NONE as usize {
            if let Some(mut a) = self.update_in_place(&old, &c.adding, &c.ins, &c.removed, options)? {
                if template.end != End::Open || prefix_free_around(&a, &c) {
                    if let Some(ids) = member_ids(&a, &old, &add_segs, &c) {
                        a.segments = Some(Segments::new(template, ids));
                        return Ok(a);
                    }
                }
            }
        }
        // The full compile of the same list (its errors, its dropped strings).
        let mut gone = vec![false; old.len()];
        for &r in &c.removed {
            gone[r] = true;
        }
        let mut list = add_segs;
        list.extend((0..old.len()).filter(|&r| !gone[r] && self.member_id(r).is_some()).map(|r| old.get(r)));
        Automaton::compile_segments(self.vocab.clone(), &list, &template, options, &budget)
    }
}

/// With an open end, whether the added segments leave the member list prefix-free (only the pairs next to an
/// added segment can break it; the old list was). `false` sends the update to the full compile, which names the
/// first offending pair.
fn prefix_free_around(a: &Automaton, c: &Changes) -> bool {
    let n = a.member_offsets.len() - 1;
    let member = |i: usize| &a.member_bytes[a.member_offsets[i] as usize..a.member_offsets[i + 1] as usize];
    c.adding.iter().all(|s| {
        let Some(r) = rank_of(a, s) else { return false };
        (r == 0 || !s.starts_with(member(r - 1))) && (r + 1 >= n || !member(r + 1).starts_with(s))
    })
}

/// The member id of each rank of the new automaton `a` (whose members are the old ones `old` without the ranks
/// `c.removed`, plus `c.adding` inserted at `c.ins`): as `compile_template` numbers the list
/// `add ++ (old − removed)`. The new rank of every kept old member follows from the changes alone (no member is
/// compared: the old ones stay in order between the changes). `None` if the update does not have the expected
/// members (the caller then compiles in full).
fn member_ids(a: &Automaton, old: &List, add: &[&[u8]], c: &Changes) -> Option<Vec<u32>> {
    let k_old = old.len();
    let n = a.member_offsets.len() - 1;
    if n + c.removed.len() != k_old + c.adding.len() {
        return None;
    }
    let mut ids = vec![NONE; n];
    // The kept old members in rank order, the `kept`-th one at new rank `o - (removed before o) + (added
    // before o)`; an added string goes before the old member at its insertion point.
    let (mut kept, mut r_removed, mut r_added) = (0u32, 0usize, 0usize);
    for o in 0..k_old {
        while r_added < c.ins.len() && c.ins[r_added] <= o {
            r_added += 1;
        }
        if r_removed < c.removed.len() && c.removed[r_removed] == o {
            r_removed += 1;
            continue;
        }
        let r = o - r_removed + r_added;
        debug_assert_eq!(a.member(r), old.get(o));
        ids[r] = add.len() as u32 + kept;
        kept += 1;
    }
    // Every added string (its first copy, last written wins: walk the copies backwards) is its index in `add`,
    // also when it was a member already.
    for (i, s) in add.iter().enumerate().rev() {
        ids[rank_of(a, s)?] = i as u32;
    }
    (!ids.contains(&NONE)).then_some(ids)
}

/// The rank of member `s` of `a` (members are sorted and distinct), if it is one.
fn rank_of(a: &Automaton, s: &[u8]) -> Option<usize> {
    let n = a.member_offsets.len() - 1;
    let member = |i: usize| &a.member_bytes[a.member_offsets[i] as usize..a.member_offsets[i + 1] as usize];
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if member(mid) < s {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < n && member(lo) == s).then_some(lo)
}
