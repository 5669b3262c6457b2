//! The frozen trie automaton: compile a set once, then decode with a plain integer state.
//!
//! Invariants of an [`Automaton`]:
//! - states are `0..n_states()` plus [`State::FINISHED`]; the start state is 0;
//! - every state can still complete a member (pruned: no token leads to a dead end), and every kept member
//!   is reachable from the start;
//! - state `s` allows exactly the tokens `tokens[offsets[s]..offsets[s + 1]]` (ascending, no repeats), and the
//!   token at position `i` leads to `targets[i]`; end-of-generation ids appear only in accepting states and
//!   lead to `FINISHED`;
//! - `FINISHED` allows only the end-of-generation ids and stays `FINISHED`.

use crate::align::{align_aho_corasick, align_token_trie, Edges};
use crate::budget::Budget;
use crate::error::{show_bytes, Error, ErrorKind, Result};
use crate::mask::{dense_row, fill_sparse};
use crate::string_trie::{StringTrie, NONE};
use crate::vocab::{TokenId, Vocabulary};
use bitvec::prelude::*;
use rayon::prelude::*;
use std::sync::Arc;

/// A decoding state: one integer, so a server keeps one `u32` per sequence and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct State(pub u32);

impl State {
    /// The state after an end-of-generation token.
    pub const FINISHED: State = State(u32::MAX);

    /// The state's number.
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// What a token does to a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The text goes on in this state.
    Next(State),
    /// An end-of-generation token ended a member.
    Finished,
}

/// Options of [`Automaton::compile`]. Build with `CompileOptions::new()` (or `default()`) and the setters;
/// the struct is `#[non_exhaustive]` so options can be added without breaking callers.
///
/// ```
/// let options = trie::CompileOptions::new().drop_unreachable(true).max_states(1_000_000);
/// assert_eq!(options.max_states, Some(1_000_000));
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Drop the strings that no token sequence of the vocabulary can produce (see [`Automaton::dropped`])
    /// instead of failing with [`ErrorKind::UnreachableString`].
    pub drop_unreachable: bool,
    /// How the trie is aligned with the vocabulary (both give the same automaton).
    pub alignment: AlignmentMethod,
    /// The most states the automaton may have, checked on the trie of the set (its node count, an upper bound
    /// on the states) before any alignment work: more is [`ErrorKind::LimitExceeded`]. `None`: only the 32-bit
    /// limits.
    pub max_states: Option<usize>,
    /// The most heap bytes the compile may allocate for the trie, the alignment and the automaton, checked
    /// before each large allocation: more is [`ErrorKind::LimitExceeded`] (never an abort). `None`: no bound.
    pub max_bytes: Option<usize>,
}

impl CompileOptions {
    /// The defaults: unreachable strings are errors, token-trie alignment, no bounds beyond the 32-bit limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`CompileOptions::drop_unreachable`].
    pub fn drop_unreachable(mut self, yes: bool) -> Self {
        self.drop_unreachable = yes;
        self
    }

    /// Sets [`CompileOptions::alignment`].
    pub fn alignment(mut self, method: AlignmentMethod) -> Self {
        self.alignment = method;
        self
    }

    /// Sets [`CompileOptions::max_states`].
    pub fn max_states(mut self, n: usize) -> Self {
        self.max_states = Some(n);
        self
    }

    /// Sets [`CompileOptions::max_bytes`].
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = Some(n);
        self
    }
}

/// How [`Automaton::compile`] finds, for every trie node, the tokens that spell a path from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlignmentMethod {
    /// Walk the string trie together with the vocabulary's token trie from every node (default; fastest here).
    #[default]
    TokenTrie,
    /// The paper's reduction: run the Aho-Corasick automaton of all token strings along the trie's paths. The
    /// automaton is built once per vocabulary, on first use.
    AhoCorasick,
}

/// The remaining text of the one member left below a state, and a token path that spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forced {
    /// The bytes still to come (empty at the end of the member).
    pub bytes: Vec<u8>,
    /// Tokens that spell `bytes` (greedy longest tokens); an end-of-generation token is not included.
    pub tokens: Vec<TokenId>,
}

