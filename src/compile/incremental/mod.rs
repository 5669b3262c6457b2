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

use crate::automaton::{Automaton, Chains, CompileOptions, Derive, Explicit, State, Step};
use crate::compile::string_trie::NONE;
use crate::error::{Error, ErrorKind, Result};
use crate::util::budget::Budget;
use crate::util::packed::Ints;
use crate::vocab::TokenId;
use rayon::prelude::*;

mod chains;
mod dirty;
mod layout;
mod members;
mod number;
mod rows;
mod templated;

/// A new state number, or "this position is gone": an entry of the old-to-new state table and the new state of a
/// position being computed. Its own type, so "gone" is never mixed up with a target: `State::FINISHED` (a real
/// target, never stored here) or `NONE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
struct Slot(u32);

impl Slot {
    const GONE: Slot = Slot(u32::MAX);

    /// New state `s` (explicit or chain; below `State::FINISHED`).
    #[inline]
    fn state(s: u32) -> Slot {
        debug_assert!(s != u32::MAX, "FINISHED is not a table entry");
        Slot(s)
    }

    /// The new state, `None` when gone.
    #[inline]
    fn get(self) -> Option<u32> {
        (self != Slot::GONE).then_some(self.0)
    }
}

/// A sorted list of distinct members: `bytes[offsets[i]..offsets[i + 1]]`.
struct List<'a> {
    offsets: Ints<'a, u64>,
    bytes: &'a [u8],
}

impl<'a> List<'a> {
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    fn get(&self, i: usize) -> &'a [u8] {
        &self.bytes[self.offsets.get(i) as usize..self.offsets.get(i + 1) as usize]
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

/// The effective changes of a member list: the added strings that are not members (sorted, distinct) with their
/// insertion points, and the old indices of the removed members (ascending; a string both added and removed
/// stays).
pub(super) struct Changes<'a> {
    pub(super) adding: Vec<&'a [u8]>,
    pub(super) ins: Vec<usize>,
    pub(super) removed: Vec<usize>,
}

