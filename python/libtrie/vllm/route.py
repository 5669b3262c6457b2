"""Routing the structured outputs users already send to libtrie (``LIBTRIE_VLLM_ROUTE=1``, one switch; the
scheduler ``--scheduler-cls libtrie.vllm.TrieScheduler`` is optional): no client change.

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

- the engine core (the entry point :func:`register`, run by vLLM in every process): the structured-output
  manager's grammar factory is wrapped (class-wide), recognized keys get a libtrie grammar (:func:`engine_grammar`);
  :class:`~libtrie.vllm.TrieScheduler`, when used, wraps the same factory per instance;
- engine start (the logits processor, :func:`check_configuration`): the switch without the entry point having run
  refuses to start; the scheduler without the switch logs an error saying structured outputs are not routed;
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

import hashlib
import json
import os
import threading
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .. import Recognized, TrieError
from .. import front
from ..sets import SetError, Settings
from . import frontend
from .grammar import Grammar, TrieGrammar, log

__all__ = ["enabled", "check_configuration", "engine_grammar", "is_routing_installed", "recognize_key", "Routed",
           "check_admission", "register", "TrieGrammar", "Grammar", "log", "FIELDS"]

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
    operator's inline bounds (:mod:`libtrie.front`), or ``None`` (vLLM's backend serves it, untouched). Over a
    bound (the text's size, members, their bytes, nesting) the request is not a set: vLLM's backend serves it, as
    plain vLLM would, never a 400 for its size. A malformed ``choice`` list or tool list (the client lists their
    members on purpose) is a :class:`~libtrie.sets.SetError` (a ``ValueError``: HTTP 400) naming the request's
    field. A grammar, schema or regex libtrie cannot read is vLLM's to judge."""
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
            try:
                if so.structural_tag is not None and frontend.check_tag(so.structural_tag, Settings.from_env()):
                    return  # libtrie's tool calls: served by libtrie, bounded above
                key = _key(so)
                routed = recognize_key(*key) if key is not None else None
            except (SetError, ValueError) as e:
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
    _route_engine_core()
    _route_tool_parsers(Refused)
    from . import deferred

    deferred.install(Refused)  # defer_loading, tool search, tool_reference: before the prompt is rendered


def _route_tool_parsers(refused: type) -> None:
    """Wrap vLLM's ``ToolParser.adjust_request`` (the API server, before sampling parameters are made): tool calls
    libtrie serves (``auto`` with a ``<tool_call>`` parser, ``required``, registries) become libtrie's structural
    tag (:func:`libtrie.vllm.frontend.adjust`)."""
    try:
        from vllm.tool_parsers.abstract_tool_parser import ToolParser
    except ImportError:  # pragma: no cover - another vLLM layout
        log.warning("libtrie: this vLLM has no ToolParser.adjust_request: tool calls keep vLLM's own constraint")
        return
    original = ToolParser.adjust_request
    if getattr(original, "_libtrie", False):
        return

    def adjust_request(self: Any, request: Any) -> Any:
        request = original(self, request)
        if not enabled():
            return request
        try:
            frontend.adjust(self, request)
        except ValueError as e:
            raise refused(str(e)) from None
        return request

    adjust_request._libtrie = True  # type: ignore[attr-defined]
    ToolParser.adjust_request = adjust_request
    try:  # the chat frontend's parser (tool and reasoning parsers together), which may add its own structural tag
        from vllm.parser import abstract_parser
    except ImportError:  # pragma: no cover - another vLLM layout
        return
    for cls in (abstract_parser.Parser, getattr(abstract_parser, "DelegatingParser", None)):
        if cls is not None and "adjust_request" in vars(cls):
            _wrap_parser(cls, refused)


def _wrap_parser(cls: Any, refused: type) -> None:
    """Wrap ``cls.adjust_request`` (vLLM's composed parser): after it, libtrie's tag replaces a structural tag the
    parser itself added (strict tool calling), never one the client sent."""
    outer = cls.adjust_request
    if getattr(outer, "_libtrie", False):
        return

    def parser_adjust_request(self: Any, request: Any) -> Any:
        so = getattr(request, "structured_outputs", None)
        client_tag = so is not None and getattr(so, "structural_tag", None) is not None
        request = outer(self, request)
        tool_parser = getattr(self, "_tool_parser", None)
        if tool_parser is not None and enabled():
            try:
                frontend.adjust(tool_parser, request, replace_tag=not client_tag)
            except ValueError as e:
                raise refused(str(e)) from None
        return request

    parser_adjust_request._libtrie = True  # type: ignore[attr-defined]
    cls.adjust_request = parser_adjust_request


