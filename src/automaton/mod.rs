//! The frozen trie automaton: compile a set once, then decode with a plain integer state.
//!
//! Two kinds of states (see `string_trie`, the set's byte trie):
//! - *explicit* states `0..n_explicit`: the trie's shared prefixes (and tails the vocabulary cannot spell byte
//!   by byte), materialised as CSR rows: state `s` allows exactly `tokens[offsets[s]..offsets[s + 1]]`
//!   (ascending, no repeats), the token at position `i` leading to `targets[i]`;
//! - *chain* states `n_explicit..n_states()`: a position `(member, depth)` in the unary tail of one member,
//!   numbered `n_explicit + chain_base[k] + depth - chain_first_depth[k]` for chain `k`. Nothing is stored per
//!   chain state: its tokens are the text tokens whose bytes are a prefix of the rest of the member (found by a
//!   walk of the vocabulary's token trie), plus the end-of-generation ids at the member's end.
//!
//! Invariants of an [`Automaton`]:
//! - states are `0..n_states()` plus [`State::FINISHED`]; the start state is 0;
//! - every state that can be reached can still complete a member (pruned: no token leads to a dead end), and
//!   every kept member is reachable from the start;
//! - end-of-generation ids are allowed exactly in accepting states and lead to `FINISHED`;
//! - `FINISHED` allows only the end-of-generation ids and stays `FINISHED`.

use crate::compile::align::{align_aho_corasick, align_token_trie, Edges, CHAIN};
use crate::compile::string_trie::{StringTrie, NONE};
use crate::error::{show_bytes, Error, ErrorKind, Result};
use crate::format::{ensure, Kind as FileKind, Reader, Writer};
use crate::util::array::Array;
use crate::util::budget::Budget;
use crate::util::mask::fill_sparse;
use crate::vocab::{TokenId, Vocabulary};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

mod incremental;
mod segments;

pub use segments::Crossing;
use segments::Segments;

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

/// The tokens allowed in a state, ascending: borrowed from the automaton for explicit states, computed for chain
/// states (a handful of ids, kept inline). Dereferences to `[TokenId]`.
#[derive(Clone, Debug)]
pub struct Allowed<'a>(AllowedRepr<'a>);

#[derive(Clone, Debug)]
enum AllowedRepr<'a> {
    Borrowed(&'a [TokenId]),
    Inline([TokenId; INLINE], u8),
    Heap(Vec<TokenId>),
}

/// Allowed lists of chain states up to this long are kept inline.
const INLINE: usize = 30;

impl<'a> Allowed<'a> {
    fn collect(mut ids: Vec<TokenId>) -> Allowed<'a> {
        ids.sort_unstable();
        if ids.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..ids.len()].copy_from_slice(&ids);
            Allowed(AllowedRepr::Inline(inline, ids.len() as u8))
        } else {
            Allowed(AllowedRepr::Heap(ids))
        }
    }
}

impl std::ops::Deref for Allowed<'_> {
    type Target = [TokenId];
    #[inline]
    fn deref(&self) -> &[TokenId] {
        match &self.0 {
            AllowedRepr::Borrowed(s) => s,
            AllowedRepr::Inline(a, n) => &a[..*n as usize],
            AllowedRepr::Heap(v) => v,
        }
    }
}

impl PartialEq<[TokenId]> for Allowed<'_> {
    fn eq(&self, other: &[TokenId]) -> bool {
        **self == *other
    }
}

impl<const N: usize> PartialEq<&[TokenId; N]> for Allowed<'_> {
    fn eq(&self, other: &&[TokenId; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<[TokenId; N]> for Allowed<'_> {
    fn eq(&self, other: &[TokenId; N]) -> bool {
        **self == other[..]
    }
}

impl PartialEq<Vec<TokenId>> for Allowed<'_> {
    fn eq(&self, other: &Vec<TokenId>) -> bool {
        **self == other[..]
    }
}

impl PartialEq<&[TokenId]> for Allowed<'_> {
    fn eq(&self, other: &&[TokenId]) -> bool {
        **self == **other
    }
}

impl PartialEq<Allowed<'_>> for Vec<TokenId> {
    fn eq(&self, other: &Allowed<'_>) -> bool {
        self[..] == **other
    }
}

impl PartialEq for Allowed<'_> {
    fn eq(&self, other: &Allowed<'_>) -> bool {
        **self == **other
    }
}

impl Eq for Allowed<'_> {}

impl<'b> IntoIterator for &'b Allowed<'_> {
    type Item = &'b TokenId;
    type IntoIter = std::slice::Iter<'b, TokenId>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A set of strings compiled against a vocabulary. Immutable, `Send + Sync`; keeps its vocabulary alive.
