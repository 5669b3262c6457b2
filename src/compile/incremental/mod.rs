//! Incremental updates: [`Automaton::with_changes`] adds and removes strings of a compiled set and builds a new
//! automaton equal to a full compile of the resulting set, reusing the old one's rows.
//!
//! ## Semantics
//! The resulting set is `(members − remove) ∪ add`, where `members` are the strings the old automaton can produce
//! (strings it dropped as unreachable are not members). Removing a string that is not a member does nothing; a
//! string in both `add` and `remove` stays; duplicates in `add`, and added strings that are already members, are
//! merged. The result is the automaton [`Automaton::compile`] gives for the list `add ++ (members − remove)` (in
//! that order, so [`Automaton::dropped`] of the result lists indices into `add`): the same arrays, byte for byte
//! ([`Automaton::to_bytes`]), the same errors (an empty result is [`ErrorKind::EmptySet`]; an unreachable added
//! string is [`ErrorKind::UnreachableString`] naming it, or dropped with `drop_unreachable`; `max_states` bounds
//! the new set's trie). The old automaton is untouched: sequences in flight on it go on.
//!
//! ## What is reused, and why it is correct
//! When every byte of every member (old and added) is a single-byte text token of the vocabulary (byte-level BPE
//! vocabularies such as GPT-2, Llama-3, Qwen; SentencePiece with byte fallback), a full compile prunes nothing:
//! every trie position can be spelled byte by byte and completed, so
//! - the explicit states are exactly the root and the positions (byte strings) that prefix at least two members,
//!   numbered in preorder, i.e. in the byte order of their paths; every other position of a member is a chain
//!   position;
//! - the row of an explicit position `x` is `{(t, state(x·t)) : x·t prefixes a member}`, plus the end-of-generation
//!   ids when `x` is a member.
//!
//! So a change of member `c` (added or removed) can only change positions that prefix `c`: whether they exist,
//! whether they are explicit (shared by two members), and their rows. These *dirty* positions (at most `|c| + 1`
//! per change) are found by narrowing binary searches in the old and the new sorted member lists. Every other
//! explicit state is *clean*: same path, same row content, only renumbered. The new automaton is laid out by
//! merging the clean old states (copied in runs: tokens as they are, targets through an old-to-new state table)
//! with the dirty ones (a dirty state that was explicit before keeps its old row through the same table, minus
//! targets that no longer exist, plus the tokens into positions that are new; a newly explicit position is aligned
//! afresh along its few members). The old rank of a position (how many old explicit states precede it in byte
//! order) follows from member indices: member `i` creates the explicit nodes at depths `lcp(i) + 1 ..=
//! shared(i)`, and the number of the first one is read by walking member `i` in the old automaton.
//!
//! Otherwise (a vocabulary that cannot spell some member byte by byte, so that pruning and explicit tails come in,
//! an old automaton that dropped strings, or more than one change per 20 members, where the per-change work
//! outweighs the copy) the update compiles the resulting set in full: same result, no speed-up.
//!
//! ## Cost
//! `O(states + transitions)` memory passes, most of them copies in runs: the member list, the chains (copied per
//! run of untouched members, one shift per run), an old-to-new state table (one shift per run of states), and the
//! rows, copied with their targets renumbered in pieces filled in parallel. That is about 1/20 of a full compile.
//! Per changed string: narrowing binary searches over the member list (in parallel), one walk, and the changed
//! rows along its path (computed in parallel; the rows near the root are the large ones).

use crate::automaton::{Automaton, Chains, CompileOptions, Explicit, State, Step};
use crate::compile::string_trie::NONE;
use crate::error::{Error, ErrorKind, Result};
use crate::util::budget::Budget;
use crate::vocab::TokenId;
use rayon::prelude::*;

/// A table entry or target meaning "this position is gone" (distinct from `State::FINISHED`, which is `NONE`;
/// state numbers stay below `NONE / 2`).
const GONE: u32 = NONE - 1;

