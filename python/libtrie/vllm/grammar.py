"""vLLM grammars (``StructuredOutputGrammar``) over libtrie automata, for the engine core under routing
(:mod:`libtrie.vllm.route`): :class:`TrieGrammar` for a set, and the log routed requests are reported to. Imports
vLLM's grammar base class when vLLM is installed (``object`` otherwise, so that this module imports without it)."""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence, Set

from .. import FINISHED, Automaton, TrieError

#: Under vLLM's logger (its handler and level): a line per routed request, in the server's log.
log = logging.getLogger("vllm.libtrie")

try:
    from vllm.v1.structured_output.backend_types import StructuredOutputGrammar as Grammar
except ImportError:  # pragma: no cover - depends on the environment
    Grammar = object  # type: ignore[misc,assignment,unused-ignore]

__all__ = ["Grammar", "TrieGrammar", "log", "roll_back"]


def roll_back(states: List[int], num_tokens: int) -> None:
    """Drop the states of the last ``num_tokens`` accepted tokens; the start state always stays (rolling back more
    than was accepted, or at the start, leaves the start)."""
    n = min(num_tokens, len(states) - 1)
    if n > 0:
        del states[-n:]


class TrieGrammar(Grammar):  # type: ignore[misc,valid-type,unused-ignore]
    """vLLM's ``StructuredOutputGrammar`` over a compiled set: one integer state per accepted token (kept for
    ``rollback``), the request's stop ids allowed where a member is complete."""

    def __init__(self, automaton: Automaton, stops: Set[int]) -> None:
        self.automaton = automaton
        self.stops = set(stops) - set(automaton.vocab.eog_ids)
        self.states: List[int] = [automaton.start()]

    def _next(self, state: int, token: int) -> Optional[int]:
        if state == FINISHED:
            return None
        if token in self.stops and self.automaton.is_accepting(state):
            return FINISHED
        try:
            return self.automaton.advance(state, token)
        except TrieError:
            return None

    def accept_tokens(self, request_id: str, tokens: Sequence[int]) -> bool:
        for t in tokens:
            if self.states[-1] == FINISHED:
                return True  # tokens after the end are ignored (as vLLM's xgrammar grammar does)
            nxt = self._next(self.states[-1], t)
            if nxt is None:
                log.error("libtrie: request %s produced token %d, which its set does not allow", request_id, t)
                return False
            self.states.append(nxt)
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> List[int]:
        state, ok = self.states[-1], []
        for t in tokens:
            nxt = self._next(state, t)
            if nxt is None:
                break
            ok.append(t)
            state = nxt
            if state == FINISHED:
                break
        return ok

    def rollback(self, num_tokens: int) -> None:
        roll_back(self.states, num_tokens)

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        state = self.states[-1]
        row = bitmask[idx]
        self.automaton.fill_bitmask(state, row)
        if self.stops and self.automaton.is_accepting(state):
            for t in self.stops:
                if 0 <= t < row.shape[0] * 32:
                    row[t >> 5] |= -(1 << 31) if t & 31 == 31 else 1 << (t & 31)

    def is_terminated(self) -> bool:
        return self.states[-1] == FINISHED

    def reset(self) -> None:
        self.states = [self.automaton.start()]