pub struct Automaton {
    vocab: Arc<Vocabulary>,
    /// CSR over the explicit states: allowed tokens (ascending) and the state each leads to.
    offsets: Array<u32>,
    tokens: Array<TokenId>,
    targets: Array<u32>,
    /// Bit `s` (of 64-bit words): explicit state `s` is accepting.
    accepting: Array<u64>,
    /// Depth (bytes of text so far) of each explicit state.
    depth: Array<u32>,
    /// The only member below each explicit state, or `NONE` when several remain.
    single_member: Array<u32>,
    /// Precomputed rows for explicit states with many allowed tokens: `dense_states` ascending, row `i` is
    /// `dense_rows[i * mask_words..(i + 1) * mask_words]`.
    dense_states: Array<u32>,
    dense_rows: Array<u32>,
    /// Chains: chain `k` covers states `n_explicit + chain_base[k] .. n_explicit + chain_base[k + 1]`, the
    /// positions of member `chain_member[k]` at depths `chain_first_depth[k]..`.
    chain_base: Array<u32>,
    chain_member: Array<u32>,
    chain_first_depth: Array<u32>,
    /// Members (sorted, distinct): `member_bytes[member_offsets[i]..member_offsets[i + 1]]`.
    member_offsets: Array<u64>,
    member_bytes: Array<u8>,
    /// Input indices of the strings dropped as unreachable (every copy of a duplicated one), ascending.
    dropped: Vec<usize>,
    /// Number of distinct members dropped.
    n_dropped_members: usize,
    /// Present for automata compiled with a [`crate::Template`] (members are then whole segments).
    segments: Option<Segments>,
}

// Section tags of a saved automaton.
const A_META: u32 = 1;
const A_OFFSETS: u32 = 2;
const A_TOKENS: u32 = 3;
const A_TARGETS: u32 = 4;
const A_ACCEPTING: u32 = 5;
const A_DEPTH: u32 = 6;
const A_SINGLE: u32 = 7;
const A_DENSE_STATES: u32 = 8;
const A_DENSE_ROWS: u32 = 9;
const A_CHAIN_BASE: u32 = 10;
const A_CHAIN_MEMBER: u32 = 11;
const A_CHAIN_DEPTH: u32 = 12;
const A_MEMBER_OFFSETS: u32 = 13;
const A_MEMBER_BYTES: u32 = 14;
const A_DROPPED: u32 = 15;

/// What a state is.
enum Kind {
    Explicit(usize),
    /// A chain state: member, depth.
    Chain(usize, usize),
}

