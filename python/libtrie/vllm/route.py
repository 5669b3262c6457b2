"""Routing the structured outputs users already send to libtrie (``LIBTRIE_VLLM_ROUTE=1`` with
``--scheduler-cls libtrie.vllm.TrieScheduler``): no client change.

A request's ``structured_outputs`` reaches the engine core as a key ``(type, text)`` (vLLM's
``get_structured_output_key``): ``CHOICE`` (a JSON list; the guidance backend keeps it), ``GRAMMAR`` (the xgrammar
and ``auto`` backends have already turned a choice into ``root ::= "a" | "b" | ...`` in the frontend), ``JSON``
(a schema) or ``REGEX``. :func:`set_strings` reads such a key with libtrie's recognizers: when its language is
exactly a finite set (a choice, a string ``enum`` / ``const`` / ``anyOf`` schema, a literal alternation), the request
is served by libtrie (:class:`TrieGrammar`, compiled through the scheduler's set cache); anything else goes to vLLM's
own backend untouched. Routing keeps vLLM's structured-output machinery: the request waits for its compile off the
engine loop, the grammar bitmask is filled by the engine core and applied by the model runner, and rollback and
speculative-decoding validation go through :class:`TrieGrammar`.

Three places, one switch (``LIBTRIE_VLLM_ROUTE=1`` in the server's environment):

- the engine core (:class:`~libtrie.vllm.TrieScheduler`): the structured-output manager's grammar factory is
  wrapped, recognized keys get a :class:`TrieGrammar`;
- admission (:meth:`~libtrie.vllm.TrieLogitsProcessor.validate_params`, after vLLM's own checks): a recognized set
  beyond the operator's inline bounds (``LIBTRIE_MAX_INLINE_STRINGS`` / ``LIBTRIE_MAX_INLINE_BYTES``), a choice list
  with a duplicate or empty member, or a string that is not valid Unicode is an HTTP 400 naming the problem;
- the frontend (the ``vllm.general_plugins`` entry point :func:`register`): vLLM's xgrammar validation parses every
  choice list as a grammar (``xgr.Grammar.from_ebnf``) in the API server process; for a request libtrie recognizes
  the parse is skipped (the request keeps the form vLLM would give it, so an engine without routing still serves it
  with xgrammar).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .. import FINISHED, Automaton, Recognized, Status, TrieError, recognize
from ..sets import SetError, parse_spec

#: Under vLLM's logger (its handler and level): a line per routed request, in the server's log.
log = logging.getLogger("vllm.libtrie")

__all__ = ["enabled", "set_strings", "choice_strings", "check_admission", "register", "TrieGrammar", "Grammar", "log"]

#: vLLM's request types (``StructuredOutputOptions`` names) that a recognizer may read, and the recognizer's kind.
KINDS = {"CHOICE": "choices", "GRAMMAR": "grammar", "JSON": "json_schema", "REGEX": "regex"}


def enabled() -> bool:
    """Whether the operator switched routing on (``LIBTRIE_VLLM_ROUTE=1``)."""
    return os.environ.get("LIBTRIE_VLLM_ROUTE", "").strip().lower() in ("1", "true", "yes", "on")


def _render(render: str, member: bytes) -> bytes:
    if render == "json_string":
        return json.dumps(member.decode("utf-8"), ensure_ascii=False).encode("utf-8")
    return member  # raw, json_text


def choice_strings(members: Sequence[Any]) -> List[bytes]:
    """A ``choice`` list as the set's strings, checked: strings, none empty, none twice. Raises :class:`SetError`."""
    seen: Dict[str, int] = {}
    out: List[bytes] = []
    for i, m in enumerate(members):
        if not isinstance(m, str):
            raise SetError(Status.INVALID_ARGUMENT, f"structured_outputs.choice: member {i} is not a string")
        if not m:
            raise SetError(Status.INVALID_ARGUMENT, f"structured_outputs.choice: member {i} is empty")
        if m in seen:
            raise SetError(Status.INVALID_ARGUMENT, f"structured_outputs.choice: the choice list lists "
                           f"{json.dumps(m, ensure_ascii=False)[:200]} twice (at {seen[m]} and {i})")
        seen[m] = i
        try:
            out.append(m.encode("utf-8"))
        except UnicodeEncodeError:
            raise SetError(Status.INVALID_ARGUMENT, f"structured_outputs.choice: member {i} is not valid Unicode "
                           "(a lone surrogate)") from None
    if not out:
        raise SetError(Status.EMPTY_SET, "structured_outputs.choice lists no member")
    return out