/// One position that prefixes a changed member and is explicit in the old or the new automaton.
struct Dirty<'s> {
    path: &'s [u8],
    /// Its state in the old automaton (explicit number or chain state), or `NONE` when it did not exist.
    old_state: u32,
    old_explicit: bool,
    /// Its kind in the new automaton.
    new: NewKind,
    /// Old explicit states whose path sorts before this one.
    rank: u32,
    /// Members of the new list with this prefix: `new_lo..new_hi`.
    new_lo: u32,
    new_hi: u32,
    /// Its new state (explicit number or chain state; `NONE` when gone), filled once the numbering is known.
    new_state: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NewKind {
    Gone,
    /// A chain position of new member `m` at depth `d`.
    Chain(u32),
    Explicit,
}

/// A row computed afresh for a dirty position: its (token, target) pairs, ascending, and its state's facts.
struct NewRow {
    pairs: Vec<(u32, u32)>,
    accepting: bool,
    depth: u32,
    single: u32,
}

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
    fn fill(self, old: &Automaton, table: &[u32], member: &[u32]) -> bool {
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
                let (ta, tb) = (old.offsets[a] as usize, old.offsets[b] as usize);
                self.tokens.copy_from_slice(&old.tokens[ta..tb]);
                let mut gone = false;
                for (out, &t) in self.targets.iter_mut().zip(&old.targets[ta..tb]) {
                    let v = if t == State::FINISHED.0 { t } else { table[t as usize] };
                    gone |= v == GONE;
                    *out = v;
                }
                let shift = self.trans_at.wrapping_sub(ta as u32);
                for (out, &o) in self.offsets.iter_mut().zip(&old.offsets[a + 1..=b]) {
                    *out = o.wrapping_add(shift);
                }
                for (i, out) in self.accepting.iter_mut().enumerate() {
                    let s = a + i;
                    *out = old.accepting[s / 64] >> (s % 64) & 1 == 1;
                }
                self.depth.copy_from_slice(&old.depth[a..b]);
                for (out, &m) in self.single_member.iter_mut().zip(&old.single_member[a..b]) {
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
            if let Ok(k) = if o == NONE { Err(0) } else { old.chain_member.binary_search(&o) } {
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
        let ka = old.chain_member.partition_point(|&m| (m as usize) < oa);
        let kb = ka + old.chain_member[ka..].partition_point(|&m| (m as usize) < ob);
        let shift = (ja as u32).wrapping_sub(oa as u32);
        if ka < kb {
            self.runs.push((old.chain_base[ka], old.chain_base[kb], *self.base.last().unwrap()));
        }
        self.member.extend(old.chain_member[ka..kb].iter().map(|&m| m.wrapping_add(shift)));
        self.first_depth.extend_from_slice(&old.chain_first_depth[ka..kb]);
        let base = self.base.last().unwrap().wrapping_sub(old.chain_base[ka]);
        self.base.extend(old.chain_base[ka + 1..=kb].iter().map(|&b| b.wrapping_add(base)));
    }
}

/// A sorted list of distinct members: `bytes[offsets[i]..offsets[i + 1]]`.
struct List<'a> {
    offsets: &'a [u64],
    bytes: &'a [u8],
}

impl<'a> List<'a> {
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    fn get(&self, i: usize) -> &'a [u8] {
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
    /// Longest common prefix of members `i - 1` and `i` (0 for the first, and past the end).
    fn lcp(&self, i: usize) -> usize {
        if i == 0 || i >= self.len() {
            return 0;
        }
        common(self.get(i - 1), self.get(i))
    }
    /// The longest prefix of member `i` shared with another member.
    fn shared(&self, i: usize) -> usize {
        self.lcp(i).max(self.lcp(i + 1))
    }
    /// For `e = 0..=|c|`, the members that have `c[..e]` as a prefix: `lo..hi` (empty ranges at the place `c[..e]`
    /// would sort).
    fn prefix_ranges(&self, c: &[u8]) -> Vec<(u32, u32)> {
        prefix_ranges(self.len(), |i| self.get(i), c)
    }
}

