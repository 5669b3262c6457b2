"""Tool registries from Python (``trie_registry_*``, the same native code llama-server uses): an operator's file
``NAME.json`` of the set directory (an OpenAI ``tools`` list) that a request names instead of sending its tools.

    cache = RegistryCache(settings.set_dir, max_file_bytes=settings.max_file_bytes)
    reg = cache.get("weather")          # Registry: names, parameters (JSON text), identity; read once per file identity

Requests are untrusted: a name is 1 to 128 characters of ``[A-Za-z0-9_.-]`` not starting with ``.`` (no path),
the file is opened without following links, its size is checked before it is read, and a file that changed while
it was read is refused (try again). Errors are :class:`libtrie.sets.SetError` (a ``ValueError``: an HTTP 400) with
a message fit for the client (the set directory's location is never in it). A registry replaced on disk gets a new
identity: requests holding the old one keep it, new requests read the new file.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ._native import declared, library, sizep, u8p, vp
from .sets import SetError

__all__ = ["Registry", "RegistryCache", "check_name", "MAX_NAME_BYTES"]

#: The longest registry name, in bytes.
MAX_NAME_BYTES = 128

_SIGNATURES: Dict[str, Tuple[List[Any], Any]] = {
    "trie_registry_cache_new": ([ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.POINTER(vp)], ctypes.c_int),
    "trie_registry_cache_free": ([vp], None),
    "trie_registry_cache_get": ([vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp),
                                 ctypes.POINTER(ctypes.c_bool)], ctypes.c_int),
    "trie_registry_cache_check": ([vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_bool)],
                                  ctypes.c_int),
    "trie_registry_free": ([vp], None),
    "trie_registry_n_tools": ([vp], ctypes.c_size_t),
    "trie_registry_tool": ([vp, ctypes.c_size_t, ctypes.POINTER(u8p), sizep, ctypes.POINTER(u8p), sizep],
                           ctypes.c_int),
    "trie_registry_identity": ([vp, ctypes.c_char_p], ctypes.c_int),
    "trie_registry_search": ([vp, ctypes.POINTER(vp)], ctypes.c_int),
}
def _lib() -> ctypes.CDLL:
    return declared(_SIGNATURES, "registries")


def _error(status: int) -> SetError:
    msg = library().trie_last_error()
    return SetError(status, msg.decode("utf-8", "replace") if msg else f"registry error {status}")


def check_name(name: Any) -> str:
    """``name`` if it is a registry name (1 to 128 characters of ``[A-Za-z0-9_.-]``, not starting with ``.``), else
    :class:`SetError` (the same rule as the native cache; checked here so that no request reaches a file for it)."""
    ok = (isinstance(name, str) and 0 < len(name) <= MAX_NAME_BYTES and not name.startswith(".")
          and all(c.isascii() and (c.isalnum() or c in "_.-") for c in name))
    if not ok:
        from . import Status

        shown = repr(name)[:80]
        raise SetError(Status.INVALID_ARGUMENT, f"a registry name is 1 to {MAX_NAME_BYTES} characters of "
                                                f"[A-Za-z0-9_.-], not starting with '.' (got {shown})")
    return str(name)


class Registry:
    """One registry, read and recognized: tool names (distinct, the file's order) and their ``parameters`` schemas
    (JSON text), and the file's identity (16 bytes; another file, or the same file changed, has another). The
    tools are copied out of the native registry once, when it is made."""

    __slots__ = ("name", "names", "parameters", "identity", "read")

    def __init__(self, name: str, handle: vp, read: bool) -> None:
        lib = _lib()
        try:
            n = int(lib.trie_registry_n_tools(handle))
            names: List[str] = []
            params: List[str] = []
            p_name, n_name, p_par, n_par = u8p(), ctypes.c_size_t(), u8p(), ctypes.c_size_t()
            for i in range(n):
                st = lib.trie_registry_tool(handle, i, ctypes.byref(p_name), ctypes.byref(n_name),
                                            ctypes.byref(p_par), ctypes.byref(n_par))
                if st != 0:
                    raise _error(st)
                names.append(ctypes.string_at(p_name, n_name.value).decode("utf-8"))
                params.append(ctypes.string_at(p_par, n_par.value).decode("utf-8") if n_par.value else "{}")
            ident = ctypes.create_string_buffer(16)
            st = lib.trie_registry_identity(handle, ident)
            if st != 0:
                raise _error(st)
        finally:
            lib.trie_registry_free(handle)
        self.name = name
        self.names: Tuple[str, ...] = tuple(names)
        self.parameters: Tuple[str, ...] = tuple(params)
        self.identity: bytes = ident.raw
        #: Whether the native cache read the file for this registry (else it had it).
        self.read = read

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, {len(self.names)} tools, identity {self.identity.hex()[:12]})"


class RegistryCache:
    """The registries of a set directory (``trie_registry_cache``), cached by file identity in the native cache,
    and the Python copies of the last ones got (by identity: a registry read again is not copied again).
    Thread-safe."""

    def __init__(self, set_dir: Optional[str], max_file_bytes: int = 256 << 20, max_tools: int = 0,
                 capacity: int = 8) -> None:
        lib = _lib()
        out = vp()
        st = lib.trie_registry_cache_new(os.fsencode(set_dir) if set_dir else None, max_file_bytes, max_tools,
                                         capacity, ctypes.byref(out))
        if st != 0:
            raise _error(st)
        self._h = out
        self._copies: Dict[bytes, Registry] = {}
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()
        #: Files read by the native cache (a new identity).
        self.reads = 0

    def _native(self, name: str, read: Optional[ctypes.c_bool] = None) -> Any:
        """A new reference to the native registry ``name`` (free it with ``trie_registry_free``); ``read`` (if
        given) tells whether the file was read now. Errors as for :meth:`get`."""
        check_name(name)
        data = name.encode("utf-8")
        out = vp()
        st = _lib().trie_registry_cache_get(self._h, data, len(data), ctypes.byref(out),
                                            None if read is None else ctypes.byref(read))
        if st != 0:
            raise _error(st)
        return out

    @contextlib.contextmanager
    def _borrowed(self, name: str) -> Iterator[Any]:
        """The native registry ``name`` for the time of a ``with`` block."""
        out = self._native(name)
        try:
            yield out
        finally:
            _lib().trie_registry_free(out)

    def get(self, name: str) -> Registry:
        """The registry ``name`` (:class:`SetError` naming the problem: a bad name, no such registry, a file
        refused, not a tools list)."""
        lib = _lib()
        read = ctypes.c_bool(False)
        out = self._native(name, read)
        ident = ctypes.create_string_buffer(16)
        if lib.trie_registry_identity(out, ident) == 0:
            with self._lock:
                hit = self._copies.get(ident.raw)
            if hit is not None and hit.name == name:
                lib.trie_registry_free(out)
                return hit
        reg = Registry(name, out, bool(read.value))
        with self._lock:
            if reg.read:
                self.reads += 1
            self._copies[reg.identity] = reg
            while len(self._copies) > self._capacity:
                self._copies.pop(next(iter(self._copies)))
        return reg

    def search(self, name: str) -> Any:
        """The :class:`~libtrie.search.ToolSearch` index of the registry ``name`` (its tools' names, descriptions
        and parameters' text; built by the native registry once per file identity, then shared). Errors as for
        :meth:`get`."""
        from .search import ToolSearch

        index = vp()
        with self._borrowed(name) as reg:
            st = _lib().trie_registry_search(reg, ctypes.byref(index))
        if st != 0:
            raise _error(st)
        return ToolSearch.from_handle(index)

    def deferred_plan(self, name: str, request: Any) -> Optional[Dict[str, Any]]:
        """:func:`libtrie.search.deferred_plan` with the registry ``name`` offered as deferred tools (its search index
        built once per file identity). Errors as for :meth:`get`."""
        from .search import deferred_plan

        with self._borrowed(name) as reg:
            return deferred_plan(request, reg)

    def check(self, name: str) -> bool:
        """What :meth:`get` checks before it reads (the name, the set directory, the file opened confined: no
        link, a regular file within the size bound), reading and recognizing nothing: for an API server's
        admission (the engine reads the registry). Returns whether the file's current identity is cached.
        :class:`SetError` as for :meth:`get`."""
        check_name(name)
        data = name.encode("utf-8")
        cached = ctypes.c_bool(False)
        st = _lib().trie_registry_cache_check(self._h, data, len(data), ctypes.byref(cached))
        if st != 0:
            raise _error(st)
        return bool(cached.value)

    def close(self) -> None:
        h, self._h = self._h, vp(0)
        if h.value:
            _lib().trie_registry_cache_free(h)

    def __del__(self) -> None:  # pragma: no cover - at collection
        try:
            self.close()
        except Exception:
            pass
