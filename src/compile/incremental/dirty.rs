//! Phase 3: the dirty positions, the prefixes of changed members that are explicit in the old or the new
//! automaton, in byte order, each with its old state, its new kind and its rank among the old explicit states.

use super::*;

/// One position that prefixes a changed member and is explicit in the old or the new automaton.
pub(super) struct Dirty<'s> {
    pub(super) path: &'s [u8],
    /// Its state in the old automaton (explicit number or chain state), or `NONE` when it did not exist.
    pub(super) old_state: u32,
    pub(super) old_explicit: bool,
    /// Its kind in the new automaton.
    pub(super) new: NewKind,
    /// Old explicit states whose path sorts before this one.
    pub(super) rank: u32,
    /// Members of the new list with this prefix: `new_lo..new_hi`.
    pub(super) new_lo: u32,
    pub(super) new_hi: u32,
    /// Its new state (explicit number or chain state; gone until the numbering is known, or when it is gone).
    pub(super) new_state: Slot,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NewKind {
    Gone,
    /// A chain position of new member `m` at depth `d`.
    Chain(u32),
    Explicit,
}

/// The dirty positions of the changes, and for each added string the dirty entry of each of its prefixes (`NONE`
/// where not dirty). `old`: the old members; `adding`: sorted distinct non-members; `removed`: old member indices,
/// ascending. `None` when the old automaton does not have the structure the fast path assumes.
pub(super) fn dirty_positions<'s>(
    this: &Automaton,
    old: &List<'s>,
    adding: &[&'s [u8]],
    removed: &[usize],
) -> Option<(Vec<Dirty<'s>>, Vec<Vec<u32>>)> {
    let k_old = old.len();
    let n_explicit_old = this.n_explicit() as u32;
    let mut dirty: Vec<Dirty> = Vec::new();
    // The first old explicit state that member `i` creates (or later members, when it creates none).
    let mut first_state_memo: std::collections::HashMap<usize, u32> = Default::default();
    let mut first_state = |lo: usize| -> Option<u32> {
        if let Some(&s) = first_state_memo.get(&lo) {
            return Some(s);
        }
        let mut j = lo;
        while j < k_old && old.shared(j) <= old.lcp(j) {
            j += 1;
        }
        let s = if j == k_old { n_explicit_old } else { this.explicit_at(old.get(j), old.lcp(j) + 1)? };
        first_state_memo.insert(lo, s);
        Some(s)
    };
    // Old explicit states before position `c[..e]`, whose old range starts at `lo` (its lower bound).
    let mut rank = |c: &[u8], e: usize, lo: usize| -> Option<u32> {
        if e == 0 {
            return Some(0);
        }
        if lo == k_old {
            return Some(n_explicit_old);
        }
        let l = old.lcp(lo);
        let top = old.shared(lo).min(common(old.get(lo), &c[..e])).min(e - 1);
        Some(first_state(lo)? + top.saturating_sub(l) as u32)
    };
    // The changed strings in byte order (added ones are not members, removed ones are: no overlap). Each one
    // contributes its prefixes longer than what it shares with the one before, so the dirty positions come
    // out distinct and in byte order.
    let mut changed: Vec<(&[u8], u32)> = adding
        .iter()
        .enumerate()
        .map(|(i, &c)| (c, i as u32))
        .chain(removed.iter().map(|&r| (old.get(r), NONE)))
        .collect();
    changed.sort_unstable();
    let tt = &this.vocab.index.trie;
    let single_token = |b: u8| -> Option<TokenId> {
        let u = tt.child(0, b);
        (u != NONE && tt.code(u) != NONE).then(|| this.vocab.index.code_tokens(&tt.code(u))[0])
    };
    // For each added string, the dirty entry of each of its prefixes (NONE where not dirty).
    let mut entry_of: Vec<Vec<u32>> = vec![Vec::new(); adding.len()];
    let mut path_entries: Vec<u32> = Vec::new();
    let mut prev: &[u8] = &[];
    // The old ranges of every prefix of every changed string (narrowing binary searches: in parallel).
    let ros: Vec<Vec<(u32, u32)>> = changed.par_iter().map(|&(c, _)| old.prefix_ranges(c)).collect();
    let mut walks: Vec<Option<u32>> = Vec::new();
    for (ci, &(c, added)) in changed.iter().enumerate() {
        let start = if ci == 0 { 0 } else { common(prev, c) + 1 };
        path_entries.truncate(start.min(path_entries.len()));
        path_entries.resize(start, NONE);
        prev = c;
        // Walk states of the prefix shared with the previous string are the same (its ranges are in `ros`).
        let known = if ci == 0 { 0 } else { start };
        let ro = &ros[ci];
        // The new list is the old one minus `removed` plus `adding`, so its ranges follow from the old ones
        // by counting changes (small sorted arrays) instead of searching the whole list again.
        let gone = |o: u32| removed.partition_point(|&r| (r as u32) < o) as u32;
        let rn: Vec<(u32, u32)> = ro
            .iter()
            .zip(prefix_ranges(adding.len(), |i| adding[i], c))
            .map(|(&(olo, ohi), (alo, ahi))| (olo - gone(olo) + alo, ohi - gone(ohi) + ahi))
            .collect();
        // The old explicit state along c, walked byte by byte while c's prefix is old explicit.
        walks.truncate(known);
        let mut walk = walks.last().copied().unwrap_or(Some(0));
        for e in 0..=c.len() {
            let (olo, ohi) = ro[e];
            let (nlo, nhi) = rn[e];
            let (no, nn) = (ohi - olo, nhi - nlo);
            if no == 0 && nn == 0 {
                break;
            }
            let old_explicit = e == 0 || no >= 2;
            if e >= known && e > 0 {
                walk = match walk {
                    Some(s) if old_explicit => {
                        let tok = single_token(c[e - 1])?;
                        let r = this.range(s as usize);
                        let Ok(i) = this.tokens.slice(r.clone()).binary_search(tok) else { return None };
                        Some(this.targets.get(r.start + i))
                    }
                    _ => None,
                };
            }
            if e >= known {
                walks.push(walk);
            }
            if e < start {
                continue;
            }
            let new_kind = if e == 0 || nn >= 2 {
                NewKind::Explicit
            } else if nn == 1 {
                NewKind::Chain(nlo)
            } else {
                NewKind::Gone
            };
            if !old_explicit && new_kind != NewKind::Explicit {
                path_entries.push(NONE);
                continue;
            }
            let r = if old_explicit {
                match walk {
                    Some(s) if s < n_explicit_old => s,
                    _ => return None,
                }
            } else {
                rank(c, e, olo as usize)?
            };
            let old_state = if old_explicit {
                r
            } else if no == 1 {
                let m = olo as usize;
                let Ok(k) = this.chain_member.binary_search(m as u32) else { return None };
                let f = this.chain_first_depth.get(k) as usize;
                if e < f {
                    return None;
                }
                n_explicit_old + this.chain_base.get(k) + (e - f) as u32
            } else {
                NONE
            };
            path_entries.push(dirty.len() as u32);
            dirty.push(Dirty {
                path: &c[..e],
                old_state,
                old_explicit,
                new: new_kind,
                rank: r,
                new_lo: nlo,
                new_hi: nhi,
                new_state: Slot::GONE,
            });
        }
        if added != NONE {
            entry_of[added as usize] = path_entries.clone();
        }
    }
    debug_assert!(dirty.windows(2).all(|w| w[0].path < w[1].path));
    Some((dirty, entry_of))
}
