"""Tool search of the native library (``trie_tool_search_*``): which tools of a catalog fit a query, for the
tool-search tool of ``defer_loading`` clients (OpenAI's ``{"type": "tool_search"}``, Anthropic's
``tool_search_tool_bm25_20251119`` / ``tool_search_tool_regex_20251119``).

:class:`ToolSearch` is the index of one tool list (built once, immutable, thread-safe): BM25 over names,
descriptions and parameters' text (names cut at ``_``, ``.``, ``-`` and camelCase), or a regular expression; the top
``k`` tools, best first, ties in list order. Every bound and error is the native library's (see
``include/trie.h``): :class:`~libtrie.TrieError` with a message naming the field (``query``, ``pattern``, ``k``,
``tools[3]``)."""

from __future__ import annotations

import ctypes
import json
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import Status, _check
from ._native import Signatures, declared, sizep, u8p, u32p, vp

__all__ = ["ToolSearch", "BM25", "REGEX", "MODES", "deferred_plan"]

#: ``trie_tool_search_query``'s modes.
BM25, REGEX = 0, 1
#: Mode names.
MODES = {"bm25": BM25, "regex": REGEX}

_SIGNATURES: Signatures = {
    "trie_tool_search_new": ([ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_tool_search_free": ([vp], None),
    "trie_tool_search_n_tools": ([vp], ctypes.c_size_t),
    "trie_tool_search_name": ([vp, ctypes.c_size_t, ctypes.POINTER(u8p), sizep], ctypes.c_int),
    "trie_tool_search_query": ([vp, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, u32p,
                                ctypes.POINTER(ctypes.c_double), ctypes.c_size_t, sizep], ctypes.c_int),
    "trie_tool_search_query_json": ([vp, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t,
                                     ctypes.c_char_p, ctypes.c_size_t, sizep], ctypes.c_int),
    "trie_deferred_plan": ([ctypes.c_char_p, ctypes.c_size_t, vp, ctypes.c_char_p, ctypes.c_size_t, sizep],
                           ctypes.c_int),
}


def _lib() -> ctypes.CDLL:
    return declared(_SIGNATURES, "libtrie.search")


def _mode(mode: Union[str, int]) -> int:
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError(f"mode: {mode!r} is not one of {sorted(MODES)}")
        return MODES[mode]
    return int(mode)


class ToolSearch:
    """The search index of one tool list: ``tools`` is the OpenAI ``tools`` list (or tools without the
    ``function`` wrapper, ``input_schema`` for Anthropic's), as Python objects or JSON text/bytes. Tool ``i`` of
    the list is tool ``i`` of every result."""

    def __init__(self, tools: Union[str, bytes, Sequence[Any]]) -> None:
        if isinstance(tools, str):
            data = tools.encode("utf-8", "surrogatepass")
        elif isinstance(tools, bytes):
            data = tools
        else:
            data = json.dumps(list(tools)).encode()
        out = vp()
        _check(_lib().trie_tool_search_new(data, len(data), ctypes.byref(out)))
        self._own(out)

    def _own(self, handle: vp) -> None:
        self._h = handle
        self._names: Optional[Tuple[str, ...]] = None
        weakref.finalize(self, _lib().trie_tool_search_free, handle).atexit = False

    @classmethod
    def from_handle(cls, handle: vp) -> "ToolSearch":
        """The index behind a ``trie_tool_search`` reference (owned from now on: freed with this object)."""
        self = cls.__new__(cls)
        self._own(handle)
        return self

    def __len__(self) -> int:
        return int(_lib().trie_tool_search_n_tools(self._h))

    def name(self, i: int) -> str:
        """Tool ``i``'s name."""
        p, ln = u8p(), ctypes.c_size_t()
        _check(_lib().trie_tool_search_name(self._h, i, ctypes.byref(p), ctypes.byref(ln)))
        return ctypes.string_at(p, ln.value).decode("utf-8")

    @property
    def names(self) -> Tuple[str, ...]:
        """The tools' names, by index (copied out once)."""
        if self._names is None:
            self._names = tuple(self.name(i) for i in range(len(self)))
        return self._names

    def search(self, query: str, k: int = 5, mode: Union[str, int] = "bm25") -> List[Tuple[int, float]]:
        """The top ``k`` tools for ``query`` (words for ``"bm25"``, a pattern for ``"regex"``): ``(index, score)``,
        best first; tools that do not match are left out."""
        q = query.encode("utf-8", "surrogatepass")
        cap = max(int(k), 1) if k >= 0 else 1
        tools = (ctypes.c_uint32 * cap)()
        scores = (ctypes.c_double * cap)()
        n = ctypes.c_size_t()
        _check(_lib().trie_tool_search_query(self._h, _mode(mode), q, len(q), k, tools, scores, cap, ctypes.byref(n)))
        return [(int(tools[j]), float(scores[j])) for j in range(n.value)]

    def names_of(self, query: str, k: int = 5, mode: Union[str, int] = "bm25") -> List[str]:
        """The names of :meth:`search`'s results."""
        return [self.name(i) for i, _ in self.search(query, k, mode)]

    def result_block(self, query: str, k: int = 5, mode: Union[str, int] = "bm25") -> Dict[str, Any]:
        """The result as Anthropic's block, made by the native library: ``{"type":
        "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": NAME},
        ...]}``."""
        q = query.encode("utf-8", "surrogatepass")
        lib, n, m = _lib(), ctypes.c_size_t(), _mode(mode)
        st = lib.trie_tool_search_query_json(self._h, m, q, len(q), k, None, 0, ctypes.byref(n))
        if st != Status.BUFFER_TOO_SMALL:
            _check(st)
        buf = ctypes.create_string_buffer(max(n.value, 1))
        _check(lib.trie_tool_search_query_json(self._h, m, q, len(q), k, buf, n.value, ctypes.byref(n)))
        result: Dict[str, Any] = json.loads(buf.raw[: n.value])
        return result


def deferred_plan(request: Union[bytes, Dict[str, Any]], registry: Any = None) -> Optional[Dict[str, Any]]:
    """The request's side of deferred tools and tool search (``trie_deferred_plan``): ``request`` is the chat
    request (its ``tools`` and ``messages`` are read), ``registry`` a native registry handle offered as deferred
    tools (:meth:`libtrie.registry.RegistryCache.deferred_plan` passes it). ``None`` when the request is to be left
    as it is; else ``{"tools": [...], "messages": [...], "loaded": [...], "search": {"name", "form"} or None}``."""
    data = request if isinstance(request, bytes) else json.dumps(request).encode("utf-8", "surrogatepass")
    lib, n = _lib(), ctypes.c_size_t()
    st = lib.trie_deferred_plan(data, len(data), registry, None, 0, ctypes.byref(n))
    if st == 0 and n.value == 0:
        return None
    if st != Status.BUFFER_TOO_SMALL:
        _check(st)
    buf = ctypes.create_string_buffer(n.value)
    _check(lib.trie_deferred_plan(data, len(data), registry, buf, n.value, ctypes.byref(n)))
    plan: Dict[str, Any] = json.loads(buf.raw[: n.value])
    return plan
