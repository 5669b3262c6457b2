//! Rows only where they pay: the *unary* explicit states of a large automaton keep no row.
//!
//! An explicit state `u` is unary when no member ends there, its row is not a precomputed (dense) one, and the
//! trie below it goes on along one byte `b` only, into the explicit state `u + 1` (states are numbered in
//! preorder). On a *byte-complete* vocabulary (every byte is the whole of some text token) such a row is a
//! function of the trie below `u`, which the automaton already holds: the byte children of a stored explicit
//! state are the targets of the single-byte tokens in its row, those of a unary state its one byte, those of a
//! chain position the next byte of its member. So the row of `u` is found as the compile finds rows (the
//! alignment walk): the vocabulary's token trie walked together with the trie below `u`, each token-trie node
//! with a pattern an allowed token, leading to the state reached. With every trie node live (on a byte-complete
//! vocabulary every prefix of a member can be finished byte by byte, so pruning keeps all of them), this is the
//! row the compile would store, token for token and target for target (`tests/file_format.rs` compares both
//! layouts state by state).
//!
//! Stored per explicit state: one bit (`derived`) and the byte (`unary_byte`); the row itself is empty in
//! `offsets` / `tokens` / `targets`. `advance` from a derived state walks the token's bytes down the trie, the
//! masks and `allowed` run the walk above. Smaller automata keep every row (no derived states): see
//! [`derive_by_default`].
//!
//! **Branching states with short rows** (format version 6): with unary states derived, an explicit state that is
//! not a precomputed (dense) row and allows at most [`BYTE_ROWS_MAX`] tokens keeps only its *byte children*: the
//! single-byte tokens of its row and their targets, which are the trie's children of the state (every byte is a
//! token's whole text; pruning keeps every node). Its row is derived by the same walk, which reads the byte
//! children of such a state from what it keeps, as for any stored row; the end-of-generation ids are added where
//! the state is accepting (and the automaton not open). One bit per explicit state (`byte_rows`) says which.
//! The walk visits each token-trie node at most once and every token it allows is a row entry, so its cost is
//! bounded by the row's size; it looks into a position (the byte children of an explicit state, the member of a
//! chain state) only where longer tokens go on from the token-trie node reached. The wide rows it computes are
//! kept in a bounded cache shared by the threads (`row_cache`), so that a state's row is walked once while it stays
//! there: the limit is 128 tokens, where the walk of a row (first use) stays within about 20 us and later masks
//! are copies of a cached list (all npm names: 269.5 MB at 128 instead of 306.6 MB at 32; `docs/bench/npm.md`).
//!
//! A loaded file's derived states are only checked for what keeps every lookup in bounds (the bit and byte
//! blocks, `u + 1` an explicit state, the row empty); every state the walk reaches is checked (lazily loaded:
//! on first use) before its row is read, and the walk is bounded by the token trie, so a crafted file gives
//! wrong rows at worst, never a crash or a loop.

use super::*;

/// Automata with fewer explicit states keep every row (the memory does not matter at that size, and an update
/// with [`Automaton::with_changes`] copies stored rows in place).
pub(crate) const DERIVE_MIN_EXPLICIT: usize = 1 << 18;

/// The most tokens a branching state's row may allow to be derived from its byte children (see the module doc).
pub(crate) const BYTE_ROWS_MAX: usize = 128;

/// Whether `assemble` derives the rows of unary states: `force` if given, else for automata of at least
/// [`DERIVE_MIN_EXPLICIT`] explicit states.
pub(crate) fn derive_by_default(force: Option<bool>, n_explicit: usize) -> bool {
    force.unwrap_or(n_explicit >= DERIVE_MIN_EXPLICIT)
}

/// Which explicit states of an automaton being assembled keep no row.
pub(crate) enum Derive {
    /// Found from the rows (unary states: see the module doc), and their rows dropped: `Some(yes)` forces the
    /// choice, `None` derives by size ([`derive_by_default`]).
    ByRows(Option<bool>),
    /// Given (bits and bytes, one per explicit state), their rows already empty: a compile whose alignment skipped
    /// the unary nodes.
    Given(Vec<u64>, Vec<u8>),
}