/// For each string, the number of members that sort before it (its index when it is a member).
fn insertion_points(list: &List, strings: &[&[u8]]) -> Vec<usize> {
    strings.par_iter().map(|s| partition(0, list.len(), |i| list.get(i) < *s)).collect()
}

/// For `e = 0..=|c|`, the strings `get(0..n)` (sorted, distinct) that have `c[..e]` as a prefix: `lo..hi`, found by
/// narrowing binary searches (empty ranges at the place `c[..e]` would sort).
fn prefix_ranges<'a>(n: usize, get: impl Fn(usize) -> &'a [u8], c: &[u8]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(c.len() + 1);
    out.push((0, n as u32));
    let (mut lo, mut hi) = (0, n);
    for (e, &b) in c.iter().enumerate() {
        if lo < hi {
            // Within lo..hi every string starts with c[..e]; the one equal to c[..e] (if any) comes first.
            let first = lo
                + partition(lo, hi, |i| {
                    let m = get(i);
                    m.len() <= e || m[e] < b
                });
            let end = first + partition(first, hi, |i| get(i)[e] == b);
            lo = first;
            hi = end;
        }
        out.push((lo as u32, hi as u32));
    }
    out
}

/// The number of leading indices of `a..b` for which `pred` holds (`pred` true then false).
fn partition(a: usize, b: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (a, b);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo - a
}

