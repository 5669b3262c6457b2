//! Sets inside an output: compiling with a [`Template`], member identity, and the hand-over at the end of an open
//! segment.
//!
//! An automaton compiled with [`Automaton::compile_template`] is the automaton of the segments
//! `prefix + render(m) + suffix` (its members are the whole segments, sorted by their bytes). It also records
//! each segment's input index (member identity) and the template. Invariants:
//! - `member_input[r]` is the first input index of the member of rank `r`, or `NONE` when it was dropped;
//! - every segment starts with the template's prefix and ends with its suffix;
//! - with [`End::Open`], no segment is a proper prefix of another, so a complete segment's state allows no token of
//!   the set and no end-of-generation token: it is where the engine hands the output over.

use super::*;
use crate::template::{End, Render, Template};
use std::borrow::Cow;
use std::ops::Range;

// Section tags of a templated automaton (optional: absent for a bare set).
const A_TEMPLATE_META: u32 = 16;
const A_TEMPLATE_BYTES: u32 = 17;
const A_MEMBER_INPUT: u32 = 18;

/// The template of an automaton compiled with one, and its members' input indices.
pub(crate) struct Segments {
    template: Template,
    /// By member rank: the caller's input index of the member (its first copy), or `NONE` when dropped.
    member_input: Array<u32>,
}

impl Segments {
    /// The segments of a compile: the template and, by member rank, the input index (`NONE` when dropped).
    pub(crate) fn new(template: Template, member_input: Vec<u32>) -> Segments {
        Segments { template, member_input: member_input.into() }
    }
}

/// A token that finishes a segment and goes on past it: the engine may take it when what follows the segment
/// accepts the token's last `overflow` bytes (see [`Automaton::crossing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Crossing {
    /// The token.
    pub token: TokenId,
    /// The member whose segment the token finishes (see [`Automaton::member_at`]).
    pub member: usize,
    /// How many of the token's last bytes lie past the segment's end (at least 1).
    pub overflow: usize,
}

impl Segments {
    pub(crate) fn memory_usage(&self) -> usize {
        self.member_input.size_bytes() + self.template.prefix.len() + self.template.suffix.len()
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        let t = &self.template;
        let render = match t.render {
            Render::Raw => 0u32,
            Render::JsonString => 1,
            Render::JsonText => 2,
        };
        let end = match t.end {
            End::Eog => 0u32,
            End::Open => 1,
        };
        w.section(A_TEMPLATE_META, &[render, end, t.prefix.len() as u32, t.suffix.len() as u32]);
        w.section(A_TEMPLATE_BYTES, &[&t.prefix[..], &t.suffix[..]].concat());
        w.section(A_MEMBER_INPUT, &self.member_input);
    }

    /// The segments of a saved automaton, if it has them (checked by [`Segments::validate`]).
    pub(crate) fn read(r: &Reader) -> Result<Option<Segments>> {
        if !r.has(A_TEMPLATE_META) {
            return Ok(None);
        }
        let meta: Array<u32> = r.array(A_TEMPLATE_META)?;
        let bytes: Array<u8> = r.array(A_TEMPLATE_BYTES)?;
        ensure(meta.len() == 4, || "template metadata".into())?;
        let render = match meta[0] {
            0 => Render::Raw,
            1 => Render::JsonString,
            2 => Render::JsonText,
            x => return Err(Error::malformed(format!("libtrie file: unknown template rendering {x}"))),
        };
        let end = match meta[1] {
            0 => End::Eog,
            1 => End::Open,
            x => return Err(Error::malformed(format!("libtrie file: unknown template end {x}"))),
        };
        let (p, q) = (meta[2] as usize, meta[3] as usize);
        ensure(p.checked_add(q) == Some(bytes.len()), || "template prefix and suffix lengths".into())?;
        let template = Template { prefix: bytes[..p].to_vec(), suffix: bytes[p..].to_vec(), render, end };
        Ok(Some(Segments { template, member_input: r.array(A_MEMBER_INPUT)? }))
    }

    /// Checks a loaded automaton's segments: one input index per member, every segment framed by the template.
    pub(crate) fn validate(&self, a: &Automaton) -> Result<()> {
        let n = a.member_offsets.len() - 1;
        ensure(self.member_input.len() == n, || "member input indices".into())?;
        let (p, q) = (&self.template.prefix[..], &self.template.suffix[..]);
        const BLOCK: usize = 1 << 14;
        let bad = (0..n.div_ceil(BLOCK)).into_par_iter().find_map_any(|b| {
            let mut bad = None;
            a.for_each_member(b * BLOCK..((b + 1) * BLOCK).min(n), |m, s| {
                if bad.is_none() && !(s.len() >= p.len() + q.len() && s.starts_with(p) && s.ends_with(q)) {
                    bad = Some(m);
                }
            });
            bad
        });
        ensure(bad.is_none(), || format!("member {} is not framed by the template", bad.unwrap()))
    }
}

