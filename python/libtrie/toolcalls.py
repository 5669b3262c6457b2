"""The tool-call engine of the native library (``trie_calls_*``): a whole tool-calling answer (free content, the
call's marker, the name from a trie, the hand-over to that tool's argument matcher, the close, further calls or
the end) decided in Rust, once for every integration. The caller supplies the argument matcher of a tool, with
xgrammar's ``GrammarMatcher`` interface (``accept_token``, ``fill_next_token_bitmask(bitmask, idx)``,
``rollback(n)``, optionally ``is_completed()``), made per call by a factory ``make(tool, last)``.

- :class:`ToolCalls`: the engine of one tool list (immutable, shared): from name automata the caller keeps
  (:meth:`ToolCalls.from_automata`: a registry's, updated with ``with_changes``) or compiled from the names
  (:meth:`ToolCalls.compile`);
- :class:`Sequence`: one sequence (``fill_bitmask``, ``accept``, ``validate``, ``rollback``, ``phase``, ``calls``,
  ``tool``);
- :func:`straddlers`, :func:`native_format`: the marker's straddling tokens and the native table of formats.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence as Seq, Tuple

from . import Automaton, Status, Vocab, _byte_strings, _check, _words
from ._native import Signatures, declared, i32p, sizep, u8p, u32p, vp

__all__ = ["ToolCalls", "Sequence", "straddlers", "native_format", "PHASES"]

#: ``trie_calls_info.phase`` → name.
PHASES = ("free", "name", "args", "end", "done")
AUTO, REQUIRED, NAMED = 0, 1, 2


_MARKERS = ("trigger", "prefix", "suffix", "close", "more", "last", "next_prefix")


_FORMAT_FIELDS: List[Tuple[str, Any]] = (
    [("struct_size", ctypes.c_size_t), ("has_trigger", ctypes.c_bool)]
    + [f for m in _MARKERS for f in ((m, u8p), (m + "_len", ctypes.c_size_t))]
    + [("render", ctypes.c_uint32)])


class CallsFormat(ctypes.Structure):
    _fields_ = _FORMAT_FIELDS


class CallsConfig(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("mode", ctypes.c_uint32), ("named_tool", ctypes.c_size_t),
                ("parallel", ctypes.c_bool), ("stops", i32p), ("n_stops", ctypes.c_size_t),
                ("only_calls_after_a_call", ctypes.c_bool)]


class CallsNames(ctypes.Structure):
    _fields_ = [("automaton", vp), ("tools", u32p), ("n_tools", ctypes.c_size_t)]


class CallsInfo(ctypes.Structure):
    _fields_ = [("phase", ctypes.c_uint32), ("calls", ctypes.c_size_t), ("has_tool", ctypes.c_bool),
                ("tool", ctypes.c_size_t), ("n_accepted", ctypes.c_size_t)]


MAKE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_bool)
PREFETCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_bool)
ACCEPT = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
FILL = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t)
ROLLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
COMPLETED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
FREE_USER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class CallsCallbacks(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("user", ctypes.c_void_p), ("make", MAKE), ("prefetch", PREFETCH),
                ("accept", ACCEPT), ("fill", FILL), ("rollback", ROLLBACK), ("completed", COMPLETED),
                ("release", RELEASE), ("free_user", FREE_USER)]


_SIGNATURES: Signatures = {
    "trie_calls_format_init": ([ctypes.POINTER(CallsFormat), ctypes.c_char_p], ctypes.c_int),
    "trie_calls_config_init": ([ctypes.POINTER(CallsConfig)], ctypes.c_int),
    "trie_calls_new": ([vp, ctypes.POINTER(u8p), sizep, ctypes.c_size_t, ctypes.POINTER(CallsFormat),
                        ctypes.POINTER(CallsConfig), vp, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_calls_from_automata": ([ctypes.POINTER(CallsNames)] * 3 + [ctypes.POINTER(CallsFormat),
                                  ctypes.POINTER(CallsConfig), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_calls_free": ([vp], None),
    "trie_calls_straddlers": ([vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, i32p, ctypes.c_size_t, sizep],
                              ctypes.c_int),
    "trie_calls_matcher_new": ([vp, ctypes.POINTER(CallsCallbacks), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_calls_matcher_free": ([vp], None),
    "trie_calls_fill_bitmask": ([vp, vp, ctypes.c_size_t], ctypes.c_int),
    "trie_calls_accept": ([vp, ctypes.c_int32], ctypes.c_int),
    "trie_calls_validate": ([vp, i32p, ctypes.c_size_t, sizep], ctypes.c_int),
    "trie_calls_rollback": ([vp, ctypes.c_size_t], ctypes.c_int),
    "trie_calls_reset": ([vp], ctypes.c_int),
    "trie_calls_is_terminated": ([vp], ctypes.c_bool),
    "trie_calls_info_of": ([vp, ctypes.POINTER(CallsInfo)], ctypes.c_int),
}


def _lib() -> ctypes.CDLL:
    return declared(_SIGNATURES, "libtrie.toolcalls")


def _format(name: str) -> CallsFormat:
    f = CallsFormat()
    _check(_lib().trie_calls_format_init(ctypes.byref(f), name.encode()))
    return f


def native_format(name: str) -> Dict[str, Any]:
    """The native table's format ``name`` (``trigger`` None or bytes, the other markers as bytes, ``render``:
    ``"json_string"`` or ``"raw"``). Raises :class:`~libtrie.TrieError` ``INVALID_ARGUMENT`` for an unknown name."""
    f = _format(name)
    out: Dict[str, Any] = {}
    for k in ("trigger", "prefix", "suffix", "close", "more", "last", "next_prefix"):
        n = getattr(f, k + "_len")
        out[k] = ctypes.string_at(getattr(f, k), n) if n else b""
    if not f.has_trigger:
        out["trigger"] = None
    out["render"] = {0: "raw", 1: "json_string"}.get(f.render, str(f.render))
    return out


def straddlers(vocab: Vocab, trigger: bytes) -> List[List[int]]:
    """For each ``k`` in ``0..len(trigger)`` (marker bytes already at the end of the output), the tokens that would
    finish the marker and go on past it in one token (``trie_calls_straddlers``; the engine masks them in free
    text)."""
    lib, out = _lib(), []
    n = ctypes.c_size_t()
    for k in range(len(trigger)):
        with vocab._use() as h:
            st = lib.trie_calls_straddlers(h, trigger, len(trigger), k, None, 0, ctypes.byref(n))
            if st not in (0, Status.BUFFER_TOO_SMALL):
                _check(st)
            buf = (ctypes.c_int32 * max(n.value, 1))()
            _check(lib.trie_calls_straddlers(h, trigger, len(trigger), k, buf, n.value, ctypes.byref(n)))
        out.append(list(buf[: n.value]))
    return out


def _config(mode: int, parallel: bool, stops: Seq[int], named_tool: int = 0) -> Tuple[CallsConfig, Any]:
    c = CallsConfig()
    _check(_lib().trie_calls_config_init(ctypes.byref(c)))
    ids = (ctypes.c_int32 * max(len(stops), 1))(*stops)
    c.mode, c.named_tool, c.parallel, c.stops, c.n_stops = mode, named_tool, parallel, ids, len(stops)
    return c, ids


class ToolCalls:
    """The engine of one tool list (``trie_calls``): immutable, shared by any number of :class:`Sequence`."""

    def __init__(self, handle: vp, keep: Tuple[Any, ...]) -> None:
        """Internal: use :meth:`from_automata` or :meth:`compile`."""
        self._h = handle
        self._keep = keep  # the automata and vocabulary (their handles outlive no call of ours)
        weakref.finalize(self, _lib().trie_calls_free, handle).atexit = False

    @classmethod
    def from_automata(cls, fmt: str, auto: bool, parallel: bool, stops: Seq[int], first: Automaton,
                      following: Optional[Automaton] = None, opener: Optional[Automaton] = None,
                      tools: Seq[Optional[Seq[int]]] = ()) -> "ToolCalls":
        """The engine over name automata the caller keeps: ``first`` (the format's prefix, the name, the suffix,
        left open), ``following`` (a parallel JSON list's further calls), ``opener`` (required with a marker);
        ``tools``: per automaton (first, following, opener), its member → tool index map, or None (the same)."""
        keep: List[Any] = []  # the maps' arrays, alive for the call
        entered: List[Automaton] = []
        structs = []
        try:
            for i, a in enumerate((first, following, opener)):
                s = CallsNames()
                if a is not None:
                    s.automaton = a._enter()
                    entered.append(a)
                    m = tools[i] if i < len(tools) else None
                    if m is not None:
                        arr = (ctypes.c_uint32 * max(len(m), 1))(*m)
                        s.tools, s.n_tools = ctypes.cast(arr, u32p), len(m)
                        keep.append(arr)
                structs.append(s)
            f = _format(fmt)
            c, _ids = _config(AUTO if auto else REQUIRED, parallel, stops)
            out = vp()
            _check(_lib().trie_calls_from_automata(*(ctypes.byref(s) for s in structs), ctypes.byref(f),
                                                    ctypes.byref(c), ctypes.byref(out)))
        finally:
            for a in entered:
                a._exit()
        return cls(out, tuple(entered))

    @classmethod
    def compile(cls, vocab: Vocab, names: Seq[str], fmt: str, auto: bool, parallel: bool, stops: Seq[int],
                named_tool: Optional[int] = None) -> "ToolCalls":
        """The engine of ``names`` (tool ``i`` is ``names[i]``) in format ``fmt``, its name automata compiled by
        the native library; ``named_tool``: only that tool may be called (it keeps its index)."""
        data = [n.encode("utf-8") for n in names]
        ptrs, lens, _keep = _byte_strings(data)
        mode = NAMED if named_tool is not None else (AUTO if auto else REQUIRED)
        f = _format(fmt)
        c, _ids = _config(mode, parallel, stops, named_tool or 0)
        out = vp()
        _check(vocab._call(_lib().trie_calls_new, ptrs, lens, len(data), ctypes.byref(f), ctypes.byref(c), None,
                           ctypes.byref(out)))
        return cls(out, (vocab,))


class _Callbacks:
    """The callback table of one sequence over Python matchers (held by the sequence's finalizer, so the callbacks
    outlive the native sequence that calls them)."""

    def __init__(self, make: Callable[[int, bool], Any], prefetch: Optional[Callable[[int, bool], None]],
                 on_error: Callable[[int, Exception], None]) -> None:
        self.make_fn, self.prefetch_fn, self.on_error = make, prefetch, on_error
        self.matchers: Dict[int, Any] = {}
        self.next_id = 1
        self.target: Any = None  # (bitmask, idx) of the fill in progress
        self.table = CallsCallbacks()
        self.table.struct_size = ctypes.sizeof(CallsCallbacks)
        self.table.make, self.table.prefetch = MAKE(self._make), PREFETCH(self._prefetch)
        self.table.accept, self.table.fill = ACCEPT(self._accept), FILL(self._fill)
        self.table.rollback, self.table.completed = ROLLBACK(self._rollback), COMPLETED(self._completed)
        self.table.release = RELEASE(self._release)

    def _make(self, _user: Any, tool: int, last: bool) -> Optional[int]:
        try:
            m = self.make_fn(tool, last)
        except Exception as e:  # a matcher over a compiled grammar; a registry schema compiled here
            self.on_error(tool, e)
            return None
        i, self.next_id = self.next_id, self.next_id + 1
        self.matchers[i] = m
        return i

    def _prefetch(self, _user: Any, tool: int, last: bool) -> None:
        if self.prefetch_fn is not None:
            try:
                self.prefetch_fn(tool, last)
            except Exception as e:  # a hint: the hand-over compiles it then
                self.on_error(tool, e)

    def _accept(self, _user: Any, m: int, token: int) -> bool:
        try:
            return bool(self.matchers[m].accept_token(token))
        except Exception:
            return False

    def _fill(self, _user: Any, m: int, _row: Any, _words: int) -> bool:
        try:  # the row given is ``bitmask[idx]`` of the fill in progress: the matcher writes it its own way
            bitmask, idx = self.target
            self.matchers[m].fill_next_token_bitmask(bitmask, idx)
            return True
        except Exception:
            return False

    def _rollback(self, _user: Any, m: int, n: int) -> None:
        self.matchers[m].rollback(n)

    def _completed(self, _user: Any, m: int) -> int:
        f = getattr(self.matchers[m], "is_completed", None)
        try:
            return -1 if f is None else int(bool(f()))
        except Exception:  # the engine then asks whether a stop token is accepted
            return -1

    def _release(self, _user: Any, m: int) -> None:
        self.matchers.pop(m, None)


class Sequence:
    """One sequence of a :class:`ToolCalls` engine (``trie_calls_matcher``); ``make(tool, last)`` gives the
    argument matcher of a call (xgrammar's interface), ``prefetch(tool, last)`` is told when the name so far leaves
    one tool, ``on_error(tool, exception)`` when ``make`` (or ``prefetch``) raised."""

    def __init__(self, engine: ToolCalls, make: Callable[[int, bool], Any],
                 prefetch: Optional[Callable[[int, bool], None]] = None,
                 on_error: Callable[[int, Exception], None] = lambda tool, e: None) -> None:
        self.engine = engine
        self._cb = _Callbacks(make, prefetch, on_error)
        out = vp()
        _check(_lib().trie_calls_matcher_new(engine._h, ctypes.byref(self._cb.table), ctypes.byref(out)))
        self._h = out
        weakref.finalize(self, _free_sequence, out, self._cb, engine).atexit = False

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        """Write the allowed tokens into row ``idx`` of ``bitmask`` (a CPU int32 tensor, a list of rows, ...)."""
        address, n, _ = _words(bitmask[idx], "bitmask row")
        self._cb.target = (bitmask, idx)
        try:
            _check(_lib().trie_calls_fill_bitmask(self._h, address or None, n))
        finally:
            self._cb.target = None

    def accept(self, token: int) -> Optional[str]:
        """Advance by ``token``: None, or why it is refused (nothing changed)."""
        st = _lib().trie_calls_accept(self._h, token)
        if st == 0:
            return None
        if st != Status.TOKEN_REJECTED:
            _check(st)
        msg = _lib().trie_last_error()
        return msg.decode("utf-8", "replace") if msg else "rejected"

    def validate(self, tokens: Seq[int]) -> int:
        """How many of ``tokens`` are accepted in a row from here; nothing changes."""
        ids = (ctypes.c_int32 * max(len(tokens), 1))(*tokens)
        n = ctypes.c_size_t()
        _check(_lib().trie_calls_validate(self._h, ids, len(tokens), ctypes.byref(n)))
        return n.value

    def rollback(self, n: int) -> None:
        _check(_lib().trie_calls_rollback(self._h, max(0, n)))

    def reset(self) -> None:
        _check(_lib().trie_calls_reset(self._h))

    def is_terminated(self) -> bool:
        return bool(_lib().trie_calls_is_terminated(self._h))

    def info(self) -> CallsInfo:
        i = CallsInfo()
        _check(_lib().trie_calls_info_of(self._h, ctypes.byref(i)))
        return i

    @property
    def phase(self) -> str:
        return PHASES[self.info().phase]

    @property
    def calls(self) -> int:
        """Calls completed."""
        return int(self.info().calls)

    @property
    def tool(self) -> Optional[int]:
        """The tool of the current call once its name is complete."""
        i = self.info()
        return int(i.tool) if i.has_tool else None

    @property
    def n_accepted(self) -> int:
        return int(self.info().n_accepted)


def _free_sequence(handle: vp, _callbacks: _Callbacks, _engine: ToolCalls) -> None:
    """Frees a native sequence; its callbacks (and the engine) are kept alive until then by this call's args."""
    _lib().trie_calls_matcher_free(handle)