/// A set of strings compiled against a vocabulary. Immutable, `Send + Sync`; keeps its vocabulary alive.
pub struct Automaton {
    vocab: Arc<Vocabulary>,
    /// CSR over states: allowed tokens (ascending) and the state each leads to.
    offsets: Vec<u32>,
    tokens: Vec<TokenId>,
    targets: Vec<u32>,
    accepting: BitVec<u64, Lsb0>,
    /// Depth (bytes of text so far) of each state.
    depth: Vec<u32>,
    /// The only member below each state, or `NONE` when several remain.
    single_member: Vec<u32>,
    /// Precomputed rows for states with many allowed tokens: (state, row), sorted by state.
    dense: Vec<(u32, Box<[u32]>)>,
    /// Members (sorted, distinct): `member_bytes[member_offsets[i]..member_offsets[i + 1]]`.
    member_offsets: Vec<usize>,
    member_bytes: Vec<u8>,
    /// Input indices of the strings dropped as unreachable (every copy of a duplicated one), ascending.
    dropped: Vec<usize>,
    /// Number of distinct members dropped.
    n_dropped_members: usize,
}

impl Automaton {
    /// Compiles `strings` (arbitrary bytes; duplicates and prefixes allowed; the empty string allowed) against
    /// `vocab`. Errors: an empty set ([`ErrorKind::EmptySet`]); a string no token sequence can produce
    /// ([`ErrorKind::UnreachableString`], naming it, unless `options.drop_unreachable`); sizes over the 32-bit
    /// limits ([`ErrorKind::LimitExceeded`]).
    pub fn compile<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        strings: &[S],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        let budget = Budget::new(options.max_bytes);
        let trie = StringTrie::build(strings, &budget, options.max_states)?;
        let edges = match options.alignment {
            AlignmentMethod::TokenTrie => align_token_trie(&trie, &vocab, &budget)?,
            AlignmentMethod::AhoCorasick => align_aho_corasick(&trie, &vocab, &budget)?,
        };
        freeze(vocab, trie, edges, options, &budget)
    }

    /// The vocabulary this automaton was compiled against.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The start state.
    pub fn start(&self) -> State {
        State(0)
    }

    /// Number of states (not counting `FINISHED`).
    pub fn n_states(&self) -> usize {
        self.depth.len()
    }

    /// Number of transitions (allowed (state, token) pairs) over all states.
    pub fn allowed_total(&self) -> usize {
        self.tokens.len()
    }

    /// Number of 32-bit words of a bitmask row: `ceil(n_vocab / 32)`.
    pub fn mask_words(&self) -> usize {
        self.vocab.mask_words()
    }

    /// Number of distinct members that can be produced.
    pub fn n_members(&self) -> usize {
        self.member_offsets.len() - 1 - self.n_dropped_members
    }

    /// Input indices of the strings dropped because the vocabulary cannot produce them (with
    /// [`CompileOptions::drop_unreachable`]), ascending.
    pub fn dropped(&self) -> &[usize] {
        &self.dropped
    }

    fn check(&self, state: State) -> Result<()> {
        if (state.0 as usize) < self.n_states() || state == State::FINISHED {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidState,
                format!("state {} is not a state of this automaton (it has {} states)", state.0, self.n_states()),
            ))
        }
    }

    #[inline]
    fn range(&self, state: State) -> std::ops::Range<usize> {
        self.offsets[state.0 as usize] as usize..self.offsets[state.0 as usize + 1] as usize
    }

    /// The tokens allowed in `state`, ascending, without copying. Empty for an invalid state.
    #[inline]
    pub fn allowed(&self, state: State) -> &[TokenId] {
        if state == State::FINISHED {
            return self.vocab.eog_ids();
        }
        if state.0 as usize >= self.n_states() {
            return &[];
        }
        &self.tokens[self.range(state)]
    }

    /// Whether a member may end in `state` (end-of-generation tokens are allowed there).
    pub fn is_accepting(&self, state: State) -> bool {
        state == State::FINISHED || self.accepting.get(state.0 as usize).map(|b| *b).unwrap_or(false)
    }

    /// The state after `token`, [`Step::Finished`] after an end-of-generation token, or an error:
    /// [`ErrorKind::TokenRejected`] when the token is not allowed, [`ErrorKind::InvalidState`] /
    /// [`ErrorKind::InvalidArgument`] for a bad state or token id.
    #[inline]
    pub fn advance(&self, state: State, token: TokenId) -> Result<Step> {
        if state == State::FINISHED {
            if self.vocab.is_eog(token) {
                return Ok(Step::Finished);
            }
            return Err(self.rejected(state, token));
        }
        self.check(state)?;
        let r = self.range(state);
        match self.tokens[r.clone()].binary_search(&token) {
            Ok(i) => {
                let t = self.targets[r.start + i];
                Ok(if t == State::FINISHED.0 { Step::Finished } else { Step::Next(State(t)) })
            }
            Err(_) => Err(self.rejected(state, token)),
        }
    }

    fn rejected(&self, state: State, token: TokenId) -> Error {
        if token as usize >= self.vocab.n_vocab() {
            return Error::invalid(format!(
                "token id {token} is out of range: the vocabulary has ids 0..{}",
                self.vocab.n_vocab()
            ));
        }
        let at = if state == State::FINISHED {
            "after the end of generation".to_string()
        } else {
            format!("in state {} (after {} bytes of text)", state.0, self.depth[state.0 as usize])
        };
        Error::new(
            ErrorKind::TokenRejected,
            format!(
                "token {token} {} is not allowed {at}; {} tokens are",
                show_bytes(self.vocab.token_bytes(token), 40),
                self.allowed(state).len()
            ),
        )
    }

    /// Writes the bitmask of `state` into `row` (at least [`Automaton::mask_words`] words; every word of `row`
    /// is written, bits past the vocabulary zero). [`ErrorKind::BufferTooSmall`] leaves `row` untouched.
    #[inline]
    pub fn fill_bitmask(&self, state: State, row: &mut [u32]) -> Result<()> {
        self.check(state)?;
        let words = self.mask_words();
        if row.len() < words {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("the bitmask has {} words but needs {words} (ceil({} / 32))", row.len(), self.vocab.n_vocab()),
            ));
        }
        self.fill_row(state, row);
        Ok(())
    }

    #[inline]
    fn fill_row(&self, state: State, row: &mut [u32]) {
        let allowed = self.allowed(state);
        if allowed.len() >= self.dense_threshold() {
            if let Ok(i) = self.dense.binary_search_by_key(&state.0, |(s, _)| *s) {
                let words = self.dense[i].1.len();
                row[..words].copy_from_slice(&self.dense[i].1);
                row[words..].fill(0);
                return;
            }
        }
        fill_sparse(allowed, row);
    }

    /// States with at least this many allowed tokens get a precomputed row.
    fn dense_threshold(&self) -> usize {
        (self.mask_words() / 4).max(64)
    }

    /// Fills one row per state: row `i` is `out[i * row_words..(i + 1) * row_words]`, `row_words` at least
    /// [`Automaton::mask_words`]. Rows are filled in parallel when there are many. All states are checked before
    /// anything is written.
    pub fn fill_bitmask_batch(&self, states: &[State], out: &mut [u32], row_words: usize) -> Result<()> {
        let words = self.mask_words();
        if row_words < words {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("rows of {row_words} words are too short: {words} needed"),
            ));
        }
        let out = batch_buffer(out, states.len(), row_words)?;
        for &s in states {
            self.check(s)?;
        }
        fill_rows(out, row_words, states, |row, &s| self.fill_row(s, row));
        Ok(())
    }

    /// Fills one row per `(automaton, state)` pair, for batches whose sequences follow different sets (a serving
    /// engine's batch): row `i` is `out[i * row_words..(i + 1) * row_words]`. A `None` automaton marks an
    /// unconstrained sequence: its row is all ones. `row_words` must be at least every automaton's
    /// [`Automaton::mask_words`]. Every pair is checked before anything is written. Parallel for large batches.
    pub fn fill_bitmask_rows(rows: &[(Option<&Automaton>, State)], out: &mut [u32], row_words: usize) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        if row_words == 0 {
            return Err(Error::invalid("row_words is 0: a bitmask row needs at least one word"));
        }
        let out = batch_buffer(out, rows.len(), row_words)?;
        for (i, &(a, s)) in rows.iter().enumerate() {
            if let Some(a) = a {
                if row_words < a.mask_words() {
                    return Err(Error::new(
                        ErrorKind::BufferTooSmall,
                        format!("rows of {row_words} words are too short for row {i}: {} needed", a.mask_words()),
                    ));
                }
                a.check(s).map_err(|e| Error::new(e.kind(), format!("row {i}: {}", e.message())))?;
            }
        }
        fill_rows(out, row_words, rows, |row, &(a, s)| match a {
            Some(a) => a.fill_row(s, row),
            None => row.fill(u32::MAX),
        });
        Ok(())
    }

    /// When only one member remains below `state`: the rest of its bytes and a token path spelling them, so an
    /// engine can jump forward. `None` when several members remain or for `FINISHED`.
    pub fn forced(&self, state: State) -> Option<Forced> {
        if state == State::FINISHED || state.0 as usize >= self.n_states() {
            return None;
        }
        let m = self.single_member[state.0 as usize];
        if m == NONE {
            return None;
        }
        let member = &self.member_bytes[self.member_offsets[m as usize]..self.member_offsets[m as usize + 1]];
        let bytes = member[self.depth[state.0 as usize] as usize..].to_vec();
        let mut tokens = Vec::new();
        let mut s = state;
        while (self.depth[s.0 as usize] as usize) < member.len() {
            // Every allowed text token leads to a live state on the member's path: take the longest.
            let r = self.range(s);
            let best = (r.start..r.end)
                .filter(|&i| self.targets[i] != State::FINISHED.0)
                .max_by_key(|&i| (self.vocab.token_bytes(self.tokens[i]).len(), std::cmp::Reverse(self.tokens[i])))?;
            tokens.push(self.tokens[best]);
            s = State(self.targets[best]);
        }
        Some(Forced { bytes, tokens })
    }

    /// The text produced so far in `state` is `depth(state)` bytes long.
    pub fn depth(&self, state: State) -> Option<usize> {
        self.depth.get(state.0 as usize).map(|&d| d as usize)
    }

    /// Heap bytes held by the automaton (not counting the shared vocabulary).
    pub fn memory_usage(&self) -> usize {
        (self.offsets.capacity() + self.tokens.capacity() + self.targets.capacity()) * 4
            + self.accepting.capacity() / 8
            + (self.depth.capacity() + self.single_member.capacity()) * 4
            + self.dense.iter().map(|(_, r)| r.len() * 4 + 16).sum::<usize>()
            + self.member_offsets.capacity() * 8
            + self.member_bytes.capacity()
            + self.dropped.capacity() * 8
    }
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton")
            .field("n_states", &self.n_states())
            .field("n_members", &self.n_members())
            .field("n_edges", &self.tokens.len())
            .field("memory_usage", &self.memory_usage())
            .finish()
    }
}

