"""Hugging Face transformers: force ``model.generate`` to output exactly one string of a set (or a template of one).

    from transformers import LogitsProcessorList
    import libtrie
    from libtrie.transformers import TrieLogitsProcessor, model_vocab, prefix_allowed_tokens_fn

    vocab = model_vocab(model, tokenizer)                 # EOG ids from the generation config, mask width = logits width
    names = libtrie.compile(vocab, ["calendar.create_event", "maps.get_route"])
    out = model.generate(**inputs, logits_processor=LogitsProcessorList([TrieLogitsProcessor(names)]))
    # or: model.generate(**inputs, prefix_allowed_tokens_fn=prefix_allowed_tokens_fn(names, inputs["input_ids"].shape[1]))

Invariants:

- A row's state is derived from its generated tokens only (``input_ids[row, prompt_length:]``), never from the row's
  position in the batch: beam search may reorder, duplicate and drop rows between steps, and a left-padded batch has
  one prompt length for every row. States are cached by the generated prefix (the entries of the previous step), so
  a step costs one ``advance`` per row.
- The mask is as wide as the logits (``scores.shape[-1]``): ids at or past the automaton's vocabulary are never
  allowed. It is filled on the CPU in one native call and applied on the logits' device.
- Where a member is complete, the vocabulary's end-of-generation ids and the processor's ``eos_token_id`` (default:
  the model's generation config, through :func:`model_vocab`) are allowed; after one of them only they are (a
  finished row of a batch is padded by ``generate``: those tokens are ignored).
- Templates (:meth:`libtrie.Automaton.compile_template` with ``end="open"``): at the end of a segment the row is
  handed over to ``then(member)``, a matcher for what follows (for example an ``xgrammar.GrammarMatcher`` compiled
  for that tool's argument schema), or left unconstrained when ``then`` returns ``None``. Crossing tokens (a token
  that ends the segment and begins what follows) are not offered: the segment ends on a token boundary.
- A row that produced a token its constraint does not allow (another processor, a forced token) is told so in the
  log and only allowed to end.

The module imports neither torch nor transformers until a processor runs. One processor serves one ``generate``
call: the prompt length is taken from its first call (pass ``prompt_length`` to fix it), and a call whose length is
not the previous one plus one starts a new generation. Assisted (speculative) generation, which scores several
positions per call, is not supported.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from . import FINISHED, Automaton, TrieError, Vocab, bitmask_words, fill_bitmask_rows

__all__ = ["TrieLogitsProcessor", "prefix_allowed_tokens_fn", "model_vocab", "eos_ids", "Matcher"]

log = logging.getLogger("libtrie.transformers")

#: What follows a template's segment: ``accept_token(t) -> bool``, ``fill_next_token_bitmask(bitmask, row)``
#: (a CPU int32 tensor of ``ceil(V / 32)`` words per row) and ``is_terminated() -> bool``: xgrammar's
#: ``GrammarMatcher`` has this shape.
Matcher = Any


def _ids(v: Any) -> List[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def eos_ids(model: Any) -> List[int]:
    """The end-of-generation ids of ``model``: its generation config's ``eos_token_id`` (an id or a list), else its
    config's."""
    gen = getattr(model, "generation_config", None)
    ids = _ids(getattr(gen, "eos_token_id", None))
    return ids or _ids(getattr(getattr(model, "config", None), "eos_token_id", None))


def _logits_width(model: Any) -> int:
    try:
        return int(model.get_output_embeddings().weight.shape[0])
    except Exception:
        config: Any = getattr(model, "config", None)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(getattr(text, "vocab_size", 0) or 0)


def model_vocab(model: Any, tokenizer: Any, eog_ids: Optional[Iterable[int]] = None) -> Vocab:
    """The libtrie vocabulary of a transformers ``model`` and its (fast) ``tokenizer``: the exact bytes of every
    token from the tokenizer's ``tokenizer.json`` form, the end-of-generation ids of the generation config (or
    ``eog_ids``) and the mask width of the model's logits (larger than the tokenizer when the embedding is padded)."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        raise TypeError(f"libtrie needs a fast tokenizer (with a tokenizer.json form), not {type(tokenizer).__name__}")
    eog = sorted(set(_ids(list(eog_ids) if eog_ids is not None else eos_ids(model))))
    fd, path = tempfile.mkstemp(suffix=".json", prefix="libtrie-tokenizer-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(backend.to_str())
        return Vocab.from_tokenizer_json(path, eog_ids=eog or None, n_vocab=_logits_width(model))
    finally:
        os.unlink(path)


class _Row:
    """The decoding state of one generated prefix: the automaton's state, or the matcher it was handed over to."""

    __slots__ = ("state", "matcher", "handed", "broken")

    def __init__(self, state: int) -> None:
        self.state = state
        self.matcher: Optional[Matcher] = None  # None after a hand-over: unconstrained
        self.handed = False
        self.broken = False

    @property
    def done(self) -> bool:
        """Only end-of-generation ids are allowed (the member ended, the matcher terminated, or the row broke)."""
        if self.handed:
            return self.broken or (self.matcher is not None and bool(self.matcher.is_terminated()))
        return self.state == FINISHED


