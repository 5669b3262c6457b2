"""The SGLang grammar backend and grammar object (see :mod:`libtrie.sglang`). Imports SGLang and torch.

Invariants: a :class:`LibtrieGrammar` is one request's position in one compiled set (an ``int`` state plus the states
before each accepted token, for rollback); its mask rows are XGrammar's layout, so SGLang may allocate, move and apply
a batch's mask with whichever grammar comes first in the batch. The backend never changes a request it does not serve:
those go, unmodified, to the default backend's ``dispatch_*``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
    InvalidGrammarObject,
    create_grammar_backend,
)

from .. import FINISHED, Automaton, NotASet, TrieError, Vocab, front
from ..draft import jump_forward
from ..masks import apply_bitmask
from ..sets import Settings
from . import BACKEND_NAME

log = logging.getLogger("libtrie.sglang")

__all__ = ["LibtrieGrammar", "LibtrieGrammarBackend", "create_backend", "load_vocab"]

#: The SGLang request kinds libtrie reads, and the recognizer shape of each.
_SHAPES = {"json": "json_schema", "regex": "regex", "ebnf": "xgrammar_grammar"}
#: How a refusal names each kind: the request field SGLang reads it from.
_FIELDS = {"json": "json_schema", "regex": "regex", "ebnf": "ebnf"}


def _pin_memory() -> bool:
    try:
        from sglang.srt.utils.common import is_pin_memory_available

        return bool(is_pin_memory_available())
    except Exception:  # pragma: no cover - older SGLang
        return bool(torch.cuda.is_available())


class LibtrieGrammar(BaseGrammarObject):  # type: ignore[misc,unused-ignore]  # SGLang ships no type stubs
    """One request decoding one compiled set: ``state`` (``libtrie.FINISHED`` once an end-of-generation id was
    accepted) and the states it came through, so that ``rollback(k)`` undoes the last ``k`` accepted tokens."""

    def __init__(self, automaton: Automaton, key_type: str, grammar_stats: Optional[GrammarStats] = None) -> None:
        super().__init__()
        self.automaton = automaton
        self.key_type = key_type
        self.grammar_stats = grammar_stats
        self.state: int = automaton.start()
        self._before: List[int] = []  # the state before each accepted token, oldest first

    # ---- decoding --------------------------------------------------------------------------------------------------

    def accept_token(self, token: int) -> None:
        """Advance by ``token``. A token the set does not allow raises ``ValueError`` (SGLang then aborts the
        request); after an end-of-generation id this does nothing, as XGrammar's grammar does."""
        if self.state == FINISHED:
            return
        self.current_token = token
        try:
            nxt = self.automaton.advance(self.state, int(token))
        except TrieError as e:
            raise ValueError(f"libtrie: token {token} is not allowed by the {self.key_type} set here ({e.message})") \
                from None
        self._before.append(self.state)
        self.state = nxt

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (``ValueError`` for more than were accepted)."""
        if k <= 0:
            return
        if k > len(self._before):
            raise ValueError(f"libtrie: cannot roll back {k} tokens, only {len(self._before)} were accepted")
        self.state = self._before[-k]
        del self._before[-k:]

    def is_terminated(self) -> bool:
        return self.state == FINISHED

    # ---- masks (XGrammar's layout) ---------------------------------------------------------------------------------

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        """``[batch_size, ceil(vocab_size / 32)]`` int32 on the CPU, all ones (-1: unconstrained), pinned where
        pinning exists: what XGrammar allocates."""
        return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=_pin_memory())

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Write this request's row ``idx`` (every word: bits past the vocabulary are 0)."""
        self.automaton.fill_bitmask(self.state, vocab_mask[idx])

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        """Set the logits of disallowed ids to -inf: SGLang's own XGrammar kernels on accelerators (the same call a
        batch led by an XGrammar grammar makes), xgrammar's CPU kernel or plain torch on the CPU."""
        if logits.device.type != "cpu":
            try:
                from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
            except ImportError:  # pragma: no cover - SGLang without xgrammar
                pass
            else:
                XGrammarGrammarBackend.apply_vocab_mask(logits, vocab_mask)
                return
        apply_bitmask(logits, vocab_mask, range(logits.shape[0]))

    # ---- copies and jump-forward -----------------------------------------------------------------------------------

    def copy(self) -> "LibtrieGrammar":
        """A new request on the same compiled set, at its start (what SGLang's cache hands out)."""
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return LibtrieGrammar(self.automaton, self.key_type, stats)

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        """The forced run (:func:`libtrie.draft.jump_forward`): the rest of the only member left, or the bytes every
        member left shares (a template's prefix, a common stem), as a token path and its text, cut at whole UTF-8
        characters; None when nothing is forced."""
        if self.state == FINISHED:
            return None
        return jump_forward(self.automaton, self.state)

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        """The engine re-tokenized the output after a jump: roll back to the common prefix, accept the rest."""
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        self.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)

    def __repr__(self) -> str:
        return f"LibtrieGrammar({self.key_type}, members={self.automaton.n_members}, state={self.state})"


