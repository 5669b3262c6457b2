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
//! Layouts: small automata keep every array plain (format version 2, byte for byte); large ones (derived rows,
//! see `derived`) store their integers at the widths their values need (`Packed`), front-code their members
//! (`front`) and hold their ascending arrays (`offsets`, `chain_base`, `chain_member`, `member_offsets`) in
//! blocks of a base and narrow per-element values (`ascending`, format version 9), in memory and in files alike.
//!
//! Invariants of an [`Automaton`]:
//! - states are `0..n_states()` plus [`State::FINISHED`]; the start state is 0;
//! - every state that can be reached can still complete a member (pruned: no token leads to a dead end), and
//!   every kept member is reachable from the start;
//! - end-of-generation ids are allowed exactly in accepting states and lead to `FINISHED`;
//! - `FINISHED` allows only the end-of-generation ids and stays `FINISHED`.

use crate::error::{show_bytes, Error, ErrorKind, Result};
use crate::format::{ensure, Kind as FileKind, Reader, Writer};
use crate::ids::NONE;
use crate::util::array::Array;
use crate::util::mask::{fill_sparse, fill_sparse_packed, set_bits};
use crate::util::packed::Packed;
use crate::vocab::{TokenId, Vocabulary};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

mod allowed;
mod ascending;
mod derived;
mod draft;
mod front;
mod lazy;
mod masks;
mod persist;
mod query;
mod row_cache;
mod segments;
mod values;

pub use allowed::Allowed;
use allowed::AllowedRepr;
use ascending::{Ascending, MemberOffsets};
pub use draft::{Draft, History};
pub use persist::FileInfo;

pub(crate) use derived::{derive_by_default, ByteTokens, Derive};
pub(crate) use masks::dense_threshold;
pub use segments::Crossing;
pub(crate) use segments::Segments;