/// Prunes the alignment to live, reachable nodes and lays out the flat arrays.
fn freeze(
    vocab: Arc<Vocabulary>,
    trie: StringTrie,
    al: Edges,
    options: &CompileOptions,
    budget: &Budget,
) -> Result<Automaton> {
    let n = trie.n_nodes();
    budget.charge(n * 9, "pruning")?;
    // live[n]: some member can be completed from n with tokens. Targets are descendants (larger ids).
    let mut live = vec![false; n];
    for node in (0..n).rev() {
        live[node] = trie.end_member[node] != NONE || al.edges(node).any(|(_, t)| live[t as usize]);
    }
    // keep[n]: live and reachable from the root through live nodes.
    let mut keep = vec![false; n];
    keep[0] = live[0];
    for node in 0..n {
        if keep[node] {
            for (_, t) in al.edges(node) {
                if live[t as usize] {
                    keep[t as usize] = true;
                }
            }
        }
    }
    drop(live);
    // Members whose end node cannot be reached.
    let mut unreachable: Vec<usize> = (0..trie.n_members()).filter(|&m| !keep[trie.end_node(m) as usize]).collect();
    if !unreachable.is_empty() && (!options.drop_unreachable || unreachable.len() == trie.n_members()) {
        let names: Vec<String> = unreachable.iter().take(5).map(|&m| trie.describe_member(m)).collect();
        let more = if unreachable.len() > 5 { format!(" and {} more", unreachable.len() - 5) } else { String::new() };
        let all = if unreachable.len() == trie.n_members() { " (no member of the set can be produced)" } else { "" };
        return Err(Error::new(
            ErrorKind::UnreachableString,
            format!(
                "no sequence of tokens of this vocabulary produces {}{more}{all}: the vocabulary lacks tokens for \
                 some of its bytes; remove or rewrite these strings, or compile with drop_unreachable",
                names.join(", ")
            ),
        ));
    }
    // Every input index of a dropped member, duplicates included.
    let mut dropped: Vec<usize> = unreachable.iter().map(|&m| trie.member_input[m] as usize).collect();
    if !unreachable.is_empty() {
        dropped.extend(
            trie.duplicates
                .iter()
                .filter(|&&(m, _)| unreachable.binary_search(&(m as usize)).is_ok())
                .map(|&(_, input)| input as usize),
        );
    }
    dropped.sort_unstable();
    let n_dropped_members = unreachable.len();
    unreachable.clear();

    // State numbering: kept nodes in preorder.
    let mut state_of = vec![NONE; n];
    let mut kept_nodes = Vec::new();
    for node in (0..n).filter(|&node| keep[node]) {
        state_of[node] = kept_nodes.len() as u32;
        kept_nodes.push(node as u32);
    }
    let n_states = kept_nodes.len();
    let eog = vocab.eog_ids();
    let idx = &vocab.index;

    // Allowed tokens of every state, in parallel blocks of states, then concatenated.
    const BLOCK: usize = 4096;
    let blocks: Vec<(Vec<u32>, Vec<TokenId>, Vec<u32>)> = (0..n_states)
        .step_by(BLOCK)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|a| -> Result<(Vec<u32>, Vec<TokenId>, Vec<u32>)> {
            if budget.exhausted() {
                return Err(Error::limit("compiling stopped: max_bytes was exceeded"));
            }
            let b = (a + BLOCK).min(n_states);
            let mut counts = Vec::with_capacity(b - a);
            let mut tokens = Vec::new();
            let mut targets = Vec::new();
            let mut pairs: Vec<(u32, u32)> = Vec::new();
            for &node in &kept_nodes[a..b] {
                let node = node as usize;
                pairs.clear();
                for (p, t) in al.edges(node) {
                    let target = state_of[t as usize];
                    if target != NONE {
                        pairs.extend(idx.tokens_of(p as usize).iter().map(|&tok| (tok, target)));
                    }
                }
                if trie.end_member[node] != NONE {
                    pairs.extend(eog.iter().map(|&e| (e, State::FINISHED.0)));
                }
                pairs.sort_unstable();
                counts.push(pairs.len() as u32);
                tokens.extend(pairs.iter().map(|p| p.0));
                targets.extend(pairs.iter().map(|p| p.1));
            }
            // Charged twice: the block, then its copy into the final arrays.
            budget.charge(counts.len() * 8 + tokens.len() * 16, "the automaton's transitions")?;
            Ok((counts, tokens, targets))
        })
        .collect::<Result<_>>()?;
    let total: usize = blocks.iter().map(|b| b.1.len()).sum();
    if total >= u32::MAX as usize {
        return Err(Error::limit(format!(
            "the automaton needs {total} transitions, over the limit of {}",
            u32::MAX - 1
        )));
    }
    let mut offsets = Vec::with_capacity(n_states + 1);
    offsets.push(0u32);
    let mut tokens = Vec::with_capacity(total);
    let mut targets = Vec::with_capacity(total);
    for (counts, tok, tgt) in blocks {
        for c in counts {
            offsets.push(offsets.last().unwrap() + c);
        }
        tokens.extend_from_slice(&tok);
        targets.extend_from_slice(&tgt);
    }
    drop(al);

    // Accepting states, depths, and the single member below each state.
    let mut accepting = bitvec![u64, Lsb0; 0; n_states];
    let mut depth = Vec::with_capacity(n_states);
    for (s, &node) in kept_nodes.iter().enumerate() {
        accepting.set(s, trie.end_member[node as usize] != NONE);
        depth.push(trie.depth[node as usize]);
    }
    let single_member = single_members(&trie, &keep, &kept_nodes);

    let mut automaton = Automaton {
        vocab,
        offsets,
        tokens,
        targets,
        accepting,
        depth,
        single_member,
        dense: Vec::new(),
        member_offsets: trie.member_offsets,
        member_bytes: trie.member_bytes,
        dropped,
        n_dropped_members,
    };
    let threshold = automaton.dense_threshold();
    let words = automaton.mask_words();
    automaton.dense = (0..n_states as u32)
        .filter(|&s| automaton.allowed(State(s)).len() >= threshold)
        .map(|s| (s, dense_row(automaton.allowed(State(s)), words)))
        .collect();
    Ok(automaton)
}

