//! One sequence of a [`ToolCalls`] engine: its positions (one per accepted token, for rollback) and the argument
//! matchers of its calls.

use super::marker::{find, tail};
use super::{Mode, ToolCalls, Which};
use crate::error::{Error, ErrorKind, Result};
use crate::util::mask::set_bits;
use crate::vocab::TokenId;
use crate::{State, Step};
use std::sync::Arc;

/// The matcher of one call's arguments (the tool's argument grammar, then the format's close), supplied by the
/// integration (an xgrammar `GrammarMatcher`, a llama.cpp grammar). Made per call by [`ArgFactory::make`].
pub trait ArgMatcher {
    /// Advances by `token`; false (nothing changed) when the grammar does not allow it.
    fn accept_token(&mut self, token: TokenId) -> bool;
    /// Writes the tokens allowed next into `row` (every word written).
    fn fill_bitmask(&mut self, row: &mut [u32]) -> Result<()>;
    /// Undoes the last `n` accepted tokens.
    fn rollback(&mut self, n: usize);
    /// Whether the whole grammar has been read (only a stop token could follow). `None`: the matcher cannot
    /// say; the engine then asks whether a stop token is accepted (and rolls it back).
    fn is_completed(&mut self) -> Option<bool> {
        None
    }
    /// The matcher as [`std::any::Any`], for an integration that hands its own matcher object back to its caller
    /// ([`CallsMatcher::current_arguments`]); `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Makes the argument matcher of each call.
pub trait ArgFactory {
    /// The matcher of tool `tool`'s arguments and the format's close; `last`: no further call may follow (the
    /// close alone, without a list's separator). An error rejects the token that completed the name.
    fn make(&mut self, tool: usize, last: bool) -> Result<Box<dyn ArgMatcher>>;
    /// Told once per call when the name so far leaves only tool `tool` (its rest is forced): a matcher that is
    /// costly to build (a registry's schema) can be prepared while the rest of the name is decoded.
    fn prefetch(&mut self, _tool: usize, _last: bool) {}
}

/// Where a sequence is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Phase {
    /// Free text until the marker ([`Mode::Auto`], and between calls written in free text).
    Free = 0,
    /// A tool's name.
    Name = 1,
    /// The tool's arguments (and the format's close).
    Args = 2,
    /// Only a stop token.
    End = 3,
    /// Ended by a stop token.
    Done = 4,
}

impl Phase {
    /// `"free"`, `"name"`, `"args"`, `"end"`, `"done"`.
    pub fn as_str(self) -> &'static str {
        ["free", "name", "args", "end", "done"][self as usize]
    }
}

/// The position after a token.
#[derive(Clone, Copy, Debug)]
struct Pos {
    phase: Phase,
    /// The name automaton (`Name`).
    which: Which,
    state: State,
    /// The latest argument matcher (index into `CallsMatcher::matchers`), kept by every later position so that a
    /// rollback knows which matchers are still needed.
    matcher: Option<u32>,
    /// The matcher accepted this position's token (a rollback over it rolls the matcher back by one).
    took: bool,
    /// Bytes of the marker at the end of the output (`Free`).
    pending: u32,
    /// After a call (`Free`) of a required answer or of a format with its own marker: only whitespace, then the
    /// marker (or a stop).
    gap: bool,
    /// The start of a required call with a marker: the marker's own token is allowed too.
    opening: bool,
    /// Calls completed.
    calls: u32,
    /// The tool of the current (or last) call.
    tool: Option<u32>,
    /// The prefetch of this name was told.
    told: bool,
}

/// One sequence (see the module docs of [`crate::calls`]).
pub struct CallsMatcher {
    calls: Arc<ToolCalls>,
    history: Vec<Pos>,
    /// Dropped before the factory that made them (fields drop in this order).
    matchers: Vec<Box<dyn ArgMatcher>>,
    factory: Box<dyn ArgFactory>,
    error: Option<String>,
}

impl std::fmt::Debug for CallsMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallsMatcher").field("history", &self.history).field("matchers", &self.matchers.len()).finish()
    }
}