# ---- the engine core: one switch -------------------------------------------------------------------------------------

def _route_engine_core() -> None:
    """Wrap vLLM's ``StructuredOutputManager._create_grammar`` (the engine core's grammar factory, run on its compile
    threads) for every manager of this process: a request libtrie serves gets a libtrie grammar
    (:func:`engine_grammar`), any other goes to vLLM's backend. This is what makes ``LIBTRIE_VLLM_ROUTE=1`` alone
    enough: no scheduler is needed for routing (:class:`~libtrie.vllm.TrieScheduler` adds its own sets of
    ``extra_args``, and wraps the same factory per instance: a request it serves never reaches this one)."""
    try:
        from vllm.v1.structured_output import StructuredOutputManager
    except ImportError:  # pragma: no cover - another vLLM layout
        log.error("libtrie: LIBTRIE_VLLM_ROUTE=1 but this vLLM has no StructuredOutputManager: nothing is routed")
        return
    original = StructuredOutputManager._create_grammar
    if getattr(original, "_libtrie", False):
        return

    def _create_grammar(self: Any, request: Any) -> Any:
        if not enabled():  # the switch is read per request: an in-process engine may have turned it off since
            return original(self, request)
        try:
            grammar = engine_grammar(self, request)
        except Exception:  # the request ends with an error (vLLM's own factory logs its failures the same way)
            log.exception("libtrie: the structured output of request %s cannot be served", request.request_id)
            raise
        return original(self, request) if grammar is None else grammar

    _create_grammar._libtrie = True  # type: ignore[attr-defined]
    StructuredOutputManager._create_grammar = _create_grammar
    log.info("libtrie: structured outputs that are finite sets, tool calls and registries are served by libtrie "
             "(LIBTRIE_VLLM_ROUTE=1)")


def is_routing_installed() -> bool:
    """Whether this process's vLLM engine core routes through libtrie (:func:`register` ran with the switch on)."""
    try:
        from vllm.v1.structured_output import StructuredOutputManager
    except ImportError:  # pragma: no cover
        return False
    return bool(getattr(StructuredOutputManager._create_grammar, "_libtrie", False))


def check_configuration(scheduler: bool, routing: Optional[bool] = None, installed: Optional[bool] = None,
                        plugins: Optional[str] = None) -> str:
    """The one-switch check, at engine start (the logits processor is built in every engine): ``LIBTRIE_VLLM_ROUTE=1``
    alone routes (the ``vllm.general_plugins`` entry point wraps the engine core's grammar factory). With the switch
    on, ``VLLM_PLUGINS`` leaving libtrie out would serve nothing through libtrie: the engine refuses to start; an
    entry point that ran before the switch was set (an in-process engine) is run again here. TrieScheduler without
    the switch serves only ``extra_args["libtrie"]`` sets, which is logged as an error. Returns what it found."""
    routing = enabled() if routing is None else routing
    if routing:
        plugins = os.environ.get("VLLM_PLUGINS") if plugins is None else plugins
        if plugins and "libtrie" not in [p.strip() for p in plugins.split(",")]:
            raise RuntimeError(f"libtrie: LIBTRIE_VLLM_ROUTE=1 but VLLM_PLUGINS={plugins!r} leaves out libtrie's "
                               "vllm.general_plugins entry point (libtrie.vllm.route:register): nothing would be "
                               "served by libtrie. Add libtrie to VLLM_PLUGINS or unset it.")
        if installed is None:
            installed = is_routing_installed()
            if not installed:
                register()
                installed = is_routing_installed()
        if not installed:
            raise RuntimeError("libtrie: LIBTRIE_VLLM_ROUTE=1 but routing could not be installed in this vLLM (its "
                               "StructuredOutputManager was not found): nothing would be served by libtrie.")
        return "routing"
    if scheduler:
        log.error("libtrie: TrieScheduler runs without LIBTRIE_VLLM_ROUTE=1: structured outputs (choice, enum, "
                  "tool calls, registries) go to vLLM's own backend and only extra_args[\"libtrie\"] sets are "
                  "served by libtrie. Set LIBTRIE_VLLM_ROUTE=1 (it alone routes; the scheduler is optional)")
        return "scheduler only"
    return "off"