/// The single-byte tokens of a vocabulary: for each byte, the smallest text token id whose bytes are exactly that
/// byte (`NONE` if none), and the same pairs sorted by token id (with a table from token id to byte when the largest
/// such id is small, as in every vocabulary seen: the walk of derived rows looks a byte up per stored child).
pub(crate) struct ByteTokens {
    pub(crate) of_byte: [u32; 256],
    by_token: Vec<(TokenId, u8)>,
    /// `of_token[t]`: the byte of token `t` if it is the single-byte token of that byte, else `NOT_A_BYTE`; ids up to
    /// [`ByteTokens::last`] (empty when that is [`TABLE_MAX`] or more: binary search of `by_token` instead).
    of_token: Vec<u16>,
}

/// The largest single-byte token id a [`ByteTokens`] keeps a table up to (its 2-byte entries).
const TABLE_MAX: u32 = 1 << 16;
const NOT_A_BYTE: u16 = u16::MAX;

impl ByteTokens {
    pub(crate) fn new(vocab: &Vocabulary) -> ByteTokens {
        let idx = &vocab.index;
        let mut of_byte = [NONE; 256];
        for (b, slot) in of_byte.iter_mut().enumerate() {
            let u = idx.trie.child(0, b as u8);
            if u != NONE && idx.trie.code(u) != NONE {
                let code = idx.trie.code(u);
                *slot = idx.code_tokens(&code)[0];
            }
        }
        let mut by_token: Vec<(TokenId, u8)> =
            of_byte.iter().enumerate().filter(|(_, &t)| t != NONE).map(|(b, &t)| (t, b as u8)).collect();
        by_token.sort_unstable();
        let mut of_token = Vec::new();
        if let Some(&(last, _)) = by_token.last().filter(|&&(t, _)| t < TABLE_MAX) {
            of_token = vec![NOT_A_BYTE; last as usize + 1];
            for &(t, b) in &by_token {
                of_token[t as usize] = b as u16;
            }
        }
        ByteTokens { of_byte, by_token, of_token }
    }

    /// Every byte is a token's whole text: unary rows can be derived.
    pub(crate) fn complete(&self) -> bool {
        self.by_token.len() == 256
    }

    /// The byte of `t` if it is the single-byte token of that byte.
    #[inline]
    fn byte_of(&self, t: TokenId) -> Option<u8> {
        if !self.of_token.is_empty() {
            return match self.of_token.get(t as usize) {
                Some(&b) if b != NOT_A_BYTE => Some(b as u8),
                _ => None,
            };
        }
        self.by_token.binary_search_by_key(&t, |&(tok, _)| tok).ok().map(|i| self.by_token[i].1)
    }

    /// The largest single-byte token id (rows are scanned up to it for the byte children).
    #[inline]
    fn last(&self) -> TokenId {
        self.by_token.last().map_or(0, |&(t, _)| t)
    }
}

/// A position in the trie while walking down from a derived state: an explicit state, or a chain state with its
/// member and depth.
#[derive(Clone, Copy)]
enum Pos {
    Explicit(u32),
    Chain(u32, u32, u32),
}

impl Pos {
    #[inline]
    fn state(self) -> u32 {
        match self {
            Pos::Explicit(s) | Pos::Chain(s, _, _) => s,
        }
    }
}

impl Automaton {
    /// Whether explicit state `s` is unary: no row stored, one byte into `s + 1`.
    #[inline]
    pub(crate) fn is_unary(&self, s: usize) -> bool {
        !self.derived.is_empty() && self.derived[s / 64] >> (s % 64) & 1 == 1
    }

    /// Whether explicit state `s` stores only its byte children.
    #[inline]
    pub(crate) fn is_byte_row(&self, s: usize) -> bool {
        !self.byte_rows.is_empty() && self.byte_rows[s / 64] >> (s % 64) & 1 == 1
    }

    /// Whether the row of explicit state `s` is derived (unary, or only its byte children stored).
    #[inline]
    pub(crate) fn is_derived(&self, s: usize) -> bool {
        self.is_unary(s) || self.is_byte_row(s)
    }

