"""A vLLM V1 logits processor that forces a request's output to be exactly one string of a set.

Register it (any one of):

- ``LLM(model, logits_processors=[TrieLogitsProcessor])`` or ``logits_processors=["libtrie.vllm:TrieLogitsProcessor"]``
- ``vllm serve MODEL --logits-processors libtrie.vllm:TrieLogitsProcessor``
- nothing: installing this package registers it in the ``vllm.logits_processors`` entry-point group, which vLLM
  loads for every engine.

Then name the set per request in ``SamplingParams.extra_args["libtrie"]`` (serializable values only, so it works
across vLLM's process boundary and over the OpenAI-compatible server's ``vllm_xargs``):

- ``{"file": "/srv/sets/icd10.txt"}``: one member per line (UTF-8, ``\\n`` separated, a final newline ignored).
  Compiled once per (path, size, modification time) and shared by every request that names it.
- ``{"strings": ["yes", "no", ...]}``: the members inline; compiled once per distinct list (keyed by a digest).
- ``{"set": "tools"}`` or just ``"tools"``: the file ``$LIBTRIE_SET_DIR/tools.txt``.
- short forms, which also fit the OpenAI-compatible server's flat ``vllm_xargs``: a string with a ``/`` is a file
  path, another string a set name, a list of strings the members (``extra_body={"vllm_xargs": {"libtrie": "tools"}}``).
- optional ``"drop_unreachable": true``: drop members the vocabulary cannot spell instead of failing the request.

Requests without the key are left alone (their logits are not touched). Each constrained request keeps one integer
state, advanced from its live output token ids before each step. ``apply`` masks the rows of the constrained requests
in one of two ways (``$LIBTRIE_VLLM_APPLY``: ``auto``, the default, picks per step): *sparse* (while rows allow few
tokens, which is the usual case in a trie: keep the allowed logits, fill the rows with -inf, put them back; O(allowed)
plus a memset) or *bitmask* (all rows filled in one native call, then xgrammar's ``apply_token_bitmask_inplace``,
the kernel vLLM's own structured outputs use, or plain torch with ``torch``). At a state where a member is complete, the stop tokens of the
request (``SamplingParams.all_stop_token_ids``, which include the model's EOS ids) are allowed too.

The vocabulary is read from the model's ``tokenizer.json`` (the tokenizer folder, or the Hugging Face cache when the
tokenizer is a hub id), or from ``$LIBTRIE_VOCAB`` (a ``tokenizer.json`` or a GGUF file); the mask width is the
model's logits width. Compiled sets are kept in an LRU of ``$LIBTRIE_CACHE_SIZE`` entries (default 64).

Caveats: compiling happens in the engine loop when a request first names a set (about 10 ms for 10,000 strings, 0.7 s
for 1,000,000 on one core); ``min_tokens`` larger than the longest member conflicts with the constraint (vLLM then
masks the only allowed tokens); speculative decoding rejects custom logits processors (a vLLM rule).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import torch

from . import FINISHED, Automaton, TrieError, Vocab, bitmask_words, fill_bitmask_rows

try:  # vLLM >= 0.10 (V1 logits processors)
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("libtrie.vllm needs vLLM with V1 logits processors (vllm>=0.10)") from e

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

__all__ = ["TrieLogitsProcessor", "SetSpec", "parse_spec", "SetCache", "apply_bitmask"]

log = logging.getLogger("libtrie.vllm")

EXTRA_KEY = "libtrie"


# ---- what a request asks for ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SetSpec:
    """A request's set, parsed from ``extra_args["libtrie"]``: ``key`` identifies the compiled set in the cache."""

    kind: str  # "file" or "strings"
    key: Tuple[Any, ...]
    path: Optional[str] = None
    strings: Optional[Tuple[str, ...]] = field(default=None, repr=False)
    drop_unreachable: bool = False