/// For each kept node: the only reachable member in its subtree, or `NONE`.
fn single_members(trie: &StringTrie, keep: &[bool], kept_nodes: &[u32]) -> Vec<u32> {
    let n = trie.n_nodes();
    // count (saturated at 2) of reachable members per subtree, and one of them.
    let mut count = vec![0u8; n];
    let mut some = vec![NONE; n];
    for node in (0..n).rev() {
        let m = trie.end_member[node];
        if m != NONE && keep[node] {
            count[node] = (count[node] + 1).min(2);
            some[node] = m;
        }
        let p = trie.parent[node];
        if p != NONE && count[node] > 0 {
            count[p as usize] = (count[p as usize] + count[node]).min(2);
            some[p as usize] = some[node];
        }
    }
    kept_nodes.iter().map(|&node| if count[node as usize] == 1 { some[node as usize] } else { NONE }).collect()
}

/// The first `n_rows * row_words` words of `out`, or `BufferTooSmall` naming the sizes.
fn batch_buffer(out: &mut [u32], n_rows: usize, row_words: usize) -> Result<&mut [u32]> {
    let need = n_rows.checked_mul(row_words).ok_or_else(|| Error::invalid("batch size overflows"))?;
    if out.len() < need {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!("the batch buffer has {} words but {n_rows} rows of {row_words} need {need}", out.len()),
        ));
    }
    Ok(&mut out[..need])
}