impl Automaton {
    /// Compiles `strings` (arbitrary bytes; duplicates and prefixes allowed; the empty string allowed) against
    /// `vocab`. Errors: an empty set ([`ErrorKind::EmptySet`]); a string no token sequence can produce
    /// ([`ErrorKind::UnreachableString`], naming it, unless `options.drop_unreachable`); sizes over the 32-bit
    /// limits or the options' bounds ([`ErrorKind::LimitExceeded`]).
    pub fn compile<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        strings: &[S],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        let budget = Budget::new(options.max_bytes);
        let trie = StringTrie::build(strings, &vocab.index.single_byte, &budget, options.max_states)?;
        let edges = match options.alignment {
            AlignmentMethod::TokenTrie => align_token_trie(&trie, &vocab, &budget)?,
            AlignmentMethod::AhoCorasick => align_aho_corasick(&trie, &vocab, &budget)?,
        };
        freeze(vocab, trie, edges, options, &budget, false)
    }

    /// The vocabulary this automaton was compiled against.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The start state.
    pub fn start(&self) -> State {
        State(0)
    }

    /// Number of states (not counting `FINISHED`): explicit and chain states.
    pub fn n_states(&self) -> usize {
        self.n_explicit() + *self.chain_base.last().unwrap() as usize
    }

    /// Number of explicit (materialised) states; the others are chain states.
    pub fn n_explicit(&self) -> usize {
        self.depth.len()
    }

    /// Number of materialised transitions (allowed (state, token) pairs of the explicit states).
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
    /// [`CompileOptions::drop_unreachable`]), ascending; every copy of a duplicated string is listed.
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

    /// Member `m`'s bytes.
    #[inline]
    fn member(&self, m: usize) -> &[u8] {
        &self.member_bytes[self.member_offsets[m] as usize..self.member_offsets[m + 1] as usize]
    }

    /// What `state` (`< n_states()`) is.
    #[inline]
    fn kind(&self, state: State) -> Kind {
        let s = state.0 as usize;
        let e = self.n_explicit();
        if s < e {
            return Kind::Explicit(s);
        }
        let idx = (s - e) as u32;
        let k = self.chain_base.partition_point(|&b| b <= idx) - 1;
        Kind::Chain(self.chain_member[k] as usize, (self.chain_first_depth[k] + idx - self.chain_base[k]) as usize)
    }

    /// The state of member `m`'s chain position at depth `d`, given the state of a position at depth `d0`.
    #[inline]
    fn chain_step(state: State, from_depth: usize, to_depth: usize) -> State {
        State(state.0 + (to_depth - from_depth) as u32)
    }

    #[inline]
    fn range(&self, s: usize) -> std::ops::Range<usize> {
        self.offsets[s] as usize..self.offsets[s + 1] as usize
    }

    /// Calls `f(tokens, length)` for every text-token byte string that is a prefix of `rest` (with the ids that
    /// stand for it), shortest first.
    #[inline]
    fn prefix_tokens(&self, rest: &[u8], mut f: impl FnMut(&[TokenId], usize)) {
        let index = &self.vocab.index;
        index.trie.prefixes(rest, |code, len| f(index.code_tokens(&code), len));
    }

    /// The tokens allowed in `state`, ascending (without copying for explicit states). Empty for an invalid
    /// state.
    #[inline]
    pub fn allowed(&self, state: State) -> Allowed<'_> {
        if state == State::FINISHED {
            return Allowed(AllowedRepr::Borrowed(self.vocab.eog_ids()));
        }
        if state.0 as usize >= self.n_states() {
            return Allowed(AllowedRepr::Borrowed(&[]));
        }
        match self.kind(state) {
            Kind::Explicit(s) => Allowed(AllowedRepr::Borrowed(&self.tokens[self.range(s)])),
            Kind::Chain(m, d) => {
                let rest = &self.member(m)[d..];
                let mut ids = Vec::new();
                self.prefix_tokens(rest, |t, _| ids.extend_from_slice(t));
                if rest.is_empty() && !self.is_open() {
                    ids.extend_from_slice(self.vocab.eog_ids());
                }
                Allowed::collect(ids)
            }
        }
    }

    /// Whether a member may end in `state` (end-of-generation tokens are allowed there).
    pub fn is_accepting(&self, state: State) -> bool {
        if state == State::FINISHED {
            return true;
        }
        if state.0 as usize >= self.n_states() {
            return false;
        }
        match self.kind(state) {
            Kind::Explicit(s) => self.accepting[s / 64] >> (s % 64) & 1 == 1,
            Kind::Chain(m, d) => d == self.member(m).len(),
        }
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
        match self.kind(state) {
            Kind::Explicit(s) => {
                let r = self.range(s);
                match self.tokens[r.clone()].binary_search(&token) {
                    Ok(i) => {
                        let t = self.targets[r.start + i];
                        Ok(if t == State::FINISHED.0 { Step::Finished } else { Step::Next(State(t)) })
                    }
                    Err(_) => Err(self.rejected(state, token)),
                }
            }
            Kind::Chain(m, d) => {
                let rest = &self.member(m)[d..];
                if self.vocab.is_eog(token) {
                    return if rest.is_empty() && !self.is_open() {
                        Ok(Step::Finished)
                    } else {
                        Err(self.rejected(state, token))
                    };
                }
                let bytes = self.vocab.token_bytes(token);
                if self.vocab.is_text_token(token) && rest.starts_with(bytes) {
                    Ok(Step::Next(Self::chain_step(state, d, d + bytes.len())))
                } else {
                    Err(self.rejected(state, token))
                }
            }
        }
    }

    fn rejected(&self, state: State, token: TokenId) -> Error {
        if token as usize >= self.vocab.n_vocab() {
            return Error::invalid(format!(
                "token id {token} is out of range: the vocabulary has ids 0..{}",
                self.vocab.n_vocab()
            ));
        }
        let at = match self.depth(state) {
            None => "after the end of generation".to_string(),
            Some(d) => format!("in state {} (after {d} bytes of text)", state.0),
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
        if state == State::FINISHED {
            return fill_sparse(self.vocab.eog_ids(), row);
        }
        match self.kind(state) {
            Kind::Explicit(s) => {
                let allowed = &self.tokens[self.range(s)];
                if allowed.len() >= self.dense_threshold() {
                    if let Ok(i) = self.dense_states.binary_search(&(s as u32)) {
                        let words = self.mask_words();
                        row[..words].copy_from_slice(&self.dense_rows[i * words..(i + 1) * words]);
                        row[words..].fill(0);
                        return;
                    }
                }
                fill_sparse(allowed, row);
            }
            Kind::Chain(m, d) => {
                row.fill(0);
                let rest = &self.member(m)[d..];
                let set = |row: &mut [u32], ids: &[TokenId]| {
                    for &t in ids {
                        row[(t >> 5) as usize] |= 1u32 << (t & 31);
                    }
                };
                self.prefix_tokens(rest, |t, _| set(row, t));
                if rest.is_empty() && !self.is_open() {
                    set(row, self.vocab.eog_ids());
                }
            }
        }
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

    /// The only member left below `state`, if one is.
    fn single_member_of(&self, state: State) -> Option<usize> {
        if state == State::FINISHED || state.0 as usize >= self.n_states() {
            return None;
        }
        match self.kind(state) {
            Kind::Explicit(s) => (self.single_member[s] != NONE).then_some(self.single_member[s] as usize),
            Kind::Chain(m, _) => Some(m),
        }
    }

    /// When only one member remains below `state`: the rest of its bytes and a token path spelling them, so an
    /// engine can jump forward. `None` when several members remain or for `FINISHED`.
    pub fn forced(&self, state: State) -> Option<Forced> {
        let m = self.single_member_of(state)?;
        let member = self.member(m);
        // (`get`: a loaded file's single-member table is not checked against depths; nothing else reads it.)
        let bytes = member.get(self.depth(state)?..)?.to_vec();
        let mut tokens = Vec::new();
        let mut s = state;
        let mut depth = self.depth(s)?;
        while depth < member.len() {
            // Every allowed text token leads to a live state on the member's path: take the longest.
            let best = self
                .allowed(s)
                .iter()
                .copied()
                .filter(|&t| !self.vocab.is_eog(t))
                .max_by_key(|&t| (self.vocab.token_bytes(t).len(), std::cmp::Reverse(t)))?;
            tokens.push(best);
            match self.advance(s, best).ok()? {
                Step::Next(next) => s = next,
                Step::Finished => return None,
            }
            // Every step of a compiled automaton adds the token's bytes to the depth. A loaded file's transitions
            // are only checked to stay inside the automaton, so a crafted one could loop (a state leading to
            // itself): stop unless the walk makes progress, which bounds it by the member's length.
            let next_depth = self.depth(s)?;
            if next_depth <= depth {
                return None;
            }
            depth = next_depth;
        }
        Some(Forced { bytes, tokens })
    }

    /// The text produced so far in `state` is `depth(state)` bytes long (`None` for `FINISHED` and invalid
    /// states).
    pub fn depth(&self, state: State) -> Option<usize> {
        if state.0 as usize >= self.n_states() {
            return None;
        }
        Some(match self.kind(state) {
            Kind::Explicit(s) => self.depth[s] as usize,
            Kind::Chain(_, d) => d,
        })
    }

    /// Bytes held by the automaton (heap, or mapped file pages after [`Automaton::load`]), not counting the shared
    /// vocabulary.
    pub fn memory_usage(&self) -> usize {
        self.offsets.size_bytes()
            + self.tokens.size_bytes()
            + self.targets.size_bytes()
            + self.accepting.size_bytes()
            + self.depth.size_bytes()
            + self.single_member.size_bytes()
            + self.dense_states.size_bytes()
            + self.dense_rows.size_bytes()
            + self.chain_base.size_bytes()
            + self.chain_member.size_bytes()
            + self.chain_first_depth.size_bytes()
            + self.member_offsets.size_bytes()
            + self.member_bytes.size_bytes()
            + self.dropped.capacity() * std::mem::size_of::<usize>()
            + self.segments.as_ref().map_or(0, Segments::memory_usage)
    }
}

impl Automaton {
    /// The bytes of each array behind [`Automaton::memory_usage`], by name (for the size benchmarks).
    #[doc(hidden)]
    pub fn memory_parts(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("offsets", self.offsets.size_bytes()),
            ("tokens", self.tokens.size_bytes()),
            ("targets", self.targets.size_bytes()),
            ("accepting", self.accepting.size_bytes()),
            ("depth", self.depth.size_bytes()),
            ("single_member", self.single_member.size_bytes()),
            ("dense_states", self.dense_states.size_bytes()),
            ("dense_rows", self.dense_rows.size_bytes()),
            ("chain_base", self.chain_base.size_bytes()),
            ("chain_member", self.chain_member.size_bytes()),
            ("chain_first_depth", self.chain_first_depth.size_bytes()),
            ("member_offsets", self.member_offsets.size_bytes()),
            ("member_bytes", self.member_bytes.size_bytes()),
            ("dropped", self.dropped.capacity() * std::mem::size_of::<usize>()),
        ]
    }
}