def parse_spec(value: Any) -> SetSpec:
    """Parse and check ``extra_args["libtrie"]`` (see the module doc). Raises ``ValueError`` naming what is wrong."""
    if isinstance(value, str):  # the short forms, which also fit the OpenAI server's flat `vllm_xargs`
        value = {"file": value} if "/" in value else {"set": value}
    elif isinstance(value, list):
        value = {"strings": value}
    if not isinstance(value, dict):
        raise ValueError(f'extra_args["{EXTRA_KEY}"] must be a set name, a path, a list of strings or a dict, '
                         f"not {type(value).__name__}")
    unknown = set(value) - {"file", "strings", "set", "drop_unreachable"}
    if unknown:
        raise ValueError(f'extra_args["{EXTRA_KEY}"] has unknown keys {sorted(unknown)} '
                         '(expected one of "file", "strings", "set", and optionally "drop_unreachable")')
    given = [k for k in ("file", "strings", "set") if k in value]
    if len(given) != 1:
        raise ValueError(f'extra_args["{EXTRA_KEY}"] needs exactly one of "file", "strings", "set" (got {given})')
    drop = value.get("drop_unreachable", False)
    if not isinstance(drop, bool):
        raise ValueError(f'extra_args["{EXTRA_KEY}"]["drop_unreachable"] must be a bool')
    if "strings" in value:
        strings = value["strings"]
        if not isinstance(strings, (list, tuple)) or not all(isinstance(s, str) for s in strings):
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["strings"] must be a list of str')
        if not strings:
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["strings"] is empty: a set needs at least one member')
        digest = hashlib.blake2b("\x00".join(strings).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        return SetSpec("strings", ("strings", digest, len(strings), drop), strings=tuple(strings),
                       drop_unreachable=drop)
    if "set" in value:
        name = value["set"]
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["set"] must be a plain set name, not {name!r}')
        root = os.environ.get("LIBTRIE_SET_DIR")
        if not root:
            raise ValueError(f'the set name {name!r} needs LIBTRIE_SET_DIR (a folder of NAME.txt files) in the '
                             'environment of the vLLM engine; or pass {"file": PATH} or {"strings": [...]}')
        path = str(Path(root) / f"{name}.txt")
    else:
        path = value["file"]
        if not isinstance(path, str) or not path:
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["file"] must be a path')
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"the set file {path} cannot be read: {e.strerror}") from None
    return SetSpec("file", ("file", os.path.realpath(path), st.st_size, st.st_mtime_ns, drop), path=path,
                   drop_unreachable=drop)


def read_set_file(path: str) -> List[str]:
    """The members of a set file: one per line, ``\\n`` separated, a final newline ignored (``\\r`` kept)."""
    with open(path, "rb") as f:
        data = f.read().decode("utf-8")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class SetCache:
    """Compiled sets keyed by :attr:`SetSpec.key`, least recently used evicted beyond ``capacity``. Thread-safe."""

    def __init__(self, vocab: Vocab, capacity: int = 64) -> None:
        self.vocab = vocab
        self.capacity = max(1, capacity)
        self._sets: "OrderedDict[Tuple[Any, ...], Automaton]" = OrderedDict()
        self._lock = threading.Lock()
        self._nothing: Optional[Automaton] = None
        self.compiles = 0

    def nothing(self) -> Automaton:
        """The set of the empty string only: end-of-generation at once (for requests whose set failed)."""
        with self._lock:
            if self._nothing is None:
                self._nothing = Automaton(self.vocab, [""])
            return self._nothing

    def get(self, spec: SetSpec) -> Automaton:
        with self._lock:
            a = self._sets.get(spec.key)
            if a is not None:
                self._sets.move_to_end(spec.key)
                return a
        members = list(spec.strings) if spec.strings is not None else read_set_file(spec.path or "")
        a = Automaton(self.vocab, members, drop_unreachable=spec.drop_unreachable)
        with self._lock:
            self.compiles += 1
            self._sets[spec.key] = a
            while len(self._sets) > self.capacity:
                self._sets.popitem(last=False)
        return a


# ---- the vocabulary of the served model -----------------------------------------------------------------------------

def _int_list(v: Any) -> List[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def _tokenizer_json(vllm_config: "VllmConfig") -> str:
    mc = vllm_config.model_config
    name = str(mc.tokenizer or mc.model)
    local = Path(name) / "tokenizer.json"
    if local.is_file():
        return str(local)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "tokenizer.json", revision=getattr(mc, "tokenizer_revision", None))
        if isinstance(cached, str):
            return cached
    except Exception:  # pragma: no cover - hub layout differences
        pass
    raise FileNotFoundError(f"libtrie: no tokenizer.json for the tokenizer {name!r} (looked in the folder and the "
                            "Hugging Face cache); set LIBTRIE_VOCAB to a tokenizer.json or GGUF file")


def load_model_vocab(vllm_config: "VllmConfig") -> Vocab:
    """The vocabulary of the served model: ``$LIBTRIE_VOCAB`` or the model's ``tokenizer.json``, with the mask width
    of the model's logits and its end-of-sequence ids (``config.json`` and ``generation_config.json``)."""
    mc = vllm_config.model_config
    n_vocab = int(mc.get_vocab_size())
    eog = set(_int_list(getattr(mc.hf_config, "eos_token_id", None)))
    try:
        eog.update(_int_list(mc.try_get_generation_config().get("eos_token_id")))
    except Exception:  # pragma: no cover - no generation config
        pass
    path = os.environ.get("LIBTRIE_VOCAB") or _tokenizer_json(vllm_config)
    if path.endswith(".gguf"):
        return Vocab.from_gguf(path)
    return Vocab.from_tokenizer_json(path, eog_ids=sorted(eog) if eog else None, n_vocab=n_vocab)


