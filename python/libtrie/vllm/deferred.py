"""Deferred tools and tool search (``defer_loading``), as OpenAI and Anthropic define them and vLLM's protocol
accepts them: the chat request's side, applied before the prompt is rendered (:func:`plan`, installed by
:func:`install` around vLLM's ``OnlineRenderer.preprocess_chat`` under ``LIBTRIE_VLLM_ROUTE=1``).

- A tool with ``"defer_loading": true`` (at the tool level or in ``function``) is left out of the prompt; its name
  stays in the call's name set and its schema in the hand-over (the structural tag is built from every tool of the
  request: :func:`libtrie.vllm.frontend.adjust`), so the model can still call it by its exact name.
- A tool-search tool (``{"type": "tool_search"}``, Anthropic's ``tool_search_tool_bm25_20251119`` /
  ``tool_search_tool_regex_20251119`` types, or, as vLLM's OpenAI protocol takes only function tools, a function
  named ``tool_search_tool_bm25`` / ``tool_search_tool_regex``) is shown to the model as a function with one free
  text argument (``query``, or ``pattern`` for the regex form), constrained like any call. The search is libtrie's
  (:class:`libtrie.search.ToolSearch`, BM25 or regex over the deferred tools' names, descriptions and parameters).
  A call of it in the history whose result the client left empty (no tool message, or an empty one) is answered
  here: the result is written into that tool message as text and the tools it found are loaded.
- ``tool_reference`` items in the history (vLLM's ``{"type": "tool_reference", "name": N}``, Anthropic's
  ``tool_name``) load the referenced tools into the prompt of the turn; the items are rendered as text for chat
  templates that do not know them.
- ``LIBTRIE_DEFERRED_REGISTRY=NAME``: the operator's registry ``NAME.json`` of ``LIBTRIE_SET_DIR`` is offered as
  deferred tools of every request with tools (as ``vllm_xargs={"libtrie_registry": NAME}`` would name it): every
  registry name is callable, none is in the prompt, the search reads the registry, and a found registry tool is
  loaded into the prompt with its name and parameters.

Everything here is stateless: the same history gives the same prompt (a search in the history runs again on each
turn, with the same result). Importable without vLLM."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["Plan", "plan", "is_deferred", "search_kind", "references", "SEARCH_NAMES", "deferred_registry",
           "install", "ENV_REGISTRY", "K"]

#: The operator's registry offered as deferred tools of every request.
ENV_REGISTRY = "LIBTRIE_DEFERRED_REGISTRY"
#: Results of one search (Anthropic returns 3 to 5).
K = 5
#: The longest query the search function's call may write (Anthropic bounds a pattern at 200 characters).
MAX_QUERY = 200
#: The function names of the search tools, and the form each reads.
SEARCH_NAMES = {"tool_search_tool_bm25": "bm25", "tool_search_tool_regex": "regex"}
_ARG = {"bm25": "query", "regex": "pattern"}
_DESCRIPTION = {
    "bm25": "Search the catalog of deferred tools by keywords (their names, descriptions and parameters). The "
            "tools found become available to call.",
    "regex": "Search the catalog of deferred tools with a regular expression over their names and descriptions "
             "((?i) for case-insensitive). The tools found become available to call.",
}


def deferred_registry() -> Optional[str]:
    """The registry of ``LIBTRIE_DEFERRED_REGISTRY`` (None when unset or empty)."""
    return os.environ.get(ENV_REGISTRY) or None


def as_dict(tool: Any) -> Dict[str, Any]:
    """A request's tool as a plain dict (vLLM's pydantic ``ChatCompletionToolsParam`` or a dict)."""
    if isinstance(tool, dict):
        return tool
    dump = getattr(tool, "model_dump", None)
    out: Dict[str, Any] = dump(exclude_none=True) if dump is not None else dict(vars(tool))
    return out


def _function(tool: Dict[str, Any]) -> Dict[str, Any]:
    f = tool.get("function")
    return f if isinstance(f, dict) else tool


def is_deferred(tool: Any) -> bool:
    """Whether a tool has ``"defer_loading": true``, at the tool level or in ``function``."""
    t = as_dict(tool)
    return t.get("defer_loading") is True or _function(t).get("defer_loading") is True


def search_kind(tool: Any) -> Optional[str]:
    """``"bm25"`` or ``"regex"`` for a tool-search tool, None for any other tool."""
    t = as_dict(tool)
    kind = t.get("type")
    if kind == "tool_search":
        return "bm25"
    if isinstance(kind, str):
        for name, form in SEARCH_NAMES.items():
            if kind.startswith(name + "_") or kind == name:
                return form
    name = _function(t).get("name")
    return SEARCH_NAMES.get(name) if isinstance(name, str) else None


def search_function(kind: str, name: Optional[str] = None) -> Dict[str, Any]:
    """The function the model sees for a search tool: one required free-text argument."""
    arg = _ARG[kind]
    return {"type": "function", "function": {
        "name": name or next(n for n, k in SEARCH_NAMES.items() if k == kind), "description": _DESCRIPTION[kind],
        "parameters": {"type": "object", "properties": {arg: {"type": "string", "maxLength": MAX_QUERY}},
                       "required": [arg], "additionalProperties": False}}}


def search_parameters(kind: str) -> Dict[str, Any]:
    """The argument schema of a search tool's call."""
    return search_function(kind)["function"]["parameters"]