fn common(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Automaton {
    /// A new automaton for this set with the strings of `add` added and those of `remove` removed, equal to a full
    /// [`Automaton::compile`] of the resulting set (byte for byte: [`Automaton::to_bytes`]) but built from this one:
    /// rows that no change touches are copied. `self` is untouched.
    ///
    /// The resulting set is `(members − remove) ∪ add`: removing a non-member does nothing, a string in both lists
    /// stays, duplicates merge. The result is what `compile(add ++ (members − remove), options)` gives, so
    /// [`Automaton::dropped`] lists indices into `add`. Errors: [`ErrorKind::EmptySet`] when nothing remains,
    /// [`ErrorKind::UnreachableString`] for an added string the vocabulary cannot produce (unless
    /// `options.drop_unreachable`), [`ErrorKind::LimitExceeded`] past `options.max_states` / `max_bytes`.
    ///
    /// Fast when the vocabulary spells every byte of the members with a single-byte token (byte-level BPE, byte
    /// fallback); otherwise (or when this automaton dropped strings) the set is compiled in full.
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use trie::{Automaton, CompileOptions, Vocabulary};
    /// # let vocab = Arc::new(Vocabulary::from_gguf("model.gguf")?);
    /// let tools = Automaton::compile(vocab, &["search_flights", "book_flight"], &CompileOptions::new())?;
    /// let tools = tools.with_changes(&["cancel_flight"], &["book_flight"], &CompileOptions::new())?;
    /// assert_eq!(tools.n_members(), 2);
    /// # Ok::<(), trie::Error>(())
    /// ```
    pub fn with_changes<A: AsRef<[u8]> + Sync, R: AsRef<[u8]>>(
        &self,
        add: &[A],
        remove: &[R],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        if self.segments.is_some() {
            return Err(Error::invalid(
                "with_changes does not update an automaton compiled with a template yet: compile the changed set \
                 with compile_template",
            ));
        }
        let old = List { offsets: &self.member_offsets, bytes: &self.member_bytes };
        // Effective changes: removed members (old indices) and added non-members (sorted, distinct).
        let mut adding: Vec<&[u8]> = add.iter().map(|s| s.as_ref()).collect();
        adding.sort_unstable();
        adding.dedup();
        let mut removing: Vec<&[u8]> = remove.iter().map(|s| s.as_ref()).collect();
        removing.sort_unstable();
        removing.dedup();
        removing.retain(|s| adding.binary_search(s).is_err());
        // Where each string sorts among the members (binary searches over the member list: in parallel).
        let is_at = |s: &[u8], i: usize| i < old.len() && old.get(i) == s;
        let removed: Vec<usize> = insertion_points(&old, &removing)
            .into_iter()
            .zip(&removing)
            .filter(|&(i, s)| is_at(s, i))
            .map(|(i, _)| i)
            .collect();
        let (adding, ins): (Vec<&[u8]>, Vec<usize>) = adding
            .iter()
            .zip(insertion_points(&old, &adding))
            .filter(|&(s, i)| !is_at(s, i))
            .map(|(&s, i)| (s, i))
            .unzip();

        let single = &self.vocab.index.single_byte;
        let fast = self.n_dropped_members == 0
            && (single.iter().all(|&b| b)
                || (self.member_bytes.iter().all(|&b| single[b as usize])
                    && adding.iter().all(|s| s.iter().all(|&b| single[b as usize]))));
        // Past about one change per 20 members the per-change work costs more than it saves (measured:
        // benches/incremental.rs); a full compile is then faster.
        let changes = adding.len() + removed.len();
        let worth_it = changes <= 64 || changes * 20 <= old.len();
        if fast && worth_it {
            if let Some(a) = self.update_in_place(&old, &adding, &ins, &removed, options)? {
                return Ok(a);
            }
        }
        self.recompile_with(add, &removed, options)
    }

    /// The fallback: a full compile of `add ++ (members − removed)`.
    fn recompile_with<A: AsRef<[u8]> + Sync>(
        &self,
        add: &[A],
        removed: &[usize],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        let n = self.member_offsets.len() - 1;
        let mut gone = vec![false; n];
        for &r in removed {
            gone[r] = true;
        }
        if self.n_dropped_members > 0 {
            // The strings this automaton dropped are not members.
            let dropped: Vec<bool> = (0..n).into_par_iter().map(|m| !self.produces(self.member(m))).collect();
            for (g, d) in gone.iter_mut().zip(dropped) {
                *g |= d;
            }
        }
        let mut list: Vec<&[u8]> = add.iter().map(|s| s.as_ref()).collect();
        list.extend((0..n).filter(|&m| !gone[m]).map(|m| self.member(m)));
        Automaton::compile(self.vocab.clone(), &list, options)
    }

    /// Whether some token path from the start spells `s` and ends in an accepting state.
    fn produces(&self, s: &[u8]) -> bool {
        // reached[d]: the state after the first d bytes, when some token path gets there.
        let mut reached = vec![NONE; s.len() + 1];
        reached[0] = 0;
        for d in 0..=s.len() {
            let st = reached[d];
            if st == NONE {
                continue;
            }
            if d == s.len() {
                return self.is_accepting(State(st));
            }
            self.prefix_tokens(&s[d..], |ids, len| {
                if let Ok(Step::Next(next)) = self.advance(State(st), ids[0]) {
                    reached[d + len] = next.0;
                }
            });
        }
        false
    }

    /// The state of explicit position `bytes[..depth]`, walking single-byte tokens from the start; `None` when the
    /// walk leaves the explicit states (the automaton does not have the structure the fast path assumes).
    fn explicit_at(&self, bytes: &[u8], depth: usize) -> Option<u32> {
        let tt = &self.vocab.index.trie;
        let mut s = 0u32;
        for &b in bytes.get(..depth)? {
            let u = tt.child(0, b);
            if u == NONE || tt.code(u) == NONE || s as usize >= self.n_explicit() {
                return None;
            }
            let code = tt.code(u);
            let tok = self.vocab.index.code_tokens(&code)[0];
            let r = self.range(s as usize);
            let i = self.tokens[r.clone()].binary_search(&tok).ok()?;
            s = self.targets[r.start + i];
        }
        ((s as usize) < self.n_explicit()).then_some(s)
    }

    /// The fast path (see the module doc); `None` when the automaton turns out not to have the expected structure.
    fn update_in_place(
        &self,
        old: &List,
        adding: &[&[u8]],
        ins: &[usize],
        removed: &[usize],
        options: &CompileOptions,
    ) -> Result<Option<Automaton>> {
        let budget = Budget::new(options.max_bytes);
        let k_old = old.len();
        let k_new = k_old - removed.len() + adding.len();
        if k_new == 0 {
            return Err(Error::new(ErrorKind::EmptySet, "the set of strings is empty: give at least one string"));
        }
        if k_new >= NONE as usize {
            return Err(Error::limit(format!("{k_new} strings exceed the limit of {}", NONE - 1)));
        }
        let add_bytes: usize = adding.iter().map(|s| s.len()).sum();
        let n_bytes = self.member_bytes.len() + add_bytes;
        budget.charge(n_bytes + (k_new + 1) * 8 + k_old * 4, "the members")?;

        // --- The new member list: runs of old members copied between the changes. ---
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
                let (from, to) = (self.member_offsets[i], new_bytes.len() as u64);
                new_bytes.extend_from_slice(&self.member_bytes[from as usize..self.member_offsets[end] as usize]);
                new_offsets.extend(self.member_offsets[i + 1..=end].iter().map(|&o| o - from + to));
                for (j, slot) in old_to_new[i..end].iter_mut().enumerate() {
                    *slot = (base + j) as u32;
                }
                runs.push((i, end, base));
                i = end;
            }
        }
        let new = List { offsets: &new_offsets, bytes: &new_bytes };
        debug_assert_eq!(new.len(), k_new);

        // --- Chains of the new list. A member's shared depth changes only next to a change. ---
        let mut touched: Vec<u32> = Vec::new();
        for &p in &added_at {
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
        let n_chains_old = self.chain_member.len();
        budget.charge((n_chains_old + adding.len()) * 16 + self.n_states() * 4, "the chains and the state table")?;
        let mut chain_base: Vec<u32> = Vec::with_capacity(n_chains_old + adding.len() + 1);
        let mut chain_member: Vec<u32> = Vec::with_capacity(n_chains_old + adding.len());
        let mut chain_first_depth: Vec<u32> = Vec::with_capacity(n_chains_old + adding.len());
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
            let mut runs_it = runs.iter();
            let mut j = 0usize;
            while j < k_new {
                if ai < added_at.len() && added_at[ai] as usize == j {
                    out.one(self, &new, j, NONE);
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
                        out.bulk(self, oa + (j - ja), oa + (next_touched - ja), j);
                        j = next_touched;
                    } else {
                        out.one(self, &new, j, (oa + (j - ja)) as u32);
                        j += 1;
                    }
                }
            }
            (out.runs, out.moved)
        };
        let chain_of = |m: u32| -> Option<usize> { chain_member.binary_search(&m).ok() };

        // --- Dirty positions: the prefixes of changed members explicit in the old or the new automaton. ---
        let n_explicit_old = self.n_explicit() as u32;
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
            let s = if j == k_old { n_explicit_old } else { self.explicit_at(old.get(j), old.lcp(j) + 1)? };
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
        let tt = &self.vocab.index.trie;
        let single_token = |b: u8| -> Option<TokenId> {
            let u = tt.child(0, b);
            (u != NONE && tt.code(u) != NONE).then(|| self.vocab.index.code_tokens(&tt.code(u))[0])
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
                            let Some(tok) = single_token(c[e - 1]) else { return Ok(None) };
                            let r = self.range(s as usize);
                            let Ok(i) = self.tokens[r.clone()].binary_search(&tok) else { return Ok(None) };
                            Some(self.targets[r.start + i])
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
                        _ => return Ok(None),
                    }
                } else {
                    match rank(c, e, olo as usize) {
                        Some(r) => r,
                        None => return Ok(None),
                    }
                };
                let old_state = if old_explicit {
                    r
                } else if no == 1 {
                    let m = olo as usize;
                    let Ok(k) = self.chain_member.binary_search(&(m as u32)) else { return Ok(None) };
                    let f = self.chain_first_depth[k] as usize;
                    if e < f {
                        return Ok(None);
                    }
                    n_explicit_old + self.chain_base[k] + (e - f) as u32
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
                    new_state: GONE,
                });
            }
            if added != NONE {
                entry_of[added as usize] = path_entries.clone();
            }
        }
        debug_assert!(dirty.windows(2).all(|w| w[0].path < w[1].path));

        // --- Numbering: clean old states in runs, dirty new ones where their rank puts them. ---
        let mut table = vec![GONE; self.n_states()];
        let mut next = 0u32;
        {
            let mut s = 0u32;
            for d in dirty.iter_mut() {
                if d.rank < s || d.rank > n_explicit_old || (d.old_explicit && d.old_state != d.rank) {
                    return Ok(None);
                }
                for t in s..d.rank {
                    table[t as usize] = next;
                    next += 1;
                }
                s = d.rank + d.old_explicit as u32;
                if d.new == NewKind::Explicit {
                    d.new_state = next;
                    next += 1;
                }
            }
            for t in s..n_explicit_old {
                table[t as usize] = next;
                next += 1;
            }
        }
        let n_explicit = next;
        let n_positions = n_explicit as usize + *chain_base.last().unwrap() as usize;
        crate::compile::string_trie::check_positions(n_positions, options.max_states)?;
        let chain_state = |m: u32, d: usize| -> Option<u32> {
            let k = chain_of(m)?;
            let f = chain_first_depth[k] as usize;
            (d >= f).then(|| n_explicit + chain_base[k] + (d - f) as u32)
        };
        for d in dirty.iter_mut() {
            if let NewKind::Chain(m) = d.new {
                match chain_state(m, d.path.len()) {
                    Some(s) => d.new_state = s,
                    None => return Ok(None),
                }
            }
        }
        // Chain states: the same member's chain, shifted (positions that became explicit are dirty). Chains copied
        // as runs keep their states' order: one shift per run.
        let e = n_explicit_old as usize;
        for &(lo, hi, at) in &chain_runs {
            let first = n_explicit + at;
            for (i, slot) in table[e + lo as usize..e + hi as usize].iter_mut().enumerate() {
                *slot = first + i as u32;
            }
        }
        for &(k, nk) in &chains_moved {
            let (k, nk) = (k as usize, nk as usize);
            let (a, b) = (self.chain_base[k] as usize, self.chain_base[k + 1] as usize);
            let (f_old, f_new) = (self.chain_first_depth[k] as usize, chain_first_depth[nk] as usize);
            // Depths below f_new became explicit (dirty, numbered below); the rest keep their order.
            let skip = f_new.saturating_sub(f_old).min(b - a);
            let first = n_explicit + chain_base[nk] + (f_old + skip - f_new) as u32;
            for (i, slot) in table[e + a + skip..e + b].iter_mut().enumerate() {
                *slot = first + i as u32;
            }
        }
        for d in &dirty {
            if d.old_state != NONE {
                table[d.old_state as usize] = d.new_state;
            }
        }

        // --- The rows. ---
        // The new state of every prefix of every added string (explicit ones are dirty, the others chain states).
        let mut add_states: Vec<Vec<u32>> = Vec::with_capacity(adding.len());
        for (ai, c) in adding.iter().enumerate() {
            let mut v = Vec::with_capacity(c.len() + 1);
            for dep in 0..=c.len() {
                let e = entry_of[ai].get(dep).copied().unwrap_or(NONE);
                let st = if e != NONE && dirty[e as usize].new == NewKind::Explicit {
                    dirty[e as usize].new_state
                } else {
                    chain_state(added_at[ai], dep).unwrap_or(GONE)
                };
                v.push(st);
            }
            add_states.push(v);
        }
        let idx = &self.vocab.index;
        let eog = self.vocab.eog_ids();
        let find_dirty = |path: &[u8]| -> Option<u32> {
            let i = dirty.binary_search_by(|d| d.path.cmp(path)).ok()?;
            (dirty[i].new == NewKind::Explicit).then_some(dirty[i].new_state)
        };
        // The new state of position `m[..d]` of new member `m` (explicit ones are dirty).
        let position = |m: u32, d: usize| -> Option<u32> {
            let s = new.get(m as usize);
            if d <= new.shared(m as usize) {
                find_dirty(&s[..d])
            } else {
                chain_state(m, d)
            }
        };
        // Calls f(code, length) for the text tokens that prefix `rest`.
        let prefix_codes = |rest: &[u8], f: &mut dyn FnMut(u32, usize)| tt.prefixes(rest, f);
        // The row of a dirty position that is explicit in the new automaton; `None` when a target is missing (the
        // automaton does not have the structure the fast path assumes).
        let dirty_row = |d: &Dirty| -> Option<NewRow> {
            let e = d.path.len();
            let is_member = d.new_hi > d.new_lo && new.get(d.new_lo as usize).len() == e;
            let mut pairs: Vec<(u32, u32)> = Vec::new();
            let mut extra: Vec<(u32, u32)> = Vec::new();
            let mut failed = false;
            let mut align = |m: u32, pairs: &mut Vec<(u32, u32)>| {
                if let Ok(ai) = added_at.binary_search(&m) {
                    let states = &add_states[ai];
                    prefix_codes(&adding[ai][e..], &mut |code, len| {
                        let t = states[e + len];
                        if t == GONE {
                            failed = true;
                        }
                        pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, t)));
                    });
                } else {
                    prefix_codes(&new.get(m as usize)[e..], &mut |code, len| match position(m, e + len) {
                        Some(t) => pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, t))),
                        None => failed = true,
                    });
                }
            };
            if d.old_explicit {
                // The old row through the table (targets that are gone dropped), then the tokens along the added
                // strings below (positions they create, or that a removed string held).
                for i in self.range(d.old_state as usize) {
                    let t = self.targets[i];
                    let t = if t == State::FINISHED.0 {
                        if is_member {
                            t
                        } else {
                            GONE
                        }
                    } else {
                        table[t as usize]
                    };
                    if t != GONE {
                        pairs.push((self.tokens[i], t));
                    }
                }
                let was_member = self.accepting[d.old_state as usize / 64] >> (d.old_state % 64) & 1 == 1;
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
            // A full compile's pairs are distinct (one target per token code, one pair per EOG id) and sorted. The
            // old row stays sorted through the table; the few new pairs are sorted and merged in.
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
            let single = if d.new_hi - d.new_lo == 1 { d.new_lo } else { NONE };
            Some(NewRow { pairs: merged, accepting: is_member, depth: e as u32, single })
        };
        // The dirty rows are independent of each other: computed in parallel.
        let rows: Option<Vec<Option<NewRow>>> = dirty
            .par_iter()
            .map(|d| if d.new == NewKind::Explicit { dirty_row(d).map(Some) } else { Some(None) })
            .collect();
        let Some(rows) = rows else { return Ok(None) };

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
            for (d, row) in dirty.iter().zip(&rows) {
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
                    ((b - a) as usize, (self.offsets[b as usize] - self.offsets[a as usize]) as usize)
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
            if !jobs.into_par_iter().all(|job| job.fill(self, &table, &old_to_new)) {
                return Ok(None);
            }
        }
        drop(pieces);
        drop(rows);
        drop(table);
        let accepting: Vec<u64> = accepting_bool
            .par_chunks(64)
            .map(|bits| bits.iter().enumerate().fold(0u64, |w, (i, &b)| w | (b as u64) << i))
            .collect();
        Ok(Some(Automaton::assemble(
            self.vocab.clone(),
            Explicit { offsets, tokens, targets, accepting, depth, single_member },
            Chains { base: chain_base, member: chain_member, first_depth: chain_first_depth },
            new_offsets,
            new_bytes,
            Vec::new(),
            0,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{TokenKind, Vocabulary};
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    /// Every byte a..e is a token, plus "ab", "abc", "bc"; EOG id 8 (the fast path), or without "e" (not).
    fn toy(with_e: bool) -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> =
            ["a", "b", "c", "d", "e", "ab", "abc", "bc"].iter().map(|s| s.as_bytes().to_vec()).collect();
        if !with_e {
            toks[4] = b"ee".to_vec();
        }
        toks.push(b"</s>".to_vec());
        let mut kinds = vec![TokenKind::Normal; 8];
        kinds.push(TokenKind::Control);
        Arc::new(Vocabulary::new(toks, kinds, &[8], Some(40)).unwrap())
    }

    fn word(rng: &mut rand::rngs::SmallRng) -> Vec<u8> {
        (0..rng.gen_range(0..6)).map(|_| b"abcde"[rng.gen_range(0..5)]).collect()
    }

    #[test]
    fn fast_path_equals_full_compile() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let o = CompileOptions::new().drop_unreachable(true);
        for with_e in [true, false] {
            let vocab = toy(with_e);
            let mut fast = 0;
            for _ in 0..2000 {
                let set: Vec<Vec<u8>> = (0..rng.gen_range(1..9)).map(|_| word(&mut rng)).collect();
                let add: Vec<Vec<u8>> = (0..rng.gen_range(0..4)).map(|_| word(&mut rng)).collect();
                let remove: Vec<Vec<u8>> = (0..rng.gen_range(0..4))
                    .map(|_| if rng.gen_bool(0.7) { set[rng.gen_range(0..set.len())].clone() } else { word(&mut rng) })
                    .collect();
                let Ok(a) = Automaton::compile(vocab.clone(), &set, &o) else { continue };
                let got = a.with_changes(&add, &remove, &o);
                let gone: Vec<&Vec<u8>> = remove.iter().filter(|r| !add.contains(r)).collect();
                let mut list: Vec<Vec<u8>> = add.clone();
                list.extend(set.iter().filter(|s| !gone.contains(s) && a.produces(s)).cloned());
                let want = Automaton::compile(vocab.clone(), &list, &o);
                match (&got, &want) {
                    (Ok(g), Ok(w)) => assert!(g.to_bytes() == w.to_bytes(), "{set:?} + {add:?} - {remove:?}"),
                    (Err(g), Err(w)) => assert_eq!(g.kind(), w.kind()),
                    _ => panic!("{set:?} + {add:?} - {remove:?}: {:?} / {:?}", got.err(), want.err()),
                }
                // Where the fast path applies, it must not fall back.
                let old = List { offsets: &a.member_offsets, bytes: &a.member_bytes };
                if with_e && want.is_ok() {
                    let mut adding: Vec<&[u8]> = add.iter().map(|s| &s[..]).collect();
                    adding.sort_unstable();
                    adding.dedup();
                    adding.retain(|s| !set.iter().any(|m| &m[..] == *s));
                    let mut removed: Vec<usize> =
                        gone.iter().filter_map(|r| (0..old.len()).find(|&i| old.get(i) == &r[..])).collect();
                    removed.sort_unstable();
                    removed.dedup();
                    let ins = insertion_points(&old, &adding);
                    assert!(a.update_in_place(&old, &adding, &ins, &removed, &o).unwrap().is_some(), "{set:?}");
                    fast += 1;
                }
            }
            assert!(!with_e || fast > 1000, "{fast}");
        }
    }
}
