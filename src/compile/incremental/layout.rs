//! Phase 6: the layout. The clean old states are copied in runs (split into pieces for the threads) between the
//! dirty rows; each piece fills its own disjoint part of the output arrays, in parallel.

use super::dirty::Dirty;
use super::rows::NewRow;
use super::*;

/// A part of the new automaton's explicit states: the clean old states `a..b`, copied, or one dirty row.
enum Piece<'r> {
    Clean(u32, u32),
    Row(&'r NewRow),
}

/// A piece and the parts of the output arrays it fills: its states' end offsets, transitions and facts.
struct Job<'p, 'o> {
    piece: &'p Piece<'p>,
    /// Index of the piece's first transition in the new automaton.
    trans_at: u32,
    offsets: &'o mut [u32],
    tokens: &'o mut [TokenId],
    targets: &'o mut [u32],
    accepting: &'o mut [bool],
    depth: &'o mut [u32],
    single_member: &'o mut [u32],
}

impl Job<'_, '_> {
    /// Fills the job's parts. A clean run keeps its tokens; its targets and members go through the old-to-new
    /// tables. `false` when a target is gone (a clean row never leads to a changed position; this would be a
    /// broken old automaton).
    fn fill(self, old: &Automaton, table: &[Slot], member: &[u32]) -> bool {
        match *self.piece {
            Piece::Row(r) => {
                for ((tok, tgt), &(t, g)) in self.tokens.iter_mut().zip(self.targets.iter_mut()).zip(&r.pairs) {
                    *tok = t;
                    *tgt = g;
                }
                self.offsets[0] = self.trans_at + r.pairs.len() as u32;
                self.accepting[0] = r.accepting;
                self.depth[0] = r.depth;
                self.single_member[0] = r.single;
                true
            }
            Piece::Clean(a, b) => {
                let (a, b) = (a as usize, b as usize);
                let (ta, tb) = (old.offsets.get(a) as usize, old.offsets.get(b) as usize);
                let mut at = 0;
                old.tokens.slice(ta..tb).for_each(|t| {
                    self.tokens[at] = t;
                    at += 1;
                });
                let mut gone = false;
                for (out, t) in self.targets.iter_mut().zip(old.targets.slice(ta..tb).iter()) {
                    let v = if t == State::FINISHED.0 { Some(t) } else { table[t as usize].get() };
                    gone |= v.is_none();
                    *out = v.unwrap_or(0);
                }
                let shift = self.trans_at.wrapping_sub(ta as u32);
                for (out, o) in self.offsets.iter_mut().zip(old.offsets.range(a + 1..b + 1)) {
                    *out = o.wrapping_add(shift);
                }
                for (i, out) in self.accepting.iter_mut().enumerate() {
                    let s = a + i;
                    *out = old.accepting[s / 64] >> (s % 64) & 1 == 1;
                }
                for (out, d) in self.depth.iter_mut().zip(old.depth.slice(a..b).iter()) {
                    *out = d;
                }
                for (out, m) in self.single_member.iter_mut().zip(old.single_member.slice(a..b).iter()) {
                    *out = if m == NONE { NONE } else { member[m as usize] };
                }
                !gone
            }
        }
    }
}

/// Splits the first `n` elements off `rest`.
fn take_front<'o, T>(rest: &mut &'o mut [T], n: usize) -> &'o mut [T] {
    let (front, back) = std::mem::take(rest).split_at_mut(n);
    *rest = back;
    front
}

/// The explicit states of the new automaton: the old rows `0..n_explicit_old` through `table` (targets) and
/// `old_to_new` (members), with `rows` (one per dirty position, `None` where it is not explicit) in their
/// places. Errors: the transition limit, `max_bytes`. `None` when a target is gone or the count disagrees with the
/// numbering (the old automaton does not have the structure the fast path assumes).
pub(super) fn layout(
    this: &Automaton,
    dirty: &[Dirty],
    rows: &[Option<NewRow>],
    table: &[Slot],
    n_explicit: u32,
    old_to_new: &[u32],
    budget: &Budget,
) -> Result<Option<Explicit>> {
    let n_explicit_old = this.n_explicit() as u32;
    // The layout: clean old states in runs (split into pieces for the threads) between the dirty rows.
    const PIECE: u32 = 1 << 13;
    let mut pieces: Vec<Piece> = Vec::with_capacity(dirty.len() + n_explicit_old as usize / PIECE as usize + 2);
    {
        let clean = |a: u32, b: u32, pieces: &mut Vec<Piece>| {
            let mut a = a;
            while a < b {
                let end = b.min(a.saturating_add(PIECE));
                pieces.push(Piece::Clean(a, end));
                a = end;
            }
        };
        let mut s = 0u32;
        for (d, row) in dirty.iter().zip(rows) {
            clean(s, d.rank, &mut pieces);
            s = d.rank + d.old_explicit as u32;
            if let Some(row) = row {
                pieces.push(Piece::Row(row));
            }
        }
        clean(s, n_explicit_old, &mut pieces);
    }
    let size = |p: &Piece| -> (usize, usize) {
        match *p {
            Piece::Clean(a, b) => {
                ((b - a) as usize, (this.offsets.get(b as usize) - this.offsets.get(a as usize)) as usize)
            }
            Piece::Row(r) => (1, r.pairs.len()),
        }
    };
    let (n_out, n_trans) = pieces.iter().map(size).fold((0, 0), |(s, t), (a, b)| (s + a, t + b));
    if n_out != n_explicit as usize {
        return Ok(None);
    }
    if n_trans >= u32::MAX as usize {
        return Err(Error::limit(format!(
            "the automaton needs {n_trans} transitions, over the limit of {}",
            u32::MAX - 1
        )));
    }
    budget.charge(n_trans * 8 + n_out * 17, "the automaton's transitions")?;
    let mut offsets = vec![0u32; n_out + 1];
    let mut tokens: Vec<TokenId> = vec![0; n_trans];
    let mut targets = vec![0u32; n_trans];
    let mut accepting_bool = vec![false; n_out];
    let mut depth = vec![0u32; n_out];
    let mut single_member = vec![0u32; n_out];
    {
        // Each piece gets its own disjoint part of every output array, then the pieces are filled in parallel.
        let mut jobs: Vec<Job> = Vec::with_capacity(pieces.len());
        let (mut o, mut tk, mut tg) = (&mut offsets[1..], &mut tokens[..], &mut targets[..]);
        let (mut ac, mut dp, mut sm) = (&mut accepting_bool[..], &mut depth[..], &mut single_member[..]);
        let mut at = 0usize;
        for p in &pieces {
            let (ns, nt) = size(p);
            jobs.push(Job {
                piece: p,
                trans_at: at as u32,
                offsets: take_front(&mut o, ns),
                tokens: take_front(&mut tk, nt),
                targets: take_front(&mut tg, nt),
                accepting: take_front(&mut ac, ns),
                depth: take_front(&mut dp, ns),
                single_member: take_front(&mut sm, ns),
            });
            at += nt;
        }
        if !jobs.into_par_iter().all(|job| job.fill(this, table, old_to_new)) {
            return Ok(None);
        }
    }
    drop(pieces);
    let accepting: Vec<u64> = accepting_bool
        .par_chunks(64)
        .map(|bits| bits.iter().enumerate().fold(0u64, |w, (i, &b)| w | (b as u64) << i))
        .collect();
    Ok(Some(Explicit { offsets, tokens, targets, accepting, depth, single_member }))
}
