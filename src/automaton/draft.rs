//! Drafting and checking tokens for jump-forward and speculative decoding.
//!
//! - [`Automaton::forced_bytes`]: the bytes every member still possible in a state continues with (the rest of the
//!   only member left, a template's prefix at the start, its suffix once a member's own bytes are unique);
//! - [`Automaton::draft`]: those bytes as a token run from the state (greedy longest tokens the state allows, the
//!   path [`Automaton::forced`] takes), cut at a number of tokens. An engine decodes the run as one batch
//!   (jump-forward) or hands it to its speculative path as draft tokens: they are the only text the set allows, so
//!   the target model's verification of them is a formality for the constraint;
//! - [`Automaton::validate_draft`]: how many tokens of a draft of any origin (a draft model, n-gram lookup, the forced
//!   run) the set accepts from a state, and the state after each, without changing anything;
//! - [`History`]: one sequence's states, one per accepted token, so a rejected draft is rolled back by dropping
//!   states (a state is one integer: nothing else to restore).
//!
//! A forced run stops where members part, where the vocabulary cannot end a token exactly at the end of the forced
//! bytes, and at the cut; past a complete member ([`Draft::complete`]) nothing but an end-of-generation id (or, for
//! an open template, the hand-over) can follow, and the run includes neither.

use super::*;
use std::borrow::Cow;

/// A forced token run from a state (see [`Automaton::draft`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Draft {
    /// The tokens, in order; each is allowed in the state before it.
    pub tokens: Vec<TokenId>,
    /// The state after each token (as long as `tokens`).
    pub states: Vec<State>,
    /// The bytes the tokens spell (a prefix of [`Automaton::forced_bytes`] of the starting state).
    pub bytes: Vec<u8>,
    /// After the run the output is one complete member (or segment) and nothing else is possible: only
    /// end-of-generation ids are allowed ([`crate::End::Eog`]) or the segment is handed over
    /// ([`crate::End::Open`]). An engine may finish the answer there without another model step.
    pub complete: bool,
}

impl Draft {
    /// The state after the run: the last of [`Draft::states`], or `from` (the starting state) for an empty run.
    pub fn end_state(&self, from: State) -> State {
        self.states.last().copied().unwrap_or(from)
    }
}

