"""Routing the structured outputs users already send to libtrie (``LIBTRIE_VLLM_ROUTE=1`` with
``--scheduler-cls libtrie.vllm.TrieScheduler``): no client change.

A request's ``structured_outputs`` reaches the engine core as a key ``(type, text)`` (vLLM's
``get_structured_output_key``): ``CHOICE`` (a JSON list; the guidance backend keeps it), ``GRAMMAR`` (the xgrammar
and ``auto`` backends have already turned a choice into ``root ::= "a" | "b" | ...`` in the frontend), ``JSON``
(a schema) or ``REGEX``. :func:`recognize_key` reads such a key with libtrie's recognizers (once per process, within
the operator's bounds: :mod:`libtrie.front`): when its language is exactly a finite set (a choice, a string ``enum``
/ ``const`` / ``anyOf`` schema, a literal alternation), or vLLM's schema of a ``tool_choice="required"`` tool list,
the request is served by libtrie (:class:`TrieGrammar`, or :class:`~libtrie.vllm.tools.TrieToolGrammar`, compiled
on vLLM's grammar threads with the recognition's own template: the native library renders the members); anything
else goes to vLLM's own backend untouched. Routing keeps vLLM's structured-output machinery: the request waits for
its compile off the engine loop, the grammar bitmask is filled by the engine core and applied by the model runner,
and rollback and speculative-decoding validation go through the grammar.

Three places, one switch (``LIBTRIE_VLLM_ROUTE=1`` in the server's environment):

- the engine core (:class:`~libtrie.vllm.TrieScheduler`): the structured-output manager's grammar factory is
  wrapped, recognized keys get a libtrie grammar;
- the frontend (the ``vllm.general_plugins`` entry point :func:`register`, the API server's event loop): vLLM's
  xgrammar validation parses every request with xgrammar (a choice list written as a grammar, a tool list's whole
  schema); for a request libtrie serves the parse is skipped (the request keeps the form vLLM would give it, so an
  engine without routing still serves it with xgrammar). The operator's bounds travel into the recognition
  (``LIBTRIE_MAX_INLINE_STRINGS``, ``LIBTRIE_MAX_INLINE_BYTES`` and the text's size, checked before anything
  parses it): a request beyond them, a ``choice`` or tool list with a duplicate or empty member, or text that is
  not valid Unicode is an HTTP 400 naming the field and the problem;
- admission (:meth:`~libtrie.vllm.TrieLogitsProcessor.validate_params`): the same check, for a request that did not
  pass the xgrammar validation (another backend); the recognition is cached, so it is not run twice.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from typing import Any, NamedTuple, Optional, Tuple

from .. import Recognized, TrieError
from .. import front
from ..sets import SetError, Settings
from .grammar import Grammar, TrieGrammar, log

__all__ = ["enabled", "recognize_key", "Routed", "check_admission", "register", "TrieGrammar", "Grammar", "log",
           "FIELDS"]

#: vLLM's request types (``StructuredOutputOptions`` names) that a recognizer may read, and the recognizer's kind.
KINDS = {"CHOICE": "choices", "GRAMMAR": "xgrammar_grammar", "JSON": "json_schema", "REGEX": "regex"}
#: The request field each type comes from, as a 400 names it (a JSON schema may also come as ``response_format``).
FIELDS = {"CHOICE": "structured_outputs.choice", "GRAMMAR": "structured_outputs.grammar",
          "JSON": "structured_outputs.json", "REGEX": "structured_outputs.regex", "TOOLS": "tools"}
#: How vLLM's schema of a ``tool_choice="required"`` tool list begins (``json.dumps`` of the dict vLLM builds):
#: only such a key is read as a tool list (by the native recognizer, kind ``"vllm_tools"``).
TOOLS_HEAD = '{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": ['


def enabled() -> bool:
    """Whether the operator switched routing on (``LIBTRIE_VLLM_ROUTE=1``)."""
    return os.environ.get("LIBTRIE_VLLM_ROUTE", "").strip().lower() in ("1", "true", "yes", "on")


class Routed(NamedTuple):
    """A request key libtrie serves: ``kind`` is ``"set"`` (members, each then end-of-generation) or ``"tools"``
    (vLLM's schema of ``tool_choice="required"``: names, then each tool's arguments), and the recognition."""

    kind: str
    found: Recognized


def recognize_key(request_type: str, spec: str, settings: Optional[Settings] = None) -> Optional[Routed]:
    """What libtrie serves of the engine key ``(request_type, spec)``, recognized once per process within the
    operator's inline bounds (:mod:`libtrie.front`), or ``None`` (vLLM's backend serves it, untouched). A bound hit
    (the text's size, members, their bytes, nesting) is a :class:`~libtrie.sets.SetError` (a ``ValueError``: HTTP
    400) naming the request's field, whatever the shape; so is a malformed ``choice`` list or tool list (the
    client lists their members on purpose). A grammar, schema or regex libtrie cannot read is vLLM's to judge."""
    kind = KINDS.get(request_type)
    if kind is None:
        return None
    settings = settings or Settings.from_env()
    lim = front.limits(settings)
    if request_type == "JSON" and spec.startswith(TOOLS_HEAD):
        try:  # the shape is the native recognizer's to judge; the head only says which field a 400 names
            tools = front.recognize_once("vllm_tools", spec, lim)
        except TrieError as e:
            raise front.client_error(FIELDS["TOOLS"], e, settings) from None
        if isinstance(tools, Recognized):
            return Routed("tools", tools)
    try:
        r = front.recognize_once(kind, spec, lim)
    except TrieError as e:
        if kind == "choices" or front.is_limit(e):
            raise front.client_error(FIELDS[request_type], e, settings) from None
        return None
    if not isinstance(r, Recognized) or r.end != "eog":
        return None
    return Routed("set", r)


