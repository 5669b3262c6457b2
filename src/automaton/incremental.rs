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
//! `O(states + transitions)` memory passes (member list, chains, an old-to-new state table, the rows copied with
//! their targets renumbered), about 1/25 to 1/40 of a full compile, plus per changed string two narrowing binary
//! searches over the member lists, one walk, and the changed rows along its path (the rows near the root are
//! the large ones).

use super::*;

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

/// The explicit states of the new automaton, as they are laid out.
struct Rows {
    offsets: Vec<u32>,
    tokens: Vec<TokenId>,
    targets: Vec<u32>,
    accepting: Vec<bool>,
    depth: Vec<u32>,
    single_member: Vec<u32>,
}

impl Rows {
    /// Appends the clean old states `a..b`: tokens as they are, targets and members renumbered. `false` when a
    /// target is gone (a clean row never leads to a changed position; this would be a broken old automaton).
    fn copy_clean(&mut self, old: &Automaton, a: u32, b: u32, table: &[u32], member: &[u32]) -> bool {
        if a >= b {
            return true;
        }
        let (a, b) = (a as usize, b as usize);
        let (ta, tb) = (old.offsets[a] as usize, old.offsets[b] as usize);
        let shift = (self.tokens.len() as u32).wrapping_sub(ta as u32);
        self.tokens.extend_from_slice(&old.tokens[ta..tb]);
        let before = self.targets.len();
        self.targets
            .extend(old.targets[ta..tb].iter().map(|&t| if t == State::FINISHED.0 { t } else { table[t as usize] }));
        if self.targets[before..].contains(&GONE) {
            return false;
        }
        self.offsets.extend(old.offsets[a + 1..=b].iter().map(|&o| o.wrapping_add(shift)));
        self.accepting.extend((a..b).map(|s| old.accepting[s / 64] >> (s % 64) & 1 == 1));
        self.depth.extend_from_slice(&old.depth[a..b]);
        self.single_member.extend(old.single_member[a..b].iter().map(|&m| {
            if m == NONE {
                NONE
            } else {
                member[m as usize]
            }
        }));
        true
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
    ///
    /// `known` holds the ranges of `c[..e]` for `e < known.len()` (those of a string sharing that prefix).
    fn prefix_ranges(&self, c: &[u8], known: &[(u32, u32)]) -> Vec<(u32, u32)> {
        let mut out = Vec::with_capacity(c.len() + 1);
        if known.is_empty() {
            out.push((0, self.len() as u32));
        } else {
            out.extend_from_slice(known);
        }
        let (mut lo, mut hi) = (out.last().unwrap().0 as usize, out.last().unwrap().1 as usize);
        for (e, &b) in c.iter().enumerate().skip(out.len() - 1) {
            if lo < hi {
                // Within lo..hi every member starts with c[..e]; the one equal to c[..e] (if any) comes first.
                let first = lo
                    + partition(lo, hi, |i| {
                        let m = self.get(i);
                        m.len() <= e || m[e] < b
                    });
                let end = first
                    + partition(first, hi, |i| {
                        let m = self.get(i);
                        m[e] == b
                    });
                lo = first;
                hi = end;
            }
            out.push((lo as u32, hi as u32));
        }
        out
    }
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
        let old = List { offsets: &self.member_offsets, bytes: &self.member_bytes };
        // Effective changes: removed members (old indices) and added non-members (sorted, distinct).
        let mut adding: Vec<&[u8]> = add.iter().map(|s| s.as_ref()).collect();
        adding.sort_unstable();
        adding.dedup();
        let mut removing: Vec<&[u8]> = remove.iter().map(|s| s.as_ref()).collect();
        removing.sort_unstable();
        removing.dedup();
        let find = |s: &[u8]| -> Option<usize> {
            let i = partition(0, old.len(), |i| old.get(i) < s);
            (i < old.len() && old.get(i) == s).then_some(i)
        };
        let removed: Vec<usize> =
            removing.iter().filter(|s| adding.binary_search(s).is_err()).filter_map(|s| find(s)).collect();
        adding.retain(|s| find(s).is_none());

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
            if let Some(a) = self.update_in_place(&old, &adding, &removed, options)? {
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
        // Insertion point (old index) of each added string.
        let ins: Vec<usize> = adding.iter().map(|s| partition(0, k_old, |i| old.get(i) < *s)).collect();
        let mut new_offsets: Vec<u64> = Vec::with_capacity(k_new + 1);
        let mut new_bytes: Vec<u8> = Vec::with_capacity(n_bytes);
        let mut old_to_new = vec![NONE; k_old];
        let mut added_at: Vec<u32> = Vec::with_capacity(adding.len());
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
                let shift = new_bytes.len() as u64 - self.member_offsets[i];
                new_bytes.extend_from_slice(
                    &self.member_bytes[self.member_offsets[i] as usize..self.member_offsets[end] as usize],
                );
                new_offsets.extend(self.member_offsets[i + 1..=end].iter().map(|&o| o + shift));
                for (j, slot) in old_to_new[i..end].iter_mut().enumerate() {
                    *slot = (base + j) as u32;
                }
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
        let mut old_chain_to_new = vec![NONE; n_chains_old];
        chain_base.push(0);
        {
            let mut new_to_old: Vec<u32> = vec![NONE; k_new];
            for (o, &n) in old_to_new.iter().enumerate() {
                if n != NONE {
                    new_to_old[n as usize] = o as u32;
                }
            }
            let mut kp = 0usize; // old chain pointer
            let mut tp = 0usize; // touched pointer
            for (j, &o) in new_to_old.iter().enumerate() {
                let len = (new_offsets[j + 1] - new_offsets[j]) as usize;
                let mut old_chain = NONE;
                let mut old_shared = None;
                if o != NONE {
                    while kp < n_chains_old && (self.chain_member[kp] as usize) < o as usize {
                        kp += 1;
                    }
                    if kp < n_chains_old && self.chain_member[kp] == o {
                        old_chain = kp as u32;
                        old_shared = Some(self.chain_first_depth[kp] as usize - 1);
                    } else {
                        old_shared = Some(len);
                    }
                }
                while tp < touched.len() && (touched[tp] as usize) < j {
                    tp += 1;
                }
                let is_touched = tp < touched.len() && touched[tp] as usize == j;
                let shared = match old_shared {
                    Some(s) if !is_touched => s,
                    _ => new.shared(j),
                };
                if shared < len {
                    if old_chain != NONE {
                        old_chain_to_new[old_chain as usize] = chain_member.len() as u32;
                    }
                    chain_member.push(j as u32);
                    chain_first_depth.push(shared as u32 + 1);
                    chain_base.push(chain_base.last().unwrap() + (len - shared) as u32);
                }
            }
        }
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
        let mut prev_ro: Vec<(u32, u32)> = Vec::new();
        let mut prev_rn: Vec<(u32, u32)> = Vec::new();
        let mut walks: Vec<Option<u32>> = Vec::new();
        for (ci, &(c, added)) in changed.iter().enumerate() {
            let start = if ci == 0 { 0 } else { common(prev, c) + 1 };
            path_entries.truncate(start.min(path_entries.len()));
            path_entries.resize(start, NONE);
            prev = c;
            // Ranges and walk states of the prefix shared with the previous string are the same.
            let known = if ci == 0 { 0 } else { start };
            let ro = old.prefix_ranges(c, &prev_ro[..known]);
            let rn = new.prefix_ranges(c, &prev_rn[..known]);
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
            prev_ro = ro;
            prev_rn = rn;
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
        crate::string_trie::check_positions(n_positions, options.max_states)?;
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
        // Chain states: the same member's chain, shifted (positions that became explicit are dirty).
        for (k, &nk) in old_chain_to_new.iter().enumerate() {
            if nk == NONE {
                continue;
            }
            let (a, b) = (self.chain_base[k] as usize, self.chain_base[k + 1] as usize);
            let f_old = self.chain_first_depth[k] as usize;
            let f_new = chain_first_depth[nk as usize] as usize;
            let base_new = n_explicit + chain_base[nk as usize];
            let e = n_explicit_old as usize;
            for (i, slot) in table[e + a..e + b].iter_mut().enumerate() {
                let d = f_old + i;
                if d >= f_new {
                    *slot = base_new + (d - f_new) as u32;
                }
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
        let total_old = self.tokens.len();
        budget
            .charge((total_old + n_explicit as usize) * 8 + n_explicit as usize * 16, "the automaton's transitions")?;
        let mut out = Rows {
            offsets: Vec::with_capacity(n_explicit as usize + 1),
            tokens: Vec::with_capacity(total_old + total_old / 64 + 64),
            targets: Vec::with_capacity(total_old + total_old / 64 + 64),
            accepting: Vec::with_capacity(n_explicit as usize),
            depth: Vec::with_capacity(n_explicit as usize),
            single_member: Vec::with_capacity(n_explicit as usize),
        };
        out.offsets.push(0);
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut extra: Vec<(u32, u32)> = Vec::new();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        let mut s = 0u32;
        for d in &dirty {
            if !out.copy_clean(self, s, d.rank, &table, &old_to_new) {
                return Ok(None);
            }
            s = d.rank + d.old_explicit as u32;
            if d.new != NewKind::Explicit {
                continue;
            }
            let e = d.path.len();
            let is_member = d.new_hi > d.new_lo && new.get(d.new_lo as usize).len() == e;
            pairs.clear();
            extra.clear();
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
                return Ok(None);
            }
            // A full compile's pairs are distinct (one target per token code, one pair per EOG id) and sorted. The
            // old row stays sorted through the table; the few new pairs are sorted and merged in.
            extra.sort_unstable();
            extra.dedup();
            merged.clear();
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
            out.tokens.extend(merged.iter().map(|p| p.0));
            out.targets.extend(merged.iter().map(|p| p.1));
            out.offsets.push(out.tokens.len() as u32);
            out.accepting.push(is_member);
            out.depth.push(e as u32);
            out.single_member.push(if d.new_hi - d.new_lo == 1 { d.new_lo } else { NONE });
        }
        if !out.copy_clean(self, s, n_explicit_old, &table, &old_to_new) || out.depth.len() != n_explicit as usize {
            return Ok(None);
        }
        if out.tokens.len() >= u32::MAX as usize {
            return Err(Error::limit(format!(
                "the automaton needs {} transitions, over the limit of {}",
                out.tokens.len(),
                u32::MAX - 1
            )));
        }
        drop(table);
        let mut accepting = vec![0u64; out.accepting.len().div_ceil(64)];
        for (i, _) in out.accepting.iter().enumerate().filter(|(_, &a)| a) {
            accepting[i / 64] |= 1 << (i % 64);
        }
        let Rows { offsets, tokens, targets, depth, single_member, .. } = out;
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
    use crate::vocab::TokenKind;
    use rand::{Rng, SeedableRng};

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
                    assert!(a.update_in_place(&old, &adding, &removed, &o).unwrap().is_some(), "{set:?}");
                    fast += 1;
                }
            }
            assert!(!with_e || fast > 1000, "{fast}");
        }
    }
}