    /// Whether some explicit state's row is derived.
    #[inline]
    pub(crate) fn has_derived(&self) -> bool {
        !self.derived.is_empty() || !self.byte_rows.is_empty()
    }

    /// Whether the derived row of `s` holds the end-of-generation ids: a member ends there (and the automaton is
    /// not open).
    #[inline]
    pub(super) fn derived_ends(&self, s: usize) -> bool {
        self.accepting[s / 64] >> (s % 64) & 1 == 1 && !self.is_open()
    }

    /// The position a target state is, `None` if it is `FINISHED`, out of range or fails its (lazy) check.
    #[inline]
    fn pos_of(&self, state: u32) -> Option<Pos> {
        if state as usize >= self.n_states() || !self.ready(State(state)) {
            return None;
        }
        Some(match self.kind(State(state)) {
            Kind::Explicit(s) => Pos::Explicit(s as u32),
            Kind::Chain(m, d) => Pos::Chain(state, m as u32, d as u32),
        })
    }

    /// The child of `pos` along byte `b`, if the trie has one.
    #[inline]
    fn byte_child(&self, pos: Pos, b: u8) -> Option<Pos> {
        match pos {
            Pos::Explicit(s) if self.is_unary(s as usize) => {
                (self.unary_byte[s as usize] == b).then(|| self.pos_of(s + 1)).flatten()
            }
            Pos::Explicit(s) => {
                let t = self.byte_tokens.of_byte[b as usize];
                let r = self.range(s as usize);
                let i = self.tokens.slice(r.clone()).binary_search(t).ok()?;
                self.pos_of(self.targets.get(r.start + i))
            }
            Pos::Chain(state, m, d) => (self.member_rest(m as usize, d as usize).first() == Some(&b))
                .then_some(Pos::Chain(state + 1, m, d + 1)),
        }
    }

    /// Whether `t`, the target of a byte child, can be walked into: a state (not `FINISHED`, below `n_states`)
    /// whose lazy check passes.
    #[inline]
    fn live(&self, t: u32, n_states: usize) -> bool {
        (t as usize) < n_states && self.ready(State(t))
    }

    /// Pushes `(target, w)` for every byte child `b` of explicit state `s` with a live target where the token trie
    /// goes on from node `v` along `b`, into `w`.
    #[inline]
    fn push_children(&self, s: usize, v: u32, n_states: usize, stack: &mut Vec<(u32, u32)>) {
        let tt = &self.vocab.index.trie;
        if self.is_unary(s) {
            let w = tt.child(v, self.unary_byte[s]);
            if w != NONE && self.live(s as u32 + 1, n_states) {
                stack.push((s as u32 + 1, w));
            }
            return;
        }
        let last = self.byte_tokens.last();
        let r = self.range(s);
        let toks = self.tokens.slice(r.clone());
        // The row up to the last single-byte token (one loop at the row's width).
        let n = toks.binary_search(last).map_or_else(|i| i, |i| i + 1);
        let mut i = r.start;
        toks.slice(0..n).for_each(|t| {
            if let Some(b) = self.byte_tokens.byte_of(t) {
                let w = tt.child(v, b);
                let target = self.targets.get(i);
                if w != NONE && self.live(target, n_states) {
                    stack.push((target, w));
                }
            }
            i += 1;
        });
    }