_KEYS: "OrderedDict[int, Tuple[Any, Optional[Tuple[str, str]]]]" = OrderedDict()
_KEYS_LOCK = threading.Lock()


def _key(so: Any) -> Optional[Tuple[str, str]]:
    """The engine's key of ``StructuredOutputsParams`` as (type name, text), or None. A schema or choice list that
    is a Python object is written as JSON once per request (the frontend validation and admission both ask; the
    text of 2,000 tool schemas takes a third of a second to write on a busy machine)."""
    from vllm.v1.structured_output.request import get_structured_output_key

    obj = so.json if so.json is not None else so.choice
    memo = obj is not None and not isinstance(obj, str)
    if memo:
        with _KEYS_LOCK:
            hit = _KEYS.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
    try:
        request_type, spec = get_structured_output_key(so)
        key: Optional[Tuple[str, str]] = (request_type.name, spec)
    except ValueError:
        key = None
    if memo:
        with _KEYS_LOCK:
            _KEYS[id(obj)] = (obj, key)
            while len(_KEYS) > 8:
                _KEYS.popitem(last=False)
    return key


def check_admission(params: Any) -> Optional[int]:
    """Admission of a request with structured outputs (the API server process): when routing is on and libtrie
    serves the request, its recognition within the operator's bounds (once per process: the frontend validation
    has usually done it). Returns the number of members (tool names for a tool call), or None when libtrie does not
    serve it. Raises :class:`~libtrie.sets.SetError` (a ``ValueError``: HTTP 400) naming the field and the problem."""
    so = getattr(params, "structured_outputs", None)
    if so is None or not enabled():
        return None
    key = _key(so)
    if key is None:
        return None
    routed = recognize_key(*key)
    return None if routed is None else len(routed.found.members)


# ---- the frontend: skip vLLM's own parse of a recognized set ---------------------------------------------------------

def register() -> None:
    """The ``vllm.general_plugins`` entry point (loaded in every vLLM process). With ``LIBTRIE_VLLM_ROUTE=1``:

    - vLLM's xgrammar request validation (frontend, the API server's event loop) skips xgrammar's parse of a request
      libtrie serves (:func:`recognize_key`: a ``choice`` list, stays a list; a grammar, schema or regex that is a
      set; vLLM's schema of a ``tool_choice="required"`` tool list), and refuses one beyond the operator's bounds
      with a 400 before anything else parses it;
    - vLLM's xgrammar backend (engine core) compiles a ``choice`` list that reaches it (routing off, e.g. another
      scheduler) as the grammar vLLM would have written, so no configuration loses a request.

    Idempotent; nothing changes without the switch."""
    if not enabled():
        return
    try:
        from vllm.exceptions import VLLMClientError
        from vllm.v1.structured_output import backend_xgrammar as bx
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions
    except ImportError:  # pragma: no cover - another vLLM layout
        log.warning("libtrie: this vLLM has no backend_xgrammar.validate_xgrammar_grammar; vLLM's frontend parses "
                    "sets itself")
        return
    original = bx.validate_xgrammar_grammar
    if getattr(original, "_libtrie", False):
        return

    class Refused(VLLMClientError, ValueError):  # type: ignore[misc,unused-ignore]  # vLLM ships no stubs
        """A request libtrie refuses (a bound, a malformed choice or tool list): vLLM's client error, an HTTP 400
        (its server answers 500 for a plain ValueError raised here), and not its VLLMValidationError, which its
        "auto" backend would take as "try guidance" and parse the request again."""

    def validate_xgrammar_grammar(sampling_params: Any) -> None:
        so = sampling_params.structured_outputs
        if so is not None and not so.all_constraints_none():
            key = _key(so)
            try:
                routed = recognize_key(*key) if key is not None else None
            except SetError as e:
                raise Refused(str(e)) from None
            if routed is not None:
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
