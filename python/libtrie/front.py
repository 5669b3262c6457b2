"""The request front end of the engine integrations (vLLM, SGLang): a request's text recognized once per process,
within the operator's bounds, by libtrie's native recognizers (:func:`libtrie.recognize`). Needs no engine.

    lim = front.limits(Settings.from_env())         # LIBTRIE_MAX_INLINE_STRINGS / _BYTES, and the text's size
    found = front.recognize_once("grammar", text, lim)   # Recognized, NotASet, or TrieError (malformed input)

The bounds travel into recognition (``max_text_bytes``, ``max_members``, ``max_member_bytes``, ``max_depth``): the
text's size is checked before anything parses it, members and their bytes are charged as the set is expanded, JSON
nesting is bounded before any recursion. Nothing is checked here after the fact: the native library is the one
place that knows the shapes and the bounds, and names the bound in its message. The integrations route requests
the engine serves itself, so a bound hit is "not a set" (:attr:`Limits.routing`): over the operator's bounds the
request keeps the engine's path, never a 400 for its size; only sets named through libtrie's own fields (a
registry, ``extra_args["libtrie"]``) are refused over a bound.

Results (a set, "not a set", or the error) are cached by a digest of (kind, bounds, text), so the API server's
admission, its frontend validation and the engine core each pay for one recognition of a request per process, and
a request sent again pays for a digest. The cache is charged by what an entry holds (the recognized members,
payloads and template, or the error's message), not by the request's size, within :data:`CACHE_BYTES`.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from typing import Any, NamedTuple, Optional, Tuple, Union

from . import Automaton, Status, TrieError, Vocab
from ._recognize import NotASet, Recognized, recognize
from .sets import CompiledDir, SetError, Settings, compiled_dir

__all__ = ["Limits", "limits", "recognize_once", "compile_recognized", "text_bytes", "client_error", "Found"]

Found = Union[Recognized, NotASet]


class Limits(NamedTuple):
    """The bounds of one recognition (``trie_recognize_limits``); ``None``: the library's default."""

    max_text_bytes: Optional[int]
    max_members: Optional[int]
    max_member_bytes: Optional[int]
    max_depth: Optional[int] = None
    #: Routing a request the engine would serve itself: a bound hit is "not a set" (the engine's path).
    routing: bool = True


def limits(settings: Settings) -> Limits:
    """The operator's inline bounds as recognition bounds: members (``LIBTRIE_MAX_INLINE_STRINGS``), their bytes
    with one per member (``LIBTRIE_MAX_INLINE_BYTES``), and the request text: eight times the inline bytes plus
    64 KiB (room for every member JSON-escaped, as vLLM writes a ``choice`` list, and for tool schemas). A bound of
    0 is the library's default. Routing bounds: a request over them is "not a set" (the engine serves it)."""
    inline = settings.max_inline_bytes
    return Limits(max_text_bytes=(8 * inline + (64 << 10)) if inline else None,
                  max_members=settings.max_inline_strings or None, max_member_bytes=inline or None)


def text_bytes(text: Union[str, bytes]) -> bytes:
    """``text`` as bytes for the recognizers: a ``str`` as UTF-8, lone surrogates kept as the invalid bytes they
    stand for (the recognizer refuses them as not UTF-8, with its message)."""
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)


_CACHE: "OrderedDict[bytes, Tuple[int, Union[Found, TrieError]]]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_BYTES = [0]
#: The cache's bounds: entries, and the bytes their results hold (:func:`_held_bytes`).
CACHE_ENTRIES, CACHE_BYTES = 256, 64 << 20
#: Recognitions run by this process (cache misses), for tests and logs.
stats = {"recognized": 0, "hits": 0}


def _digest(kind: str, data: bytes, lim: Limits) -> bytes:
    h = hashlib.sha256(repr((kind, tuple(lim))).encode())
    h.update(b"\0")
    h.update(data)
    return h.digest()


def _recognize(kind: str, data: bytes, lim: Limits) -> Found:
    return recognize(kind, data, max_text_bytes=lim.max_text_bytes, max_members=lim.max_members,
                     max_member_bytes=lim.max_member_bytes, max_depth=lim.max_depth, over_bounds_not_a_set=lim.routing)


def _held_bytes(result: "Union[Found, TrieError]") -> int:
    """What a cached result holds: the members, payloads and template of a set, the reason or message
    otherwise (plus a fixed overhead per entry)."""
    if isinstance(result, Recognized):
        held = sum(sys.getsizeof(m) + 8 for m in result.members) + len(result.prefix) + len(result.suffix)
        held += sum(sys.getsizeof(p) + 8 for p in result.payloads or ())
        return held + 512
    text = result.reason if isinstance(result, NotASet) else result.message
    return len(text) + 512