def load_vocab(tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Iterable[int]]) -> Vocab:
    """The served model's vocabulary: ``$LIBTRIE_VOCAB`` (a ``tokenizer.json`` or GGUF file), else the tokenizer's
    own ``tokenizer.json`` (a fast tokenizer's backend, serialized); ``vocab_size`` ids wide, ending on the model's
    EOS ids (the tokenizer's ``eos_token_id`` when SGLang passes none)."""
    eog = sorted({int(t) for t in eos_token_ids}) if eos_token_ids else []
    if not eog and getattr(tokenizer, "eos_token_id", None) is not None:
        eog = [int(tokenizer.eos_token_id)]
    path = os.environ.get("LIBTRIE_VOCAB", "").strip()
    if path:
        if path.endswith(".gguf"):
            return Vocab.from_gguf(path)
        return Vocab.from_tokenizer_json(path, eog_ids=eog or None, n_vocab=vocab_size)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        raise ValueError(f"libtrie: the tokenizer {type(tokenizer).__name__} has no tokenizer.json to read; set "
                         "LIBTRIE_VOCAB to the model's tokenizer.json or GGUF file")
    with tempfile.TemporaryDirectory(prefix="libtrie-sglang-") as tmp:
        file = os.path.join(tmp, "tokenizer.json")
        with open(file, "w", encoding="utf-8") as f:
            f.write(backend.to_str())
        return Vocab.from_tokenizer_json(file, eog_ids=eog or None, n_vocab=vocab_size)


