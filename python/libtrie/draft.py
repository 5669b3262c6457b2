"""Drafting and checking tokens for jump-forward and speculative decoding (``trie_draft``, ``trie_validate_draft``).

- :func:`draft`: the forced token run of a state: tokens spelling the bytes every member still possible continues
  with (the rest of the only member left, a template's prefix at the start, its suffix once the member is known),
  at most ``max_tokens`` of them. An engine decodes them as one batch (jump-forward) or hands them to its
  speculative path as draft tokens: they are the only text the set allows there.
- :func:`validate`: how many tokens of a draft of any origin (a draft model, n-gram lookup) the set accepts from a
  state, and the state after each; nothing changes.
- :class:`History`: one sequence's states, one per accepted token, so a rejected draft is rolled back by dropping
  states (a state is one integer).
"""

from __future__ import annotations

import ctypes
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple

from . import Automaton, _check
from ._native import Signatures, declared, i32p, sizep, u32p, vp

__all__ = ["Draft", "History", "draft", "jump_forward", "validate"]


_SIGNATURES: Signatures = {
    "trie_draft": ([vp, ctypes.c_uint32, i32p, ctypes.c_size_t, sizep, u32p, ctypes.POINTER(ctypes.c_bool)],
                   ctypes.c_int),
    "trie_validate_draft": ([vp, ctypes.c_uint32, i32p, ctypes.c_size_t, sizep, u32p], ctypes.c_int),
}


def _lib() -> ctypes.CDLL:
    return declared(_SIGNATURES, "libtrie.draft")


class Draft(NamedTuple):
    """A forced token run (see :func:`draft`)."""

    #: The tokens, in order; each is allowed in the state before it.
    tokens: Tuple[int, ...]
    #: The state after them (the starting state for an empty run).
    end_state: int
    #: After them the output is one complete member and nothing else may follow (only end-of-generation ids, or
    #: the hand-over of an open segment): the answer can end without another model step.
    complete: bool


def draft(automaton: Automaton, state: int, max_tokens: int = 256) -> Draft:
    """The forced token run from ``state``, at most ``max_tokens`` long (call again from ``end_state`` to go on).
    Empty where nothing is forced and for FINISHED. Raises :class:`~libtrie.TrieError` ``INVALID_STATE`` for a state
    that does not exist."""
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    lib = _lib()
    buf = (ctypes.c_int32 * max(max_tokens, 1))()
    n, end, complete = ctypes.c_size_t(), ctypes.c_uint32(), ctypes.c_bool()
    with automaton._use() as h:
        _check(lib.trie_draft(h, state, buf, max_tokens, ctypes.byref(n), ctypes.byref(end), ctypes.byref(complete)))
    return Draft(tuple(buf[: n.value]), end.value, complete.value)


def jump_forward(automaton: Automaton, state: int, max_tokens: int = 256) -> Optional[Tuple[List[int], str]]:
    """The forced run of ``state`` as an engine's jump-forward takes it (SGLang's ``try_jump_forward``): its tokens
    and their text, cut to the longest prefix whose bytes are whole UTF-8 characters (a run can end inside one where
    members part between two characters sharing a first byte); ``None`` when nothing is left to jump. Covers the rest
    of the only member left and the bytes all members left share (a template's prefix, ``weather.get_``)."""
    run = draft(automaton, state, max_tokens)
    vocab = automaton.vocab
    tokens, text = list(run.tokens), b"".join(vocab.token_bytes(t) for t in run.tokens)
    while tokens:
        try:
            return tokens, text.decode("utf-8")
        except UnicodeDecodeError:
            text = text[: len(text) - len(vocab.token_bytes(tokens.pop()))]
    return None


def validate(automaton: Automaton, state: int, tokens: Sequence[int]) -> List[int]:
    """The states after each token of the longest prefix of ``tokens`` that the set accepts from ``state`` (its
    length is the number accepted; FINISHED after an end-of-generation id where a member is complete). A rejected or
    out-of-range token only ends the prefix."""
    lib = _lib()
    n = len(tokens)
    ids = (ctypes.c_int32 * max(n, 1))(*[t if 0 <= t < 2**31 else -1 for t in tokens])
    states = (ctypes.c_uint32 * max(n, 1))()
    k = ctypes.c_size_t()
    with automaton._use() as h:
        _check(lib.trie_validate_draft(h, state, ids, n, ctypes.byref(k), states))
    return list(states[: k.value])


class History:
    """One sequence's states: ``states[0]`` the start, ``states[i]`` the state after ``i`` accepted tokens."""

    __slots__ = ("automaton", "states")

    def __init__(self, automaton: Automaton, start: int | None = None) -> None:
        self.automaton = automaton
        self.states: List[int] = [automaton.start() if start is None else start]

    @property
    def state(self) -> int:
        return self.states[-1]

    @property
    def n_accepted(self) -> int:
        return len(self.states) - 1

    def accept(self, token: int) -> int:
        """Accept one token (raises :class:`~libtrie.TrieError` ``TOKEN_REJECTED``, changing nothing)."""
        nxt = self.automaton.advance(self.state, token)
        self.states.append(nxt)
        return nxt

    def accept_draft(self, tokens: Iterable[int]) -> int:
        """Accept the longest prefix of ``tokens`` the set allows; returns its length."""
        after = validate(self.automaton, self.state, list(tokens))
        self.states.extend(after)
        return len(after)

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted tokens (``ValueError``, changing nothing, for more than were accepted)."""
        if n < 0 or n > self.n_accepted:
            raise ValueError(f"cannot roll back {n} tokens: {self.n_accepted} were accepted")
        if n:
            del self.states[-n:]