def _plain(tool: Dict[str, Any]) -> Dict[str, Any]:
    """A tool as the chat template sees it: ``defer_loading`` removed."""
    t = copy.deepcopy(tool)
    t.pop("defer_loading", None)
    f = t.get("function")
    if isinstance(f, dict):
        f.pop("defer_loading", None)
    return t


def _name(tool: Dict[str, Any]) -> str:
    n = _function(tool).get("name")
    return n if isinstance(n, str) else ""


def references(messages: Sequence[Any]) -> List[str]:
    """The tool names of ``tool_reference`` items in the history, in order, each once."""
    out: List[str] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        for item in _items(content):
            n = item.get("name") or item.get("tool_name")
            if isinstance(n, str) and n and n not in out:
                out.append(n)
    return out


def _items(content: Any) -> List[Dict[str, Any]]:
    """The ``tool_reference`` items of a message's content (a list, or a search result block in it)."""
    out: List[Dict[str, Any]] = []
    if not isinstance(content, list):
        return out
    for item in content:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "tool_reference":
            out.append(item)
        elif isinstance(item.get("tool_references"), list):
            out.extend(i for i in item["tool_references"] if isinstance(i, dict))
    return out


def _as_text(names: Sequence[str]) -> str:
    return ("Tools found and now available: " + ", ".join(names)) if names else "No tool found."


@dataclass
class Plan:
    """What a request becomes: ``prompt`` the tools the template renders (deferred ones left out, loaded ones and
    the search function in), ``messages`` the history as the model sees it (searches answered, references as
    text), ``loaded`` the deferred tools' names loaded by references or searches, ``search`` the search tool's
    ``(form, name)``."""

    prompt: List[Dict[str, Any]]
    messages: List[Any]
    loaded: List[str] = field(default_factory=list)
    search: Optional[Tuple[str, str]] = None


Searcher = Callable[[str, str, int], List[str]]


def plan(tools: Sequence[Any], messages: Sequence[Any], searcher: Optional[Searcher] = None,
         registry_tool: Optional[Callable[[str], Optional[Dict[str, Any]]]] = None,
         registry: bool = False) -> Optional[Plan]:
    """The prompt's side of a request with ``tools`` and ``messages`` (dicts or vLLM's objects); None when nothing
    is deferred, no search tool is there and no reference is in the history (the request is left as it is).

    ``searcher(form, query, k)``: the names a search finds (the request's deferred tools, and a registry's);
    ``registry_tool(name)``: a registry tool to load into the prompt; ``registry``: an operator registry is offered
    as deferred tools (then a search tool alone is a reason to plan). Raises ``ValueError`` naming the field for a
    search the engine refuses (a bad pattern)."""
    ts = [as_dict(t) for t in tools]
    kinds = [search_kind(t) for t in ts]
    deferred = [is_deferred(t) and k is None for t, k in zip(ts, kinds)]
    refs = references(messages)
    search = next(((k, _name(t) if _name(t) in SEARCH_NAMES else next(n for n, f in SEARCH_NAMES.items() if f == k))
                   for t, k in zip(ts, kinds) if k is not None), None)
    if not any(deferred) and search is None and not refs and not registry:
        return None
    msgs = list(messages)
    loaded: List[str] = list(refs)
    if search is not None:
        msgs = _answer_searches(msgs, search, searcher, loaded)
    msgs = [_references_as_text(m) for m in msgs]
    by_name = {_name(t): t for t in ts}
    prompt: List[Dict[str, Any]] = []
    for t, k, d in zip(ts, kinds, deferred):
        if k is not None:
            prompt.append(search_function(k, search[1] if search else None))
        elif not d or _name(t) in loaded:
            prompt.append(_plain(t))
    for n in loaded:  # registry tools the history loaded
        if n not in by_name and registry_tool is not None:
            t = registry_tool(n)
            if t is not None:
                prompt.append(t)
    return Plan(prompt, msgs, loaded, search)


def _call_args(call: Any) -> Tuple[str, str, Dict[str, Any]]:
    c = call if isinstance(call, dict) else as_dict(call)
    f = c.get("function") or {}
    try:
        args = json.loads(f.get("arguments") or "{}")
    except (TypeError, ValueError):
        args = {}
    return c.get("id") or "", f.get("name") or "", args if isinstance(args, dict) else {}


