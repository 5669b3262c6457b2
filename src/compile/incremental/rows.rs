//! Phase 5: the rows of the dirty positions that are explicit in the new automaton: the old row through the state
//! table plus the tokens along the added strings, or a row aligned afresh for a newly explicit position. The rows
//! are independent of each other: computed in parallel.

use super::chains::ChainLayout;
use super::dirty::{Dirty, NewKind};
use super::number::Numbering;
use super::*;

/// A row computed afresh for a dirty position: its (token, target) pairs, ascending, and its state's facts.
pub(super) struct NewRow {
    pub(super) pairs: Vec<(u32, u32)>,
    pub(super) accepting: bool,
    pub(super) depth: u32,
    pub(super) single: u32,
}

/// What the rows are computed from.
pub(super) struct RowInputs<'a, 's> {
    pub(super) this: &'a Automaton,
    /// The new members.
    pub(super) new: List<'a>,
    /// The added strings (sorted) and their new member indices.
    pub(super) adding: &'a [&'s [u8]],
    pub(super) added_at: &'a [u32],
    /// For each added string, the dirty entry of each of its prefixes (`NONE` where not dirty).
    pub(super) entry_of: &'a [Vec<u32>],
    pub(super) dirty: &'a [Dirty<'s>],
    pub(super) chains: &'a ChainLayout,
    pub(super) numbering: &'a Numbering,
}

/// The row of each dirty position (`None` for those not explicit in the new automaton); `None` when a target is
/// missing (the old automaton does not have the structure the fast path assumes).
pub(super) fn rows(inputs: &RowInputs) -> Option<Vec<Option<NewRow>>> {
    let rows = Rows { add_states: add_states(inputs), i: inputs };
    inputs
        .dirty
        .par_iter()
        .map(|d| if d.new == NewKind::Explicit { rows.row(d).map(Some) } else { Some(None) })
        .collect()
}

/// The new state of every prefix of every added string (explicit ones are dirty, the others chain states).
fn add_states(i: &RowInputs) -> Vec<Vec<Slot>> {
    let mut add_states: Vec<Vec<Slot>> = Vec::with_capacity(i.adding.len());
    for (ai, c) in i.adding.iter().enumerate() {
        let mut v = Vec::with_capacity(c.len() + 1);
        for dep in 0..=c.len() {
            let e = i.entry_of[ai].get(dep).copied().unwrap_or(NONE);
            let st = if e != NONE && i.dirty[e as usize].new == NewKind::Explicit {
                i.dirty[e as usize].new_state
            } else {
                i.chains.state(i.numbering.n_explicit, i.added_at[ai], dep).map_or(Slot::GONE, Slot::state)
            };
            v.push(st);
        }
        add_states.push(v);
    }
    add_states
}

struct Rows<'a, 'b, 's> {
    i: &'b RowInputs<'a, 's>,
    add_states: Vec<Vec<Slot>>,
}

impl Rows<'_, '_, '_> {
    /// The new state of dirty position `path` when it is explicit in the new automaton.
    fn find_dirty(&self, path: &[u8]) -> Option<u32> {
        let dirty = self.i.dirty;
        let i = dirty.binary_search_by(|d| d.path.cmp(path)).ok()?;
        (dirty[i].new == NewKind::Explicit).then_some(dirty[i].new_state)?.get()
    }

    /// The new state of position `m[..d]` of new member `m` (explicit ones are dirty).
    fn position(&self, m: u32, d: usize) -> Option<u32> {
        let new = &self.i.new;
        let s = new.get(m as usize);
        if d <= new.shared(m as usize) {
            self.find_dirty(&s[..d])
        } else {
            self.i.chains.state(self.i.numbering.n_explicit, m, d)
        }
    }

    /// The row of a dirty position that is explicit in the new automaton; `None` when a target is missing.
    fn row(&self, d: &Dirty) -> Option<NewRow> {
        let RowInputs { this, new, adding, added_at, numbering, .. } = self.i;
        let table = &numbering.table;
        let idx = &this.vocab.index;
        // No end-of-generation tokens where a segment ends with an open end (as `freeze` lays them out).
        let eog: &[TokenId] = if this.is_open() { &[] } else { this.vocab.eog_ids() };
        // Calls f(code, length) for the text tokens that prefix `rest`.
        let prefix_codes = |rest: &[u8], f: &mut dyn FnMut(u32, usize)| idx.trie.prefixes(rest, f);
        let e = d.path.len();
        let is_member = d.new_hi > d.new_lo && new.get(d.new_lo as usize).len() == e;
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut extra: Vec<(u32, u32)> = Vec::new();
        let mut failed = false;
        let mut align = |m: u32, pairs: &mut Vec<(u32, u32)>| {
            if let Ok(ai) = added_at.binary_search(&m) {
                let states = &self.add_states[ai];
                prefix_codes(&adding[ai][e..], &mut |code, len| match states[e + len].get() {
                    Some(t) => pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, t))),
                    None => failed = true,
                });
            } else {
                prefix_codes(&new.get(m as usize)[e..], &mut |code, len| match self.position(m, e + len) {
                    Some(t) => pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, t))),
                    None => failed = true,
                });
            }
        };
        if d.old_explicit {
            // The old row through the table (targets that are gone dropped), then the tokens along the added
            // strings below (positions they create, or that a removed string held).
            for i in this.range(d.old_state as usize) {
                let t = this.targets.get(i);
                // FINISHED stays where the position is still a member; other targets go through the table.
                let t = if t == State::FINISHED.0 { is_member.then_some(t) } else { table[t as usize].get() };
                if let Some(t) = t {
                    pairs.push((this.tokens.get(i), t));
                }
            }
            let was_member = this.accepting[d.old_state as usize / 64] >> (d.old_state % 64) & 1 == 1;
            if is_member && !was_member {
                extra.extend(eog.iter().map(|&t| (t, State::FINISHED.0)));
            }
            let lo = adding.partition_point(|c| *c < d.path);
            for (ai, c) in adding.iter().enumerate().skip(lo) {
                if !c.starts_with(d.path) {
                    break;
                }
                align(added_at[ai], &mut extra);
            }
        } else {
            // A newly explicit position: few members below it (all but one added), aligned afresh.
            for m in d.new_lo..d.new_hi {
                align(m, &mut extra);
            }
            if is_member {
                extra.extend(eog.iter().map(|&t| (t, State::FINISHED.0)));
            }
        }
        if failed {
            return None;
        }
        let single = if d.new_hi - d.new_lo == 1 { d.new_lo } else { NONE };
        Some(NewRow { pairs: merge(pairs, extra), accepting: is_member, depth: e as u32, single })
    }
}

/// The pairs of a row: the old row's `pairs` (sorted through the table) with the few new `extra` ones merged in.
/// A full compile's pairs are distinct (one target per token code, one pair per EOG id) and sorted.
pub(super) fn merge(pairs: Vec<(u32, u32)>, mut extra: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    extra.sort_unstable();
    extra.dedup();
    let mut merged = Vec::with_capacity(pairs.len() + extra.len());
    let (mut i, mut j) = (0, 0);
    while i < pairs.len() || j < extra.len() {
        let p = if j == extra.len() || (i < pairs.len() && pairs[i] <= extra[j]) {
            i += 1;
            pairs[i - 1]
        } else {
            j += 1;
            extra[j - 1]
        };
        if merged.last() != Some(&p) {
            merged.push(p);
        }
    }
    if !merged.windows(2).all(|w| w[0] < w[1]) {
        merged.sort_unstable();
        merged.dedup();
    }
    merged
}