def recognize_once(kind: str, text: Union[str, bytes], lim: Limits) -> Found:
    """:func:`libtrie.recognize` of ``text`` within ``lim``, once per process for the same (kind, bounds, text).
    Raises :class:`TrieError` (the same error for the same text): ``LIMIT_EXCEEDED`` naming the bound,
    ``INVALID_ARGUMENT`` / ``EMPTY_SET`` for malformed input; ``ValueError`` for an unknown kind."""
    data = text_bytes(text)
    if lim.max_text_bytes is not None and len(data) > lim.max_text_bytes:
        return _recognize(kind, data, lim)  # refused by its size before anything reads it: nothing to cache
    key = _digest(kind, data, lim)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            stats["hits"] += 1
    if hit is not None:
        if isinstance(hit[1], TrieError):
            raise hit[1]
        return hit[1]
    result: Union[Found, TrieError]
    try:
        result = _recognize(kind, data, lim)
    except TrieError as e:
        result = e
    size = _held_bytes(result)
    with _CACHE_LOCK:
        stats["recognized"] += 1
        if key not in _CACHE and size <= CACHE_BYTES:
            _CACHE[key] = (size, result)
            _CACHE_BYTES[0] += size
            while len(_CACHE) > CACHE_ENTRIES or _CACHE_BYTES[0] > CACHE_BYTES:
                _CACHE_BYTES[0] -= _CACHE.popitem(last=False)[1][0]
    if isinstance(result, TrieError):
        raise result
    return result


def client_error(field: str, e: TrieError, settings: Optional[Settings] = None) -> SetError:
    """``e`` as the request's 400: the field the client sent, once, then the library's message (and, for a bound,
    the operator's settings it comes from)."""
    msg = f"{field}: {e.message}"
    if settings is not None and is_limit(e):
        msg += (f" (this server's bounds: LIBTRIE_MAX_INLINE_STRINGS={settings.max_inline_strings}, "
                f"LIBTRIE_MAX_INLINE_BYTES={settings.max_inline_bytes})")
    return SetError(e.status, msg)


def is_limit(e: TrieError) -> bool:
    """Whether ``e`` is a bound of the operator (a 400 for any shape) rather than a text libtrie cannot read."""
    return e.status == Status.LIMIT_EXCEEDED


class _Compiled:
    """Compiled recognized sets keyed by (digest of the recognition, vocabulary): one compile per set however many
    threads ask, the ``capacity`` most recently used kept."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._done: "OrderedDict[Tuple[Any, ...], Automaton]" = OrderedDict()
        self._pending: "dict[Tuple[Any, ...], threading.Event]" = {}
        self._lock = threading.Lock()
        #: Compiles run (a set asked again is not compiled again).
        self.compiles = 0

    def get(self, vocab: Vocab, r: Recognized, end: str, max_states: Optional[int],
            max_bytes: Optional[int], indexed: bool = False, shared: Optional[CompiledDir] = None) -> Automaton:
        key = (vocab, r.members, r.prefix, r.suffix, r.render, end, max_states, max_bytes, indexed)
        while True:
            with self._lock:
                a = self._done.get(key)
                if a is not None:
                    self._done.move_to_end(key)
                    return a
                wait = self._pending.get(key)
                if wait is None:
                    self._pending[key] = threading.Event()
                    break
            wait.wait()
        try:
            a = Automaton.compile_template(vocab, r.members, prefix=r.prefix, suffix=r.suffix, render=r.render,
                                           end=end, max_states=max_states, max_bytes=max_bytes,
                                           values=range(len(r.members)) if indexed else None,
                                           compiled_dir=None if indexed else shared)
            with self._lock:
                self.compiles += 1
                self._done[key] = a
                while len(self._done) > self.capacity:
                    self._done.popitem(last=False)
            return a
        finally:
            with self._lock:
                self._pending.pop(key).set()


_COMPILED = _Compiled()


def compile_recognized(vocab: Vocab, r: Recognized, settings: Settings, end: Optional[str] = None,
                       indexed: bool = False) -> Automaton:
    """The recognized set compiled against ``vocab`` with its own template (the native library renders members:
    raw, JSON string or JSON text), ``end`` (default: the recognition's) and the operator's compile bounds;
    compiled once per process while it is among the most recently used, and with ``LIBTRIE_COMPILED_DIR`` once
    per machine (the other processes map the file the first one saved). ``indexed``: each member carries its
    index in ``r.members`` as its value (:meth:`Automaton.member_value`), which ``with_changes`` keeps and
    updates (such a set is compiled per process: a shared file carries no values yet). Raises
    :class:`TrieError`."""
    return _COMPILED.get(vocab, r, end or r.end, settings.max_states or None, settings.max_bytes or None, indexed,
                         compiled_dir(settings))
