//! Phase 2: the chains of the new list. A member's shared depth changes only next to a change, so the chains of
//! the members in between are the old ones, renumbered and copied in runs.

use super::members::Members;
use super::*;

/// The chains of the new automaton, and where the old chain states went (for the state table).
pub(super) struct ChainLayout {
    pub(super) base: Vec<u32>,
    pub(super) member: Vec<u32>,
    pub(super) first_depth: Vec<u32>,
    /// Old chains copied as runs: old chain-state offsets `lo..hi` now start at new offset `at` (same order).
    pub(super) runs: Vec<(u32, u32, u32)>,
    /// Old chains kept but recomputed (their first depth may have changed): (old chain, new chain).
    pub(super) moved: Vec<(u32, u32)>,
}

impl ChainLayout {
    /// The chain of new member `m`, if it has one.
    pub(super) fn chain_of(&self, m: u32) -> Option<usize> {
        self.member.binary_search(&m).ok()
    }

    /// The state of position `d` of new member `m` when it is a chain position (`n_explicit` explicit states).
    pub(super) fn state(&self, n_explicit: u32, m: u32, d: usize) -> Option<u32> {
        let k = self.chain_of(m)?;
        let f = self.first_depth[k] as usize;
        (d >= f).then(|| n_explicit + self.base[k] + (d - f) as u32)
    }
}

/// The chains of the new list `new` (`m` its members; `old` the old list, `removed` its removed members).
/// `None` when the old automaton does not have the structure the fast path assumes.
pub(super) fn chains(
    this: &Automaton,
    old: &List,
    m: &Members,
    removed: &[usize],
    budget: &Budget,
) -> Result<Option<ChainLayout>> {
    let new = m.list();
    let k_new = new.len();
    let n_added = m.added_at.len();
    let mut touched: Vec<u32> = Vec::new();
    for &p in &m.added_at {
        touched.extend([p.wrapping_sub(1), p, p + 1]);
    }
    for &r in removed {
        // The members on both sides of the gap: the last one before and the first one after.
        let after = partition(0, k_new, |j| new.get(j) < old.get(r));
        touched.extend([(after as u32).wrapping_sub(1), after as u32]);
    }
    touched.retain(|&t| (t as usize) < k_new);
    touched.sort_unstable();
    touched.dedup();
    let n_chains_old = this.chain_member.len();
    budget.charge((n_chains_old + n_added) * 16 + this.n_states() * 4, "the chains and the state table")?;
    let mut chain_base: Vec<u32> = Vec::with_capacity(n_chains_old + n_added + 1);
    let mut chain_member: Vec<u32> = Vec::with_capacity(n_chains_old + n_added);
    let mut chain_first_depth: Vec<u32> = Vec::with_capacity(n_chains_old + n_added);
    chain_base.push(0);
    let (chain_runs, chains_moved) = {
        let mut out = NewChains {
            base: &mut chain_base,
            member: &mut chain_member,
            first_depth: &mut chain_first_depth,
            runs: Vec::new(),
            moved: Vec::new(),
        };
        // Walk the new members in order: added ones and runs of old ones, the touched members of a run apart.
        let (mut ai, mut tp) = (0usize, 0usize);
        let mut runs_it = m.runs.iter();
        let mut j = 0usize;
        while j < k_new {
            if ai < m.added_at.len() && m.added_at[ai] as usize == j {
                out.one(this, &new, j, NONE);
                ai += 1;
                j += 1;
                continue;
            }
            let Some(&(oa, ob, ja)) = runs_it.next() else { return Ok(None) };
            if ja != j {
                return Ok(None);
            }
            let jb = ja + (ob - oa);
            while j < jb {
                while tp < touched.len() && (touched[tp] as usize) < j {
                    tp += 1;
                }
                let next_touched = if tp < touched.len() { (touched[tp] as usize).min(jb) } else { jb };
                if next_touched > j {
                    out.bulk(this, oa + (j - ja), oa + (next_touched - ja), j);
                    j = next_touched;
                } else {
                    out.one(this, &new, j, (oa + (j - ja)) as u32);
                    j += 1;
                }
            }
        }
        (out.runs, out.moved)
    };
    Ok(Some(ChainLayout {
        base: chain_base,
        member: chain_member,
        first_depth: chain_first_depth,
        runs: chain_runs,
        moved: chains_moved,
    }))
}

/// The chains of the new automaton, as they are laid out in member order.
struct NewChains<'a> {
    base: &'a mut Vec<u32>,
    member: &'a mut Vec<u32>,
    first_depth: &'a mut Vec<u32>,
    /// Old chains copied as runs: old chain-state offsets `lo..hi` now start at new offset `at` (same order).
    runs: Vec<(u32, u32, u32)>,
    /// Old chains kept but recomputed (their first depth may have changed): (old chain, new chain).
    moved: Vec<(u32, u32)>,
}

impl NewChains<'_> {
    /// New member `j`, from old member `o` (`NONE` when added), next to a change: its chain recomputed.
    fn one(&mut self, old: &Automaton, new: &List, j: usize, o: u32) {
        let len = new.get(j).len();
        let shared = new.shared(j);
        if shared < len {
            if let Ok(k) = if o == NONE { Err(0) } else { old.chain_member.binary_search(o) } {
                self.moved.push((k as u32, self.member.len() as u32));
            }
            self.member.push(j as u32);
            self.first_depth.push(shared as u32 + 1);
            self.base.push(self.base.last().unwrap() + (len - shared) as u32);
        }
    }

    /// Old members `oa..ob`, now `ja..`, none next to a change: their shared depths are the same, so their chains
    /// are the old ones with the member renumbered (copied as a run).
    fn bulk(&mut self, old: &Automaton, oa: usize, ob: usize, ja: usize) {
        let (members, bases) = (&old.chain_member, &old.chain_base);
        let ka = members.partition_point(|m| (m as usize) < oa);
        let kb = members.partition_point(|m| (m as usize) < ob).max(ka);
        let shift = (ja as u32).wrapping_sub(oa as u32);
        if ka < kb {
            self.runs.push((bases.get(ka), bases.get(kb), *self.base.last().unwrap()));
        }
        self.member.extend(members.range(ka..kb).map(|m| m.wrapping_add(shift)));
        self.first_depth.extend(old.chain_first_depth.slice(ka..kb).iter());
        let base = self.base.last().unwrap().wrapping_sub(bases.get(ka));
        self.base.extend(bases.range(ka + 1..kb + 1).map(|b| b.wrapping_add(base)));
    }
}