class LibtrieGrammarBackend(BaseGrammarBackend):  # type: ignore[misc,unused-ignore]
    """SGLang's ``BaseGrammarBackend`` (its cache and compile executor) for finite sets; every request the
    recognizers do not read as a set, and every other SGLang hook, goes to ``default`` (None: refused)."""

    def __init__(self, vocab: Vocab, default: Optional[BaseGrammarBackend], settings: Optional[Settings] = None,
                 default_name: str = "xgrammar") -> None:
        super().__init__()
        self.vocab = vocab
        self.default = default
        self.default_name = default_name
        self.settings = settings or Settings.from_env()

    # ---- requests --------------------------------------------------------------------------------------------------

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":  # JSON mode: any JSON value
            return self._delegate("json", key_string)
        return self._serve("json", key_string)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._serve("regex", key_string)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        return self._serve("ebnf", key_string)

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._delegate("structural_tag", key_string)

    def dispatch_fallback(self, key_type: str, key_string: str) -> BaseGrammarObject:
        if self.default is None:
            return super().dispatch_fallback(key_type, key_string)
        return self.default.dispatch_fallback(key_type, key_string)

    def _delegate(self, key_type: str, key_string: str) -> BaseGrammarObject:
        if self.default is None:
            return InvalidGrammarObject(f"libtrie serves finite sets only, and this {key_type} request is not one; "
                                        f"the default grammar backend is {self.default_name!r}")
        grammar: BaseGrammarObject = getattr(self.default, f"dispatch_{key_type}")(key_string)
        return grammar

    def _serve(self, key_type: str, key_string: str) -> BaseGrammarObject:
        """A set's grammar, or the default backend's for anything else: a request over the operator's bounds too
        (they travel into the recognition, :mod:`libtrie.front`: the text's size before anything parses it, members
        and their bytes as the set is expanded, nesting; and into the compile), as without libtrie. A text libtrie's
        recognizers cannot read (XGrammar's ``TagDispatch``, another dialect) is the default backend's to judge,
        never refused here."""
        try:
            key_string.encode("utf-8")
        except UnicodeEncodeError:  # XGrammar raises on it too (an exception, not a refusal): refused here
            return InvalidGrammarObject(f"libtrie: {_FIELDS[key_type]}: the text is not valid Unicode (a lone "
                                        "surrogate)")
        try:  # routing bounds: over them the request is not a set (the default backend's, as without libtrie)
            found = front.recognize_once(_SHAPES[key_type], key_string, front.limits(self.settings))
        except TrieError:
            return self._delegate(key_type, key_string)
        if isinstance(found, NotASet) or found.end != "eog":
            return self._delegate(key_type, key_string)
        s = self.settings
        try:
            automaton = front.compile_recognized(self.vocab, found, s, end="eog")
        except TrieError as e:
            if front.is_limit(e):  # over the compile bounds: the default backend serves it
                return self._delegate(key_type, key_string)
            return InvalidGrammarObject(f"libtrie: {_FIELDS[key_type]}: {e.message}")
        return LibtrieGrammar(automaton, key_type, GrammarStats(dispatch_type=key_type))

    # ---- SGLang's other hooks: the default backend's ---------------------------------------------------------------

    def reset(self) -> None:
        super().reset()
        if self.default is not None:
            self.default.reset()

    @property
    def enable_strict_thinking(self) -> bool:
        return bool(self.default is not None and self.default.enable_strict_thinking)

    @property
    def is_support_token_filter(self) -> bool:
        return bool(self.default is not None and self.default.is_support_token_filter)

    def set_token_filter(self, vocab_mask: Any, token_ids: Any, batch_idx: int, is_allowed: bool = True,
                         reset_vocab_mask: bool = True) -> None:
        if self.default is not None:
            self.default.set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed=is_allowed,
                                          reset_vocab_mask=reset_vocab_mask)

    def init_strict_reasoning_grammar(self, reasoning: bool) -> Any:
        return None if self.default is None else self.default.init_strict_reasoning_grammar(reasoning)

    def get_request_grammar_key(self, key: Tuple[str, str], *, input_ids: Sequence[int],
                                thinking_budget: Optional[int]) -> Tuple[str, str]:
        if self.default is None:
            return key
        found: Tuple[str, str] = self.default.get_request_grammar_key(key, input_ids=input_ids,
                                                                       thinking_budget=thinking_budget)
        return found

    def reserve_framing_tokens(self, token_ids: Sequence[int]) -> None:
        if self.default is not None:
            self.default.reserve_framing_tokens(token_ids)

    def compile_framed_grammar(self, grammar: BaseGrammarObject,
                               frame: Callable[[Dict[str, Any]], Dict[str, Any]]) -> Optional[BaseGrammarObject]:
        if self.default is None or isinstance(grammar, LibtrieGrammar):
            return None
        return self.default.compile_framed_grammar(grammar, frame)


def _default_backend(name: str, server_args: Any, tokenizer: Any, vocab_size: int,
                     eos_token_ids: Optional[Set[int]]) -> Optional[BaseGrammarBackend]:
    """SGLang's own backend ``name``, built by SGLang's ``create_grammar_backend`` with the arguments it gave us
    (its ``--grammar-backend`` setting scoped to ``name`` for the call)."""
    if name == BACKEND_NAME:
        raise ValueError(f"LIBTRIE_SGLANG_DEFAULT cannot be {BACKEND_NAME!r}")
    from sglang.srt.runtime_context import get_exec

    with get_exec().kernel.override(grammar_backend=name):
        return create_grammar_backend(server_args, tokenizer, vocab_size, eos_token_ids)


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int,
                   eos_token_ids: Optional[Set[int]] = None) -> LibtrieGrammarBackend:
    """The init SGLang calls for ``--grammar-backend libtrie`` (``register_grammar_backend``'s signature). Reads the
    operator's settings and the vocabulary now, so that a bad setting stops the server at start, naming it."""
    settings = Settings.from_env()
    name = os.environ.get("LIBTRIE_SGLANG_DEFAULT", "").strip() or "xgrammar"
    vocab = load_vocab(tokenizer, vocab_size, eos_token_ids)
    default = _default_backend(name, server_args, tokenizer, vocab_size, eos_token_ids)
    log.info("libtrie: grammar backend ready (vocabulary of %d ids, EOS %s; other requests go to %s)",
             vocab.n_vocab, list(vocab.eog_ids), name)
    return LibtrieGrammarBackend(vocab, default, settings, name)