# ---- applying bitmasks --------------------------------------------------------------------------------------------

_SHIFTS: Dict[torch.device, torch.Tensor] = {}


def _apply_bitmask_torch(logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int]) -> None:
    """``logits[indices[i], t] = -inf`` where bit ``t`` of row ``i`` is 0 (plain torch; any device)."""
    n, vocab = len(indices), logits.shape[-1]
    shifts = _SHIFTS.get(bitmask.device)
    if shifts is None:
        shifts = _SHIFTS[bitmask.device] = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask[:n].unsqueeze(-1) >> shifts) & 1  # [n, W, 32]
    allowed = bits.reshape(n, -1)[:, :vocab].to(torch.bool)
    if allowed.shape[1] < vocab:  # a row narrower than the logits: the ids past it are not allowed
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]), value=False)
    rows = torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)
    sub = logits.index_select(0, rows)
    sub.masked_fill_(~allowed.to(logits.device), float("-inf"))
    logits.index_copy_(0, rows, sub)


def _xgrammar_kernel() -> Optional[Callable[..., None]]:
    try:
        import xgrammar

        kernel: Callable[..., None] = xgrammar.apply_token_bitmask_inplace
        return kernel
    except Exception:
        return None


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int], use_xgrammar: bool = True) -> None:
    """Set ``logits[indices[i], t]`` to ``-inf`` where bit ``t`` of ``bitmask[i]`` is 0 (the shared layout), in place.
    Uses xgrammar's kernel when available (what vLLM's structured outputs use), plain torch otherwise."""
    if not indices:
        return
    kernel = _xgrammar_kernel() if use_xgrammar else None
    if (kernel is not None and logits.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and logits.shape[-1] <= bitmask.shape[-1] * 32):
        rows = bitmask[: len(indices)]
        if rows.device != logits.device:
            rows = rows.to(logits.device, non_blocking=True)
        if len(indices) == logits.shape[0] and list(indices) == list(range(len(indices))):
            kernel(logits, rows)
        else:
            # xgrammar indexes bitmask rows by the logits row: scatter the rows into a full-batch mask.
            full = torch.full((logits.shape[0], rows.shape[1]), -1, dtype=torch.int32, device=logits.device)
            full[torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)] = rows
            kernel(logits, full, indices=list(indices))
        return
    _apply_bitmask_torch(logits, bitmask, indices)


# ---- the processor --------------------------------------------------------------------------------------------------

class _Row:
    """One constrained request of the persistent batch."""

    __slots__ = ("automaton", "state", "output", "consumed", "stops", "broken")

    def __init__(self, automaton: Automaton, output: List[int], stops: Set[int]) -> None:
        self.automaton = automaton
        self.state = automaton.start()
        self.output = output  # vLLM's live list of the request's output token ids
        self.consumed = 0
        self.stops = stops  # stop ids of the request beyond the vocabulary's EOG ids
        self.broken = False


