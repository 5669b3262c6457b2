//! Phase 4: the numbering. Clean old explicit states keep their order, in runs; dirty new ones go where their rank
//! puts them; chain states follow their member's chain. The result is the old-to-new state table.

use super::chains::ChainLayout;
use super::dirty::{Dirty, NewKind};
use super::*;

/// The new numbering: `table[old state]` is its new state ([`Slot::GONE`] for a position that is gone), and the number
/// of explicit states of the new automaton.
pub(super) struct Numbering {
    pub(super) table: Vec<Slot>,
    pub(super) n_explicit: u32,
}

/// Numbers the new automaton's states and sets each dirty position's `new_state`. Errors: `max_states`. `None`
/// when the old automaton does not have the structure the fast path assumes.
pub(super) fn number(
    this: &Automaton,
    dirty: &mut [Dirty],
    chains: &ChainLayout,
    options: &CompileOptions,
) -> Result<Option<Numbering>> {
    let n_explicit_old = this.n_explicit() as u32;
    // The explicit part first; the chain part (most of the states of a templated set: its suffix bytes) is
    // written once, run by run, below.
    let mut table = Vec::with_capacity(this.n_states());
    table.resize(n_explicit_old as usize, Slot::GONE);
    let mut next = 0u32;
    let mut s = 0u32;
    for d in dirty.iter_mut() {
        if d.rank < s || d.rank > n_explicit_old || (d.old_explicit && d.old_state != d.rank) {
            return Ok(None);
        }
        for t in s..d.rank {
            table[t as usize] = Slot::state(next);
            next += 1;
        }
        s = d.rank + d.old_explicit as u32;
        if d.new == NewKind::Explicit {
            d.new_state = Slot::state(next);
            next += 1;
        }
    }
    for t in s..n_explicit_old {
        table[t as usize] = Slot::state(next);
        next += 1;
    }
    let n_explicit = next;
    let n_positions = n_explicit as usize + *chains.base.last().unwrap() as usize;
    crate::compile::string_trie::check_positions(n_positions, options.max_states)?;
    for d in dirty.iter_mut() {
        if let NewKind::Chain(m) = d.new {
            match chains.state(n_explicit, m, d.path.len()) {
                Some(s) => d.new_state = Slot::state(s),
                None => return Ok(None),
            }
        }
    }
    // Chain states: the same member's chain, shifted (positions that became explicit are dirty). Chains copied
    // as runs keep their states' order: one shift per run. Runs in old order, the gaps between them gone.
    let mut runs: Vec<(u32, u32, u32)> = chains.runs.iter().map(|&(lo, hi, at)| (lo, hi, n_explicit + at)).collect();
    for &(k, nk) in &chains.moved {
        let (k, nk) = (k as usize, nk as usize);
        let (a, b) = (this.chain_base.get(k) as usize, this.chain_base.get(k + 1) as usize);
        let (f_old, f_new) = (this.chain_first_depth.get(k) as usize, chains.first_depth[nk] as usize);
        // Depths below f_new became explicit (dirty, numbered below); the rest keep their order.
        let skip = f_new.saturating_sub(f_old).min(b - a);
        let first = n_explicit + chains.base[nk] + (f_old + skip - f_new) as u32;
        runs.push(((a + skip) as u32, b as u32, first));
    }
    runs.sort_unstable();
    let e = n_explicit_old as usize;
    for &(lo, hi, first) in &runs {
        if (lo as usize) < table.len() - e {
            return Ok(None); // runs overlap
        }
        table.resize(e + lo as usize, Slot::GONE);
        table.extend((0..hi - lo).map(|i| Slot::state(first + i)));
    }
    table.resize(this.n_states(), Slot::GONE);
    for d in dirty.iter() {
        if d.old_state != NONE {
            table[d.old_state as usize] = d.new_state;
        }
    }
    Ok(Some(Numbering { table, n_explicit }))
}