def _answer_searches(msgs: List[Any], search: Tuple[str, str], searcher: Optional[Searcher],
                     loaded: List[str]) -> List[Any]:
    """Each call of the search tool whose result is missing or empty gets the search's result (as a tool message
    in text); the names found are loaded."""
    form, name = search
    out: List[Any] = []
    i = 0
    while i < len(msgs):
        m = msgs[i]
        out.append(m)
        i += 1
        calls = m.get("tool_calls") if isinstance(m, dict) and m.get("role") == "assistant" else None
        for call in calls or ():
            cid, fname, args = _call_args(call)
            if fname != name:
                continue
            query = args.get(_ARG[form])
            found: List[str] = []
            if isinstance(query, str) and query and searcher is not None:
                found = searcher(form, query, K)
            # the tool message of this call, if the client sent one
            j = next((j for j in range(i, len(msgs)) if isinstance(msgs[j], dict) and msgs[j].get("role") == "tool"
                      and msgs[j].get("tool_call_id") == cid), None)
            if j is not None and msgs[j].get("content") not in (None, "", []):
                continue  # answered by the client (its references are read with the others)
            for n in found:
                if n not in loaded:
                    loaded.append(n)
            answer = {"role": "tool", "tool_call_id": cid, "content": _as_text(found)}
            if j is not None:
                msgs = msgs[:j] + [answer] + msgs[j + 1:]
            else:
                out.append(answer)
    return out


def _references_as_text(m: Any) -> Any:
    if not isinstance(m, dict):
        return m
    items = _items(m.get("content"))
    if not items:
        return m
    names = [str(it.get("name") or it.get("tool_name")) for it in items]
    texts = [it.get("text", "") for it in m["content"] if isinstance(it, dict) and it.get("type") == "text"]
    m = dict(m)
    m["content"] = "\n".join([t for t in texts if t] + [_as_text(names)])
    return m


# ---- vLLM: the hook before the prompt is rendered --------------------------------------------------------------------


def _searcher(request_tools: Sequence[Dict[str, Any]], registry: Optional[str], settings: Any) -> Searcher:
    """Search over the request's deferred tools and the operator's registry (results merged by score)."""
    from ..search import ToolSearch

    own = [t for t in request_tools if is_deferred(t) and search_kind(t) is None]

    def run(form: str, query: str, k: int) -> List[str]:
        hits: List[Tuple[float, int, str]] = []
        if own:
            index = ToolSearch([_plain(t) for t in own])
            hits += [(s, 0, index.name(i)) for i, s in index.search(query, k, form)]
        if registry is not None:
            from .frontend import registries

            index = registries(settings).search(registry)
            hits += [(s, 1, index.name(i)) for i, s in index.search(query, k, form)]
        hits.sort(key=lambda h: (-h[0], h[1]))
        out: List[str] = []
        for _, _, n in hits:
            if n not in out:
                out.append(n)
        return out[:k]

    return run


def _registry_tool(registry: str, settings: Any) -> Callable[[str], Optional[Dict[str, Any]]]:
    def get(name: str) -> Optional[Dict[str, Any]]:
        from .frontend import registries

        reg = registries(settings).get(registry)
        try:
            i = reg.names.index(name)
        except ValueError:
            return None
        return {"type": "function", "function": {"name": name, "parameters": json.loads(reg.parameters[i])}}

    return get


def apply(request: Any, messages: Sequence[Any], tool_dicts: Optional[List[Dict[str, Any]]],
          settings: Any = None) -> Tuple[Sequence[Any], Optional[List[Dict[str, Any]]]]:
    """The messages and tool dicts vLLM renders for ``request`` (unchanged when :func:`plan` has nothing to do).
    Raises ``ValueError`` naming the field."""
    from ..sets import Settings
    from .frontend import REGISTRY_KEY

    if not getattr(request, "tools", None):
        return messages, tool_dicts
    settings = settings or Settings.from_env()
    registry = (getattr(request, "vllm_xargs", None) or {}).get(REGISTRY_KEY) or deferred_registry()
    offered = deferred_registry() is not None and registry == deferred_registry()
    tools = [as_dict(t) for t in request.tools]
    try:
        p = plan(tools, messages, _searcher(tools, registry if offered else None, settings),
                 _registry_tool(registry, settings) if offered else None, offered)
    except Exception as e:  # a pattern the engine refuses, a registry that cannot be read
        raise ValueError(f"tool search: {getattr(e, 'message', e)}") from None
    if p is None:
        return messages, tool_dicts
    return p.messages, p.prompt if tool_dicts is not None else None


def install(refused: type) -> None:
    """Wrap vLLM's ``OnlineRenderer.preprocess_chat`` (the API server, before the chat template renders): the
    request's messages and tools become :func:`apply`'s. Idempotent."""
    try:
        from vllm.renderers.online_renderer import OnlineRenderer
    except ImportError:  # pragma: no cover - another vLLM layout
        return
    original = OnlineRenderer.preprocess_chat
    if getattr(original, "_libtrie", False):
        return

    async def preprocess_chat(self: Any, request: Any, messages: List[Any], *args: Any, **kw: Any) -> Any:
        tool_dicts = kw.get("tool_dicts")
        try:
            messages, tool_dicts = apply(request, messages, tool_dicts)  # type: ignore[assignment]
        except ValueError as e:
            raise refused(str(e)) from None
        if "tool_dicts" in kw:
            kw["tool_dicts"] = tool_dicts
        return await original(self, request, list(messages), *args, **kw)

    preprocess_chat._libtrie = True  # type: ignore[attr-defined]
    OnlineRenderer.preprocess_chat = preprocess_chat