impl Automaton {
    /// Saves the automaton to `path` (written atomically: a temporary file renamed into place). The file is the
    /// frozen arrays themselves, tagged with the vocabulary's [`Vocabulary::fingerprint`]: [`Automaton::load`]
    /// maps it back in milliseconds, and processes loading the same file share its pages.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.writer().write(path.as_ref())
    }

    /// The saved form of the automaton, in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.writer().to_bytes()
    }

    fn writer(&self) -> Writer {
        let mut w = Writer::new(FileKind::Automaton, self.vocab.fingerprint());
        let dropped: Vec<u64> = self.dropped.iter().map(|&d| d as u64).collect();
        w.section(A_META, &[self.vocab.n_vocab() as u64, self.n_dropped_members as u64]);
        w.section(A_OFFSETS, &self.offsets);
        w.section(A_TOKENS, &self.tokens);
        w.section(A_TARGETS, &self.targets);
        w.section(A_ACCEPTING, &self.accepting);
        w.section(A_DEPTH, &self.depth);
        w.section(A_SINGLE, &self.single_member);
        w.section(A_DENSE_STATES, &self.dense_states);
        w.section(A_DENSE_ROWS, &self.dense_rows);
        w.section(A_CHAIN_BASE, &self.chain_base);
        w.section(A_CHAIN_MEMBER, &self.chain_member);
        w.section(A_CHAIN_DEPTH, &self.chain_first_depth);
        w.section(A_MEMBER_OFFSETS, &self.member_offsets);
        w.section(A_MEMBER_BYTES, &self.member_bytes);
        w.section(A_DROPPED, &dropped);
        if let Some(seg) = &self.segments {
            seg.write(&mut w);
        }
        w
    }

    /// Whether the automaton's arrays live in a file mapping ([`Automaton::load`]) rather than on the heap.
    pub fn is_mapped(&self) -> bool {
        self.tokens.is_mapped()
    }

    /// Loads an automaton saved by [`Automaton::save`] for use with `vocab`: the file is memory-mapped and checked
    /// (header, checksum, and every array against the others, so that no lookup can leave its bounds), not
    /// rebuilt. Errors: [`ErrorKind::Io`]; [`ErrorKind::MalformedFile`] (truncated, corrupt, another format
    /// version or byte order, not an automaton); [`ErrorKind::VocabularyMismatch`] when the file was compiled
    /// against another vocabulary. The file must not change while loaded (truncating it raises SIGBUS; see the
    /// README's "Limits"): replace it by renaming a new file over it, as [`Automaton::save`] does.
    pub fn load(vocab: Arc<Vocabulary>, path: impl AsRef<Path>) -> Result<Automaton> {
        let path = path.as_ref();
        Self::from_reader(vocab, Reader::open(path, FileKind::Automaton)?)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Like [`Automaton::load`], from the bytes of a saved automaton (copied).
    pub fn from_bytes(vocab: Arc<Vocabulary>, bytes: &[u8]) -> Result<Automaton> {
        Self::from_reader(vocab, Reader::from_bytes(bytes, FileKind::Automaton)?)
    }

    fn from_reader(vocab: Arc<Vocabulary>, r: Reader) -> Result<Automaton> {
        if r.fingerprint() != vocab.fingerprint() {
            return Err(Error::new(
                ErrorKind::VocabularyMismatch,
                format!(
                    "the automaton was compiled against another vocabulary (fingerprint {:032x}, this one is \
                     {:032x}): compile the set again for this vocabulary",
                    r.fingerprint(),
                    vocab.fingerprint()
                ),
            ));
        }
        let meta: Array<u64> = r.array(A_META)?;
        ensure(meta.len() == 2 && meta[0] == vocab.n_vocab() as u64, || "automaton metadata".into())?;
        let a = Automaton {
            offsets: r.array(A_OFFSETS)?,
            tokens: r.array(A_TOKENS)?,
            targets: r.array(A_TARGETS)?,
            accepting: r.array(A_ACCEPTING)?,
            depth: r.array(A_DEPTH)?,
            single_member: r.array(A_SINGLE)?,
            dense_states: r.array(A_DENSE_STATES)?,
            dense_rows: r.array(A_DENSE_ROWS)?,
            chain_base: r.array(A_CHAIN_BASE)?,
            chain_member: r.array(A_CHAIN_MEMBER)?,
            chain_first_depth: r.array(A_CHAIN_DEPTH)?,
            member_offsets: r.array(A_MEMBER_OFFSETS)?,
            member_bytes: r.array(A_MEMBER_BYTES)?,
            dropped: r.array::<u64>(A_DROPPED)?.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect(),
            n_dropped_members: usize::try_from(meta[1]).unwrap_or(usize::MAX),
            segments: Segments::read(&r)?,
            vocab,
        };
        a.validate()?;
        Ok(a)
    }

    /// Checks a loaded automaton's arrays against each other and its vocabulary: every index used when decoding
    /// is in bounds, so a crafted or damaged file is an error and never a crash.
    fn validate(&self) -> Result<()> {
        let n_members = self.member_offsets.len().checked_sub(1);
        ensure(n_members.is_some() && self.member_offsets[0] == 0, || "member offsets".into())?;
        let n_members = n_members.unwrap();
        ensure(
            self.member_offsets.windows(2).all(|w| w[0] <= w[1])
                && self.member_offsets[n_members] == self.member_bytes.len() as u64
                && self.n_dropped_members <= n_members,
            || "member offsets are not ascending within the member bytes".into(),
        )?;
        // Members sorted and distinct: `with_changes` binary-searches them.
        let unsorted =
            (1..n_members).into_par_iter().with_min_len(1 << 14).find_any(|&i| self.member(i - 1) >= self.member(i));
        ensure(unsorted.is_none(), || {
            format!("members {} and {} are not ascending and distinct", unsorted.unwrap() - 1, unsorted.unwrap())
        })?;
        let e = self.depth.len();
        ensure(
            e >= 1
                && self.offsets.len() == e + 1
                && self.single_member.len() == e
                && self.accepting.len() == e.div_ceil(64)
                && self.offsets[0] == 0
                && self.offsets.windows(2).all(|w| w[0] <= w[1])
                && self.offsets[e] as usize == self.tokens.len()
                && self.targets.len() == self.tokens.len(),
            || "explicit state tables of inconsistent sizes".into(),
        )?;
        let k = self.chain_member.len();
        ensure(
            self.chain_base.len() == k + 1
                && self.chain_first_depth.len() == k
                && self.chain_base[0] == 0
                && self.chain_base.windows(2).all(|w| w[0] < w[1])
                && self.chain_member.windows(2).all(|w| w[0] < w[1])
                && self.chain_member.iter().all(|&m| (m as usize) < n_members),
            || "chain tables".into(),
        )?;
        let bad_chain = (0..k).into_par_iter().with_min_len(1 << 14).find_any(|&i| {
            let m = self.chain_member[i] as usize;
            let len = self.member_offsets[m + 1] - self.member_offsets[m];
            let (first, n) = (self.chain_first_depth[i] as u64, (self.chain_base[i + 1] - self.chain_base[i]) as u64);
            !(first >= 1 && first + n - 1 == len)
        });
        ensure(bad_chain.is_none(), || format!("chain {} does not end at its member's end", bad_chain.unwrap()))?;
        let n_states = e as u64 + self.chain_base[k] as u64;
        ensure(n_states < State::FINISHED.0 as u64, || "too many states".into())?;
        // The transitions, in parallel blocks of states: ids of the vocabulary, ascending within each state, and
        // targets inside the automaton.
        let n_vocab = self.vocab.n_vocab() as u64;
        const BLOCK: usize = 1 << 14;
        let bad = (0..e.div_ceil(BLOCK)).into_par_iter().find_any(|&b| {
            (b * BLOCK..((b + 1) * BLOCK).min(e)).any(|s| {
                let r = self.range(s);
                let toks = &self.tokens[r.clone()];
                !(toks.windows(2).all(|w| w[0] < w[1])
                    && toks.last().map_or(true, |&t| (t as u64) < n_vocab)
                    && self.targets[r].iter().all(|&t| t == State::FINISHED.0 || (t as u64) < n_states))
            })
        });
        ensure(bad.is_none(), || "a state's tokens are not ascending ids of the vocabulary, or lead outside".into())?;
        ensure(self.depth.iter().all(|&d| (d as usize) <= self.member_bytes.len()), || "state depths".into())?;
        ensure(self.single_member.iter().all(|&m| m == NONE || (m as usize) < n_members), || "single members".into())?;
        let words = self.mask_words();
        ensure(
            self.dense_states.windows(2).all(|w| w[0] < w[1])
                && self.dense_states.iter().all(|&s| (s as usize) < e)
                && self.dense_rows.len() == self.dense_states.len() * words,
            || "dense rows".into(),
        )?;
        // A precomputed row must be its state's allowed list (masks and allowed lists never disagree).
        let bad_row = (0..self.dense_states.len()).into_par_iter().find_any(|&i| {
            let allowed = &self.tokens[self.range(self.dense_states[i] as usize)];
            let row = &self.dense_rows[i * words..(i + 1) * words];
            row.iter().map(|w| w.count_ones() as usize).sum::<usize>() != allowed.len()
                || !allowed.iter().all(|&t| row[(t >> 5) as usize] >> (t & 31) & 1 == 1)
        });
        ensure(bad_row.is_none(), || {
            format!("dense row {} differs from its state's allowed tokens", bad_row.unwrap())
        })?;
        if let Some(seg) = &self.segments {
            seg.validate(self)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton")
            .field("n_states", &self.n_states())
            .field("n_explicit", &self.n_explicit())
            .field("n_members", &self.n_members())
            .field("n_edges", &self.tokens.len())
            .field("memory_usage", &self.memory_usage())
            .finish()
    }
}

/// Prunes the alignment to live, reachable explicit nodes, numbers the states and lays out the flat arrays.
/// `open`: no end-of-generation tokens where a member ends (a template's [`crate::End::Open`]).
pub(crate) fn freeze(
    vocab: Arc<Vocabulary>,
    trie: StringTrie,
    al: Edges,
    options: &CompileOptions,
    budget: &Budget,
    open: bool,
) -> Result<Automaton> {
    let n = trie.n_nodes();
    let n_chain = trie.n_chain_positions();
    budget.charge(n * 9 + n_chain / 8, "pruning")?;
    // live[n]: some member can be completed from explicit node n with tokens. Chain positions are all live;
    // explicit targets are descendants (larger ids).
    let mut live = vec![false; n];
    for node in (0..n).rev() {
        live[node] = trie.end_member[node] != NONE || al.edges(node).any(|(_, t)| t & CHAIN != 0 || live[t as usize]);
    }
    // keep[n]: live and reachable from the root through live nodes; entered: chain positions some kept node's
    // token leads to.
    let mut keep = vec![false; n];
    let mut entered = vec![false; n_chain];
    keep[0] = live[0];
    for node in 0..n {
        if keep[node] {
            for (_, t) in al.edges(node) {
                if t & CHAIN != 0 {
                    entered[(t & !CHAIN) as usize] = true;
                } else if live[t as usize] {
                    keep[t as usize] = true;
                }
            }
        }
    }
    drop(live);
    let chain_entered: Vec<bool> = (0..trie.chain_member.len())
        .map(|k| entered[trie.chain_base[k] as usize..trie.chain_base[k + 1] as usize].contains(&true))
        .collect();
    drop(entered);
    // Members that cannot be produced: their end node is not kept, or their chain is never entered.
    let mut reachable = vec![false; trie.n_members()];
    for node in 0..n {
        if keep[node] && trie.end_member[node] != NONE {
            reachable[trie.end_member[node] as usize] = true;
        }
    }
    for (k, &m) in trie.chain_member.iter().enumerate() {
        reachable[m as usize] = chain_entered[k];
    }
    let mut unreachable: Vec<usize> = (0..trie.n_members()).filter(|&m| !reachable[m]).collect();
    drop(reachable);
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

    // State numbering: kept explicit nodes in preorder, then the chain positions.
    let mut state_of = vec![NONE; n];
    let mut kept_nodes = Vec::new();
    for node in (0..n).filter(|&node| keep[node]) {
        state_of[node] = kept_nodes.len() as u32;
        kept_nodes.push(node as u32);
    }
    let n_explicit = kept_nodes.len() as u32;
    let eog = vocab.eog_ids();
    let idx = &vocab.index;

    // Allowed tokens of every explicit state: counted in parallel blocks of states, then sorted and written in
    // place, each block into its own slice of the final arrays (the transitions are never held twice).
    const BLOCK: usize = 2048;
    let target_of = |t: u32| if t & CHAIN != 0 { n_explicit + (t & !CHAIN) } else { state_of[t as usize] };
    let mut offsets = vec![0u32; kept_nodes.len() + 1];
    offsets[1..].par_chunks_mut(BLOCK).zip(kept_nodes.par_chunks(BLOCK)).try_for_each(|(counts, nodes)| {
        if budget.exhausted() {
            return Err(Error::limit("compiling stopped: max_bytes was exceeded"));
        }
        let mut n_block = 0usize;
        for (count, &node) in counts.iter_mut().zip(nodes) {
            let node = node as usize;
            let mut n = 0usize;
            for (code, t) in al.edges(node) {
                if target_of(t) != NONE {
                    n += idx.code_tokens(&code).len();
                }
            }
            if trie.end_member[node] != NONE && !open {
                n += eog.len();
            }
            *count = u32::try_from(n).unwrap_or(u32::MAX);
            n_block += n;
        }
        // Charged twice, as when the blocks were copied into the final arrays.
        budget.charge(counts.len() * 8 + n_block * 16, "the automaton's transitions")
    })?;
    let total: usize = offsets.par_iter().map(|&c| c as usize).sum();
    if total >= u32::MAX as usize {
        return Err(Error::limit(format!(
            "the automaton needs {total} transitions, over the limit of {}",
            u32::MAX - 1
        )));
    }
    for s in 0..kept_nodes.len() {
        offsets[s + 1] += offsets[s];
    }
    let mut tokens: Vec<TokenId> = vec![0; total];
    let mut targets = vec![0u32; total];
    let mut pieces = Vec::with_capacity(kept_nodes.len().div_ceil(BLOCK));
    let (mut tok_rest, mut tgt_rest) = (&mut tokens[..], &mut targets[..]);
    for a in (0..kept_nodes.len()).step_by(BLOCK) {
        let b = (a + BLOCK).min(kept_nodes.len());
        let n = (offsets[b] - offsets[a]) as usize;
        let (tok, rest) = std::mem::take(&mut tok_rest).split_at_mut(n);
        tok_rest = rest;
        let (tgt, rest) = std::mem::take(&mut tgt_rest).split_at_mut(n);
        tgt_rest = rest;
        pieces.push((a, b, tok, tgt));
    }
    pieces.into_par_iter().for_each(|(a, b, tok, tgt)| {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut at = 0;
        for &node in &kept_nodes[a..b] {
            let node = node as usize;
            pairs.clear();
            for (code, t) in al.edges(node) {
                let target = target_of(t);
                if target != NONE {
                    pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, target)));
                }
            }
            if trie.end_member[node] != NONE && !open {
                pairs.extend(eog.iter().map(|&e| (e, State::FINISHED.0)));
            }
            pairs.sort_unstable();
            for (i, &(token, target)) in pairs.iter().enumerate() {
                tok[at + i] = token;
                tgt[at + i] = target;
            }
            at += pairs.len();
        }
    });
    drop(al);

    // Accepting states, depths, and the single member below each explicit state.
    let mut accepting = vec![0u64; kept_nodes.len().div_ceil(64)];
    let mut depth = Vec::with_capacity(kept_nodes.len());
    for (s, &node) in kept_nodes.iter().enumerate() {
        if trie.end_member[node as usize] != NONE {
            accepting[s / 64] |= 1 << (s % 64);
        }
        depth.push(trie.depth[node as usize]);
    }
    let single_member = single_members(&trie, &keep, &chain_entered, &kept_nodes);
    let chain_first_depth: Vec<u32> = trie.chain_member.iter().map(|&m| trie.explicit_depth[m as usize] + 1).collect();

    Ok(Automaton::assemble(
        vocab,
        Explicit { offsets, tokens, targets, accepting, depth, single_member },
        Chains { base: trie.chain_base, member: trie.chain_member, first_depth: chain_first_depth },
        trie.member_offsets.into_iter().map(|o| o as u64).collect(),
        trie.member_bytes,
        dropped,
        n_dropped_members,
    ))
}

