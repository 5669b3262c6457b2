"""The API server's side of tool calls under routing (``LIBTRIE_VLLM_ROUTE=1``): vLLM's tool parser prepares a chat
request (``ToolParser.adjust_request``), then :func:`adjust` writes what libtrie serves as a structural tag
(:func:`libtrie.vllm.calls.build_tag`):

- a parser of the ``<tool_call>`` family (``hermes``; Qwen 2.5 uses it), ``llama3_json`` (a call opens with its
  ``{``) or ``mistral`` (``[TOOL_CALLS]``): ``tool_choice="auto"`` (or unset): free text, and from the marker on the
  call's name from the tools and its arguments by that tool's schema; ``"required"`` (hermes, mistral): the output
  opens with a call; ``parallel_tool_calls=false``: one call, then only the end;
- ``tool_choice="required"`` with a parser that reads vLLM's JSON list (``supports_required_and_named``):
  ``[{"name": ..., "parameters": ...}]``, one call or (parallel) several, each by its own tool's schema;
- tools with ``defer_loading`` (:mod:`libtrie.vllm.deferred`: left out of the prompt) are callable like the others;
- ``vllm_xargs={"libtrie_registry": NAME}`` (or the operator's ``LIBTRIE_DEFERRED_REGISTRY=NAME`` for every request)
  with either: the names (and argument schemas) of the operator's registry ``NAME.json`` of ``LIBTRIE_SET_DIR``, and
  the request's own tools that are not in it. A named ``tool_choice`` is left to vLLM (one tool's schema).

Refusals are ``ValueError`` naming the field (the caller makes them vLLM's HTTP 400): a duplicate or empty tool
name, parameters that are not an object, a bad or missing registry. More tools or a larger tag than the operator's
inline bounds, and ``auto`` with a content constraint of the client's (``response_format``, ``structured_outputs``),
keep vLLM's own path, as without libtrie. Importable without vLLM (the request is duck-typed)."""

from __future__ import annotations

import json
import threading
from typing import Any, List, Optional, Tuple

from .. import Status, TrieError, front
from ..sets import SetError, Settings
from . import calls, deferred
from .tools import MAX_SCHEMAS

__all__ = ["adjust", "tools_of", "REGISTRY_KEY", "registries"]

#: The ``vllm_xargs`` key that names a registry.
REGISTRY_KEY = "libtrie_registry"

_REG: List[Any] = []
_REG_LOCK = threading.Lock()


def registries(settings: Settings) -> Any:
    """This process's registry cache (the API server checks a named registry at admission: a 400 there, not an
    error in the engine)."""
    from ..registry import RegistryCache

    with _REG_LOCK:
        if not _REG:
            _REG.append(RegistryCache(settings.set_dir, settings.max_file_bytes, capacity=max(2, settings.cache_size)))
        return _REG[0]


def tools_of(request: Any) -> List[Tuple[str, Any]]:
    """``(name, parameters)`` of each function tool of a chat request (OpenAI ``tools``), deferred ones
    (``defer_loading``) included: they are callable."""
    out: List[Tuple[str, Any]] = []
    for t in request.tools or ():
        fn = getattr(t, "function", None)
        if fn is None and isinstance(t, dict):
            fn = t.get("function")
        if fn is None:
            continue
        name = fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)
        params = fn.get("parameters") if isinstance(fn, dict) else getattr(fn, "parameters", None)
        out.append((name if isinstance(name, str) else "", params if params is not None else {"type": "object"}))
    return out


def _mistral_pre_v11(parser: Any) -> bool:
    """Whether vLLM's ``mistral`` parser reads the pre-v11 form (``[TOOL_CALLS][{...}]``: the tokenizer has no
    ``[ARGS]`` token); the flag is the parser's own, or its parser engine's (vLLM 0.32's adapter)."""
    flag = getattr(parser, "_is_pre_v11", None)
    if flag is None:
        flag = getattr(getattr(parser, "_parser_engine", None), "_is_pre_v11", True)
    return bool(flag)


def _mode(parser: Any, request: Any) -> Optional[str]:
    """The format libtrie serves for this parser and ``tool_choice`` (:data:`libtrie.vllm.calls.FORMATS`):

    - ``hermes`` for parsers of the ``<tool_call>`` family (``auto``, and ``required``, which vLLM then parses as
      ``auto``: its hermes parser has no JSON-list mode while strict tool calling is on);
    - ``llama`` for ``llama3_json``/``llama4_json`` (marker ``<|python_tag|>``) under ``auto``;
    - ``mistral`` / ``mistral_v11`` for ``mistral`` (marker ``[TOOL_CALLS]``), ``auto`` and ``required`` (the
      parser reads ``required`` from its own format: ``supports_required_and_named`` is false);
    - ``json`` for ``required`` with a parser that reads vLLM's JSON list."""
    choice = getattr(request, "tool_choice", None)
    if choice not in ("auto", None, "required"):
        return None
    if getattr(parser, "tool_call_start_token", None) == "<tool_call>":
        return "hermes"
    bot = getattr(parser, "bot_token", None)
    if bot == "[TOOL_CALLS]":
        return "mistral" if _mistral_pre_v11(parser) else "mistral_v11"
    if choice == "required" and getattr(parser, "supports_required_and_named", True):
        return "json"
    if bot == "<|python_tag|>":
        return "llama"
    return None