#: The most names of a registry that may change (added + removed, as a fraction of its size; at least 16) for its
#: name automaton to be updated by ``with_changes`` rather than compiled again.
UPDATE_FRACTION = 0.25


class EngineContext:
    """What the engine core's routing needs, once per structured-output manager: the operator's settings, the
    model's vocabulary (loaded on the first routed request, on a compile thread) and the argument compiler."""

    def __init__(self, manager: Any) -> None:
        from ._common import shared_cache
        from .tools import ToolCompiler

        self.settings = Settings.from_env()
        self.n_vocab = int(manager.vllm_config.model_config.get_vocab_size())
        self.cache = shared_cache(manager.vllm_config, self.settings)
        self.compiler = ToolCompiler(lambda: manager.backend)
        #: Requests served by libtrie through this context.
        self.routed = 0
        self._lock = threading.Lock()
        self._registries: Optional[Any] = None
        self._by_identity: Dict[Any, Any] = {}
        #: Per registry name and template: its last automaton and the registry's names it was made for (each
        #: member's value is its name's index in them).
        self._latest: Dict[Any, Tuple[Any, Tuple[str, ...]]] = {}
        #: Registries updated by with_changes instead of compiled again.
        self.updates = 0
        #: Per registry identity: its names as a set (what a request adds to it).
        self._name_sets: Dict[Any, Any] = {}

    def registry(self, name: str) -> Any:
        """The registry ``name`` of the operator's set directory (:mod:`libtrie.registry`; read once per file
        identity)."""
        from ..registry import RegistryCache

        with self._lock:
            if self._registries is None:
                self._registries = RegistryCache(self.settings.set_dir, self.settings.max_file_bytes,
                                                 capacity=max(2, self.settings.cache_size))
        return self._registries.get(name)

    def names(self, names: Any, prefix: str, suffix: str, identity: Optional[bytes] = None,
              render: str = "json_string", registry: Optional[str] = None) -> Any:
        """The name automaton of a tool list (``prefix``, the name as a JSON string, ``suffix``, left open), each
        name carrying its tool's index in ``names`` as its value (the native tool-call engine reads it where the name is
        complete): compiled once per list and template (:func:`libtrie.front.compile_recognized`). A registry
        whose file changed (``registry``: its name; a new ``identity``) is updated from its last automaton by
        ``with_changes`` when few names were added or removed (at most :data:`UPDATE_FRACTION` of them): the
        added names, and the kept ones whose index changed, are added with their new indices as values."""
        from ._common import fits

        key = (identity, prefix, suffix, render)
        if identity is not None:
            hit = self._by_identity.get(key)
            if hit is not None:
                return hit
        updated = self._update(registry, names, key) if registry is not None and identity is not None else None
        if updated is not None:
            return updated
        found = Recognized(tuple(n.encode("utf-8") for n in names), prefix.encode(), suffix.encode(), render,
                           "open", None, False)
        a = fits(front.compile_recognized(self.cache.vocab, found, self.settings, indexed=True), self.n_vocab)
        self._remember(key, a, registry, tuple(names))
        return a

    def _update(self, registry: str, names: Any, key: Tuple[Optional[bytes], str, str, str]) -> Optional[Any]:
        """The automaton of a changed registry from its previous one (``with_changes``), or None (compile it)."""
        from ._common import fits

        with self._lock:
            prev = self._latest.get((registry,) + key[1:])
        if prev is None:
            return None
        old, old_names = prev
        before = {n: i for i, n in enumerate(old_names)}
        now = set(names)
        added = [n for n in names if n not in before]
        gone = [n for n in old_names if n not in now]
        if len(added) + len(gone) > max(16, int(len(names) * UPDATE_FRACTION)):
            return None
        # The new names and the kept ones whose index moved (a name removed or inserted before it, a reorder):
        # added with their index in the new list, which becomes their value; the others keep theirs.
        moved = [(i, n) for i, n in enumerate(names) if before.get(n) != i]
        if not moved and not gone:
            a = old  # the same names in the same order (a schema changed)
        else:
            try:
                a = fits(old.with_changes(add=[n for _, n in moved], remove=gone, values=[i for i, _ in moved]),
                         self.n_vocab)
            except TrieError as e:
                log.warning("libtrie: registry %r: the update of its names failed (%s); compiled again", registry, e)
                return None
            self.updates += 1
        self._remember(key, a, registry, tuple(names))
        return a

    def _remember(self, key: Tuple[Optional[bytes], str, str, str], a: Any, registry: Optional[str],
                  names: Tuple[str, ...]) -> None:
        """A registry's name automaton by the file's identity: a warm request skips even the member list."""
        if key[0] is None:
            return
        bound = 4 * max(2, self.settings.cache_size)
        with self._lock:
            self._by_identity[key] = a
            if registry is not None:
                self._latest[(registry,) + key[1:]] = (a, names)
                while len(self._latest) > bound:
                    self._latest.pop(next(iter(self._latest)))
            while len(self._by_identity) > bound:
                self._by_identity.pop(next(iter(self._by_identity)))

    def outside(self, reg: Any, names: Sequence[str]) -> List[int]:
        """The indices of ``names`` that are not tools of the registry ``reg`` (its name set kept per identity)."""
        with self._lock:
            if not hasattr(self, "_name_sets"):
                self._name_sets = {}
            known = self._name_sets.get(reg.identity)
            if known is None:
                known = frozenset(reg.names)
                self._name_sets[reg.identity] = known
                while len(self._name_sets) > 4:
                    self._name_sets.pop(next(iter(self._name_sets)))
        return [i for i, n in enumerate(names) if n not in known]

    @classmethod
    def of(cls, manager: Any) -> "EngineContext":
        ctx: Optional[EngineContext] = getattr(manager, "_libtrie_context", None)
        if ctx is None:
            with _KEYS_LOCK:
                ctx = getattr(manager, "_libtrie_context", None)
                if ctx is None:
                    ctx = cls(manager)
                    manager._libtrie_context = ctx
        return ctx