    /// The chain of chain state `state` (as `kind` finds it), searched outwards from chain `hint`, then by
    /// bisection: the chains one walk enters lie close together (the members below a state are a range), and the
    /// first is guessed from the state's share of the chain states.
    fn chain_near(&self, state: u32, hint: Option<usize>) -> usize {
        let cb = &self.chain_base;
        let (n, idx) = (cb.len() - 1, state - self.n_explicit() as u32);
        if cb.block().is_some() {
            // In blocks: a search of the block bases and one block (a probe of a base is one read).
            return cb.last_at_most(idx).map_or(0, |(k, _)| k);
        }
        let h = hint.unwrap_or_else(|| (idx as u64 * n as u64 / cb.get(n).max(1) as u64) as usize).min(n);
        // `below(i)`: chain `i` starts at or before `idx` (true at 0, false at `n`); the chain is the last such.
        let below = |i: usize| cb.get(i) <= idx;
        let (mut lo, mut hi);
        let mut step = 1;
        if below(h) {
            lo = h;
            while h + step < n && below(h + step) {
                lo = h + step;
                step *= 2;
            }
            hi = (h + step).min(n);
        } else {
            hi = h;
            while step <= h && !below(h - step) {
                hi = h - step;
                step *= 2;
            }
            lo = h.saturating_sub(step);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if below(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// `f(code)` for every token-trie node below `v` along the rest of chain state `state`'s member (in chain `k`).
    #[inline]
    fn chain_codes(&self, state: u32, k: usize, mut v: u32, f: &mut impl FnMut(u32)) {
        let tt = &self.vocab.index.trie;
        let idx = state - self.n_explicit() as u32;
        let (m, d) = (self.chain_member.get(k), self.chain_first_depth.get(k) + idx - self.chain_base.get(k));
        for &b in self.member_rest(m as usize, d as usize) {
            v = tt.child(v, b);
            if v == NONE {
                return;
            }
            let code = tt.code(v);
            if code != NONE {
                f(code);
            }
        }
    }

    /// The row of derived state `u`: `f(code)` for every token code allowed there (see the module doc), in no
    /// particular order. A walk of the token trie: each of its nodes is visited at most once; a node's position is
    /// only looked into (the byte children of an explicit state, the member of a chain state) when longer tokens
    /// go on from the node.
    pub(super) fn derived_row(&self, u: usize, mut f: impl FnMut(u32)) {
        let tt = &self.vocab.index.trie;
        let (n_explicit, n_states) = (self.n_explicit(), self.n_states());
        // (state reached, token-trie node of the bytes so far): live states, nodes below the root.
        let mut stack: Vec<(u32, u32)> = Vec::with_capacity(64);
        let mut chain = None;
        self.push_children(u, 0, n_states, &mut stack);
        while let Some((t, v)) = stack.pop() {
            let code = tt.code(v);
            if code != NONE {
                f(code);
            }
            if !tt.has_children(v) {
                continue;
            }
            if (t as usize) < n_explicit {
                self.push_children(t as usize, v, n_states, &mut stack);
            } else {
                let k = self.chain_near(t, chain);
                chain = Some(k);
                self.chain_codes(t, k, v, &mut f);
            }
        }
    }

    /// The allowed tokens of derived state `u`, walked (ascending, no repeats). See also `derived_list`, which
    /// keeps the wide ones.
    pub(super) fn derived_tokens(&self, u: usize) -> Vec<TokenId> {
        let idx = &self.vocab.index;
        let mut ids = Vec::with_capacity(32);
        self.derived_row(u, |code| ids.extend_from_slice(idx.code_tokens(&code)));
        if self.derived_ends(u) {
            ids.extend_from_slice(self.vocab.eog_ids());
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The step of `token` from derived state `u`: its bytes walked down the trie (`FINISHED` for an
    /// end-of-generation id where a member ends).
    pub(super) fn derived_advance(&self, u: usize, token: TokenId) -> Option<u32> {
        if self.vocab.is_eog(token) && self.derived_ends(u) {
            return Some(State::FINISHED.0);
        }
        if !self.vocab.is_text_token(token) {
            return None;
        }
        let mut pos = Pos::Explicit(u as u32);
        for &b in self.vocab.token_bytes(token) {
            pos = self.byte_child(pos, b)?;
        }
        Some(pos.state())
    }
}

/// Drops the rows of the unary states of `e` (see the module doc), compacting the transitions in place; returns
/// the `derived` bits and `unary_byte`s (both empty when no state is derived). `dense`: the dense-row threshold.
pub(super) fn derive_rows(e: &mut Explicit, bytes: &ByteTokens, dense: usize) -> (Vec<u64>, Vec<u8>) {
    let n = e.depth.len();
    if !bytes.complete() || n < 2 {
        return (Vec::new(), Vec::new());
    }
    const BLOCK: usize = 1 << 14;
    let mut unary_byte = vec![0u8; n];
    let mut derived = vec![0u64; n.div_ceil(64)];
    let last = bytes.last();
    // BLOCK is a multiple of 64: each block owns whole words of `derived`.
    derived.par_chunks_mut(BLOCK / 64).zip(unary_byte.par_chunks_mut(BLOCK)).enumerate().for_each(
        |(blk, (bits, ub))| {
            for (i, slot) in ub.iter_mut().enumerate() {
                let s = blk * BLOCK + i;
                let (a, b) = (e.offsets[s] as usize, e.offsets[s + 1] as usize);
                if e.accepting[s / 64] >> (s % 64) & 1 == 1 || b - a >= dense || s + 1 >= n {
                    continue;
                }
                let mut child = None;
                let mut children = 0;
                for j in a..b {
                    if e.tokens[j] > last {
                        break;
                    }
                    if let Some(byte) = bytes.byte_of(e.tokens[j]) {
                        children += 1;
                        child = Some((byte, e.targets[j]));
                    }
                }
                if let (1, Some((byte, t))) = (children, child) {
                    if t as usize == s + 1 {
                        *slot = byte;
                        bits[i / 64] |= 1 << (i % 64);
                    }
                }
            }
        },
    );
    if derived.iter().all(|&w| w == 0) {
        return (Vec::new(), Vec::new());
    }
    // Compaction in place: rows only move towards the front.
    let mut at = 0usize;
    for s in 0..n {
        let (a, b) = (e.offsets[s] as usize, e.offsets[s + 1] as usize);
        e.offsets[s] = at as u32;
        if derived[s / 64] >> (s % 64) & 1 == 0 {
            e.tokens.copy_within(a..b, at);
            e.targets.copy_within(a..b, at);
            at += b - a;
        }
    }
    e.offsets[n] = at as u32;
    e.tokens.truncate(at);
    e.tokens.shrink_to_fit();
    e.targets.truncate(at);
    e.targets.shrink_to_fit();
    (derived, unary_byte)
}

/// Keeps only the byte children (single-byte tokens and their targets) in the rows of the branching states of `e`
/// that allow at most `max` tokens, are not unary (`derived`) and have no precomputed row (fewer than `dense`
/// tokens), compacting the transitions in place; returns their bits (empty when none). See the module doc.
pub(super) fn keep_byte_children(
    e: &mut Explicit,
    bytes: &ByteTokens,
    derived: &[u64],
    dense: usize,
    max: usize,
) -> Vec<u64> {
    let n = e.depth.len();
    if !bytes.complete() || max == 0 || n < 2 {
        return Vec::new();
    }
    let mut bits = vec![0u64; n.div_ceil(64)];
    for (s, w) in (0..n).map(|s| (s, s / 64)) {
        let len = (e.offsets[s + 1] - e.offsets[s]) as usize;
        let unary = derived.get(w).is_some_and(|&d| d >> (s % 64) & 1 == 1);
        if !unary && len <= max && len < dense {
            bits[w] |= 1 << (s % 64);
        }
    }
    if bits.iter().all(|&w| w == 0) {
        return Vec::new();
    }
    // Compaction in place: rows only move towards the front.
    let last = bytes.last();
    let mut at = 0usize;
    for s in 0..n {
        let (a, b) = (e.offsets[s] as usize, e.offsets[s + 1] as usize);
        e.offsets[s] = at as u32;
        let byte_row = bits[s / 64] >> (s % 64) & 1 == 1;
        for j in a..b {
            let t = e.tokens[j];
            if !byte_row || (t <= last && bytes.byte_of(t).is_some()) {
                e.tokens[at] = t;
                e.targets[at] = e.targets[j];
                at += 1;
            }
        }
    }
    e.offsets[n] = at as u32;
    e.tokens.truncate(at);
    e.tokens.shrink_to_fit();
    e.targets.truncate(at);
    e.targets.shrink_to_fit();
    bits
}
