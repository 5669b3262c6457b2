//! Decoding queries: the tokens a state allows, the step a token takes, forced continuations, depths.

use super::*;

impl Automaton {
    pub(super) fn check(&self, state: State) -> Result<()> {
        if state == State::FINISHED {
            Ok(())
        } else if (state.0 as usize) < self.n_states() {
            if self.ready(state) {
                Ok(())
            } else {
                Err(self.malformed_state(state))
            }
        } else {
            Err(Error::new(
                ErrorKind::InvalidState,
                format!("state {} is not a state of this automaton (it has {} states)", state.0, self.n_states()),
            ))
        }
    }

    /// What `state` (`< n_states()`) is.
    #[inline]
    pub(super) fn kind(&self, state: State) -> Kind {
        let s = state.0 as usize;
        let e = self.n_explicit();
        if s < e {
            return Kind::Explicit(s);
        }
        let idx = (s - e) as u32;
        // (`chain_base[0] == 0 <= idx`, checked at load.)
        let (k, base) = self.chain_base.last_at_most(idx).unwrap_or((0, 0));
        let depth = self.chain_first_depth.get(k) + idx - base;
        Kind::Chain(self.chain_member.get(k) as usize, depth as usize)
    }

    /// The state of member `m`'s chain position at depth `d`, given the state of a position at depth `d0`.
    #[inline]
    pub(super) fn chain_step(state: State, from_depth: usize, to_depth: usize) -> State {
        State(state.0 + (to_depth - from_depth) as u32)
    }

    #[inline]
    pub(crate) fn range(&self, s: usize) -> std::ops::Range<usize> {
        let (from, to) = self.offsets.pair(s);
        from as usize..to as usize
    }

    /// Calls `f(tokens, length)` for every text-token byte string that is a prefix of `rest` (with the ids that
    /// stand for it), shortest first.
    #[inline]
    pub(crate) fn prefix_tokens(&self, rest: &[u8], mut f: impl FnMut(&[TokenId], usize)) {
        let index = &self.vocab.index;
        index.trie.prefixes(rest, |code, len| f(index.code_tokens(&code), len));
    }

    /// The tokens allowed in `state`, ascending (without copying the rows of explicit states stored at the full
    /// width). Empty for an invalid
    /// state.
    #[inline]
    pub fn allowed(&self, state: State) -> Allowed<'_> {
        if state == State::FINISHED {
            return Allowed(AllowedRepr::Borrowed(self.vocab.eog_ids()));
        }
        if state.0 as usize >= self.n_states() || !self.ready(state) {
            return Allowed(AllowedRepr::Borrowed(&[]));
        }
        match self.kind(state) {
            Kind::Explicit(s) if self.is_derived(s) => Allowed::derived(self.derived_list(s)),
            Kind::Explicit(s) => Allowed::row(self.tokens.slice(self.range(s))),
            Kind::Chain(m, d) => {
                let rest = self.member_rest(m, d);
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
        if state.0 as usize >= self.n_states() || !self.ready(state) {
            return false;
        }
        match self.kind(state) {
            Kind::Explicit(s) => self.accepting[s / 64] >> (s % 64) & 1 == 1,
            Kind::Chain(m, d) => d == self.member_len(m),
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
            Kind::Explicit(s) if self.is_derived(s) => match self.derived_advance(s, token) {
                Some(t) if t == State::FINISHED.0 => Ok(Step::Finished),
                Some(t) => Ok(Step::Next(State(t))),
                None => Err(self.rejected(state, token)),
            },
            Kind::Explicit(s) => {
                let r = self.range(s);
                match self.tokens.slice(r.clone()).binary_search(token) {
                    Ok(i) => {
                        let t = self.targets.get(r.start + i);
                        Ok(if t == State::FINISHED.0 { Step::Finished } else { Step::Next(State(t)) })
                    }
                    Err(_) => Err(self.rejected(state, token)),
                }
            }
            Kind::Chain(m, d) => {
                let rest = self.member_rest(m, d);
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

    pub(super) fn rejected(&self, state: State, token: TokenId) -> Error {
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

    /// The only member left below `state`, if one is.
    pub(super) fn single_member_of(&self, state: State) -> Option<usize> {
        if state == State::FINISHED || state.0 as usize >= self.n_states() || !self.ready(state) {
            return None;
        }
        match self.kind(state) {
            Kind::Explicit(s) => {
                let m = self.single_member.get(s);
                (m != NONE).then_some(m as usize)
            }
            Kind::Chain(m, _) => Some(m),
        }
    }

    /// When only one member remains below `state`: the rest of its bytes and a token path spelling them, so an
    /// engine can jump forward. `None` when several members remain or for `FINISHED`.
    pub fn forced(&self, state: State) -> Option<Forced> {
        let m = self.single_member_of(state)?;
        // (`None` past the end: a loaded file's single-member table is not checked against depths; nothing else
        // reads it.)
        let bytes = self.member_from(m, self.depth(state)?)?.into_owned();
        let len = self.member_len(m);
        let mut tokens = Vec::new();
        let mut s = state;
        let mut depth = self.depth(s)?;
        while depth < len {
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
        if state.0 as usize >= self.n_states() || !self.ready(state) {
            return None;
        }
        Some(match self.kind(state) {
            Kind::Explicit(s) => self.depth.get(s) as usize,
            Kind::Chain(_, d) => d,
        })
    }
}