/// Fills row `i` of `out` (rows of `row_words`, `row_words > 0`) from `items[i]`; in parallel for 64 rows or more.
fn fill_rows<T: Sync>(out: &mut [u32], row_words: usize, items: &[T], fill: impl Fn(&mut [u32], &T) + Sync) {
    if items.len() >= 64 {
        out.par_chunks_mut(row_words).zip(items.par_iter()).with_min_len(32).for_each(|(row, it)| fill(row, it));
    } else {
        out.chunks_mut(row_words).zip(items).for_each(|(row, it)| fill(row, it));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;

    /// Tokens: single letters a..e, "ab", "abc", "bc", EOG id 8.
    fn toy() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> =
            ["a", "b", "c", "d", "e", "ab", "abc", "bc"].iter().map(|s| s.as_bytes().to_vec()).collect();
        toks.push(b"</s>".to_vec());
        let mut kinds = vec![TokenKind::Normal; 8];
        kinds.push(TokenKind::Control);
        Arc::new(Vocabulary::new(toks, kinds, &[8], Some(40)).unwrap())
    }

    #[test]
    fn walks_a_small_set() {
        let a = Automaton::compile(toy(), &["abc", "ab", "bd"], &CompileOptions::default()).unwrap();
        let s0 = a.start();
        assert_eq!(a.allowed(s0), &[0, 1, 5, 6]);
        let Step::Next(s_ab) = a.advance(s0, 5).unwrap() else { panic!() };
        assert!(a.is_accepting(s_ab));
        assert_eq!(a.allowed(s_ab), &[2, 8]);
        assert_eq!(a.advance(s_ab, 8).unwrap(), Step::Finished);
        let Step::Next(s_abc) = a.advance(s_ab, 2).unwrap() else { panic!() };
        assert_eq!(a.allowed(s_abc), &[8]);
        assert_eq!(a.advance(s0, 3).unwrap_err().kind(), ErrorKind::TokenRejected);
        let mut row = vec![0u32; 2];
        a.fill_bitmask(s0, &mut row).unwrap();
        assert_eq!(row, [0b110_0011, 0]);
        assert_eq!(a.fill_bitmask(s0, &mut row[..1]).unwrap_err().kind(), ErrorKind::BufferTooSmall);
    }

    #[test]
    fn forced_continuation() {
        let a = Automaton::compile(toy(), &["abcab", "bd"], &CompileOptions::default()).unwrap();
        assert_eq!(a.forced(a.start()), None);
        let Step::Next(s) = a.advance(a.start(), 0).unwrap() else { panic!() };
        let f = a.forced(s).unwrap();
        assert_eq!(f.bytes, b"bcab");
        assert_eq!(f.tokens, vec![7, 5]);
    }

    #[test]
    fn unreachable_strings_are_named_or_dropped() {
        let e = Automaton::compile(toy(), &["abz", "ab"], &CompileOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnreachableString);
        assert!(e.message().contains("\"abz\""), "{e}");
        let a = Automaton::compile(toy(), &["abz", "ab"], &CompileOptions::new().drop_unreachable(true)).unwrap();
        assert_eq!(a.dropped(), &[0]);
        assert_eq!(a.n_members(), 1);
        // Every copy of a duplicated unreachable string is reported, and counted once as a member.
        let a =
            Automaton::compile(toy(), &["abz", "ab", "abz", "a", "abz"], &CompileOptions::new().drop_unreachable(true))
                .unwrap();
        assert_eq!(a.dropped(), &[0, 2, 4]);
        assert_eq!(a.n_members(), 2);
        let e = Automaton::compile(toy(), &["zz"], &CompileOptions::new().drop_unreachable(true)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnreachableString);
    }

    #[test]
    fn bounds_are_limit_errors() {
        let set = ["abcabc", "abd", "bc"];
        // The trie has 10 nodes: root, a, ab, abc, abca, abcab, abcabc, abd, b, bc.
        let e = Automaton::compile(toy(), &set, &CompileOptions::new().max_states(9)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        assert!(e.message().contains("max_states = 9"), "{e}");
        Automaton::compile(toy(), &set, &CompileOptions::new().max_states(10)).unwrap();
        for max in [0, 64, 200] {
            let e = Automaton::compile(toy(), &set, &CompileOptions::new().max_bytes(max)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{max}");
            assert!(e.message().contains("max_bytes"), "{e}");
        }
        Automaton::compile(toy(), &set, &CompileOptions::new().max_bytes(1 << 20)).unwrap();
    }

    #[test]
    fn dead_ends_are_pruned() {
        // "abz" can't be finished, so "ab"'s token must not lead into a state that only continues to z.
        let a = Automaton::compile(toy(), &["abcz", "abd"], &CompileOptions::new().drop_unreachable(true)).unwrap();
        // "abc" token (6) would lead into the dead "abc" prefix; only a, ab remain at the start.
        assert_eq!(a.allowed(a.start()), &[0, 5]);
    }
}
