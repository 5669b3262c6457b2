"""Request sets: the operator's settings, a request's set spec, and the cache of compiled sets.

A thin layer over libtrie's request-set front end (``trie_set_cache_*`` of ``include/trie.h``), the one llama-server
uses too: spec parsing, confinement of set files to the operator's set directory (no symbolic link followed,
no ``..``, no absolute path; the file opened once, its identity and content taken from the open file), bounded
UTF-8 reading, bounded inline sets, and an LRU of compiled sets in which concurrent requests for one set compile
it once. Needs neither vLLM nor torch.

A spec is what a request names (see :mod:`libtrie.vllm` for the shapes): a set name, a path, a list of strings or
a dict with one of ``"set"``, ``"file"``, ``"strings"`` and optionally ``"drop_unreachable"``, ``"add"``,
``"remove"``. A refused spec raises :class:`SetError` (a ``ValueError``, so a server answers HTTP 400) whose message
names the reason and never the set directory's location.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import stat
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from . import Automaton, Status, TrieError, Vocab, _Handle, library
from ._native import CompiledDirStats, SetConfig, SetInfo, SetStats, vp

__all__ = ["Settings", "SetSpec", "SetError", "SetCache", "CompiledDir", "compiled_dir", "parse_spec", "spec_json",
           "read_set_file"]


class SetError(TrieError, ValueError):
    """A request's set is refused or cannot be compiled: ``status`` says why (``INVALID_ARGUMENT`` for a bad shape,
    bound, path or encoding; ``EMPTY_SET``; ``UNREACHABLE_STRING``; ``LIMIT_EXCEEDED``; ``IO``) and the message is
    fit for the client. A ``ValueError``: an HTTP 400."""

    def __str__(self) -> str:
        return self.message


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r} must not be negative")
    return value


@dataclass(frozen=True)
class Settings:
    """What the operator allows, read from the environment (``LIBTRIE_*``; see :mod:`libtrie.vllm`)."""

    set_dir: Optional[str] = None  # real path of LIBTRIE_SET_DIR
    allow_any_path: bool = False
    max_inline_strings: int = 10_000
    max_inline_bytes: int = 1 << 20
    max_file_bytes: int = 256 << 20
    max_states: int = 0  # 0: the library's own bound
    max_bytes: int = 0
    compile_threads: int = 1
    cache_size: int = 64
    #: Real path of LIBTRIE_COMPILED_DIR (LIBTRIE_CACHE_DIR, its older name): compiled sets (set files and
    #: recognized sets) and the vocabulary, shared by every process of the machine; created if missing.
    cache_dir: Optional[str] = None

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "Settings":
        env = os.environ if env is None else env
        d = cls()
        root = env.get("LIBTRIE_SET_DIR", "").strip()
        if root:
            root = os.path.realpath(root)
            if not os.path.isdir(root):
                raise ValueError("LIBTRIE_SET_DIR is not a directory")
        cache_dir = env.get("LIBTRIE_COMPILED_DIR", "").strip() or env.get("LIBTRIE_CACHE_DIR", "").strip()
        if cache_dir:
            cache_dir = os.path.realpath(cache_dir)
            if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
                raise ValueError("LIBTRIE_COMPILED_DIR is not a directory")
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        return cls(
            cache_dir=cache_dir or None,
            set_dir=root or None,
            allow_any_path=env.get("LIBTRIE_ALLOW_ANY_PATH", "").strip().lower() in ("1", "true", "yes", "on"),
            max_inline_strings=_env_int(env, "LIBTRIE_MAX_INLINE_STRINGS", d.max_inline_strings),
            max_inline_bytes=_env_int(env, "LIBTRIE_MAX_INLINE_BYTES", d.max_inline_bytes),
            max_file_bytes=_env_int(env, "LIBTRIE_MAX_FILE_BYTES", d.max_file_bytes),
            max_states=_env_int(env, "LIBTRIE_MAX_STATES", d.max_states),
            max_bytes=_env_int(env, "LIBTRIE_MAX_BYTES", d.max_bytes),
            compile_threads=max(1, _env_int(env, "LIBTRIE_COMPILE_THREADS", d.compile_threads)),
            cache_size=max(1, _env_int(env, "LIBTRIE_CACHE_SIZE", d.cache_size)),
        )

    def config(self) -> SetConfig:
        """These settings as a ``trie_set_config`` (``set_dir`` bytes kept alive by the struct's owner)."""
        c = SetConfig()
        st = library().trie_set_config_init(ctypes.byref(c))
        if st:
            raise TrieError(st, "trie_set_config_init failed")
        c.set_dir = os.fsencode(self.set_dir) if self.set_dir else None
        c.allow_any_path = self.allow_any_path
        u64 = (1 << 64) - 1
        c.max_inline_strings = min(self.max_inline_strings, u64)
        c.max_inline_bytes = min(self.max_inline_bytes, u64)
        c.max_file_bytes = min(self.max_file_bytes, u64)
        c.max_states = min(self.max_states, u64)
        c.max_bytes = min(self.max_bytes, u64)
        c.capacity = min(self.cache_size, u64)
        c.cache_dir = os.fsencode(self.cache_dir) if self.cache_dir else None
        return c


def spec_json(value: Any) -> bytes:
    """A request's spec as JSON text for the native front end, which checks it (a string that is not valid Unicode,
    such as a lone surrogate ``"\\ud800"``, is kept as the invalid bytes it stands for and refused there, bug B6).
    Raises :class:`SetError` for a value JSON cannot hold."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SetError(Status.INVALID_ARGUMENT, f"the set spec cannot be written as JSON: {e}") from None
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class SetSpec:
    """A request's set, checked at admission (:func:`parse_spec`): its JSON text, for :meth:`SetCache.get`."""

    json: bytes

    @property
    def key(self) -> bytes:
        """The spec's text (the compiled set's identity, a file's included, is decided when it is opened)."""
        return self.json


class _NativeCache(_Handle):
    """A ``trie_set_cache`` handle (a vocabulary, or ``None`` for checks only)."""

    __slots__ = ("vocab",)
    _kind = "SetCache"

    def __init__(self, vocab: Optional[Vocab], settings: Settings) -> None:
        self._set(vp(0))
        self.vocab = vocab
        config, out = settings.config(), vp()
        if vocab is None:
            st = library().trie_set_cache_new(None, ctypes.byref(config), ctypes.byref(out))
        else:
            st = vocab._call(library().trie_set_cache_new, ctypes.byref(config), ctypes.byref(out))
        _raise(st)
        self._set(out)

    @staticmethod
    def _release(handle: vp) -> None:
        library().trie_set_cache_free(handle)


class CompiledDir(_Handle):
    """A directory of compiled sets shared by the processes of a machine (``trie_compiled_dir``): pass it to
    :meth:`Automaton.compile_template` (``compiled_dir=``); the first process compiles and saves a set, the others
    map the file (one copy in the page cache). Created (0700) if missing. :func:`compiled_dir` keeps one per path."""

    __slots__ = ("path",)
    _kind = "CompiledDir"

    def __init__(self, path: str) -> None:
        self._set(vp(0))
        self.path = path
        out = vp()
        _raise(library().trie_compiled_dir_new(os.fsencode(path), ctypes.byref(out)))
        self._set(out)

    @staticmethod
    def _release(handle: vp) -> None:
        library().trie_compiled_dir_free(handle)

    def stats(self) -> Dict[str, int]:
        """This process's counters: ``loaded`` (mapped, not compiled), ``compiled``, ``rejected`` (damaged files
        compiled again and replaced), ``save_failed``."""
        s = CompiledDirStats()
        _raise(self._call(library().trie_compiled_dir_stats, ctypes.byref(s)))
        return {f[0]: int(getattr(s, f[0])) for f in CompiledDirStats._fields_}


_COMPILED_DIRS: Dict[str, CompiledDir] = {}
_COMPILED_DIRS_LOCK = threading.Lock()


def compiled_dir(settings: Settings) -> Optional[CompiledDir]:
    """The process's :class:`CompiledDir` of ``settings.cache_dir`` (``LIBTRIE_COMPILED_DIR``), ``None`` without."""
    if settings.cache_dir is None:
        return None
    with _COMPILED_DIRS_LOCK:
        d = _COMPILED_DIRS.get(settings.cache_dir)
        if d is None:
            d = _COMPILED_DIRS[settings.cache_dir] = CompiledDir(settings.cache_dir)
        return d


def _raise(status: int) -> None:
    if status:
        msg = library().trie_last_error()
        raise SetError(status, msg.decode("utf-8", "replace") if msg else "")


_CHECKERS: Dict[Settings, _NativeCache] = {}
_CHECKERS_LOCK = threading.Lock()


def _checker(settings: Settings) -> _NativeCache:
    with _CHECKERS_LOCK:
        c = _CHECKERS.get(settings)
        if c is None:
            c = _CHECKERS[settings] = _NativeCache(None, settings)
        return c


def parse_spec(value: Any, settings: Optional[Settings] = None) -> SetSpec:
    """Check a request's spec against the operator's ``settings`` (default: :meth:`Settings.from_env`) without
    compiling it: its shape, the inline bounds, and a set file's confinement, type and size. Raises
    :class:`SetError` (a ``ValueError``) naming what is wrong."""
    data = value.json if isinstance(value, SetSpec) else spec_json(value)
    checker = _checker(settings or Settings.from_env())
    _raise(checker._call(library().trie_set_cache_check, data, len(data)))
    return SetSpec(data)


def read_set_file(path: str, max_bytes: Optional[int] = None) -> List[bytes]:
    """The members of a set file for a trusted script: one per line, ``\\n`` separated, a final newline ignored
    (``\\r`` kept). A regular file of at most ``max_bytes``, valid UTF-8 (``UnicodeDecodeError`` otherwise); the last
    component is not followed if it is a symbolic link. Servers read request sets through :class:`SetCache`."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        limit = st.st_size if max_bytes is None else max_bytes
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
    data.decode("utf-8")
    if not data:
        return []
    return (data[:-1] if data.endswith(b"\n") else data).split(b"\n")


class SetCache:
    """The compiled sets of one vocabulary, keyed by what a spec names (a set file by its identity when opened;
    inline members by their content): the ``capacity`` most recently used, plus any still held by a running
    request; failures of a set itself are kept too (a bad set is not compiled again until its file changes).
    One compile per set at a time, however many threads ask. Thread-safe; native calls release the GIL."""

    def __init__(self, vocab: Union[Vocab, Callable[[], Vocab]], capacity: int = 64,
                 settings: Optional[Settings] = None) -> None:
        self._vocab: Optional[Vocab] = vocab if isinstance(vocab, Vocab) else None
        self._load_vocab = None if isinstance(vocab, Vocab) else vocab
        self.settings = settings or Settings()
        if capacity != self.settings.cache_size:
            self.settings = dataclasses.replace(self.settings, cache_size=max(1, capacity))
        self.capacity = self.settings.cache_size
        self._native: Optional[_NativeCache] = None
        self._lock = threading.Lock()
        self._wrappers: "weakref.WeakValueDictionary[int, Automaton]" = weakref.WeakValueDictionary()
        self._pending: Dict[bytes, "Future[Automaton]"] = {}
        self._executor: Optional[ThreadPoolExecutor] = None
        self._nothing: Optional[Automaton] = None
        #: Seconds the last compile run by this process took (0 before any).
        self.last_compile_s = 0.0

    @property
    def vocab(self) -> Vocab:
        """The vocabulary (loaded on first use when the cache was given a loader)."""
        if self._vocab is None:
            with self._lock:
                if self._vocab is None:
                    assert self._load_vocab is not None
                    self._vocab = self._load_vocab()
        return self._vocab

    def _cache(self) -> _NativeCache:
        if self._native is None:
            vocab = self.vocab
            with self._lock:
                if self._native is None:
                    self._native = _NativeCache(vocab, self.settings)
        return self._native

    def _stats(self) -> SetStats:
        s = SetStats()
        _raise(self._cache()._call(library().trie_set_cache_stats, ctypes.byref(s)))
        return s

    @property
    def compiles(self) -> int:
        """Compiles run (failed ones included)."""
        return int(self._stats().compiles)

    @property
    def loaded(self) -> int:
        """Compiles served by mapping a file of ``LIBTRIE_COMPILED_DIR`` instead (counted in :attr:`compiles`)."""
        return int(self._stats().loaded)

    @property
    def hits(self) -> int:
        """Lookups served without compiling."""
        return int(self._stats().hits)

    def nothing(self) -> Automaton:
        """The set of the empty string only: end-of-generation at once (for requests whose set failed)."""
        if self._nothing is None:
            a = Automaton(self.vocab, [""])
            with self._lock:
                if self._nothing is None:
                    self._nothing = a
        return self._nothing

    def check(self, spec: Any) -> SetSpec:
        """:func:`parse_spec` under this cache's settings."""
        return parse_spec(spec, self.settings)

    def get(self, spec: Any) -> Automaton:
        """The compiled set of ``spec`` (a :class:`SetSpec` or a raw spec), compiled in this thread if nobody has
        (blocks until it is ready; the GIL is released meanwhile). Raises :class:`SetError`."""
        data = spec.json if isinstance(spec, SetSpec) else spec_json(spec)
        native = self._cache()
        out, info = vp(), SetInfo()
        _raise(native._call(library().trie_set_cache_get, data, len(data), ctypes.byref(out), ctypes.byref(info)))
        if info.compiled:
            self.last_compile_s = float(info.seconds)
        return self._wrap(out)

    def _wrap(self, out: vp) -> Automaton:
        """One Python object per compiled set while it is alive (the extra native reference is dropped)."""
        address = out.value or 0
        with self._lock:
            a = self._wrappers.get(address)
            # A wrapper being collected is gone from the weak dictionary before its handle is released (the release
            # is a weakref.finalize of an inner owner, run after the weak references die); one closed by its user
            # is replaced.
            if a is None or a._closing:
                a = Automaton.__new__(Automaton)
                a._adopt(self.vocab, out)
                self._wrappers[address] = a
                return a
        library().trie_automaton_free(out)  # the live wrapper holds a reference to the same automaton
        return a

    def lookup(self, spec: Any) -> Optional[Automaton]:
        """The compiled set of ``spec`` if it is ready, without compiling (``None`` when it is not compiled yet or
        still compiling). Raises :class:`SetError` for a refused spec or a remembered failure of the set."""
        data = spec.json if isinstance(spec, SetSpec) else spec_json(spec)
        out = vp()
        _raise(self._cache()._call(library().trie_set_cache_lookup, data, len(data), ctypes.byref(out)))
        return self._wrap(out) if out.value else None

    def submit(self, spec: Any) -> "Future[Automaton]":
        """The compiled set of ``spec`` as a future, compiled on the cache's worker threads
        (``Settings.compile_threads``) unless it is ready (then the future is done at once, as it is for a refused
        spec or a remembered failure)."""
        data = spec.json if isinstance(spec, SetSpec) else spec_json(spec)
        ready: "Future[Automaton]" = Future()
        try:
            found = self.lookup(SetSpec(data))
        except SetError as e:
            ready.set_exception(e)
            return ready
        if found is not None:
            ready.set_result(found)
            return ready
        with self._lock:
            fut = self._pending.get(data)
            if fut is not None:
                return fut
            fut = self._pending[data] = Future()
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.settings.compile_threads, thread_name_prefix="libtrie-compile")
            executor = self._executor
        executor.submit(self._run, SetSpec(data), fut)
        return fut

    def _run(self, spec: SetSpec, fut: "Future[Automaton]") -> None:
        try:
            a = self.get(spec)
        except BaseException as e:
            with self._lock:
                self._pending.pop(spec.json, None)
            fut.set_exception(e)
            return
        with self._lock:
            self._pending.pop(spec.json, None)
        fut.set_result(a)

    def close(self) -> None:
        """Release the native cache (compiled sets in use stay valid; a compile in flight finishes first)."""
        with self._lock:
            native, self._native = self._native, None
        if native is not None:
            native.close()