/// A decoding state: one integer, so a server keeps one `u32` per sequence and nothing else.
///
/// The number is public on purpose (`State(n)`, `.0`): it is what the C ABI's `trie_state` and every binding pass
/// around, stored and restored by callers. A forged or stale number is harmless: every query checks it against
/// the automaton (`0..n_states()` or [`State::FINISHED`]) and refuses others with
/// [`ErrorKind::InvalidState`]; it never indexes out of bounds. What it cannot
/// say is which automaton it belongs to: a valid number of another automaton is a valid state of this one.
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
    /// Whether the unary explicit states keep no row (derived on use from the trie below them): `None` (the
    /// default) for automata of 262,144 explicit states or more, on vocabularies where every byte is a token.
    /// For tests and measurements; the automaton behaves the same either way.
    #[doc(hidden)]
    pub derive_rows: Option<bool>,
    /// With derived rows: the most transitions a branching explicit state (not a precomputed row) may allow to
    /// keep only its byte children and derive its row on use (`None`: 128, `derived::BYTE_ROWS_MAX`; `Some(0)`:
    /// none). For tests and measurements; the automaton behaves the same either way.
    #[doc(hidden)]
    pub byte_rows_max: Option<usize>,
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

    /// Sets [`CompileOptions::derive_rows`].
    #[doc(hidden)]
    pub fn derive_rows(mut self, yes: bool) -> Self {
        self.derive_rows = Some(yes);
        self
    }

    /// Sets [`CompileOptions::byte_rows_max`].
    #[doc(hidden)]
    pub fn byte_rows_max(mut self, max: usize) -> Self {
        self.byte_rows_max = Some(max);
        self
    }

    /// The most transitions of a row derived from its stored byte children (see `derived`).
    pub(crate) fn byte_rows_limit(&self) -> usize {
        self.byte_rows_max.unwrap_or(derived::BYTE_ROWS_MAX)
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
///
/// The fields are crate-visible for `compile/` (which lays them out: `freeze`, `incremental`); every other layer
/// reads an automaton through its methods.
pub struct Automaton {
    pub(crate) vocab: Arc<Vocabulary>,
    /// CSR over the explicit states: allowed tokens (ascending) and the state each leads to.
    pub(crate) offsets: Ascending<u32>,
    pub(crate) tokens: Packed<TokenId>,
    pub(crate) targets: Packed<u32>,
    /// Bit `s` (of 64-bit words): explicit state `s` is accepting.
    pub(crate) accepting: Array<u64>,
    /// Depth (bytes of text so far) of each explicit state.
    pub(crate) depth: Packed<u32>,
    /// The only member below each explicit state, or `NONE` when several remain.
    pub(crate) single_member: Packed<u32>,
    /// Bit `s` (of 64-bit words; empty when no state is): explicit state `s` keeps no row, its row is derived
    /// from the trie below it (see `derived`), along its one byte `unary_byte[s]` into state `s + 1`.
    pub(crate) derived: Array<u64>,
    pub(crate) unary_byte: Array<u8>,
    /// Bit `s` (of 64-bit words; empty when no state is): explicit state `s` stores only its byte children (the
    /// single-byte tokens of its row and their targets); its row is derived from the trie below it, as a unary
    /// state's (see `derived`).
    pub(crate) byte_rows: Array<u64>,
    /// The vocabulary's single-byte tokens (for derived rows; not saved).
    pub(crate) byte_tokens: derived::ByteTokens,
    /// Precomputed rows for explicit states with many allowed tokens: `dense_states` ascending, row `i` is
    /// `dense_rows[i * mask_words..(i + 1) * mask_words]`.
    pub(crate) dense_states: Array<u32>,
    pub(crate) dense_rows: Array<u32>,
    /// Chains: chain `k` covers states `n_explicit + chain_base[k] .. n_explicit + chain_base[k + 1]`, the
    /// positions of member `chain_member[k]` at depths `chain_first_depth[k]..`.
    pub(crate) chain_base: Ascending<u32>,
    pub(crate) chain_member: Ascending<u32>,
    pub(crate) chain_first_depth: Packed<u32>,
    /// Members (sorted, distinct): `member_bytes[member_offsets[i]..member_offsets[i + 1]]` (front-coded: the
    /// bytes after the prefix shared with the member before, see `member_lcp`).
    ///
    /// (`tokens`, `targets`, `depth`, `single_member` and `chain_first_depth` are [`Packed`], `offsets`,
    /// `chain_base`, `chain_member` and `member_offsets` [`Ascending`]: at their full width, the layout of plain
    /// arrays, except in automata with derived rows, where each is stored at the width its values need (token ids
    /// of a vocabulary of fewer than 16,777,215 tokens take 3 bytes there, targets 3 bytes in automata of fewer
    /// states), and the ascending ones in blocks when that is smaller (front-coded automata): see `persist` and
    /// `ascending`.)
    pub(crate) member_offsets: MemberOffsets,
    pub(crate) member_bytes: Array<u8>,
    /// Empty, or (front-coded members, the large layout: see `front`) by member, the length of the prefix it
    /// shares with the member before it, which `member_bytes` leaves out: the member is that prefix followed by
    /// its bytes in `member_bytes`.
    pub(crate) member_lcp: Packed<u32>,
    /// Input indices of the strings dropped as unreachable (every copy of a duplicated one), ascending.
    pub(crate) dropped: Vec<usize>,
    /// Number of distinct members dropped.
    pub(crate) n_dropped_members: usize,
    /// Present for automata compiled with a [`crate::Template`] (members are then whole segments).
    pub(crate) segments: Option<Segments>,
    /// The caller's value of each member, by rank (dropped members included), for automata compiled with values
    /// (`compile_with_values`, `compile_template_with_values`, `with_changes_and_values`); `None` otherwise.
    pub(crate) values: Option<Array<u64>>,
    /// The checks still to be made of an automaton loaded with [`Automaton::load_lazy`] (`None`: all made).
    pub(crate) lazy: Option<Box<lazy::Lazy>>,
    /// The wide derived rows computed so far, within a byte budget (see `row_cache`).
    pub(crate) row_cache: row_cache::RowCache,
}

/// What a state is.
enum Kind {
    Explicit(usize),
    /// A chain state: member, depth.
    Chain(usize, usize),
}

impl Automaton {
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
        self.n_explicit() + self.chain_base.last().unwrap() as usize
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

    /// Bytes held by the automaton (heap, or mapped file pages after [`Automaton::load`]), not counting the shared
    /// vocabulary, nor the rows of large automata computed on use and kept for their next use (a bounded cache of at
    /// most 4 MiB an automaton).
    pub fn memory_usage(&self) -> usize {
        self.offsets.size_bytes()
            + self.tokens.size_bytes()
            + self.targets.size_bytes()
            + self.accepting.size_bytes()
            + self.depth.size_bytes()
            + self.single_member.size_bytes()
            + self.dense_states.size_bytes()
            + self.dense_rows.size_bytes()
            + self.derived.size_bytes()
            + self.unary_byte.size_bytes()
            + self.byte_rows.size_bytes()
            + self.chain_base.size_bytes()
            + self.chain_member.size_bytes()
            + self.chain_first_depth.size_bytes()
            + self.member_offsets.size_bytes()
            + self.member_bytes.size_bytes()
            + self.member_lcp.size_bytes()
            + self.dropped.capacity() * std::mem::size_of::<usize>()
            + self.segments.as_ref().map_or(0, Segments::memory_usage)
            + self.values.as_ref().map_or(0, Array::size_bytes)
            + self.lazy.as_ref().map_or(0, |l| l.memory_usage())
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
            ("derived", self.derived.size_bytes()),
            ("unary_byte", self.unary_byte.size_bytes()),
            ("byte_rows", self.byte_rows.size_bytes()),
            ("chain_base", self.chain_base.size_bytes()),
            ("chain_member", self.chain_member.size_bytes()),
            ("chain_first_depth", self.chain_first_depth.size_bytes()),
            ("member_offsets", self.member_offsets.size_bytes()),
            ("member_bytes", self.member_bytes.size_bytes()),
            ("member_lcp", self.member_lcp.size_bytes()),
            ("dropped", self.dropped.capacity() * std::mem::size_of::<usize>()),
            ("values", self.values.as_ref().map_or(0, Array::size_bytes)),
        ]
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
    /// An automaton from its parts, with precomputed rows for the explicit states that allow many tokens, and
    /// without the rows of unary states as `derive` says (see `derived`); when some are derived, the branching
    /// states allowing at most `byte_rows_max` tokens (and no precomputed row) keep only their byte children.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        vocab: Arc<Vocabulary>,
        mut e: Explicit,
        chains: Chains,
        member_offsets: Vec<u64>,
        member_bytes: Vec<u8>,
        dropped: Vec<usize>,
        n_dropped_members: usize,
        derive: Derive,
        byte_rows_max: usize,
    ) -> Automaton {
        let words = vocab.mask_words();
        let threshold = masks::dense_threshold(words);
        let n = e.depth.len();
        let dense_states: Vec<u32> =
            (0..n as u32).filter(|&s| e.offsets[s as usize + 1] - e.offsets[s as usize] >= threshold as u32).collect();
        let mut dense_rows = vec![0u32; dense_states.len() * words];
        for (i, &s) in dense_states.iter().enumerate() {
            let r = e.offsets[s as usize] as usize..e.offsets[s as usize + 1] as usize;
            fill_sparse(&e.tokens[r], &mut dense_rows[i * words..(i + 1) * words]);
        }
        let byte_tokens = derived::ByteTokens::new(&vocab);
        let (deriving, (derived, unary_byte)) = match derive {
            Derive::ByRows(force) if derived::derive_by_default(force, n) => {
                (true, derived::derive_rows(&mut e, &byte_tokens, threshold))
            }
            Derive::ByRows(_) => (false, (Vec::new(), Vec::new())),
            Derive::Given(bits, _) if bits.iter().all(|&w| w == 0) => (true, (Vec::new(), Vec::new())),
            Derive::Given(bits, bytes) => (true, (bits, bytes)),
        };
        // (Also where no state is unary: a compile whose alignment cut the short rows relies on it.)
        let byte_rows = if deriving {
            derived::keep_byte_children(&mut e, &byte_tokens, &derived, threshold, byte_rows_max)
        } else {
            Vec::new()
        };
        // The large layout (with derived rows) stores its per-state, per-chain and per-member integers at the
        // widths their values need; every other automaton keeps plain arrays (files byte for byte as before).
        let pack = !derived.is_empty() || !byte_rows.is_empty();
        let p32 = |v: Vec<u32>| if pack { Packed::narrow_vec(v) } else { Packed::plain(v) };
        // ... and its ascending arrays in blocks (format version 9, see `ascending`).
        let asc = |v: Vec<u32>, choices| if pack { Ascending::blocked(&v, choices) } else { Ascending::plain(v) };
        // The large layout also front-codes its members (format version 7, see `front`).
        let front = || {
            if pack {
                let (o, b, l) = front::front_code(&member_offsets, member_bytes);
                (MemberOffsets::blocked(&o, ascending::MEMBER_BLOCKS), b, Packed::narrow(&l))
            } else {
                (MemberOffsets::plain(member_offsets), member_bytes, Packed::default())
            }
        };
        // Each array is laid out on its own (in parallel on the large layout: independent passes).
        let (e_offsets, e_tokens, e_targets, e_depth, e_single) =
            (e.offsets, e.tokens, e.targets, e.depth, e.single_member);
        let (chain_base, chain_member, chain_first_depth) = (chains.base, chains.member, chains.first_depth);
        let (((offsets, tokens), (targets, (depth, single_member))), ((members, chains), chain_first_depth)) = join(
            pack,
            || {
                join(
                    pack,
                    || join(pack, || asc(e_offsets, ascending::OFFSETS_BLOCKS), || p32(e_tokens)),
                    || join(pack, || p32(e_targets), || join(pack, || p32(e_depth), || p32(e_single))),
                )
            },
            || {
                join(
                    pack,
                    || {
                        join(pack, front, || {
                            (asc(chain_base, ascending::CHAIN_BLOCKS), asc(chain_member, ascending::CHAIN_BLOCKS))
                        })
                    },
                    || p32(chain_first_depth),
                )
            },
        );
        let (member_offsets, member_bytes, member_lcp) = members;
        let (chain_base, chain_member) = chains;
        Automaton {
            vocab,
            offsets,
            tokens,
            targets,
            accepting: e.accepting.into(),
            depth,
            single_member,
            dense_states: dense_states.into(),
            dense_rows: dense_rows.into(),
            derived: derived.into(),
            unary_byte: unary_byte.into(),
            byte_rows: byte_rows.into(),
            byte_tokens,
            chain_base,
            chain_member,
            chain_first_depth,
            member_offsets,
            member_bytes: member_bytes.into(),
            member_lcp,
            dropped,
            n_dropped_members,
            segments: None,
            values: None,
            lazy: None,
            row_cache: row_cache::RowCache::new(row_cache::DEFAULT_BUDGET),
        }
    }
}