def engine_grammar(manager: Any, request: Any) -> Optional[Any]:
    """The libtrie grammar of ``request`` (a vLLM ``Request`` with structured outputs), or None when vLLM's backend
    serves it. Runs on the manager's compile threads: every compile (names, argument schemas) happens here."""
    from ._common import fits, stop_ids
    from .tools import MAX_SCHEMAS, TrieToolGrammar, matcher

    request_type, spec = request.structured_output_request.structured_output_key
    ctx = EngineContext.of(manager)
    calls = _calls_grammar(ctx, request, request_type.name, spec)
    if calls is not None:
        return calls
    routed = recognize_key(request_type.name, spec, ctx.settings)
    if routed is None:
        return None
    found, params, vocab = routed.found, request.sampling_params, ctx.cache.vocab
    if routed.kind == "tools":  # tool_choice="required": the name from a trie, then its arguments
        contexts = ctx.compiler.compile(found)  # every argument grammar, here: off the engine loop
        if contexts is None:
            log.info("libtrie: request %s (tools) has more than %d argument schemas: vLLM's backend serves it",
                     request.request_id, MAX_SCHEMAS)
            return None
        template = _compiled(ctx, request, found, None)
        if template is None:
            return None
        stops = sorted(params.all_stop_token_ids or ())
        ctx.routed += 1
        log.info("libtrie: request %s (tools, %d names) is served by libtrie", request.request_id, len(found.members))
        return TrieToolGrammar(template, lambda m: matcher(contexts[m], stops))
    automaton = _compiled(ctx, request, found, "eog")
    if automaton is None:
        return None
    ctx.routed += 1
    log.info("libtrie: request %s (%s, %d members) is served by libtrie", request.request_id,
             request_type.name.lower(), len(found.members))
    return TrieGrammar(automaton, stop_ids(params, automaton, ctx.n_vocab))


def _compiled(ctx: EngineContext, request: Any, found: Recognized, end: Optional[str]) -> Optional[Any]:
    """The routed set compiled within the operator's compile bounds (``LIBTRIE_MAX_STATES`` / ``_BYTES``), or None
    over them: vLLM's backend then serves the request, as without libtrie (routing never refuses what the engine
    serves)."""
    from ._common import fits

    try:
        a = front.compile_recognized(ctx.cache.vocab, found, ctx.settings, end=end)
    except TrieError as e:
        if not front.is_limit(e):
            raise
        log.info("libtrie: request %s is over this server's compile bounds (%s): vLLM's backend serves it",
                 request.request_id, e.message)
        return None
    return fits(a, ctx.n_vocab)