/// The explicit states of an automaton being built (see the fields of [`Automaton`]).
pub(crate) struct Explicit {
    pub(crate) offsets: Vec<u32>,
    pub(crate) tokens: Vec<TokenId>,
    pub(crate) targets: Vec<u32>,
    pub(crate) accepting: Vec<u64>,
    pub(crate) depth: Vec<u32>,
    pub(crate) single_member: Vec<u32>,
}

/// The chains of an automaton being built.
pub(crate) struct Chains {
    pub(crate) base: Vec<u32>,
    pub(crate) member: Vec<u32>,
    pub(crate) first_depth: Vec<u32>,
}

impl Automaton {
    /// An automaton from its parts, with precomputed rows for the explicit states that allow many tokens.
    pub(crate) fn assemble(
        vocab: Arc<Vocabulary>,
        e: Explicit,
        chains: Chains,
        member_offsets: Vec<u64>,
        member_bytes: Vec<u8>,
        dropped: Vec<usize>,
        n_dropped_members: usize,
    ) -> Automaton {
        let words = vocab.mask_words();
        let threshold = (words / 4).max(64);
        let n = e.depth.len();
        let dense_states: Vec<u32> =
            (0..n as u32).filter(|&s| e.offsets[s as usize + 1] - e.offsets[s as usize] >= threshold as u32).collect();
        let mut dense_rows = vec![0u32; dense_states.len() * words];
        for (i, &s) in dense_states.iter().enumerate() {
            let r = e.offsets[s as usize] as usize..e.offsets[s as usize + 1] as usize;
            fill_sparse(&e.tokens[r], &mut dense_rows[i * words..(i + 1) * words]);
        }
        Automaton {
            vocab,
            offsets: e.offsets.into(),
            tokens: e.tokens.into(),
            targets: e.targets.into(),
            accepting: e.accepting.into(),
            depth: e.depth.into(),
            single_member: e.single_member.into(),
            dense_states: dense_states.into(),
            dense_rows: dense_rows.into(),
            chain_base: chains.base.into(),
            chain_member: chains.member.into(),
            chain_first_depth: chains.first_depth.into(),
            member_offsets: member_offsets.into(),
            member_bytes: member_bytes.into(),
            dropped,
            n_dropped_members,
            segments: None,
        }
    }
}