impl CallsMatcher {
    /// A sequence at its start.
    pub fn new(calls: Arc<ToolCalls>, factory: Box<dyn ArgFactory>) -> CallsMatcher {
        let mut m = CallsMatcher { calls, factory, history: Vec::new(), matchers: Vec::new(), error: None };
        m.reset();
        m
    }

    /// Back to the start (every matcher dropped).
    pub fn reset(&mut self) {
        let c = &self.calls;
        let start = if c.config.mode == Mode::Auto {
            Pos {
                phase: Phase::Free,
                which: Which::First,
                state: State(0),
                matcher: None,
                took: false,
                pending: 0,
                gap: false,
                opening: false,
                calls: 0,
                tool: None,
                told: false,
            }
        } else if c.opener.is_some() {
            Pos { opening: true, ..self.name(Which::Opener, None, 0) }
        } else {
            self.name(Which::First, None, 0)
        };
        self.matchers.clear();
        self.history = vec![start];
    }

    fn name(&self, which: Which, matcher: Option<u32>, calls: u32) -> Pos {
        Pos {
            phase: Phase::Name,
            which,
            state: self.calls.names(which).automaton.start(),
            matcher,
            took: false,
            pending: 0,
            gap: false,
            opening: false,
            calls,
            tool: None,
            told: false,
        }
    }