fn effective_changes<'a>(old: &List, add: &[&'a [u8]], remove: &[&[u8]]) -> Changes<'a> {
    let mut adding: Vec<&[u8]> = add.to_vec();
    adding.sort_unstable();
    adding.dedup();
    let mut removing: Vec<&[u8]> = remove.to_vec();
    removing.sort_unstable();
    removing.dedup();
    removing.retain(|s| adding.binary_search(s).is_err());
    // Where each string sorts among the members (binary searches over the member list: in parallel).
    let is_at = |s: &[u8], i: usize| i < old.len() && old.get(i) == s;
    let removed: Vec<usize> = insertion_points(old, &removing)
        .into_iter()
        .zip(&removing)
        .filter(|&(i, s)| is_at(s, i))
        .map(|(i, _)| i)
        .collect();
    let (adding, ins): (Vec<&[u8]>, Vec<usize>) =
        adding.iter().zip(insertion_points(old, &adding)).filter(|&(s, i)| !is_at(s, i)).map(|(&s, i)| (s, i)).unzip();
    Changes { adding, ins, removed }
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
    /// An automaton compiled with [`Automaton::compile_template`] (or loaded from such a file) is updated with its
    /// template: `add` and `remove` are members before rendering, and the result is what
    /// `compile_template(add ++ (members − remove), template, options)` gives, byte for byte, the members listed
    /// in the byte order of their segments (the ranks of `self`). So [`Automaton::member_at`] of the result names
    /// an index into `add` for an added string and `add.len() + j` for the `j`-th remaining member in rank order
    /// (see `src/compile/incremental/templated.rs`). An automaton loaded with [`Automaton::load_lazy`] is checked
    /// whole first (once).
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
        if self.values.is_some() {
            return Err(Error::invalid(
                "this automaton's members carry values: update it with with_changes_and_values (C: \
                 trie_automaton_with_values; Python: with_changes(values=...)), giving one value per added string",
            ));
        }
        self.changes(add, None, remove, options)
    }

    /// [`Automaton::with_changes`] of an automaton whose members carry values ([`Automaton::compile_with_values`],
    /// [`Automaton::compile_template_with_values`]): `add_values[i]` is the value of `add[i]`. The result is what
    /// the compile with values of `add ++ (members − remove)` and `add_values ++ (their values)` gives, byte for
    /// byte: a kept member keeps its value; an added string takes the value of its first copy in `add`, also when
    /// it was a member already (like a map insert; so re-adding a member with a new value changes its value).
    /// Errors: those of [`Automaton::with_changes`]; [`ErrorKind::InvalidArgument`] when `add_values` and `add`
    /// differ in length, or when this automaton was compiled without values.
    pub fn with_changes_and_values<A: AsRef<[u8]> + Sync, R: AsRef<[u8]>>(
        &self,
        add: &[A],
        add_values: &[u64],
        remove: &[R],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        crate::compile::freeze::check_values_len(add_values.len(), add.len(), "added strings")?;
        if self.values.is_none() {
            return Err(Error::invalid(
                "this automaton was compiled without values: update it without values (with_changes; C: \
                 trie_automaton_with), or compile it with values to give its members values",
            ));
        }
        self.changes(add, Some(add_values), remove, options)
    }

    /// The update, with the added strings' values when the members carry values.
    fn changes<A: AsRef<[u8]> + Sync, R: AsRef<[u8]>>(
        &self,
        add: &[A],
        add_values: Option<&[u64]>,
        remove: &[R],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        self.check_whole()?;
        if self.segments.is_some() {
            return self.with_changes_templated(add, add_values, remove, options);
        }
        let decoded = self.decoded_members();
        let old = self.member_list(&decoded);
        let add_list: Vec<&[u8]> = add.iter().map(|s| s.as_ref()).collect();
        let remove_list: Vec<&[u8]> = remove.iter().map(|s| s.as_ref()).collect();
        let c = effective_changes(&old, &add_list, &remove_list);
        if self.fast_path_fits(&old, &c) && add.len() < NONE as usize {
            if let Some(mut a) = self.update_in_place(&old, &c.adding, &c.ins, &c.removed, options)? {
                if add_values.is_none() {
                    return Ok(a);
                }
                if let Some(o) = members::origins(&a, &old, &add_list, &c) {
                    a.values = self.carried_values(&o, add_values);
                    return Ok(a);
                }
            }
        }
        self.recompile_with(&old, add, add_values, &c.removed, options)
    }

    /// The member table as one list: the members as stored, or `decoded` ([`Automaton::decoded_members`]) when
    /// they are front-coded.
    fn member_list<'a>(&'a self, decoded: &'a Option<(Vec<u64>, Vec<u8>)>) -> List<'a> {
        match decoded {
            Some((offsets, bytes)) => List { offsets: Ints::of(offsets), bytes },
            None => List { offsets: self.member_offsets.ints(), bytes: &self.member_bytes },
        }
    }

    /// The values of an update's members (see [`members::origins`]), when the members carry values.
    fn carried_values(
        &self,
        o: &members::Origins,
        add_values: Option<&[u64]>,
    ) -> Option<crate::util::array::Array<u64>> {
        let old = self.values.as_deref()?;
        Some(members::updated_values(o, old, add_values?).into())
    }

    /// The values of the list `add ++ kept` (`kept`: old ranks) that a full compile of an update is given, when
    /// the members carry values.
    fn list_values(&self, add_values: Option<&[u64]>, kept: &[usize]) -> Option<Vec<u64>> {
        let old = self.values.as_deref()?;
        Some(add_values?.iter().copied().chain(kept.iter().map(|&r| old[r])).collect())
    }

    /// Whether the fast path applies to these changes (see the module doc).
    fn fast_path_fits(&self, old: &List, c: &Changes) -> bool {
        let single = &self.vocab.index.single_byte;
        let fast = self.n_dropped_members == 0
            && (single.iter().all(|&b| b)
                || (old.bytes.iter().all(|&b| single[b as usize])
                    && c.adding.iter().all(|s| s.iter().all(|&b| single[b as usize]))));
        // Past about one change per 20 members the per-change work costs more than it saves (measured:
        // benches/incremental.rs); a full compile is then faster.
        let changes = c.adding.len() + c.removed.len();
        fast && (changes <= 64 || changes * 20 <= old.len())
    }

    /// The fallback: a full compile of `add ++ (members − removed)`.
    fn recompile_with<A: AsRef<[u8]> + Sync>(
        &self,
        old: &List,
        add: &[A],
        add_values: Option<&[u64]>,
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
            let dropped: Vec<bool> = (0..n).into_par_iter().map(|m| !self.produces(old.get(m))).collect();
            for (g, d) in gone.iter_mut().zip(dropped) {
                *g |= d;
            }
        }
        let kept: Vec<usize> = (0..n).filter(|&m| !gone[m]).collect();
        let mut list: Vec<&[u8]> = add.iter().map(|s| s.as_ref()).collect();
        list.extend(kept.iter().map(|&m| old.get(m)));
        let values = self.list_values(add_values, &kept);
        Automaton::compile_valued(self.vocab.clone(), &list, values.as_deref(), options)
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
            let i = self.tokens.slice(r.clone()).binary_search(tok).ok()?;
            s = self.targets.get(r.start + i);
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
        // The rows are copied from the old automaton's arrays: one that derives rows (large sets) or front-codes
        // its members is compiled again instead.
        if self.has_derived() || self.is_front_coded() {
            return Ok(None);
        }
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

        // The phases (one file each), in order; each `None` means the old automaton does not have the structure
        // the fast path assumes (the caller then compiles in full).
        let m = members::members(self, adding, ins, removed, n_bytes);
        debug_assert_eq!(m.list().len(), k_new);
        let Some(chains) = chains::chains(self, old, &m, removed, &budget)? else { return Ok(None) };
        let Some((mut dirty, entry_of)) = dirty::dirty_positions(self, old, adding, removed) else {
            return Ok(None);
        };
        debug_assert!(dirty.windows(2).all(|w| w[0].path < w[1].path));
        let Some(numbering) = number::number(self, &mut dirty, &chains, options)? else { return Ok(None) };
        let inputs = rows::RowInputs {
            this: self,
            new: m.list(),
            adding,
            added_at: &m.added_at,
            entry_of: &entry_of,
            dirty: &dirty,
            chains: &chains,
            numbering: &numbering,
        };
        let Some(rows) = rows::rows(&inputs) else { return Ok(None) };
        let (table, n_explicit) = (&numbering.table, numbering.n_explicit);
        let Some(explicit) = layout::layout(self, &dirty, &rows, table, n_explicit, &m.old_to_new, &budget)? else {
            return Ok(None);
        };
        drop((rows, numbering, entry_of));
        Ok(Some(Automaton::assemble(
            self.vocab.clone(),
            explicit,
            Chains { base: chains.base, member: chains.member, first_depth: chains.first_depth },
            m.offsets,
            m.bytes,
            Vec::new(),
            0,
            Derive::ByRows(options.derive_rows),
            options.byte_rows_limit(),
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

    /// The phases on their own: the member list keeps old members in runs around the changes, and the numbering
    /// maps every old state that survives to a distinct new one, GONE only for positions that went away.
    #[test]
    fn phases_on_their_own() {
        let v = toy(true);
        let old_set: Vec<&[u8]> = vec![b"ab", b"abd", b"bcd", b"c", b"dd"];
        let a = Automaton::compile(v.clone(), &old_set, &CompileOptions::new()).unwrap();
        let old = List { offsets: a.member_offsets.ints(), bytes: &a.member_bytes };
        let adding: Vec<&[u8]> = vec![b"abc", b"e"];
        let ins = insertion_points(&old, &adding);
        assert_eq!(ins, [1, 5]);
        let removed = [3usize]; // "c"
        let n_bytes = a.member_bytes.len() + 4 - 1;
        let m = members::members(&a, &adding, &ins, &removed, n_bytes);
        let list = m.list();
        let got: Vec<&[u8]> = (0..list.len()).map(|i| list.get(i)).collect();
        assert_eq!(got, [&b"ab"[..], b"abc", b"abd", b"bcd", b"dd", b"e"]);
        assert_eq!(m.added_at, [1, 5]);
        assert_eq!(m.old_to_new, [0, 2, 3, NONE, 4]);
        assert_eq!(m.runs, [(0, 1, 0), (1, 3, 2), (4, 5, 4)]);

        let budget = Budget::new(None);
        let chains = chains::chains(&a, &old, &m, &removed, &budget).unwrap().unwrap();
        let (mut dirty, _) = dirty::dirty_positions(&a, &old, &adding, &removed).unwrap();
        let numbering = number::number(&a, &mut dirty, &chains, &CompileOptions::new()).unwrap().unwrap();
        let full = Automaton::compile(v, &got, &CompileOptions::new()).unwrap();
        assert_eq!(numbering.n_explicit as usize, full.n_explicit());
        let mut seen: Vec<u32> = numbering.table.iter().filter_map(|s| s.get()).collect();
        let n_live = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), n_live, "two old states numbered alike");
        assert!(seen.iter().all(|&s| (s as usize) < full.n_states()));
        assert!(numbering.table.contains(&Slot::GONE), "the removed member's position is gone");
    }

    #[test]
    fn rows_merge_sorted_and_distinct() {
        assert_eq!(rows::merge(vec![(1, 5), (4, 2)], vec![(3, 1), (1, 5), (9, 0)]), [(1, 5), (3, 1), (4, 2), (9, 0)]);
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
                let old = List { offsets: a.member_offsets.ints(), bytes: &a.member_bytes };
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