impl Automaton {
    /// The template this automaton was compiled with (`None` for [`Automaton::compile`] and
    /// [`Automaton::with_changes`]).
    pub fn template(&self) -> Option<&Template> {
        self.segments.as_ref().map(|s| &s.template)
    }

    /// Whether segments are handed over at their end ([`End::Open`]) instead of ending with end-of-generation.
    #[inline]
    pub fn is_open(&self) -> bool {
        matches!(&self.segments, Some(s) if s.template.end == End::Open)
    }

    /// The member whose segment is complete in `state` (where [`Automaton::is_accepting`] holds): its index in
    /// the caller's input for [`Automaton::compile_template`], its rank (byte order of the members, see
    /// [`Automaton::member_bytes`]) for automata compiled without a template. `None` elsewhere, for `FINISHED`
    /// and invalid states.
    pub fn member_at(&self, state: State) -> Option<usize> {
        self.member_id(self.rank_at(state)?)
    }

    /// The rank of the member whose segment (or string) is complete in `state`, dropped members included (`None`
    /// where no member is complete, for `FINISHED` and invalid states).
    pub(super) fn rank_at(&self, state: State) -> Option<usize> {
        if state == State::FINISHED || !self.is_accepting(state) || self.check_whole().is_err() {
            return None;
        }
        match self.kind(state) {
            Kind::Chain(m, _) => Some(m),
            Kind::Explicit(s) => {
                let path = self.path(s)?;
                self.first_rank_from(&path, 0).filter(|&r| self.member(r) == path)
            }
        }
    }

    /// The ranks of the members still possible in `state` (their segments begin with the text so far), as a
    /// range of ranks in byte order; empty for `FINISHED` and invalid states. Members dropped as unreachable
    /// may lie inside the range (see [`Automaton::possible_members`]).
    pub fn member_range(&self, state: State) -> Range<usize> {
        if state == State::FINISHED || state.0 as usize >= self.n_states() || self.check_whole().is_err() {
            return 0..0;
        }
        match self.kind(state) {
            Kind::Chain(m, _) => m..m + 1,
            Kind::Explicit(s) => match self.path(s) {
                None => 0..0,
                Some(path) => {
                    let n = self.member_offsets.len() - 1;
                    let lo = self.first_rank_from(&path, 0).unwrap_or(n);
                    // Members beginning with `path` are contiguous from `lo`.
                    let (mut a, mut b) = (lo, n);
                    while a < b {
                        let mid = (a + b) / 2;
                        if self.member(mid).starts_with(&path) {
                            a = mid + 1;
                        } else {
                            b = mid;
                        }
                    }
                    lo..a
                }
            },
        }
    }

    /// The members still possible in `state`, by id (see [`Automaton::member_at`]), in byte order of their
    /// segments; members dropped as unreachable are left out for templated automata.
    pub fn possible_members(&self, state: State) -> Vec<usize> {
        self.member_range(state).filter_map(|r| self.member_id(r)).collect()
    }