def set_strings(request_type: str, spec: str) -> Optional[List[bytes]]:
    """The exact strings of the key ``(request_type, spec)`` when its language is a finite set libtrie serves (every
    string then end-of-generation), else ``None`` (vLLM's backend serves it). A choice list is always a set (checked
    by :func:`choice_strings`: :class:`SetError` for a bad one); a grammar, schema or regex is read by libtrie's
    recognizers, and one they cannot read is left to vLLM's backend."""
    kind = KINDS.get(request_type)
    if kind is None:
        return None
    if kind == "choices":
        try:
            members = json.loads(spec)
        except ValueError:
            raise SetError(Status.INVALID_ARGUMENT, "structured_outputs.choice is not a JSON list") from None
        if not isinstance(members, list):
            raise SetError(Status.INVALID_ARGUMENT, "structured_outputs.choice is not a list")
        return choice_strings(members)
    try:
        r = recognize(kind, spec)
    except TrieError:
        return None  # a grammar, schema or regex the recognizers cannot read: vLLM's backend decides
    if not isinstance(r, Recognized) or r.end != "eog":
        return None
    return [r.prefix + _render(r.render, m) + r.suffix for m in r.members]


def _key(so: Any) -> Optional[Tuple[str, str]]:
    """The engine's key of ``StructuredOutputsParams`` as (type name, text), or None."""
    from vllm.v1.structured_output.request import get_structured_output_key

    try:
        request_type, spec = get_structured_output_key(so)
    except ValueError:
        return None
    return request_type.name, spec


def check_admission(params: Any) -> Optional[int]:
    """Admission of a request with structured outputs (the API server process): when routing is on and libtrie
    recognizes the request, check its set against the operator's bounds. Returns the number of members, or None when
    libtrie does not serve it. Raises :class:`SetError` (a ``ValueError``: HTTP 400) naming the problem."""
    so = getattr(params, "structured_outputs", None)
    if so is None or not enabled():
        return None
    key = _key(so)
    if key is None:
        return None
    strings = set_strings(*key)
    if strings is None and key[0] == "JSON":
        from .tools import tool_schema

        found = tool_schema(key[1])
        strings = [n.encode("utf-8", "surrogatepass") for n in found[0]] if found else None
    if strings is None:
        return None
    try:
        texts = [s.decode("utf-8") for s in strings]
    except UnicodeDecodeError:
        raise SetError(Status.INVALID_ARGUMENT, "structured_outputs: a member is not valid UTF-8") from None
    parse_spec({"strings": texts})  # the operator's inline bounds, and valid Unicode
    return len(strings)




# ---- the frontend: skip vLLM's own parse of a recognized set ---------------------------------------------------------

def register() -> None:
    """The ``vllm.general_plugins`` entry point (loaded in every vLLM process). With ``LIBTRIE_VLLM_ROUTE=1``:

    - vLLM's xgrammar request validation (frontend) lets a ``choice`` list through as a list after libtrie's own
      checks (:func:`choice_strings`), instead of writing it as a grammar and parsing that with xgrammar, and skips
      xgrammar's parse of a grammar, schema or regex that libtrie's recognizers read as a set;
    - vLLM's xgrammar backend (engine core) compiles a ``choice`` list that reaches it (routing off, e.g. another
      scheduler) as the grammar vLLM would have written, so no configuration loses a request.

    Idempotent; nothing changes without the switch."""
    if not enabled():
        return
    try:
        from vllm.v1.structured_output import backend_xgrammar as bx
        from vllm.exceptions import VLLMValidationError
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions
    except ImportError:  # pragma: no cover - another vLLM layout
        log.warning("libtrie: this vLLM has no backend_xgrammar.validate_xgrammar_grammar; vLLM's frontend parses "
                    "sets itself")
        return
    original = bx.validate_xgrammar_grammar
    if getattr(original, "_libtrie", False):
        return

    def validate_xgrammar_grammar(sampling_params: Any) -> None:
        so = sampling_params.structured_outputs
        if so is not None and not so.all_constraints_none():
            if so.choice is not None:
                try:
                    choice_strings(so.choice)
                except SetError as e:  # vLLM's server answers 400 for its own validation error (500 for others)
                    raise VLLMValidationError(str(e), parameter="structured_outputs") from None
                return
            key = _key(so)
            if key is not None and set_strings(*key) is not None:
                return
        original(sampling_params)

    validate_xgrammar_grammar._libtrie = True  # type: ignore[attr-defined]
    bx.validate_xgrammar_grammar = validate_xgrammar_grammar

    compile_grammar = bx.XgrammarBackend.compile_grammar

    def compile_choice_as_grammar(self: Any, request_type: Any, grammar_spec: str, *args: Any, **kw: Any) -> Any:
        if request_type == StructuredOutputOptions.CHOICE:
            request_type = StructuredOutputOptions.GRAMMAR
            grammar_spec = bx.choice_as_grammar(json.loads(grammar_spec))
        return compile_grammar(self, request_type, grammar_spec, *args, **kw)

    bx.XgrammarBackend.compile_grammar = compile_choice_as_grammar


# ---- the engine core: a vLLM grammar backed by an automaton -----------------------------------------------------------

try:
    from vllm.v1.structured_output.backend_types import StructuredOutputGrammar as Grammar
except ImportError:  # pragma: no cover - depends on the environment
    Grammar = object  # type: ignore[misc,assignment,unused-ignore]


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
        if num_tokens > 0:
            del self.states[-min(num_tokens, len(self.states) - 1):]

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


def admission_error(e: Exception) -> ValueError:
    """``e`` as the ``ValueError`` vLLM turns into an HTTP 400."""
    return e if isinstance(e, ValueError) else ValueError(str(e))