/// `rayon::join(a, b)` when `parallel`, else `(a(), b())` in this thread.
fn join<A: Send, B: Send>(parallel: bool, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    if parallel {
        rayon::join(a, b)
    } else {
        (a(), b())
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

    /// A lazily loaded automaton drafts without checking the whole file (issue 36, defect 7: the first `draft`
    /// validated every member, 25 ms at 400,000 names, about 200 ms at 4.5 M): the forced bytes come from the states
    /// walked, and equal the eager automaton's.
    #[test]
    fn a_lazy_draft_checks_only_the_states_it_walks() {
        let set = ["abcab", "abcd", "abce", "bd", "bde", "e"];
        let a = Automaton::compile(toy(), &set, &CompileOptions::default()).unwrap();
        let lazy = Automaton::from_bytes_lazy(toy(), &a.to_bytes()).unwrap();
        assert!(!lazy.whole_checked());
        let Step::Next(s_a) = a.advance(a.start(), 0).unwrap() else { panic!() };
        let Step::Next(s_b) = a.advance(a.start(), 1).unwrap() else { panic!() };
        for s in [a.start(), s_a, s_b] {
            assert_eq!(lazy.forced_bytes(s), a.forced_bytes(s));
            assert_eq!(lazy.draft(s, 8), a.draft(s, 8));
        }
        assert_eq!(&*a.forced_bytes(s_a), b"bc", "several members left, all continuing with bc");
        assert_eq!(&*a.forced_bytes(s_b), b"d");
        assert!(!lazy.whole_checked(), "draft walked states only");
        assert_eq!(lazy.possible_members(s_b), a.possible_members(s_b));
        assert!(lazy.whole_checked(), "a member lookup checks the whole file");
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
        fill_sparse(a.tokens.slice(a.range(0)).as_slice().unwrap(), &mut row);
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