    /// The segment (or, without a template, the member) of rank `rank`, or `None` past the last.
    /// (Borrowed from the automaton, or decoded when the members are front-coded: large automata, see
    /// [`Automaton::FORMAT_VERSION`].)
    pub fn member_bytes(&self, rank: usize) -> Option<Cow<'_, [u8]>> {
        (rank + 1 < self.member_offsets.len() && self.check_whole().is_ok()).then(|| self.member(rank))
    }

    /// The id of the member of rank `rank` (its input index for templated automata, else the rank), `None` when
    /// dropped or out of range.
    pub fn member_id(&self, rank: usize) -> Option<usize> {
        if rank + 1 >= self.member_offsets.len() || self.check_whole().is_err() {
            return None;
        }
        match &self.segments {
            Some(seg) => (seg.member_input[rank] != NONE).then_some(seg.member_input[rank] as usize),
            None => Some(rank),
        }
    }

    /// Tokens that finish a segment below `state` and go on past its end, ascending by token (one entry per
    /// token and member), for an automaton with [`End::Open`] (empty otherwise). They are not in `state`'s mask:
    /// the engine offers each one when the constraint that follows accepts its last `overflow` bytes (XGrammar's
    /// `accept_string`, a llama.cpp grammar), then hands over with [`Automaton::cross`]. Every valid
    /// tokenization of segment + continuation is either in the mask or here. Costs one token-trie walk per
    /// possible member whose rest is shorter than the longest token (cheap near a segment's end), plus one entry
    /// per token: one byte before the end, every token that begins with that byte crosses (tens of thousands on
    /// byte-level vocabularies); [`Automaton::crossing_where`] prunes them by what may follow.
    pub fn crossing(&self, state: State) -> Vec<Crossing> {
        self.crossing_where(state, |_, _| true)
    }

    /// [`Automaton::crossing`] restricted to the tokens whose overflow the constraint that follows can begin
    /// with: `keep(member, overflow_prefix)` is asked for each overflow prefix before the tokens that extend it
    /// (a refused prefix skips all of them), so a JSON value that must begin with `{` costs a few calls, not one
    /// per token. A crossing token is returned when `keep` accepted every prefix of its overflow.
    pub fn crossing_where(&self, state: State, mut keep: impl FnMut(usize, &[u8]) -> bool) -> Vec<Crossing> {
        let mut out = Vec::new();
        if !self.is_open() || state == State::FINISHED || state.0 as usize >= self.n_states() {
            return out;
        }
        if self.check_whole().is_err() {
            return out;
        }
        let Some(depth) = self.depth(state) else { return out };
        let index = &self.vocab.index;
        let max = index.max_pattern_len as usize;
        for rank in self.member_range(state) {
            let Some(id) = self.member_id(rank) else { continue };
            let Some(rest) = self.member_from(rank, depth) else { continue };
            if rest.is_empty() || rest.len() >= max {
                continue;
            }
            let u = index.trie.walk(&rest);
            if u == NONE {
                continue;
            }
            index.trie.below(
                u,
                |overflow| keep(id, overflow),
                |code, extra| {
                    for &token in index.code_tokens(&code) {
                        out.push(Crossing { token, member: id, overflow: extra });
                    }
                },
            );
        }
        out.sort_unstable_by_key(|c| (c.token, c.member));
        out
    }

    /// The hand-over by `token`, which must finish a segment below `state` and go on past it (an entry of
    /// [`Automaton::crossing`]): the member and how many of the token's bytes overflow. Errors:
    /// [`ErrorKind::TokenRejected`] when the token does not cross a segment's end here (or the automaton is not
    /// open); [`ErrorKind::InvalidState`] / [`ErrorKind::InvalidArgument`] for a bad state or token id.
    pub fn cross(&self, state: State, token: TokenId) -> Result<Crossing> {
        if state != State::FINISHED {
            self.check(state)?;
        }
        self.check_whole()?;
        if token as usize >= self.vocab.n_vocab() {
            return Err(self.rejected(state, token));
        }
        let depth = self.depth(state);
        if !self.is_open() || depth.is_none() || !self.vocab.is_text_token(token) {
            return Err(self.not_crossing(state, token));
        }
        let bytes = self.vocab.token_bytes(token);
        let depth = depth.unwrap();
        let Some(first) = self.member_range(state).next() else { return Err(self.not_crossing(state, token)) };
        // The segment the token finishes is the text so far + bytes[..k] for some 1 <= k < len.
        let Some(mut key) = self.member(first).get(..depth).map(<[u8]>::to_vec) else {
            return Err(self.not_crossing(state, token));
        };
        for k in 1..bytes.len() {
            key.push(bytes[k - 1]);
            if let Some(r) = self.first_rank_from(&key, first).filter(|&r| *self.member(r) == key[..]) {
                if let Some(member) = self.member_id(r) {
                    return Ok(Crossing { token, member, overflow: bytes.len() - k });
                }
            }
        }
        Err(self.not_crossing(state, token))
    }

    fn not_crossing(&self, state: State, token: TokenId) -> Error {
        let why = if self.is_open() { "" } else { " (the automaton is not open: compile with End::Open)" };
        Error::new(
            ErrorKind::TokenRejected,
            format!(
                "token {token} {} does not finish a segment and go on past it in state {}{why}",
                show_bytes(self.vocab.token_bytes(token), 40),
                state.0
            ),
        )
    }

    /// The text so far in explicit state `s`: the first `depth(s)` bytes of a member below it, found by walking
    /// down transitions until a state with one member left (`None` on a crafted file whose walk does not end).
    fn path(&self, s: usize) -> Option<Cow<'_, [u8]>> {
        let depth = self.depth.get(s) as usize;
        let mut cur = s;
        loop {
            let single = self.single_member.get(cur);
            if single != NONE {
                return Self::prefix(self.member(single as usize), depth);
            }
            let next = if self.is_unary(cur) {
                cur as u32 + 1
            } else {
                self.targets.slice(self.range(cur)).iter().find(|&t| t != State::FINISHED.0)?
            };
            match self.kind(State(next)) {
                Kind::Chain(m, _) => return Self::prefix(self.member(m), depth),
                Kind::Explicit(e) if self.depth.get(e) > self.depth.get(cur) => cur = e,
                Kind::Explicit(_) => return None,
            }
        }
    }

    /// The first `depth` bytes of `member`, if it is that long.
    fn prefix(member: Cow<'_, [u8]>, depth: usize) -> Option<Cow<'_, [u8]>> {
        match member {
            Cow::Borrowed(b) => b.get(..depth).map(Cow::Borrowed),
            Cow::Owned(mut v) if v.len() >= depth => {
                v.truncate(depth);
                Some(Cow::Owned(v))
            }
            Cow::Owned(_) => None,
        }
    }

    /// The first rank at or after `from` whose member is `>= key` (byte order), if any.
    fn first_rank_from(&self, key: &[u8], from: usize) -> Option<usize> {
        let n = self.member_offsets.len() - 1;
        let (mut lo, mut hi) = (from, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if *self.member(mid) < *key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < n).then_some(lo)
    }
}
