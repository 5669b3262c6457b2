"""What the vLLM processor and scheduler share, importable without vLLM or torch: the served model's vocabulary,
the process-wide set caches, and the per-request decoding row."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Set, Tuple

from .. import FINISHED, Automaton, TrieError, Vocab
from ..sets import SetCache, Settings

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

log = logging.getLogger("libtrie.vllm")

#: The key of ``SamplingParams.extra_args`` that names a request's set.
EXTRA_KEY = "libtrie"


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
    cache_dir = Settings.from_env().cache_dir
    saved = None
    if cache_dir is not None:
        st = os.stat(path)
        key = repr(("vocab", os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino, n_vocab, sorted(eog)))
        saved = os.path.join(cache_dir, "vocab-" + hashlib.sha256(key.encode()).hexdigest()[:40] + ".vocab")
        if os.path.isfile(saved):
            try:
                return Vocab.load(saved)
            except TrieError as e:
                log.warning("libtrie: reading the vocabulary again instead of loading %s (%s)", saved, e.message)
    if path.endswith(".gguf"):
        vocab = Vocab.from_gguf(path)
    else:
        vocab = Vocab.from_tokenizer_json(path, eog_ids=sorted(eog) if eog else None, n_vocab=n_vocab)
    if saved is not None:
        try:
            vocab.save(saved)
        except TrieError as e:
            log.warning("libtrie: cannot save the vocabulary to %s: %s", saved, e.message)
    return vocab


_CACHES: Dict[Tuple[Any, ...], SetCache] = {}
_CACHES_LOCK = threading.Lock()


def shared_cache(vllm_config: "VllmConfig", settings: Settings) -> SetCache:
    """The compiled sets of the served model in this process (shared by every processor and scheduler of it); the
    vocabulary is loaded on first use, on the thread that first compiles."""
    mc = vllm_config.model_config
    key = (str(mc.tokenizer or mc.model), int(mc.get_vocab_size()), os.environ.get("LIBTRIE_VOCAB"), settings)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = SetCache(lambda: load_model_vocab(vllm_config), settings.cache_size, settings)
        return cache


def fits(automaton: Automaton, n_vocab: int) -> Automaton:
    """``automaton``, if its vocabulary fits the model's logits (``LIBTRIE_VOCAB`` may name a wider one)."""
    if automaton.n_vocab > n_vocab:
        raise ValueError(f"the vocabulary has {automaton.n_vocab} ids, more than the model's {n_vocab} logits "
                         "(LIBTRIE_VOCAB names another model's vocabulary?)")
    return automaton


def stop_ids(params: "SamplingParams", automaton: Automaton, n_vocab: int) -> Set[int]:
    """The request's stop ids beyond the vocabulary's end-of-generation ids (allowed where a member is complete)."""
    stops = set(getattr(params, "all_stop_token_ids", ()) or ()) - set(automaton.vocab.eog_ids)
    return {t for t in stops if 0 <= t < n_vocab}


class Row:
    """One constrained request: its automaton, its state and how much of its output has been consumed."""

    __slots__ = ("automaton", "state", "output", "consumed", "stops", "broken")

    def __init__(self, automaton: Automaton, output: Sequence[int], stops: Set[int]) -> None:
        self.automaton = automaton
        self.state = automaton.start()
        self.output = output  # vLLM's live list of the request's output token ids
        self.consumed = 0
        self.stops = stops  # stop ids of the request beyond the vocabulary's EOG ids
        self.broken = False

    def catch_up(self, where: Any) -> None:
        """Advance the state over the output tokens produced since the last call."""
        out = self.output
        while self.consumed < len(out):
            t = out[self.consumed]
            self.consumed += 1
            if self.broken:
                continue
            if self.state != FINISHED and t in self.stops and self.automaton.is_accepting(self.state):
                self.state = FINISHED
                continue
            try:
                self.state = self.automaton.advance(self.state, t)
            except TrieError as e:  # a token from outside the mask (another processor, a forced token, ...)
                self.broken = True
                self.state = FINISHED
                log.warning("libtrie: the request %s produced token %d, which its set does not allow (%s); only "
                            "stop tokens are allowed from now on", where, t, e.message)

    def extra(self) -> Any:
        """The stop ids allowed at the current state beyond the automaton's own (a member is complete)."""
        if self.stops and (self.state == FINISHED or self.automaton.is_accepting(self.state)):
            return self.stops
        return ()


def uses_trie_scheduler(vllm_config: "VllmConfig") -> bool:
    """Whether the engine runs :class:`~libtrie.vllm.TrieScheduler` (then it masks the rows and the processor only
    validates)."""
    cls: Any = getattr(getattr(vllm_config, "scheduler_config", None), "scheduler_cls", None)
    if cls is None:
        return False
    if isinstance(cls, str):
        if cls in ("libtrie.vllm.TrieScheduler", "libtrie.vllm:TrieScheduler", "libtrie.vllm.scheduler.TrieScheduler"):
            return True
        try:
            from vllm.utils.import_utils import resolve_obj_by_qualname

            cls = resolve_obj_by_qualname(cls)
        except Exception:
            return False
    if not isinstance(cls, type):
        return False
    # By name, not by importing the scheduler (which imports this module, and vLLM).
    return any(c.__name__ == "TrieScheduler" and c.__module__ == "libtrie.vllm.scheduler" for c in cls.__mro__)
