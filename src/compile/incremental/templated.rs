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
//! remove); one in `add` is an error naming its index, as for `compile_template`. Member values follow the same
//! list (see `src/automaton/values.rs`).

use super::*;
use crate::automaton::Segments;
use crate::compile::template::render_all;
use crate::template::End;

impl Automaton {
    /// `add_values`: the added members' values, for an automaton whose members carry values (checked by the
    /// caller).
    pub(super) fn with_changes_templated<A: AsRef<[u8]> + Sync, R: AsRef<[u8]>>(
        &self,
        add: &[A],
        add_values: Option<&[u64]>,
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
        let decoded = self.decoded_members();
        let old = self.member_list(&decoded);
        let c = effective_changes(&old, &add_segs, &remove_segs);
        if self.fast_path_fits(&old, &c) && add.len() < NONE as usize {
            if let Some(mut a) = self.update_in_place(&old, &c.adding, &c.ins, &c.removed, options)? {
                if template.end != End::Open || prefix_free_around(&a, &c) {
                    if let Some(o) = members::origins(&a, &old, &add_segs, &c) {
                        a.segments = Some(Segments::new(template, member_ids(&o, add.len())));
                        a.values = self.carried_values(&o, add_values);
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
        let kept: Vec<usize> = (0..old.len()).filter(|&r| !gone[r] && self.member_id(r).is_some()).collect();
        let mut list = add_segs;
        list.extend(kept.iter().map(|&r| old.get(r)));
        let values = self.list_values(add_values, &kept);
        Automaton::compile_segments(self.vocab.clone(), &list, values.as_deref(), &template, options, &budget)
    }
}

/// With an open end, whether the added segments leave the member list prefix-free (only the pairs next to an
/// added segment can break it; the old list was). `false` sends the update to the full compile, which names the
/// first offending pair.
fn prefix_free_around(a: &Automaton, c: &Changes) -> bool {
    let n = a.member_offsets.len() - 1;
    c.adding.iter().all(|s| {
        let Some(r) = members::rank_of(a, s) else { return false };
        (r == 0 || !s.starts_with(&a.member(r - 1))) && (r + 1 >= n || !a.member(r + 1).starts_with(s))
    })
}

/// The member id of each rank of an update whose members come from `o` (see [`members::origins`]): as
/// `compile_template` numbers the list `add ++ (old − removed)`, an added string is the index of its first copy
/// in `add` (also when it was a member already), the `kept`-th kept old member in rank order (counting those
/// added again) is `n_add + kept`.
fn member_ids(o: &members::Origins, n_add: usize) -> Vec<u32> {
    let mut kept = 0u32;
    o.old
        .iter()
        .zip(&o.added)
        .map(|(&old, &added)| {
            let id = if old != NONE {
                kept += 1;
                n_add as u32 + kept - 1
            } else {
                NONE
            };
            if added != NONE {
                added
            } else {
                id
            }
        })
        .collect()
}