_GONE = _Row(FINISHED)  # a prefix whose matcher moved to its first child: further children replay


class _States:
    """States of generated prefixes, cached by prefix for one step: a row's state is its parent's advanced by its
    last token, or replayed from the start when the parent is unknown (or gave its matcher to another child:
    matchers are stateful and cannot be copied)."""

    def __init__(self, automaton: Automaton, stops: Sequence[int], then: Optional[Callable[[int], Optional[Matcher]]]):
        self.a = automaton
        self.stops = set(stops) | set(automaton.vocab.eog_ids)
        self.then = then
        self.open = automaton.is_open
        self.prev: Dict[Tuple[int, ...], _Row] = {}
        self.cur: Dict[Tuple[int, ...], _Row] = {}

    def step(self) -> None:
        """Forget the prefixes before the current step (called before each new length)."""
        self.prev, self.cur = self.cur, {}

    def get(self, gen: Tuple[int, ...]) -> _Row:
        row = self.cur.get(gen)
        if row is not None:
            return row
        parent = self.prev.get(gen[:-1]) if gen else None
        if parent is not None and parent is not _GONE:
            if parent.matcher is not None:
                row = parent  # moved: the parent's entry is gone
                self.prev[gen[:-1]] = _GONE
            else:
                row = _Row(parent.state)
                row.handed, row.broken = parent.handed, parent.broken
            self._advance(row, gen[-1])
        else:
            row = _Row(self.a.start())
            for t in gen:
                self._advance(row, t)
        self.cur[gen] = row
        return row

    def _advance(self, row: _Row, t: int) -> None:
        if row.broken:
            return
        if row.handed:
            if row.matcher is not None and not row.matcher.is_terminated() and not row.matcher.accept_token(t):
                self._break(row, t, "the matcher it was handed over to")
            return
        if row.state == FINISHED:
            return  # padding after the end of a finished row
        if t in self.stops and self.a.is_accepting(row.state):
            row.state = FINISHED
            return
        try:
            row.state = self.a.advance(row.state, t)
        except TrieError:
            self._break(row, t, "its set")
            return
        if self.open and row.state != FINISHED:
            member = self.a.member(row.state)
            if member is not None:  # the segment is complete (an open template's segment has no continuation)
                row.handed = True
                row.matcher = self.then(member) if self.then is not None else None

    def _break(self, row: _Row, t: int, what: str) -> None:
        row.broken = True
        row.state = FINISHED
        row.matcher = None
        log.warning("libtrie: a row produced token %d, which %s does not allow; it may only end now", t, what)