    fn cur(&self) -> Pos {
        *self.history.last().expect("the start position is never rolled back")
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<ToolCalls> {
        &self.calls
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.cur().phase
    }

    /// Calls completed so far.
    pub fn calls_so_far(&self) -> usize {
        self.cur().calls as usize
    }

    /// The tool of the current call once its name is complete (kept after the call until the next name begins).
    pub fn tool(&self) -> Option<usize> {
        self.cur().tool.map(|t| t as usize)
    }

    /// Whether a stop token ended the answer.
    pub fn is_terminated(&self) -> bool {
        self.phase() == Phase::Done
    }

    /// Tokens accepted (and not rolled back) since the start.
    pub fn n_accepted(&self) -> usize {
        self.history.len() - 1
    }

    /// The argument matcher of the current call while its arguments are decoded ([`Phase::Args`]), else `None`:
    /// where the sequence's mask is exactly that matcher's, an integration may apply its matcher itself (llama.cpp
    /// checks a sampled token against a grammar without masking the whole vocabulary).
    pub fn current_arguments(&self) -> Option<&dyn ArgMatcher> {
        let cur = self.cur();
        if cur.phase != Phase::Args {
            return None;
        }
        cur.matcher.and_then(|m| self.matchers.get(m as usize)).map(|b| b.as_ref())
    }

    /// The tokens forced from here, at most `max_tokens`: in a name, the name automaton's forced run (the
    /// format's fixed text, the rest of the only name left, the suffix; [`crate::Automaton::draft`]); empty in
    /// every other phase (what an argument matcher or free text writes is not forced here).
    pub fn draft(&self, max_tokens: usize) -> Vec<TokenId> {
        let cur = self.cur();
        if cur.phase != Phase::Name {
            return Vec::new();
        }
        self.calls.names(cur.which).automaton.draft(cur.state, max_tokens).tokens
    }

    /// Why the last token was rejected when the argument factory failed for it (else `None`).
    pub fn last_error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Advances by `token`: false (nothing changed) when the tool calls do not allow it. After the end (a stop
    /// token) every token is accepted and ignored, as vLLM's grammars do.
    pub fn accept_token(&mut self, token: TokenId) -> bool {
        let cur = self.cur();
        if cur.phase == Phase::Done {
            return true;
        }
        match self.next(cur, token) {
            Some(p) => {
                self.history.push(p);
                true
            }
            None => false,
        }
    }

    /// How many of `tokens` are accepted in a row from here (stopping after the end); nothing changes.
    pub fn validate_tokens(&mut self, tokens: &[TokenId]) -> usize {
        let mut n = 0;
        for &t in tokens {
            let cur = self.cur();
            if cur.phase == Phase::Done {
                break;
            }
            match self.next(cur, t) {
                Some(p) => self.history.push(p),
                None => break,
            }
            n += 1;
        }
        self.rollback(n);
        n
    }

    /// Undoes the last `n` accepted tokens (at most back to the start), the argument matchers with them.
    pub fn rollback(&mut self, n: usize) {
        let n = n.min(self.history.len() - 1);
        if n == 0 {
            return;
        }
        let popped = self.history.split_off(self.history.len() - n);
        let keep = self.cur().matcher.map_or(0, |m| m as usize + 1);
        self.matchers.truncate(keep);
        let mut undo = vec![0usize; keep];
        for p in popped.iter().filter(|p| p.took) {
            if let Some(c) = p.matcher.and_then(|m| undo.get_mut(m as usize)) {
                *c += 1;
            }
        }
        for (m, &k) in self.matchers.iter_mut().zip(&undo) {
            if k > 0 {
                m.rollback(k);
            }
        }
    }

    /// Writes the tokens allowed next into `row` (at least the vocabulary's mask words; every word written).
    pub fn fill_bitmask(&mut self, row: &mut [u32]) -> Result<()> {
        let c = self.calls.clone();
        let (words, n_vocab) = (c.vocab.mask_words(), c.vocab.n_vocab());
        if row.len() < words {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("the bitmask row has {} words but needs {words} (ceil({n_vocab} / 32))", row.len()),
            ));
        }
        let cur = self.cur();
        match cur.phase {
            Phase::Name => {
                c.names(cur.which).automaton.fill_bitmask(cur.state, row)?;
                if cur.opening {
                    set_bits(&c.marker.ids, row);
                }
            }
            Phase::Args => {
                let m = cur.matcher.expect("an argument position has its matcher") as usize;
                self.matchers[m].fill_bitmask(row)?;
            }
            Phase::Free if cur.gap => {
                row.fill(0);
                let trigger = c.config.format.trigger.as_deref().unwrap_or_default();
                for t in 0..c.vocab.n_listed() as TokenId {
                    if gap_allows(trigger, cur.pending as usize, c.vocab.token_bytes(t)) {
                        row[(t >> 5) as usize] |= 1u32 << (t & 31);
                    }
                }
                set_bits(&c.stops, row);
            }
            Phase::Free => {
                // Every listed token (padding ids past the tokenizer's list stay masked).
                let listed = c.vocab.n_listed();
                row.fill(0);
                row[..listed / 32].fill(u32::MAX);
                if listed % 32 != 0 {
                    row[listed / 32] = (1u32 << (listed % 32)) - 1;
                }
                for &t in c.marker.straddle.get(cur.pending as usize).map_or(&[][..], |v| v.as_slice()) {
                    row[(t >> 5) as usize] &= !(1u32 << (t & 31));
                }
                set_bits(&c.stops, row); // a stop token ends the answer, whatever its text
            }
            Phase::End | Phase::Done => {
                row.fill(0);
                if cur.phase == Phase::End {
                    set_bits(&c.stops, row);
                }
            }
        }
        Ok(())
    }