class TrieLogitsProcessor(LogitsProcessor):  # type: ignore[misc,unused-ignore]  # vLLM ships no type stubs
    """vLLM V1 logits processor: requests whose ``SamplingParams.extra_args`` name a set (``"libtrie"`` key, see the
    module doc) can only produce a member of that set. Not argmax-invariant (it changes greedy results)."""

    #: Shared by every processor of the process (engines of one process serve the same model in practice).
    _caches: Dict[Tuple[Any, ...], SetCache] = {}

    @classmethod
    def validate_params(cls, sampling_params: "SamplingParams") -> None:
        extra = sampling_params.extra_args or {}
        if EXTRA_KEY in extra:
            parse_spec(extra[EXTRA_KEY])

    #: The active processor per engine (keyed by its config object): vLLM builds one instance per registration, and
    #: the entry point plus an explicit `logits_processors=[...]` would otherwise mask every row twice.
    _active: "weakref.WeakValueDictionary[int, TrieLogitsProcessor]" = weakref.WeakValueDictionary()

    def __init__(self, vllm_config: "VllmConfig", device: torch.device, is_pin_memory: bool) -> None:
        #: False for a second registration in the same engine: it then does nothing.
        self.active = self._active.setdefault(id(vllm_config), self) is self
        self.vllm_config = vllm_config
        self.device = torch.device(device)
        self.max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        self.n_vocab = int(vllm_config.model_config.get_vocab_size())
        self.row_words = bitmask_words(self.n_vocab)
        self.is_pin_memory = is_pin_memory
        self.rows: Dict[int, _Row] = {}
        self._cache: Optional[SetCache] = None
        self._bitmask: Optional[torch.Tensor] = None
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
            mc = self.vllm_config.model_config
            key = (str(mc.tokenizer or mc.model), self.n_vocab, os.environ.get("LIBTRIE_VOCAB"))
            cache = self._caches.get(key)
            if cache is None:
                cache = SetCache(load_model_vocab(self.vllm_config), int(os.environ.get("LIBTRIE_CACHE_SIZE", "64")))
                self._caches[key] = cache
            self._cache = cache
        return self._cache

    def _new_row(self, params: "SamplingParams", output: List[int]) -> Optional[_Row]:
        extra = params.extra_args or {}
        if EXTRA_KEY not in extra:
            return None
        try:
            automaton = self.cache.get(parse_spec(extra[EXTRA_KEY]))
        except Exception as e:  # an engine must not die of one request's set (empty file, unreadable, not UTF-8, ...)
            log.error("libtrie: the set of a request cannot be compiled (%s); the request will end at once with an "
                      "empty output", e)
            automaton = self.cache.nothing()
        stops = set(getattr(params, "all_stop_token_ids", ()) or ()) - set(automaton.vocab.eog_ids)
        return _Row(automaton, output, {t for t in stops if 0 <= t < self.n_vocab})

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
            self._catch_up(index, row)

    def _catch_up(self, index: int, row: _Row) -> None:
        out = row.output
        while row.consumed < len(out):
            t = out[row.consumed]
            row.consumed += 1
            if row.broken:
                continue
            if row.state != FINISHED and t in row.stops and row.automaton.is_accepting(row.state):
                row.state = FINISHED
                continue
            try:
                row.state = row.automaton.advance(row.state, t)
            except TrieError as e:  # a token from outside the mask (another processor, a forced token, ...)
                row.broken = True
                row.state = FINISHED
                log.warning("libtrie: the request in batch row %d produced token %d, which its set does not allow "
                            "(%s); only stop tokens are allowed from now on", index, t, e.message)

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
        allowed = [r.automaton.allowed(r.state) for r in rows]  # zero-copy views
        extra = [r.stops if r.stops and (r.state == FINISHED or r.automaton.is_accepting(r.state)) else ()
                 for r in rows]
        n_allowed = sum(map(len, allowed)) + sum(map(len, extra))
        if self.mode == "sparse" or (self.mode == "auto" and n_allowed <= self.sparse_limit * len(rows)):
            _apply_sparse(logits, indices, allowed, extra)
            return logits
        bitmask = self._buffer(len(indices))
        fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
        for i, stops in enumerate(extra):
            for t in stops:
                bitmask[i, t >> 5] |= _bit(t & 31)
        apply_bitmask(logits, bitmask, indices, self.mode != "torch")
        return logits


def _apply_sparse(logits: torch.Tensor, indices: Sequence[int], allowed: Sequence[memoryview],
                  extra: Sequence[Any]) -> None:
    """Mask rows by keeping only their allowed entries: save them, fill the rows with -inf, put them back. Costs
    O(rows x V) for the fill (a memset) plus O(allowed), against a bit test per logit for a bitmask kernel: the
    faster path when few tokens are allowed, which is the usual case deep in a trie."""
    parts, counts = [], []
    for v, e in zip(allowed, extra):  # per row: its allowed ids, then its extra stop ids
        parts.append(np.frombuffer(v, dtype=np.int32))
        if e:
            parts.append(np.fromiter(e, dtype=np.int32, count=len(e)))
        counts.append(len(v) + len(e))
    cols = np.concatenate(parts)
    row_ids = np.repeat(np.asarray(indices, dtype=np.int64), counts)
    device = logits.device
    r = torch.from_numpy(row_ids).to(device, non_blocking=True)
    c = torch.from_numpy(cols.astype(np.int64)).to(device, non_blocking=True)
    keep = logits[r, c]
    start = 0  # fill runs of consecutive rows as slices (a plain memset; index_fill_ is several times slower)
    for k in range(1, len(indices) + 1):
        if k == len(indices) or indices[k] != indices[k - 1] + 1:
            logits[indices[start]:indices[k - 1] + 1].fill_(float("-inf"))
            start = k
    logits[r, c] = keep


def _bit(i: int) -> int:
    """Bit ``i`` of an int32 word as a Python int that fits int32 (bit 31 is negative)."""
    return -(1 << 31) if i == 31 else 1 << i