impl Automaton {
    /// The bytes that every member still possible in `state` continues with: the rest of the member when one is
    /// left, the longest common prefix of the rests otherwise (empty where members part or one ends; empty for
    /// `FINISHED` and invalid states). For a templated automaton this covers the prefix at the start and the
    /// suffix once the member is known.
    pub fn forced_bytes(&self, state: State) -> Cow<'_, [u8]> {
        let Some(depth) = self.depth(state) else { return Cow::Borrowed(&[]) };
        // Found by walking the automaton from `state` (no lookup in the member table, so a lazily loaded automaton
        // checks only the states walked, not the whole file): while several members remain, the state is not
        // accepting and every token it allows begins with one byte `b`, every member below continues with `b`
        // (each member left is reachable, so its next byte begins an allowed token) and the one-byte token `b`
        // leads to the state of all of them.
        let mut s = state;
        let mut at = depth;
        loop {
            if let Some(m) = self.single_member_of(s) {
                return self.member_from(m, depth).unwrap_or_default();
            }
            let Some(b) = self.only_next_byte(s) else { return self.bytes_below(s, depth, at) };
            let Some(next) = self.one_byte_step(s, b) else { return self.forced_bytes_by_range(state, depth) };
            match self.depth(next) {
                Some(d) if d == at + 1 => (s, at) = (next, d),
                _ => return Cow::Borrowed(&[]), // a loaded file whose transitions do not add their bytes
            }
        }
    }

    /// The one byte every text token allowed in `state` begins with, when the state is not accepting and has
    /// several members below it (else `None`: members part or one ends here).
    fn only_next_byte(&self, state: State) -> Option<u8> {
        if self.is_accepting(state) {
            return None;
        }
        let mut first = None;
        for &t in self.allowed(state).iter() {
            let b = *self.vocab.token_bytes(t).first()?;
            match first {
                None => first = Some(b),
                Some(f) if f != b => return None,
                Some(_) => {}
            }
        }
        first
    }

    /// The state after the one-byte token `b` from `state`, if the vocabulary has one that `state` allows.
    fn one_byte_step(&self, state: State, b: u8) -> Option<State> {
        let t = self.allowed(state).iter().copied().find(|&t| self.vocab.token_bytes(t) == [b])?;
        match self.advance(state, t).ok()? {
            Step::Next(next) => Some(next),
            Step::Finished => None,
        }
    }

    /// The bytes `depth..at` of the text leading to `state` (at depth `at`): taken from a member below it, reached
    /// by following the first text token of each state down to one member.
    fn bytes_below(&self, state: State, depth: usize, at: usize) -> Cow<'_, [u8]> {
        let mut s = state;
        let mut d = at;
        let none = Cow::Borrowed(&[][..]);
        loop {
            if let Some(m) = self.single_member_of(s) {
                return match self.member_from(m, depth) {
                    Some(Cow::Borrowed(rest)) => Cow::Borrowed(rest.get(..at - depth).unwrap_or(&[])),
                    Some(Cow::Owned(mut rest)) if rest.len() >= at - depth => {
                        rest.truncate(at - depth);
                        Cow::Owned(rest)
                    }
                    _ => none,
                };
            }
            let Some(t) = self.allowed(s).iter().copied().find(|&t| !self.vocab.is_eog(t)) else { return none };
            let Ok(Step::Next(next)) = self.advance(s, t) else { return none };
            match self.depth(next) {
                Some(nd) if nd > d => (s, d) = (next, nd), // progress bounds the walk by a member's length
                _ => return none,
            }
        }
    }

    /// [`Automaton::forced_bytes`] from the member table: the common prefix of the members in the state's range.
    /// For the vocabularies that lack a one-byte token where the walk needs one (it checks the whole file once
    /// when the automaton was loaded lazily).
    fn forced_bytes_by_range(&self, state: State, depth: usize) -> Cow<'_, [u8]> {
        let range = self.member_range(state);
        if range.is_empty() {
            return Cow::Borrowed(&[]);
        }
        // Members are sorted by bytes: the common prefix of a contiguous range is that of its first and last.
        let (Some(first), Some(last)) = (self.member_from(range.start, depth), self.member_from(range.end - 1, depth))
        else {
            return Cow::Borrowed(&[]);
        };
        let n = first.iter().zip(last.iter()).take_while(|(x, y)| x == y).count();
        match first {
            Cow::Borrowed(f) => Cow::Borrowed(&f[..n]),
            Cow::Owned(mut f) => {
                f.truncate(n);
                Cow::Owned(f)
            }
        }
    }

    /// Whether `state` ends the only member left (nothing but its end, or the hand-over of its segment, follows).
    pub fn is_complete(&self, state: State) -> bool {
        match (self.single_member_of(state), self.depth(state)) {
            (Some(m), Some(d)) => self.member_len(m) == d,
            _ => false,
        }
    }

    /// The forced token run from `state`, at most `max_tokens` long: tokens spelling a prefix of
    /// [`Automaton::forced_bytes`] (at each step the longest token the current state allows whose bytes begin what
    /// is left, the smallest id among equals: the path [`Automaton::forced`] takes), with the state after each.
    /// Empty for `FINISHED`, invalid states and where nothing is forced. Call again from [`Draft::end_state`] to
    /// go on after a cut.
    pub fn draft(&self, state: State, max_tokens: usize) -> Draft {
        let forced = self.forced_bytes(state);
        let mut d = Draft::default();
        let mut s = state;
        while d.tokens.len() < max_tokens && d.bytes.len() < forced.len() {
            let rest = &forced[d.bytes.len()..];
            let mut best: Option<(usize, TokenId, State)> = None;
            self.prefix_tokens(rest, |ids, len| {
                for &t in ids {
                    if let Ok(Step::Next(next)) = self.advance(s, t) {
                        if best.map_or(true, |(l, b, _)| len > l || (len == l && t < b)) {
                            best = Some((len, t, next));
                        }
                    }
                }
            });
            let Some((len, token, next)) = best.filter(|&(len, _, _)| len > 0) else { break };
            d.tokens.push(token);
            d.states.push(next);
            d.bytes.extend_from_slice(&rest[..len]);
            s = next;
        }
        d.complete = d.bytes.len() == forced.len() && self.is_complete(s);
        d
    }

    /// Checks a draft: the states after each token of the longest prefix of `tokens` that the set accepts from
    /// `state`, in order (its length is the number of tokens accepted; an end-of-generation id where a member is
    /// complete leads to `FINISHED`, which accepts only more end-of-generation ids). Nothing is changed: a
    /// speculative engine keeps the states it needs (see [`History`]). Errors: [`ErrorKind::InvalidState`] for a
    /// state that does not exist; a rejected or out-of-range token only ends the accepted prefix.
    pub fn validate_draft(&self, state: State, tokens: &[TokenId]) -> Result<Vec<State>> {
        self.check(state)?;
        let mut out = Vec::with_capacity(tokens.len());
        let mut s = state;
        for &t in tokens {
            s = match self.advance(s, t) {
                Ok(Step::Next(next)) => next,
                Ok(Step::Finished) => State::FINISHED,
                Err(_) => break,
            };
            out.push(s);
        }
        Ok(out)
    }
}

/// One sequence's decoding states, one per accepted token, for engines that verify drafts and roll back (vLLM's
/// `StructuredOutputGrammar`, SGLang's grammar objects, llama-server's speculative slot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// `states[0]` is the state before any token; `states[i]` the state after `i` accepted tokens.
    states: Vec<State>,
}

impl History {
    /// A history starting in `start` (usually [`Automaton::start`]).
    pub fn new(start: State) -> History {
        History { states: vec![start] }
    }

    /// The current state.
    pub fn state(&self) -> State {
        *self.states.last().expect("a history holds its start")
    }

    /// The number of tokens accepted (and not rolled back).
    pub fn n_accepted(&self) -> usize {
        self.states.len() - 1
    }

    /// Accepts one token ([`Automaton::advance`]'s errors; the history is unchanged on an error).
    pub fn accept(&mut self, a: &Automaton, token: TokenId) -> Result<State> {
        let state = self.state();
        let next = match state {
            State::FINISHED => a.advance(state, token).map(|_| State::FINISHED)?,
            _ => match a.advance(state, token)? {
                Step::Next(s) => s,
                Step::Finished => State::FINISHED,
            },
        };
        self.states.push(next);
        Ok(next)
    }

    /// Accepts the longest prefix of `tokens` the set allows ([`Automaton::validate_draft`]) and returns its length.
    pub fn accept_draft(&mut self, a: &Automaton, tokens: &[TokenId]) -> Result<usize> {
        let states = a.validate_draft(self.state(), tokens)?;
        let n = states.len();
        self.states.extend(states);
        Ok(n)
    }

    /// Undoes the last `n` accepted tokens. More than were accepted is [`ErrorKind::InvalidArgument`] and changes
    /// nothing.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.n_accepted() {
            return Err(Error::invalid(format!(
                "cannot roll back {n} tokens: only {} were accepted",
                self.n_accepted()
            )));
        }
        self.states.truncate(self.states.len() - n);
        Ok(())
    }
}