/// For each kept explicit node: the only reachable member below it (ending there, ending at a kept descendant, or
/// in an entered chain hanging below), or `NONE`.
fn single_members(trie: &StringTrie, keep: &[bool], chain_entered: &[bool], kept_nodes: &[u32]) -> Vec<u32> {
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
        for &k in trie.hanging(node as u32) {
            if chain_entered[k as usize] {
                count[node] = (count[node] + 1).min(2);
                some[node] = trie.chain_member[k as usize];
            }
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

    /// A loaded file is only checked to keep every lookup in bounds; its transitions may still be nonsense. One
    /// that leads back to the same state must not make `forced` loop (found by the `load` fuzz target: a timeout).
    #[test]
    fn forced_stops_on_a_loop_of_a_crafted_file() {
        let mut a = Automaton::compile(toy(), &["abcabcab"], &CompileOptions::default()).unwrap();
        assert!(a.n_explicit() >= 1 && a.allowed_total() >= 1);
        a.targets = vec![0; a.targets.len()].into();
        a.validate().unwrap();
        let a = Arc::new(a);
        let (tx, rx) = std::sync::mpsc::channel();
        let b = a.clone();
        std::thread::spawn(move || tx.send(b.forced(b.start())).unwrap());
        let forced = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("forced() did not return");
        assert_eq!(forced, None);
    }

    /// A precomputed mask row of a loaded file must agree with its state's allowed list.
    #[test]
    fn a_dense_row_that_disagrees_is_refused() {
        let vocab = toy();
        let mut a = Automaton::compile(vocab, &["ab", "abc", "bc", "a", "b", "c"], &CompileOptions::default()).unwrap();
        // The toy vocabulary is too small for a dense row: make the start state's row by hand, then spoil it.
        let words = a.mask_words();
        let mut row = vec![0u32; words];
        fill_sparse(&a.tokens[a.range(0)], &mut row);
        a.dense_states = vec![0u32].into();
        a.dense_rows = row.clone().into();
        a.validate().unwrap();
        row[0] ^= 1 << 3;
        a.dense_rows = row.into();
        let e = a.validate().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("dense row 0"), "{e}");
    }

    #[test]
    fn dead_ends_are_pruned() {
        // "abz" can't be finished, so "ab"'s token must not lead into a state that only continues to z.
        let a = Automaton::compile(toy(), &["abcz", "abd"], &CompileOptions::new().drop_unreachable(true)).unwrap();
        // "abc" token (6) would lead into the dead "abc" prefix; only a, ab remain at the start.
        assert_eq!(a.allowed(a.start()), &[0, 5]);
    }
}
