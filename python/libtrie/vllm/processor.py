"""The vLLM V1 logits processor (see :mod:`libtrie.vllm`). Imports vLLM and torch."""

from __future__ import annotations

import os
import time
import weakref
from typing import TYPE_CHECKING, Dict, List, Optional

import torch

from .. import bitmask_words, fill_bitmask_rows
from ..masks import apply_bitmask, apply_sparse, bit
from ..sets import SetCache, Settings, parse_spec
from . import route
from ._common import EXTRA_KEY, Row, fits, log, shared_cache, stop_ids, uses_trie_scheduler

try:  # vLLM >= 0.10 (V1 logits processors)
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("libtrie.vllm.TrieLogitsProcessor needs vLLM with V1 logits processors (vllm>=0.10)") from e

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

__all__ = ["TrieLogitsProcessor"]


# ---- the logits processor -------------------------------------------------------------------------------------------

class TrieLogitsProcessor(LogitsProcessor):  # type: ignore[misc,unused-ignore]  # vLLM ships no type stubs
    """vLLM V1 logits processor: requests whose ``SamplingParams.extra_args`` name a set (``"libtrie"`` key, see the
    module doc) can only produce a member of that set. Not argmax-invariant (it changes greedy results). Under
    :class:`TrieScheduler` it only validates requests (the scheduler masks)."""

    @classmethod
    def validate_params(cls, sampling_params: "SamplingParams") -> None:
        """Admission (the API server process, on its event loop): parse and check the request's set against the
        operator's settings, without reading or compiling it. A ``ValueError`` becomes an HTTP 400."""
        route.check_admission(sampling_params)  # a structured output libtrie serves (LIBTRIE_VLLM_ROUTE=1)
        extra = sampling_params.extra_args or {}
        if EXTRA_KEY in extra:
            if getattr(sampling_params, "structured_outputs", None) is not None:
                raise ValueError(f'extra_args["{EXTRA_KEY}"] cannot be combined with structured outputs')
            parse_spec(extra[EXTRA_KEY])

    #: The active processor per engine (keyed by its config object): vLLM builds one instance per registration, and
    #: the entry point plus an explicit `logits_processors=[...]` would otherwise mask every row twice.
    _active: "weakref.WeakValueDictionary[int, TrieLogitsProcessor]" = weakref.WeakValueDictionary()

    def __init__(self, vllm_config: "VllmConfig", device: torch.device, is_pin_memory: bool) -> None:
        self.settings = Settings.from_env()  # a bad setting stops the engine at start, with its name
        #: True under TrieScheduler: the scheduler masks, this processor does nothing.
        self.delegated = uses_trie_scheduler(vllm_config)
        #: False for a second registration in the same engine, or under TrieScheduler: it then does nothing.
        self.active = not self.delegated and self._active.setdefault(id(vllm_config), self) is self
        if self.delegated:
            log.info("libtrie: TrieScheduler masks the constrained requests; the logits processor only validates")
        route.check_configuration(self.delegated)
        self.vllm_config = vllm_config
        self.device = torch.device(device)
        self.max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        self.n_vocab = int(vllm_config.model_config.get_vocab_size())
        self.row_words = bitmask_words(self.n_vocab)
        self.is_pin_memory = is_pin_memory
        self.rows: Dict[int, Row] = {}
        self._cache: Optional[SetCache] = None
        self._bitmask: Optional[torch.Tensor] = None
        self._warned = False
        #: How masks are applied: "auto" (sparse when rows allow few tokens on average, else the bitmask with
        #: xgrammar's kernel), "sparse", "xgrammar" (bitmask, xgrammar's kernel) or "torch" (bitmask, plain torch).
        self.mode = os.environ.get("LIBTRIE_VLLM_APPLY", "auto")
        if self.mode not in ("auto", "sparse", "xgrammar", "torch"):
            raise ValueError(f"LIBTRIE_VLLM_APPLY={self.mode!r}: expected auto, sparse, xgrammar or torch")
        #: "auto" goes sparse while the batch averages at most this many allowed ids per row.
        self.sparse_limit = int(os.environ.get("LIBTRIE_VLLM_SPARSE_LIMIT", "4096"))

    # vLLM asks this to route the processor: False, since masking changes the argmax.
    def is_argmax_invariant(self) -> bool:
        return False

    @property
    def cache(self) -> SetCache:
        """The compiled sets (the model's vocabulary is loaded on first use, not at engine start)."""
        if self._cache is None:
            self._cache = shared_cache(self.vllm_config, self.settings)
        return self._cache

    def _new_row(self, params: "SamplingParams", output: List[int]) -> Optional[Row]:
        extra = params.extra_args or {}
        if EXTRA_KEY not in extra:
            return None
        cache = self.cache
        cache.vocab  # loaded on first use: not part of the compile time below  # noqa: B018
        t, compiles = time.monotonic(), cache.compiles
        try:
            automaton = fits(cache.get(extra[EXTRA_KEY]), self.n_vocab)
        except Exception as e:  # an engine must not die of one request's set (empty file, unreadable, not UTF-8, ...)
            log.error("libtrie: the set of a request cannot be compiled (%s); the request will end at once with an "
                      "empty output", e)
            automaton = cache.nothing()
        took = time.monotonic() - t
        if cache.compiles != compiles and took > 0.1 and not self._warned:
            self._warned = True
            log.warning("libtrie: a set took %.2f s to compile in the model runner, and the whole batch waited; run "
                        "vLLM with --scheduler-cls libtrie.vllm.TrieScheduler to compile sets off the engine loop "
                        "while only their requests wait", took)
        return Row(automaton, output, stop_ids(params, automaton, self.n_vocab))

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        if not self.active:
            return
        if batch_update is not None:
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                row = self._new_row(params, output)
                if row is None:
                    self.rows.pop(index, None)
                else:
                    self.rows[index] = row
            for a, b, direction in batch_update.moved:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if rb is not None and direction == MoveDirectionality.SWAP:
                    self.rows[a] = rb
        for index, row in self.rows.items():
            row.catch_up(f"in batch row {index}")

    def _buffer(self, n: int) -> torch.Tensor:
        if self._bitmask is None or self._bitmask.shape[0] < n:
            rows = max(n, min(self.max_rows, 2 * n))
            self._bitmask = torch.empty((rows, self.row_words), dtype=torch.int32, device="cpu",
                                        pin_memory=self.is_pin_memory and self.device.type != "cpu")
        return self._bitmask[:n]

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        indices = sorted(i for i in self.rows if i < logits.shape[0])
        if not indices:
            return logits
        rows = [self.rows[i] for i in indices]
        allowed = [r.automaton.allowed(r.state) for r in rows]
        extra = [r.extra() for r in rows]
        n_allowed = sum(map(len, allowed)) + sum(map(len, extra))
        if self.mode == "sparse" or (self.mode == "auto" and n_allowed <= self.sparse_limit * len(rows)):
            apply_sparse(logits, indices, allowed, extra)
            return logits
        bitmask = self._buffer(len(indices))
        fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
        for i, stops in enumerate(extra):
            for t in stops:
                bitmask[i, t >> 5] |= bit(t & 31)
        apply_bitmask(logits, bitmask, indices, self.mode != "torch")
        return logits