class TrieLogitsProcessor:
    """A transformers logits processor (``generate(logits_processor=LogitsProcessorList([...]))``): every row's
    output is a member of ``automaton``, then an end-of-generation id (or, for an open template, the segment and
    then what ``then(member)`` allows). ``eos_token_id``: ids allowed as the end besides the vocabulary's own (pass
    the model's generation config's; :func:`model_vocab` already puts them in the vocabulary). ``prompt_length``: the
    length of ``input_ids`` at the first step (default: taken from the first call)."""

    def __init__(self, automaton: Automaton, *, eos_token_id: Any = None, prompt_length: Optional[int] = None,
                 then: Optional[Callable[[int], Optional[Matcher]]] = None) -> None:
        self.automaton = automaton
        self.stops = _ids(eos_token_id)
        self.then = then
        self.fixed_prompt = prompt_length
        self.reset()

    def reset(self) -> None:
        """Forget the rows (for another ``generate`` call)."""
        self.prompt_length = self.fixed_prompt
        self._last = -1
        self._states = _States(self.automaton, self.stops, self.then)

    def states(self, input_ids: Any) -> List[_Row]:
        """The state of each row of ``input_ids`` (``[rows, length]``), from its tokens past the prompt."""
        length = int(input_ids.shape[1])
        if self.fixed_prompt is None and length != self._last + 1:  # the first call, or another generate call
            self.prompt_length = length
            self._states = _States(self.automaton, self.stops, self.then)
        elif length <= self._last:  # another generate call with the same prompt length
            self._states = _States(self.automaton, self.stops, self.then)
        if length < (self.prompt_length or 0):
            raise ValueError(f"input_ids has {length} tokens, fewer than the prompt length {self.prompt_length}")
        self._states.step()
        self._last = length
        rows = input_ids[:, self.prompt_length:].tolist()
        return [self._states.get(tuple(r)) for r in rows]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        rows = self.states(input_ids)
        n, width = int(scores.shape[0]), int(scores.shape[-1])
        words = bitmask_words(width)
        bitmask = torch.zeros((n, words), dtype=torch.int32)
        if bitmask.shape[1] < self.automaton.mask_words:
            raise ValueError(f"the logits have {width} columns, fewer than the vocabulary's {self.automaton.n_vocab} ids")
        trie_rows: List[Tuple[Optional[Automaton], int]] = []
        unconstrained: Set[int] = set()
        for i, r in enumerate(rows):
            if r.done:
                trie_rows.append((self.automaton, FINISHED))
            elif r.handed:
                if r.matcher is None:
                    unconstrained.add(i)
                trie_rows.append((None, 0))  # all ones; a matcher's row is written below
            else:
                trie_rows.append((self.automaton, r.state))
        fill_bitmask_rows(trie_rows, bitmask)
        extra = [t for t in set(self.stops) - set(self.automaton.vocab.eog_ids) if 0 <= t < width]
        for i, r in enumerate(rows):
            if r.matcher is not None and not r.done:
                r.matcher.fill_next_token_bitmask(bitmask, i)
            elif extra and (r.done or (not r.handed and self.automaton.is_accepting(r.state))):
                for t in extra:
                    bitmask[i, t >> 5] |= _bit(t & 31)
        if width % 32:
            bitmask[:, -1] &= (1 << (width % 32)) - 1  # ids past the logits (an all-ones row sets them)
        keep = [i for i in range(n) if i not in unconstrained]
        if not keep:
            return scores
        mask = _unpack(bitmask[keep], width).to(scores.device, non_blocking=True)
        index = torch.as_tensor(keep, dtype=torch.long, device=scores.device)
        sub = scores.index_select(0, index).masked_fill(~mask, float("-inf"))
        return scores.index_copy(0, index, sub)


def _bit(i: int) -> int:
    return -(1 << 31) if i == 31 else 1 << i


_SHIFTS: Dict[Any, Any] = {}


def _unpack(bitmask: Any, width: int) -> Any:
    """``[n, W]`` int32 words to a ``[n, width]`` bool tensor (True = allowed)."""
    import torch

    shifts = _SHIFTS.get("cpu")
    if shifts is None:
        shifts = _SHIFTS["cpu"] = torch.arange(32, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :width].to(torch.bool)


def prefix_allowed_tokens_fn(automaton: Automaton, prompt_length: int, *,
                             eos_token_id: Any = None) -> Callable[[int, Any], List[int]]:
    """A ``prefix_allowed_tokens_fn`` for ``generate``: ``fn(batch_id, input_ids_row)`` lists the ids the row may
    produce next (a member of ``automaton``, then an end-of-generation id). ``prompt_length``: the length of the
    (padded) prompt, ``inputs["input_ids"].shape[1]``. States are cached by generated prefix like
    :class:`TrieLogitsProcessor`'s (open templates are not supported here: use the processor)."""
    if automaton.is_open:
        raise ValueError("prefix_allowed_tokens_fn serves closed sets; use TrieLogitsProcessor for a template")
    states = _States(automaton, _ids(eos_token_id), None)
    extra = sorted(set(_ids(eos_token_id)) - set(automaton.vocab.eog_ids))
    last = [-1]

    def fn(batch_id: int, input_ids: Any) -> List[int]:
        ids = input_ids.tolist() if hasattr(input_ids, "tolist") else list(input_ids)
        if len(ids) != last[0]:
            states.step()
            last[0] = len(ids)
        row = states.get(tuple(ids[prompt_length:]))
        allowed = automaton.allowed(row.state).tolist()
        if extra and automaton.is_accepting(row.state):
            allowed = sorted(set(allowed) | set(extra))
        return allowed

    return fn