def adjust(parser: Any, request: Any, settings: Optional[Settings] = None, replace_tag: bool = False) -> bool:
    """Rewrite ``request``'s structured outputs as libtrie's structural tag when libtrie serves its tool calls;
    returns whether it did. ``replace_tag``: a structural tag already there is vLLM's parser's own (the client sent
    none), which libtrie replaces; else a structural tag is the client's, left to vLLM. Raises ``ValueError`` (a 400)
    naming the field."""
    if not getattr(request, "tools", None):
        return False
    fmt = _mode(parser, request)
    if fmt is None:
        return False
    so = getattr(request, "structured_outputs", None)
    there = getattr(so, "structural_tag", None) if so is not None else None
    if there is not None and not replace_tag and calls.KEY not in there:
        return False  # the client's own structural tag: vLLM's
    if getattr(request, "tool_choice", None) in ("auto", None) and content_constraint(request, so):
        # The client constrains the content (response_format or structured_outputs): plain vLLM enforces that
        # schema on the whole output under "auto", and so does this request, untouched.
        return False
    settings = settings or Settings.from_env()
    tools = tools_of(request)
    named = (getattr(request, "vllm_xargs", None) or {}).get(REGISTRY_KEY)
    registry = named or deferred.deferred_registry()
    # Deferred tools or a search tool (the native plan, without the history: no search runs): a search tool's call
    # takes its one free-text argument, and next to a registry the request's own tools are callable too.
    plan = deferred.request_plan(request.tools, [])
    found = deferred.search_tool(plan)
    if found is not None:  # in place, or added (a search tool of a type of its own: not a function of the list)
        tools = [(n, found[1]) if n == found[0] else (n, p) for n, p in tools]
        tools += [found] if found[0] not in {n for n, _ in tools} else []
    extend = registry is not None and (named is None or plan is not None)
    if registry is None and settings.max_inline_strings and len(tools) > settings.max_inline_strings:
        return False  # over the operator's inline bounds: vLLM's own path, as without libtrie (no 400 for its size)
    if registry is not None:
        try:  # checked, not read (the event loop serves every client; the engine core reads the registry)
            registries(settings).check(registry)
        except (TrieError, ValueError) as e:
            field = f"vllm_xargs.{REGISTRY_KEY}" if named is not None else deferred.ENV_REGISTRY + " (the server's)"
            raise SetError(Status.INVALID_ARGUMENT, f"{field}: {getattr(e, 'message', e)}") from None
    if registry is None and len({json.dumps(p, sort_keys=True) for _, p in tools}) > MAX_SCHEMAS:
        return False  # vLLM's backend compiles them (as before routing); a registry has no such bound
    parallel = getattr(request, "parallel_tool_calls", True) is not False
    tag = calls.build_tag(fmt, getattr(request, "tool_choice", None) != "required", parallel, tools, registry, extend)
    bound = front.limits(settings).max_text_bytes
    if registry is None and bound is not None and len(tag.encode("utf-8", "surrogatepass")) > bound:
        return False  # over the operator's inline bounds: vLLM's own path (a registry serves larger catalogs)
    from vllm.sampling_params import StructuredOutputsParams

    request.structured_outputs = StructuredOutputsParams(structural_tag=tag)
    if hasattr(request, "response_format"):
        request.response_format = None
    return True


def content_constraint(request: Any, so: Any = None) -> bool:
    """Whether the client constrains the output's content: a ``response_format`` other than ``text``, or
    ``structured_outputs`` with a constraint other than a structural tag."""
    fmt = getattr(request, "response_format", None)
    kind = fmt.get("type") if isinstance(fmt, dict) else getattr(fmt, "type", None)
    if fmt is not None and kind not in (None, "text"):
        return True
    so = so if so is not None else getattr(request, "structured_outputs", None)
    if so is None:
        return False
    return any(getattr(so, f, None) is not None for f in ("json", "regex", "choice", "grammar")) or bool(
        getattr(so, "json_object", None))


def check_tag(spec: str, settings: Settings) -> bool:
    """The frontend validation of a structural tag: True when it is libtrie's (then xgrammar's own parse is
    skipped), after the bounded parse; ``ValueError`` naming the field for a malformed one."""
    cs = calls.parse_spec(spec, front.limits(settings).max_text_bytes)
    if cs is None:
        return False
    if settings.max_inline_strings and len(cs.names) > settings.max_inline_strings:
        raise SetError(Status.INVALID_ARGUMENT, f"tools: {len(cs.names)} tools, over this server's bound LIBTRIE_MAX_INLINE_STRINGS="
                           f"{settings.max_inline_strings}")
    distinct = dict(zip(cs.schemas, cs.names))
    if cs.registry is None and len(distinct) > MAX_SCHEMAS:  # the engine refuses it: nothing compiled here
        raise SetError(Status.INVALID_ARGUMENT, f"tools: {len(distinct)} distinct parameter schemas in one request, over "
                                                f"{MAX_SCHEMAS}; name a registry for larger catalogs")
    try:
        import xgrammar as xgr
    except ImportError:  # pragma: no cover - vLLM ships it
        return True
    for schema, tool in distinct.items():  # one xgrammar cannot read: 400 here, not later
        try:
            xgr.Grammar.from_json_schema(schema)
        except Exception as e:
            raise SetError(Status.INVALID_ARGUMENT, f"tools: the parameters of {tool!r} are not a JSON schema this "
                                                    f"server can compile: {str(e)[:200]}") from None
    return True
