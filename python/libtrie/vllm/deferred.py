"""Deferred tools and tool search (``defer_loading``), as OpenAI and Anthropic define them and vLLM's protocol
accepts them: the chat request's side, applied before the prompt is rendered (:func:`install` wraps vLLM's
``OnlineRenderer.preprocess_chat`` under ``LIBTRIE_VLLM_ROUTE=1``). What the template renders and how the history
reads is decided once for every engine, in Rust (``trie_deferred_plan``, :func:`libtrie.search.deferred_plan`; see
``src/calls/deferred.rs`` and docs/tool-calls.md):

- a tool with ``"defer_loading": true`` (at the tool level or in ``function``) is left out of the prompt; its name
  stays in the call's name set and its schema in the hand-over (:func:`libtrie.vllm.frontend.adjust` builds the
  structural tag from every tool of the request);
- a tool-search tool (a function named ``tool_search_tool_bm25`` / ``tool_search_tool_regex``: vLLM's OpenAI
  protocol takes only function tools) is shown as a function with one free-text argument, its call constrained like
  any call; a call of it in the history whose result the client left empty is answered by libtrie's search (BM25 or
  regex over the deferred tools) and the tools it found are loaded;
- ``tool_reference`` items in the history load the referenced tools into the prompt (rendered as text);
- ``LIBTRIE_DEFERRED_REGISTRY=NAME``: the operator's registry ``NAME.json`` of ``LIBTRIE_SET_DIR`` is offered as
  deferred tools of every request with tools (callable, searched, loaded when found), so the custom
  ``vllm_xargs.libtrie_registry`` field is optional.

Importable without vLLM."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["request_plan", "apply", "install", "deferred_registry", "search_tool", "ENV_REGISTRY"]

#: The operator's registry offered as deferred tools of every request.
ENV_REGISTRY = "LIBTRIE_DEFERRED_REGISTRY"


def deferred_registry() -> Optional[str]:
    """The registry of ``LIBTRIE_DEFERRED_REGISTRY`` (None when unset or empty)."""
    return os.environ.get(ENV_REGISTRY) or None


def as_dict(tool: Any) -> Any:
    """A request's tool as plain JSON values (vLLM's pydantic ``ChatCompletionToolsParam``, dicts, objects)."""
    if isinstance(tool, dict):
        return {k: as_dict(v) for k, v in tool.items()}
    if isinstance(tool, (list, tuple)):
        return [as_dict(v) for v in tool]
    dump = getattr(tool, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)
    if hasattr(tool, "__dict__"):
        return {k: as_dict(v) for k, v in vars(tool).items() if v is not None}
    return tool


def request_plan(tools: Sequence[Any], messages: Sequence[Any], registry: Optional[str] = None,
                 settings: Any = None) -> Optional[Dict[str, Any]]:
    """The native plan (:func:`libtrie.search.deferred_plan`) of a request's tools and messages, ``registry`` the
    operator's registry offered as deferred tools (read through this process's registry cache). Raises
    ``ValueError`` naming the field."""
    from .. import TrieError
    from ..search import deferred_plan

    request = {"tools": [as_dict(t) for t in tools], "messages": list(messages)}
    try:
        data = json.dumps(request).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):  # content the native plan cannot read: the tools alone (no history read)
        try:
            data = json.dumps({"tools": request["tools"]}).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError):
            return None  # tools that are not JSON: nothing of defer_loading to read
    try:
        if registry is None:
            return deferred_plan(data)
        from .frontend import registries

        plan: Optional[Dict[str, Any]] = registries(settings).deferred_plan(registry, data)
        return plan
    except TrieError as e:
        raise ValueError(e.message) from None


def search_tool(plan: Optional[Dict[str, Any]]) -> Optional[Tuple[str, Any]]:
    """The search tool's ``(name, parameters)`` of a plan (the call's schema: one free-text argument), or None."""
    found = (plan or {}).get("search")
    if not found:
        return None
    for t in plan["tools"] if plan else ():
        f = t.get("function") or {}
        if f.get("name") == found["name"]:
            return found["name"], f.get("parameters")
    return None


def apply(request: Any, messages: Sequence[Any], tool_dicts: Optional[List[Dict[str, Any]]],
          settings: Any = None) -> Tuple[Sequence[Any], Optional[List[Dict[str, Any]]]]:
    """The messages and tool dicts vLLM renders for ``request`` (unchanged when the plan is None). Raises
    ``ValueError`` naming the field."""
    from ..sets import Settings
    from .frontend import REGISTRY_KEY

    if not getattr(request, "tools", None) or not hasattr(request, "messages"):
        return messages, tool_dicts  # no tools, or not a chat request (the Responses API renders its own tools)
    settings = settings or Settings.from_env()
    named = (getattr(request, "vllm_xargs", None) or {}).get(REGISTRY_KEY)
    offered = deferred_registry() if named is None or named == deferred_registry() else None
    try:
        json.dumps(list(messages))
        readable = True
    except (TypeError, ValueError):
        readable = False
    plan = request_plan(request.tools, messages if readable else [], offered, settings)
    if plan is None:
        return messages, tool_dicts
    out = plan["messages"] if readable else messages
    return out, plan["tools"] if tool_dicts is not None else None


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
        try:  # off the event loop: a registry's plan (its search index on first use) must not hold other clients
            out, tool_dicts = await asyncio.to_thread(apply, request, messages, kw.get("tool_dicts"))
        except ValueError as e:
            raise refused(str(e)) from None
        if "tool_dicts" in kw:
            kw["tool_dicts"] = tool_dicts
        return await original(self, request, list(out), *args, **kw)

    preprocess_chat._libtrie = True  # type: ignore[attr-defined]
    OnlineRenderer.preprocess_chat = preprocess_chat