    /// The position after `t`, or `None` when it is not allowed.
    fn next(&mut self, cur: Pos, t: TokenId) -> Option<Pos> {
        self.error = None;
        let c = self.calls.clone();
        if t as usize >= c.vocab.n_vocab() {
            return None;
        }
        let is_stop = c.stops.binary_search(&t).is_ok();
        let is_trigger = c.marker.ids.binary_search(&t).is_ok();
        match cur.phase {
            Phase::Free => {
                if t as usize >= c.vocab.n_listed() {
                    return None;
                }
                if is_stop {
                    return Some(Pos { phase: Phase::Done, took: false, ..cur });
                }
                // The marker's own token goes through the text too: after a part of a marker that overlaps itself
                // ("<" of "<<"), it would finish the marker and go on past it.
                let trigger = c.config.format.trigger.as_deref().unwrap_or_default();
                if cur.gap && !gap_allows(trigger, cur.pending as usize, c.vocab.token_bytes(t)) {
                    return None;
                }
                let text = [&trigger[..cur.pending as usize], c.vocab.token_bytes(t)].concat();
                match find(&text, trigger) {
                    Some(i) if i + trigger.len() < text.len() => None, // the marker and more in one token
                    Some(_) => Some(self.name(Which::First, cur.matcher, cur.calls)),
                    None => Some(Pos { pending: tail(trigger, &text) as u32, took: false, ..cur }),
                }
            }
            Phase::Name => {
                if cur.opening && is_trigger {
                    return Some(self.name(Which::First, cur.matcher, cur.calls));
                }
                let a = &c.names(cur.which).automaton;
                let Ok(Step::Next(state)) = a.advance(cur.state, t) else { return None };
                let last = !c.config.parallel;
                let Some(tool) = c.tool_at(cur.which, state) else {
                    let mut told = cur.told;
                    if !told {
                        if let Some(tool) = c.only_tool(cur.which, state) {
                            self.factory.prefetch(tool, last);
                            told = true;
                        }
                    }
                    return Some(Pos { state, opening: false, took: false, told, ..cur });
                };
                match self.factory.make(tool, last) {
                    Ok(m) => {
                        self.matchers.push(m);
                        let matcher = Some(self.matchers.len() as u32 - 1);
                        Some(Pos { phase: Phase::Args, matcher, took: false, tool: Some(tool as u32), ..cur })
                    }
                    Err(e) => {
                        self.error = Some(format!("the arguments of tool {tool} cannot be matched: {}", e.message()));
                        None
                    }
                }
            }
            Phase::Args => {
                let m = cur.matcher.expect("an argument position has its matcher") as usize;
                if !self.matchers[m].accept_token(t) {
                    return None;
                }
                let pos = Pos { took: true, ..cur };
                let b = c.vocab.token_bytes(t);
                if b.last().map_or(true, |x| c.end_bytes.contains(x)) && self.at_end(m) {
                    return Some(self.after_call(pos, b));
                }
                Some(pos)
            }
            Phase::End => is_stop.then_some(Pos { phase: Phase::Done, took: false, ..cur }),
            Phase::Done => None,
        }
    }

    /// Whether matcher `m` has read its whole grammar: its own answer, else a stop token accepted and rolled back.
    fn at_end(&mut self, m: usize) -> bool {
        let matcher = &mut self.matchers[m];
        if let Some(done) = matcher.is_completed() {
            return done;
        }
        let Some(&stop) = self.calls.stops.first() else { return false };
        if !matcher.accept_token(stop) {
            return false;
        }
        matcher.rollback(1);
        true
    }

    /// The position after the token `bytes` that completed a call's arguments.
    fn after_call(&self, pos: Pos, bytes: &[u8]) -> Pos {
        let c = &self.calls;
        let calls = pos.calls + 1;
        let fmt = &c.config.format;
        let end = Pos { phase: Phase::End, calls, ..pos };
        if !c.config.parallel {
            return end;
        }
        if fmt.is_list() {
            if bytes.trim_ascii_end().ends_with(&fmt.last) {
                return end;
            }
            return Pos { took: true, ..self.name(Which::Following, pos.matcher, calls) };
        }
        // with `only_calls_after_a_call` (llama.cpp's parser reads nothing else after a call): a further call after
        // whitespace only, or the end; under `auto` with a trigger that is the call's own `{` (Llama 3 JSON), calls
        // stay separated by free text as vLLM's parser reads them
        let gap = c.config.only_calls_after_a_call
            && (c.config.mode == Mode::Required || fmt.trigger.as_ref().is_some_and(|t| !t.starts_with(b"{")));
        Pos { phase: Phase::Free, pending: 0, gap, calls, ..pos }
    }
}

/// Between the calls of a required answer: whether a token of `bytes` keeps the text whitespace followed by a
/// part of the marker (`pending` of its bytes already written; whitespace only before the marker begins).
fn gap_allows(trigger: &[u8], pending: usize, bytes: &[u8]) -> bool {
    let skip = if pending == 0 { bytes.iter().take_while(|b| b.is_ascii_whitespace()).count() } else { 0 };
    !bytes.is_empty() && trigger[pending.min(trigger.len())..].starts_with(&bytes[skip..])
}