def _calls_grammar(ctx: EngineContext, request: Any, request_type: str, spec: str) -> Optional[Any]:
    """Tool calls under ``auto``, parallel calls and registries (:mod:`libtrie.vllm.calls`): a structural tag
    written by the frontend (:mod:`libtrie.vllm.frontend`); None for any other key."""
    from . import calls
    from .tools import MAX_SCHEMAS, matcher

    if request_type != "STRUCTURAL_TAG":
        return None
    cs = calls.parse_spec(spec, front.limits(ctx.settings).max_text_bytes)
    if cs is None:
        return None
    names, schemas, what, identity = cs.names, cs.schemas, f"{len(cs.names)} tools", None
    if cs.registry is not None:
        reg = ctx.registry(cs.registry)
        names, schemas, identity = reg.names, reg.parameters, reg.identity
        what = f"registry {cs.registry!r}, {len(reg.names)} tools"
        extra = ctx.outside(reg, cs.names) if cs.extend else []
        if extra:  # the request's own tools that the registry lacks (a search tool, a session's tools): callable too
            names = tuple(names) + tuple(cs.names[i] for i in extra)
            schemas = tuple(schemas) + tuple(cs.schemas[i] for i in extra)
            identity = identity + hashlib.sha256(json.dumps([cs.names[i] for i in extra]).encode()).digest()[:16]
            what += f" and {len(extra)} of the request"
    fmt = calls.FORMATS[cs.format]
    first = ctx.names(names, fmt.prefix, fmt.suffix, identity, fmt.render, cs.registry)
    following = (ctx.names(names, fmt.next_prefix, fmt.suffix, identity, fmt.render, cs.registry)
                 if fmt.more and cs.parallel else None)
    closes = {last: _close_ebnf(fmt, last, cs.parallel) for last in (False, True)}
    distinct = dict.fromkeys(schemas)
    if cs.registry is None and len(distinct) > MAX_SCHEMAS:
        raise ValueError(f"tools: more than {MAX_SCHEMAS} distinct parameter schemas in one request; name a "
                         "registry for larger catalogs")
    if len(distinct) <= MAX_SCHEMAS:  # every argument grammar now, off the engine loop (a registry: once per file)
        for s in distinct:
            ctx.compiler._compile_one(s, closes[not cs.parallel])

    def prefetch_arguments(member: int, last: bool) -> None:
        ctx.compiler.prefetch(schemas[member], closes[last])

    # A large registry: a tool's schema is compiled on a worker thread once the name leaves only that tool.
    prefetch = prefetch_arguments if len(distinct) > MAX_SCHEMAS else None
    params = request.sampling_params
    stops = sorted(params.all_stop_token_ids or ())

    def arguments(member: int, last: bool) -> Any:  # compiled already, or prefetched (see TrieCallsGrammar)
        return matcher(ctx.compiler.at_hand_over(schemas[member], closes[last]), stops)

    opener = (ctx.names(names, fmt.trigger + fmt.prefix, fmt.suffix, identity, fmt.render, cs.registry)
              if fmt.trigger and not cs.auto else None)
    ctx.routed += 1
    log.info("libtrie: request %s (tool calls, %s, %s, %s) is served by libtrie", request.request_id, what,
             "auto" if cs.auto else "required", "parallel" if cs.parallel else "one call")
    # A registry's name automata carry each tool's index as the member's value: the engine reads the tool there.
    return calls.TrieCallsGrammar(cs, first, following, arguments, stops, opener=opener, prefetch=prefetch)


def _close_ebnf(fmt: Any, last: bool, parallel: bool) -> str:
    """What follows a tool's arguments, as an EBNF ``root``: the format's close, then (the JSON list, parallel)
    either the list's end or the separator of another call."""
    if fmt.more and parallel:
        return f"root ::= {json.dumps(fmt.close)} ({json.dumps(fmt.last)} | {json.dumps(fmt.more)})"
    return f"root ::= {json.dumps(fmt.close + fmt.last)}"
