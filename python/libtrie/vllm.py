"""vLLM integration: force a request's output to be exactly one string of a set.

Two parts, both in this module:

- :class:`TrieLogitsProcessor`, a vLLM V1 logits processor. Installing the package registers it in the
  ``vllm.logits_processors`` entry-point group, which vLLM loads for every engine (or pass
  ``LLM(model, logits_processors=[TrieLogitsProcessor])`` / ``--logits-processors libtrie.vllm:TrieLogitsProcessor``).
  Its ``validate_params`` checks every request at admission (a bad set is an HTTP 400 on the OpenAI-compatible
  server), and on its own it masks the constrained rows in the model runner.
- :class:`TrieScheduler`, a vLLM scheduler (``--scheduler-cls libtrie.vllm.TrieScheduler``, or
  ``LLM(..., scheduler_cls=TrieScheduler)``). Recommended for servers. It does what vLLM does for its own structured
  outputs: a set is compiled on a worker thread of the engine core while its request waits in the queue (the other
  requests go on), and the masks are filled in the engine core during the forward pass and applied by the model
  runner with xgrammar's kernel. The logits processor then only validates. Needs synchronous scheduling (vLLM's
  default on CPU; pass ``--no-async-scheduling`` on GPU).

  Why a scheduler: without it a set is compiled when the model runner first sees the request, and a logits
  processor cannot hold one request back (every scheduled request samples a token each step; no token is
  harmless), so the whole batch waits for the compile (1.5 s to 3 s for 1,000,000 strings here). Compiling at
  admission does not help either: ``validate_params`` runs in the API server process, on its event loop, and the
  masks are needed in the model runner, a third process on CPU (``mp`` executor).

Name the set per request in ``SamplingParams.extra_args["libtrie"]`` (serializable values only, so it works across
vLLM's process boundaries and through the OpenAI-compatible server's ``vllm_xargs``):

- ``{"set": "tools"}`` or just ``"tools"``: the file ``tools.txt`` of the set directory ``$LIBTRIE_SET_DIR``, one
  member per line (UTF-8, ``\\n`` separated, a final newline ignored).
- ``{"file": "sub/tools.txt"}`` (or a string with a ``/``): a file by its path relative to the set directory.
- ``{"strings": ["yes", "no", ...]}`` (or a list of strings): the members inline.
- optional ``"drop_unreachable": true``: drop members the vocabulary cannot spell instead of failing the request.
- optional ``"add": [...]`` and ``"remove": [...]`` (lists of strings, with any of the three forms): the set with
  these strings added and removed, e.g. a registry's tool set plus the tools of this session. It is built from the
  compiled base set (compiled once, cached) by ``Automaton.with_changes``, which copies the rows the changes do not
  touch, and cached under its own key; the result is the set ``(base - remove) + add``.

Requests are untrusted input. Operator settings (environment of the vLLM server):

- ``LIBTRIE_SET_DIR``: the folder sets are read from. Without it, sets from files are refused. A path must stay
  inside it: absolute paths, ``..`` and symbolic links that resolve outside are refused, and so are files that are
  not regular files or are larger than ``LIBTRIE_MAX_FILE_BYTES`` (default 256 MiB). The folder's contents must be
  trusted (whoever can write there chooses what the model may print).
- ``LIBTRIE_ALLOW_ANY_PATH=1``: trusted callers only (an offline ``LLM`` script): any readable regular file, by an
  absolute path or one relative to the set directory.
- ``LIBTRIE_MAX_INLINE_STRINGS`` (default 10,000) and ``LIBTRIE_MAX_INLINE_BYTES`` (default 1 MiB, counting a byte
  per member for its separator): the largest inline set (``strings``, ``add`` and ``remove`` together). Larger sets belong in the set directory, where they are
  compiled once and shared.
- ``LIBTRIE_MAX_STATES`` / ``LIBTRIE_MAX_BYTES``: memory bounds of one compile (0 or unset: the library's own);
  a set beyond them fails with ``LIMIT_EXCEEDED``.
- ``LIBTRIE_COMPILE_THREADS`` (default 1): concurrent compiles of the scheduler; ``LIBTRIE_CACHE_SIZE`` (default 64):
  compiled sets kept (least recently used go first; a set still in use by a request is never compiled twice).
- ``LIBTRIE_CACHE_DIR``: a folder (the operator's, writable) where compiled sets and the vocabulary are saved in
  libtrie's file format: a restarted server, or another worker process, maps them instead of compiling (the pages
  are shared). Files are named by a digest of the vocabulary's fingerprint, the set (its content, or for a set file
  its path, size, modification time and inode) and the compile options; a damaged or stale file is compiled again
  and replaced. libtrie never deletes files there: size the folder yourself.

A request whose set passes admission but then fails to compile (not UTF-8, empty, a string the vocabulary cannot
spell, beyond the memory bounds) ends with finish reason ``error`` under the scheduler, or with an empty output
under the logits processor alone; the engine goes on.

Decoding: each constrained request keeps one integer state, advanced from its output token ids before each step.
At a state where a member is complete, the request's stop tokens (``SamplingParams.all_stop_token_ids``, which
include the model's EOS ids) are allowed too. The logits processor masks rows in one of two ways
(``$LIBTRIE_VLLM_APPLY``: ``auto``, the default, picks per step): *sparse* (keep the allowed logits, fill the rows
with -inf, put them back; O(allowed) plus a memset) or *bitmask* (all rows filled in one native call, then xgrammar's
``apply_token_bitmask_inplace``, or plain torch with ``torch``).

The vocabulary is read from the model's ``tokenizer.json`` (the tokenizer folder, or the Hugging Face cache when the
tokenizer is a hub id), or from ``$LIBTRIE_VOCAB`` (a ``tokenizer.json`` or a GGUF file); the mask width is the
model's logits width.

Caveats: ``min_tokens`` larger than the longest member conflicts with the constraint (vLLM then masks the only
allowed tokens); speculative decoding rejects custom logits processors (a vLLM rule); a set cannot be combined with
vLLM's own structured outputs in one request.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np
import torch

from . import FINISHED, Automaton, TrieError, Vocab, bitmask_words, fill_bitmask_rows

try:  # vLLM >= 0.10 (V1 logits processors)
    from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("libtrie.vllm needs vLLM with V1 logits processors (vllm>=0.10)") from e

try:  # the V1 engine core's scheduler (vLLM 0.32)
    from vllm.v1.core.sched.output import GrammarOutput
    from vllm.v1.core.sched.scheduler import Scheduler as _VllmScheduler
except ImportError:  # pragma: no cover - depends on the vLLM version
    _VllmScheduler = object  # type: ignore[misc,assignment,unused-ignore]
    GrammarOutput = None  # type: ignore[misc,assignment,unused-ignore]

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig

__all__ = ["TrieLogitsProcessor", "TrieScheduler", "Settings", "SetSpec", "parse_spec", "read_set_file", "SetCache",
           "apply_bitmask"]

log = logging.getLogger("libtrie.vllm")

EXTRA_KEY = "libtrie"


# ---- operator settings ----------------------------------------------------------------------------------------------

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
    """What the operator allows (see the module doc), read from the environment of the vLLM server."""

    set_dir: Optional[str] = None  # real path of LIBTRIE_SET_DIR
    allow_any_path: bool = False
    max_inline_strings: int = 10_000
    max_inline_bytes: int = 1 << 20
    max_file_bytes: int = 256 << 20
    max_states: int = 0  # 0: the library's own bound
    max_bytes: int = 0
    compile_threads: int = 1
    cache_size: int = 64
    cache_dir: Optional[str] = None  # real path of LIBTRIE_CACHE_DIR

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "Settings":
        env = os.environ if env is None else env
        d = cls()
        root = env.get("LIBTRIE_SET_DIR", "").strip()
        if root:
            real = os.path.realpath(root)
            if not os.path.isdir(real):
                raise ValueError("LIBTRIE_SET_DIR is not a directory")
            root = real
        cache_dir = env.get("LIBTRIE_CACHE_DIR", "").strip()
        if cache_dir:
            cache_dir = os.path.realpath(cache_dir)
            if not os.path.isdir(cache_dir):
                raise ValueError("LIBTRIE_CACHE_DIR is not a directory")
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


# ---- what a request asks for ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SetSpec:
    """A request's set, parsed from ``extra_args["libtrie"]``: ``key`` identifies the compiled set in the cache."""

    kind: str  # "file" or "strings"
    key: Tuple[Any, ...]
    path: Optional[str] = None  # the real path of a file set (checked against the operator's settings)
    strings: Optional[Tuple[str, ...]] = field(default=None, repr=False)
    drop_unreachable: bool = False
    #: Strings added to and removed from the base set (the set named without them, whose key is ``base_key``).
    add: Tuple[str, ...] = field(default=(), repr=False)
    remove: Tuple[str, ...] = field(default=(), repr=False)
    base_key: Optional[Tuple[Any, ...]] = None

    def base(self) -> "SetSpec":
        """The set without the changes (itself when it has none)."""
        if self.base_key is None:
            return self
        return SetSpec(self.kind, self.base_key, self.path, self.strings, self.drop_unreachable)


def _where(raw: str, kind: str) -> str:
    shown = raw if len(raw) <= 200 else raw[:200] + "..."  # the client's own words, not a megabyte of them
    return f"the set {shown!r}" if kind == "set" else f"the set file {shown!r}"


def resolve_set_file(raw: str, settings: Settings, kind: str = "file") -> Tuple[str, os.stat_result]:
    """The real path and ``stat`` of the set file a request names (a set name + ``.txt``, or a path), checked
    against the operator's settings. Raises ``ValueError`` with a reason fit for the client (the set directory's own
    location is not disclosed)."""
    what = _where(raw[:-4] if kind == "set" else raw, kind)
    if "\x00" in raw:
        raise ValueError(f"{what} is not a valid path")
    root = settings.set_dir
    if settings.allow_any_path:
        real = os.path.realpath(raw if os.path.isabs(raw) or root is None else os.path.join(root, raw))
    else:
        if root is None:
            raise ValueError(f"{what} is refused: this server does not read sets from files (the operator has not "
                             'configured LIBTRIE_SET_DIR); pass the members inline ({"strings": [...]})')
        if os.path.isabs(raw) or raw.startswith("~"):
            raise ValueError(f"{what} is refused: absolute paths are not allowed; name a set of the set directory "
                             "or a path relative to it")
        if ".." in raw.replace("\\", "/").split("/"):
            raise ValueError(f"{what} is refused: '..' is not allowed in a set path")
        real = os.path.realpath(os.path.join(root, raw))
        if real == root or os.path.commonpath([root, real]) != root:
            raise ValueError(f"{what} is refused: it resolves outside the set directory (a symbolic link)")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise ValueError(f"{what} does not exist" + ("" if settings.allow_any_path else " in the set directory")) \
            from None
    except OSError as e:
        raise ValueError(f"{what} cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} is refused: not a regular file")
    if st.st_size > settings.max_file_bytes:
        raise ValueError(f"{what} is refused: {st.st_size} bytes, more than this server reads "
                         f"({settings.max_file_bytes}, LIBTRIE_MAX_FILE_BYTES)")
    return real, st


class _InlineBudget:
    """The inline strings of one request (``strings``, ``add`` and ``remove`` together), checked against the
    operator's bounds as they are read."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.count = 0
        self.size = 0

    def take(self, value: Any, name: str) -> Tuple[Tuple[str, ...], str]:
        """The strings of ``extra_args[...][name]`` and their digest; raises ``ValueError`` naming what is wrong."""
        s = self.settings
        if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["{name}"] must be a list of str')
        self.count += len(value)
        if self.count > s.max_inline_strings:
            raise ValueError(f"the inline set has {self.count} strings, more than this server accepts "
                             f"({s.max_inline_strings}, LIBTRIE_MAX_INLINE_STRINGS); name a set of the set "
                             "directory instead")
        h = hashlib.blake2b(digest_size=16)
        for x in value:
            b = x.encode("utf-8", "surrogatepass")
            self.size += len(b) + 1
            if self.size > s.max_inline_bytes:
                raise ValueError(f"the inline set is larger than this server accepts ({s.max_inline_bytes} "
                                 "bytes, LIBTRIE_MAX_INLINE_BYTES); name a set of the set directory instead")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
        return tuple(value), h.hexdigest()


def parse_spec(value: Any, settings: Optional[Settings] = None) -> SetSpec:
    """Parse and check ``extra_args["libtrie"]`` (see the module doc) against the operator's ``settings`` (default:
    :meth:`Settings.from_env`). Raises ``ValueError`` naming what is wrong. Cheap: a file is only ``stat``-ed."""
    if settings is None:
        settings = Settings.from_env()
    if isinstance(value, str):  # the short forms, which also fit the OpenAI server's flat `vllm_xargs`
        value = {"file": value} if "/" in value else {"set": value}
    elif isinstance(value, list):
        value = {"strings": value}
    if not isinstance(value, dict):
        raise ValueError(f'extra_args["{EXTRA_KEY}"] must be a set name, a path, a list of strings or a dict, '
                         f"not {type(value).__name__}")
    unknown = set(value) - {"file", "strings", "set", "drop_unreachable", "add", "remove"}
    if unknown:
        raise ValueError(f'extra_args["{EXTRA_KEY}"] has unknown keys {sorted(map(str, unknown))[:8]} '
                         '(expected one of "file", "strings", "set", and optionally "drop_unreachable", "add", '
                         '"remove")')
    given = [k for k in ("file", "strings", "set") if k in value]
    if len(given) != 1:
        raise ValueError(f'extra_args["{EXTRA_KEY}"] needs exactly one of "file", "strings", "set" (got {given})')
    drop = value.get("drop_unreachable", False)
    if not isinstance(drop, bool):
        raise ValueError(f'extra_args["{EXTRA_KEY}"]["drop_unreachable"] must be a bool')
    inline = _InlineBudget(settings)
    if "strings" in value:
        strings, digest = inline.take(value["strings"], "strings")
        if not strings:
            raise ValueError(f'extra_args["{EXTRA_KEY}"]["strings"] is empty: a set needs at least one member')
        base = SetSpec("strings", ("strings", digest, len(strings), drop), strings=strings, drop_unreachable=drop)
    else:
        if "set" in value:
            name = value["set"]
            if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
                raise ValueError(f'extra_args["{EXTRA_KEY}"]["set"] must be a plain set name, not {name!r}')
            path, st = resolve_set_file(name + ".txt", settings, "set")
        else:
            raw = value["file"]
            if not isinstance(raw, str) or not raw:
                raise ValueError(f'extra_args["{EXTRA_KEY}"]["file"] must be a path')
            path, st = resolve_set_file(raw, settings, "file")
        base = SetSpec("file", ("file", path, st.st_size, st.st_mtime_ns, drop), path=path, drop_unreachable=drop)
    add, add_digest = inline.take(value.get("add", []), "add")
    remove, remove_digest = inline.take(value.get("remove", []), "remove")
    if not add and not remove:
        return base
    return SetSpec(base.kind, base.key + ("changes", add_digest, len(add), remove_digest, len(remove)), base.path,
                   base.strings, drop, add=add, remove=remove, base_key=base.key)


def read_set_file(path: str, max_bytes: Optional[int] = None) -> List[bytes]:
    """The members of a set file: one per line, ``\\n`` separated, a final newline ignored (``\\r`` kept). The file
    must be a regular file of at most ``max_bytes`` and valid UTF-8 (``UnicodeDecodeError`` otherwise). The last
    component of ``path`` is not followed if it is a symbolic link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        limit = st.st_size if max_bytes is None else max_bytes
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
    # Checked and split a chunk of whole lines at a time: on a compile thread, the GIL is held for about a
    # millisecond at a time rather than for the whole file (0.1 s for 30 MB).
    lines: List[bytes] = []
    start, n = 0, len(data)
    while start < n:
        end = data.find(b"\n", min(start + (1 << 20), n))
        end = n if end < 0 else end + 1
        piece = data[start:end]
        piece.decode("utf-8")  # only a check (a chunk ends after a newline: no character is cut)
        lines.extend((piece[:-1] if piece.endswith(b"\n") else piece).split(b"\n"))
        start = end
    return lines


class SetCache:
    """Compiled sets keyed by :attr:`SetSpec.key`: the ``capacity`` most recently used, plus any still referenced
    elsewhere (by a running request), plus the last failures (so that a failing set is not compiled again and again
    until its file changes). One compile per key at a time, however many threads ask. Thread-safe."""

    def __init__(self, vocab: Union[Vocab, Callable[[], Vocab]], capacity: int = 64,
                 settings: Optional[Settings] = None) -> None:
        self._vocab: Optional[Vocab] = vocab if isinstance(vocab, Vocab) else None
        self._load_vocab = None if isinstance(vocab, Vocab) else vocab
        self.capacity = max(1, capacity)
        self.settings = settings or Settings()
        self._sets: "OrderedDict[Tuple[Any, ...], Automaton]" = OrderedDict()
        self._live: "weakref.WeakValueDictionary[Tuple[Any, ...], Automaton]" = weakref.WeakValueDictionary()
        self._failed: "OrderedDict[Tuple[Any, ...], BaseException]" = OrderedDict()
        self._pending: Dict[Tuple[Any, ...], "Future[Automaton]"] = {}
        self._lock = threading.Lock()
        self._vocab_lock = threading.Lock()
        self._executor: Optional[ThreadPoolExecutor] = None
        self._nothing: Optional[Automaton] = None
        #: Compiles run (successful or not, loads from ``LIBTRIE_CACHE_DIR`` included), and the seconds the last one
        #: took; how many of them loaded a saved set instead of compiling.
        self.compiles = 0
        self.last_compile_s = 0.0
        self.loaded = 0

    @property
    def vocab(self) -> Vocab:
        """The vocabulary (loaded on first use when the cache was given a loader)."""
        if self._vocab is None:
            with self._vocab_lock:
                if self._vocab is None:
                    assert self._load_vocab is not None
                    self._vocab = self._load_vocab()
        return self._vocab

    def nothing(self) -> Automaton:
        """The set of the empty string only: end-of-generation at once (for requests whose set failed)."""
        if self._nothing is None:
            a = Automaton(self.vocab, [""])
            with self._lock:
                if self._nothing is None:
                    self._nothing = a
        return self._nothing

    def _claim(self, spec: SetSpec) -> Tuple["Future[Automaton]", bool]:
        """The future of ``spec``'s automaton, and whether the caller must compile it."""
        key = spec.key
        with self._lock:
            a = self._sets.get(key)
            if a is None:
                a = self._live.get(key)
                if a is not None:
                    self._remember(key, a)
            if a is not None:
                self._sets.move_to_end(key)
                done: "Future[Automaton]" = Future()
                done.set_result(a)
                return done, False
            err = self._failed.get(key)
            if err is not None:
                failed: "Future[Automaton]" = Future()
                failed.set_exception(err)
                return failed, False
            fut = self._pending.get(key)
            if fut is not None:
                return fut, False
            fut = self._pending[key] = Future()
            return fut, True

    def _remember(self, key: Tuple[Any, ...], a: Automaton) -> None:
        self._sets[key] = a
        self._live[key] = a
        while len(self._sets) > self.capacity:
            self._sets.popitem(last=False)

    def _run(self, spec: SetSpec, fut: "Future[Automaton]") -> None:
        t = time.monotonic()
        try:
            a = self._compile(spec)
        except BaseException as e:
            with self._lock:
                del self._pending[spec.key]
                self.compiles += 1
                self.last_compile_s = time.monotonic() - t
                if isinstance(e, (TrieError, ValueError)):  # the set's own fault (UnicodeDecodeError is a ValueError)
                    self._failed[spec.key] = e
                    while len(self._failed) > self.capacity:
                        self._failed.popitem(last=False)
            fut.set_exception(e)
            return
        with self._lock:
            del self._pending[spec.key]
            self.compiles += 1
            self.last_compile_s = time.monotonic() - t
            self._remember(spec.key, a)
        fut.set_result(a)

    def _compile(self, spec: SetSpec) -> Automaton:
        s = self.settings
        saved = self._saved_path(spec)
        if saved is not None and os.path.isfile(saved):
            try:
                a = Automaton.load(self.vocab, saved)
                with self._lock:
                    self.loaded += 1
                return a
            except TrieError as e:  # damaged, another format version or vocabulary: compile again, replace it
                log.warning("libtrie: compiling again instead of loading %s (%s)", saved, e.message)
        bounds = dict(max_states=s.max_states or None, max_bytes=s.max_bytes or None)
        base = self._base_of(spec) if spec.base_key is not None else None
        if base is not None:
            a = base.with_changes(spec.add, spec.remove, drop_unreachable=spec.drop_unreachable, **bounds)
        else:
            members: Sequence[Union[str, bytes]]
            if spec.strings is not None:
                members = spec.strings
            else:
                members = read_set_file(spec.path or "", s.max_file_bytes)
            if spec.base_key is not None:  # the changed set, compiled in full
                gone = {r.encode("utf-8", "surrogatepass") for r in spec.remove}
                gone -= {x.encode("utf-8", "surrogatepass") for x in spec.add}
                kept = [m for m in members if (m.encode("utf-8", "surrogatepass") if isinstance(m, str) else m)
                        not in gone]
                members = list(spec.add) + kept
            a = Automaton(self.vocab, members, spec.drop_unreachable, **bounds)
        if saved is not None:
            try:
                a.save(saved)
            except TrieError as e:  # a full disk must not fail the request
                log.warning("libtrie: cannot save a compiled set to %s: %s", saved, e.message)
        return a

    def _base_of(self, spec: SetSpec) -> Optional[Automaton]:
        """The compiled base set of a changed set: from the cache, or compiled (and cached) in this thread.
        ``None`` when another thread is compiling it (or has it queued behind this one): then the caller compiles
        the changed set in full instead of waiting. Raises what compiling the base raised."""
        base = spec.base()
        fut, mine = self._claim(base)
        if mine:
            self._run(base, fut)
        elif not fut.done():
            return None
        return fut.result()

    def _saved_path(self, spec: SetSpec) -> Optional[str]:
        """Where ``spec``'s compiled set is saved in ``LIBTRIE_CACHE_DIR`` (``None`` without one): a digest of the
        vocabulary, the set (inline: its members; a file: its path, size, modification time and inode) and the
        compile options."""
        s = self.settings
        if s.cache_dir is None:
            return None
        h = hashlib.sha256()
        h.update(b"libtrie-set-v1\0" + self.vocab.fingerprint.encode())
        h.update(repr((spec.drop_unreachable, s.max_states, s.max_bytes)).encode())
        if spec.strings is not None:
            for m in spec.strings:
                b = m.encode("utf-8")
                h.update(len(b).to_bytes(8, "little") + b)
        else:
            st = os.stat(spec.path or "")
            h.update(repr(("file", spec.path, st.st_size, st.st_mtime_ns, st.st_ino)).encode())
        if spec.base_key is not None:
            for tag, strings in ((b"add", spec.add), (b"remove", spec.remove)):
                h.update(b"\0" + tag + len(strings).to_bytes(8, "little"))
                for m in strings:
                    b = m.encode("utf-8", "surrogatepass")
                    h.update(len(b).to_bytes(8, "little") + b)
        return os.path.join(s.cache_dir, h.hexdigest()[:40] + ".trie")

    def get(self, spec: SetSpec) -> Automaton:
        """The compiled set of ``spec``, compiled in this thread if nobody has (blocks until it is ready). Raises
        what compiling raised (``TrieError``, ``OSError``, ``UnicodeDecodeError``)."""
        fut, mine = self._claim(spec)
        if mine:
            self._run(spec, fut)
        return fut.result()

    def submit(self, spec: SetSpec) -> "Future[Automaton]":
        """The compiled set of ``spec`` as a future, compiled on the cache's worker threads
        (``Settings.compile_threads``) if nobody has. ctypes releases the GIL during the native compile."""
        fut, mine = self._claim(spec)
        if mine:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.settings.compile_threads,
                                                        thread_name_prefix="libtrie-compile")
                executor = self._executor
            executor.submit(self._run, spec, fut)
        return fut


# ---- the vocabulary of the served model -----------------------------------------------------------------------------

def _int_list(v: Any) -> List[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def _tokenizer_json(vllm_config: "VllmConfig") -> str:
    mc = vllm_config.model_config
    name = str(mc.tokenizer or mc.model)
    local = Path(name) / "tokenizer.json"
    if local.is_file():
        return str(local)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "tokenizer.json", revision=getattr(mc, "tokenizer_revision", None))
        if isinstance(cached, str):
            return cached
    except Exception:  # pragma: no cover - hub layout differences
        pass
    raise FileNotFoundError(f"libtrie: no tokenizer.json for the tokenizer {name!r} (looked in the folder and the "
                            "Hugging Face cache); set LIBTRIE_VOCAB to a tokenizer.json or GGUF file")


def load_model_vocab(vllm_config: "VllmConfig") -> Vocab:
    """The vocabulary of the served model: ``$LIBTRIE_VOCAB`` or the model's ``tokenizer.json``, with the mask width
    of the model's logits and its end-of-sequence ids (``config.json`` and ``generation_config.json``)."""
    mc = vllm_config.model_config
    n_vocab = int(mc.get_vocab_size())
    eog = set(_int_list(getattr(mc.hf_config, "eos_token_id", None)))
    try:
        eog.update(_int_list(mc.try_get_generation_config().get("eos_token_id")))
    except Exception:  # pragma: no cover - no generation config
        pass
    path = os.environ.get("LIBTRIE_VOCAB") or _tokenizer_json(vllm_config)
    cache_dir = Settings.from_env().cache_dir
    saved = None
    if cache_dir is not None:
        st = os.stat(path)
        key = repr(("vocab", os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino, n_vocab, sorted(eog)))
        saved = os.path.join(cache_dir, "vocab-" + hashlib.sha256(key.encode()).hexdigest()[:40] + ".vocab")
        if os.path.isfile(saved):
            try:
                return Vocab.load(saved)
            except TrieError as e:
                log.warning("libtrie: reading the vocabulary again instead of loading %s (%s)", saved, e.message)
    if path.endswith(".gguf"):
        vocab = Vocab.from_gguf(path)
    else:
        vocab = Vocab.from_tokenizer_json(path, eog_ids=sorted(eog) if eog else None, n_vocab=n_vocab)
    if saved is not None:
        try:
            vocab.save(saved)
        except TrieError as e:
            log.warning("libtrie: cannot save the vocabulary to %s: %s", saved, e.message)
    return vocab


# ---- applying bitmasks --------------------------------------------------------------------------------------------

_SHIFTS: Dict[torch.device, torch.Tensor] = {}


def _apply_bitmask_torch(logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int]) -> None:
    """``logits[indices[i], t] = -inf`` where bit ``t`` of row ``i`` is 0 (plain torch; any device)."""
    n, vocab = len(indices), logits.shape[-1]
    shifts = _SHIFTS.get(bitmask.device)
    if shifts is None:
        shifts = _SHIFTS[bitmask.device] = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask[:n].unsqueeze(-1) >> shifts) & 1  # [n, W, 32]
    allowed = bits.reshape(n, -1)[:, :vocab].to(torch.bool)
    if allowed.shape[1] < vocab:  # a row narrower than the logits: the ids past it are not allowed
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[1]), value=False)
    rows = torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)
    sub = logits.index_select(0, rows)
    sub.masked_fill_(~allowed.to(logits.device), float("-inf"))
    logits.index_copy_(0, rows, sub)


def _xgrammar_kernel() -> Optional[Callable[..., None]]:
    try:
        import xgrammar

        kernel: Callable[..., None] = xgrammar.apply_token_bitmask_inplace
        return kernel
    except Exception:
        return None


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor, indices: Sequence[int], use_xgrammar: bool = True) -> None:
    """Set ``logits[indices[i], t]`` to ``-inf`` where bit ``t`` of ``bitmask[i]`` is 0 (the shared layout), in place.
    Uses xgrammar's kernel when available (what vLLM's structured outputs use), plain torch otherwise."""
    if not indices:
        return
    kernel = _xgrammar_kernel() if use_xgrammar else None
    if (kernel is not None and logits.dtype in (torch.float32, torch.float16, torch.bfloat16)
            and logits.shape[-1] <= bitmask.shape[-1] * 32):
        rows = bitmask[: len(indices)]
        if rows.device != logits.device:
            rows = rows.to(logits.device, non_blocking=True)
        if len(indices) == logits.shape[0] and list(indices) == list(range(len(indices))):
            kernel(logits, rows)
        else:
            # xgrammar indexes bitmask rows by the logits row: scatter the rows into a full-batch mask.
            full = torch.full((logits.shape[0], rows.shape[1]), -1, dtype=torch.int32, device=logits.device)
            full[torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)] = rows
            kernel(logits, full, indices=list(indices))
        return
    _apply_bitmask_torch(logits, bitmask, indices)


# ---- per-request decoding state -------------------------------------------------------------------------------------

_CACHES: Dict[Tuple[Any, ...], SetCache] = {}
_CACHES_LOCK = threading.Lock()


def shared_cache(vllm_config: "VllmConfig", settings: Settings) -> SetCache:
    """The compiled sets of the served model in this process (shared by every processor and scheduler of it); the
    vocabulary is loaded on first use, on the thread that first compiles."""
    mc = vllm_config.model_config
    key = (str(mc.tokenizer or mc.model), int(mc.get_vocab_size()), os.environ.get("LIBTRIE_VOCAB"), settings)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = SetCache(lambda: load_model_vocab(vllm_config), settings.cache_size, settings)
        return cache


def _fits(automaton: Automaton, n_vocab: int) -> Automaton:
    """``automaton``, if its vocabulary fits the model's logits (``LIBTRIE_VOCAB`` may name a wider one)."""
    if automaton.n_vocab > n_vocab:
        raise ValueError(f"the vocabulary has {automaton.n_vocab} ids, more than the model's {n_vocab} logits "
                         "(LIBTRIE_VOCAB names another model's vocabulary?)")
    return automaton


def _stop_ids(params: "SamplingParams", automaton: Automaton, n_vocab: int) -> Set[int]:
    """The request's stop ids beyond the vocabulary's end-of-generation ids (allowed where a member is complete)."""
    stops = set(getattr(params, "all_stop_token_ids", ()) or ()) - set(automaton.vocab.eog_ids)
    return {t for t in stops if 0 <= t < n_vocab}


class _Row:
    """One constrained request: its automaton, its state and how much of its output has been consumed."""

    __slots__ = ("automaton", "state", "output", "consumed", "stops", "broken")

    def __init__(self, automaton: Automaton, output: Sequence[int], stops: Set[int]) -> None:
        self.automaton = automaton
        self.state = automaton.start()
        self.output = output  # vLLM's live list of the request's output token ids
        self.consumed = 0
        self.stops = stops  # stop ids of the request beyond the vocabulary's EOG ids
        self.broken = False

    def catch_up(self, where: Any) -> None:
        """Advance the state over the output tokens produced since the last call."""
        out = self.output
        while self.consumed < len(out):
            t = out[self.consumed]
            self.consumed += 1
            if self.broken:
                continue
            if self.state != FINISHED and t in self.stops and self.automaton.is_accepting(self.state):
                self.state = FINISHED
                continue
            try:
                self.state = self.automaton.advance(self.state, t)
            except TrieError as e:  # a token from outside the mask (another processor, a forced token, ...)
                self.broken = True
                self.state = FINISHED
                log.warning("libtrie: the request %s produced token %d, which its set does not allow (%s); only "
                            "stop tokens are allowed from now on", where, t, e.message)

    def extra(self) -> Any:
        """The stop ids allowed at the current state beyond the automaton's own (a member is complete)."""
        if self.stops and (self.state == FINISHED or self.automaton.is_accepting(self.state)):
            return self.stops
        return ()


def _uses_trie_scheduler(vllm_config: "VllmConfig") -> bool:
    """Whether the engine runs :class:`TrieScheduler` (then it masks the rows and the processor only validates)."""
    cls: Any = getattr(getattr(vllm_config, "scheduler_config", None), "scheduler_cls", None)
    if cls is None:
        return False
    if isinstance(cls, str):
        if cls in ("libtrie.vllm.TrieScheduler", "libtrie.vllm:TrieScheduler"):
            return True
        try:
            from vllm.utils.import_utils import resolve_obj_by_qualname

            cls = resolve_obj_by_qualname(cls)
        except Exception:
            return False
    return isinstance(cls, type) and issubclass(cls, TrieScheduler)


# ---- the logits processor -------------------------------------------------------------------------------------------

class TrieLogitsProcessor(LogitsProcessor):  # type: ignore[misc,unused-ignore]  # vLLM ships no type stubs
    """vLLM V1 logits processor: requests whose ``SamplingParams.extra_args`` name a set (``"libtrie"`` key, see the
    module doc) can only produce a member of that set. Not argmax-invariant (it changes greedy results). Under
    :class:`TrieScheduler` it only validates requests (the scheduler masks)."""

    @classmethod
    def validate_params(cls, sampling_params: "SamplingParams") -> None:
        """Admission (the API server process, on its event loop): parse and check the request's set against the
        operator's settings, without reading or compiling it. A ``ValueError`` becomes an HTTP 400."""
        extra = sampling_params.extra_args or {}
        if EXTRA_KEY in extra:
            if getattr(sampling_params, "structured_outputs", None) is not None:
                raise ValueError(f'extra_args["{EXTRA_KEY}"] cannot be combined with structured outputs')
            parse_spec(extra[EXTRA_KEY])

    #: The active processor per engine (keyed by its config object): vLLM builds one instance per registration, and
    #: the entry point plus an explicit `logits_processors=[...]` would otherwise mask every row twice.
    _active: "weakref.WeakValueDictionary[int, TrieLogitsProcessor]" = weakref.WeakValueDictionary()

    def __init__(self, vllm_config: "VllmConfig", device: torch.device, is_pin_memory: bool) -> None:
        self.settings = Settings.from_env()  # a bad setting stops the engine at start, with its name
        #: True under TrieScheduler: the scheduler masks, this processor does nothing.
        self.delegated = _uses_trie_scheduler(vllm_config)
        #: False for a second registration in the same engine, or under TrieScheduler: it then does nothing.
        self.active = not self.delegated and self._active.setdefault(id(vllm_config), self) is self
        if self.delegated:
            log.info("libtrie: TrieScheduler masks the constrained requests; the logits processor only validates")
        self.vllm_config = vllm_config
        self.device = torch.device(device)
        self.max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        self.n_vocab = int(vllm_config.model_config.get_vocab_size())
        self.row_words = bitmask_words(self.n_vocab)
        self.is_pin_memory = is_pin_memory
        self.rows: Dict[int, _Row] = {}
        self._cache: Optional[SetCache] = None
        self._bitmask: Optional[torch.Tensor] = None
        self._warned = False
        #: How masks are applied: "auto" (sparse when rows allow few tokens on average, else the bitmask with
        #: xgrammar's kernel), "sparse", "xgrammar" (bitmask, xgrammar's kernel) or "torch" (bitmask, plain torch).
        self.mode = os.environ.get("LIBTRIE_VLLM_APPLY", "auto")
        if self.mode not in ("auto", "sparse", "xgrammar", "torch"):
            raise ValueError(f"LIBTRIE_VLLM_APPLY={self.mode!r}: expected auto, sparse, xgrammar or torch")
        #: "auto" goes sparse while the batch averages at most this many allowed ids per row.
        self.sparse_limit = int(os.environ.get("LIBTRIE_VLLM_SPARSE_LIMIT", "4096"))

    # vLLM asks this to route the processor: False, since masking changes the argmax.
    def is_argmax_invariant(self) -> bool:
        return False

    @property
    def cache(self) -> SetCache:
        """The compiled sets (the model's vocabulary is loaded on first use, not at engine start)."""
        if self._cache is None:
            self._cache = shared_cache(self.vllm_config, self.settings)
        return self._cache

    def _new_row(self, params: "SamplingParams", output: List[int]) -> Optional[_Row]:
        extra = params.extra_args or {}
        if EXTRA_KEY not in extra:
            return None
        cache = self.cache
        cache.vocab  # loaded on first use: not part of the compile time below  # noqa: B018
        t, compiles = time.monotonic(), cache.compiles
        try:
            automaton = _fits(cache.get(parse_spec(extra[EXTRA_KEY], self.settings)), self.n_vocab)
        except Exception as e:  # an engine must not die of one request's set (empty file, unreadable, not UTF-8, ...)
            log.error("libtrie: the set of a request cannot be compiled (%s); the request will end at once with an "
                      "empty output", e)
            automaton = cache.nothing()
        took = time.monotonic() - t
        if cache.compiles != compiles and took > 0.1 and not self._warned:
            self._warned = True
            log.warning("libtrie: a set took %.2f s to compile in the model runner, and the whole batch waited; run "
                        "vLLM with --scheduler-cls libtrie.vllm.TrieScheduler to compile sets off the engine loop "
                        "while only their requests wait", took)
        return _Row(automaton, output, _stop_ids(params, automaton, self.n_vocab))

    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        if not self.active:
            return
        if batch_update is not None:
            for index in batch_update.removed:
                self.rows.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                row = self._new_row(params, output)
                if row is None:
                    self.rows.pop(index, None)
                else:
                    self.rows[index] = row
            for a, b, direction in batch_update.moved:
                ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
                if ra is not None:
                    self.rows[b] = ra
                if rb is not None and direction == MoveDirectionality.SWAP:
                    self.rows[a] = rb
        for index, row in self.rows.items():
            row.catch_up(f"in batch row {index}")

    def _buffer(self, n: int) -> torch.Tensor:
        if self._bitmask is None or self._bitmask.shape[0] < n:
            rows = max(n, min(self.max_rows, 2 * n))
            self._bitmask = torch.empty((rows, self.row_words), dtype=torch.int32, device="cpu",
                                        pin_memory=self.is_pin_memory and self.device.type != "cpu")
        return self._bitmask[:n]

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        indices = sorted(i for i in self.rows if i < logits.shape[0])
        if not indices:
            return logits
        rows = [self.rows[i] for i in indices]
        allowed = [r.automaton.allowed(r.state) for r in rows]
        extra = [r.extra() for r in rows]
        n_allowed = sum(map(len, allowed)) + sum(map(len, extra))
        if self.mode == "sparse" or (self.mode == "auto" and n_allowed <= self.sparse_limit * len(rows)):
            _apply_sparse(logits, indices, allowed, extra)
            return logits
        bitmask = self._buffer(len(indices))
        fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
        for i, stops in enumerate(extra):
            for t in stops:
                bitmask[i, t >> 5] |= _bit(t & 31)
        apply_bitmask(logits, bitmask, indices, self.mode != "torch")
        return logits


# ---- the scheduler --------------------------------------------------------------------------------------------------

class _Pending:
    """A constrained request known to the scheduler: its set's future, then its decoding row."""

    __slots__ = ("future", "row")

    def __init__(self, future: "Future[Automaton]") -> None:
        self.future = future
        self.row: Optional[_Row] = None


class TrieScheduler(_VllmScheduler):  # type: ignore[misc,valid-type,unused-ignore]  # vLLM ships no type stubs
    """vLLM's scheduler, plus libtrie's sets the way vLLM runs its own structured outputs (the engine core process):

    - ``add_request``: a request that names a set gets its compile started on a worker thread
      (:meth:`SetCache.submit`; a set already compiled is ready at once);
    - while the compile runs the request waits in the queue (skipped like a request whose grammar is compiling;
      the others are scheduled and stream); a set that fails ends its request with finish reason ``error``;
    - ``get_grammar_bitmask``, which the engine calls while the model runs: the rows of the constrained requests
      that sample this step, filled in one native call and appended to the structured-output bitmask that the model
      runner applies with xgrammar's kernel.

    Use it with ``--scheduler-cls libtrie.vllm.TrieScheduler`` (or ``LLM(..., scheduler_cls=TrieScheduler)``);
    the package's logits processor stays registered for admission checks. Needs synchronous scheduling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if getattr(self.scheduler_config, "async_scheduling", False):
            raise ValueError("libtrie.vllm.TrieScheduler needs synchronous scheduling: pass --no-async-scheduling "
                             "(async_scheduling=False)")
        self.trie_settings = Settings.from_env()
        self.trie_n_vocab = int(self.vllm_config.model_config.get_vocab_size())
        self.trie_words = bitmask_words(self.trie_n_vocab)
        self.trie_cache = shared_cache(self.vllm_config, self.trie_settings)
        self.trie_cache.vocab  # load the vocabulary now, at engine start, not while serving  # noqa: B018
        self._trie: Dict[str, _Pending] = {}

    def add_request(self, request: Any) -> None:
        params = request.sampling_params
        extra = (params.extra_args or {}) if params is not None else {}
        if EXTRA_KEY in extra and request.request_id not in self._trie:
            try:
                if request.use_structured_output:
                    raise ValueError(f'extra_args["{EXTRA_KEY}"] cannot be combined with structured outputs')
                future = self.trie_cache.submit(parse_spec(extra[EXTRA_KEY], self.trie_settings))
            except ValueError as e:  # admission checked it already, unless the request came another way
                future = Future()
                future.set_exception(e)
            self._trie[request.request_id] = _Pending(future)
        super().add_request(request)

    def _handle_blocked_waiting_request(self, request: Any) -> bool:
        pending = self._trie.get(request.request_id)
        if pending is not None and pending.row is None:
            if not pending.future.done():
                return False  # compiling: skip it this step, schedule the others
            try:
                automaton = _fits(pending.future.result(), self.trie_n_vocab)
            except Exception as e:
                log.error("libtrie: the set of request %s cannot be compiled (%s); the request ends with an error",
                          request.request_id, e)
                self.grammar_compile_error_reqs.add(request.request_id)
                return False
            pending.row = _Row(automaton, request.output_token_ids,
                               _stop_ids(request.sampling_params, automaton, self.trie_n_vocab))
        ok: bool = super()._handle_blocked_waiting_request(request)
        return ok

    def _free_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._trie.pop(request.request_id, None)
        return super()._free_request(request, *args, **kwargs)

    def get_grammar_bitmask(self, scheduler_output: Any) -> Any:
        out = super().get_grammar_bitmask(scheduler_output)
        if not self._trie:
            return out
        ids, rows = [], []
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens or {}
        for req_id in scheduler_output.num_scheduled_tokens:
            pending = self._trie.get(req_id)
            if pending is None or pending.row is None:
                continue
            request = self.requests.get(req_id)
            if request is None or request.is_prefill_chunk:
                continue  # no token is sampled for a chunk of a prompt
            pending.row.catch_up(req_id)
            ids.append(req_id)
            rows.append(pending.row)
        if not ids:
            return out
        n_spec = [len(spec_tokens.get(i, ())) for i in ids]
        bitmask = np.zeros((len(ids), self.trie_words), dtype=np.int32)  # ids past a narrower vocabulary: 0
        fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
        for i, r in enumerate(rows):
            for t in r.extra():
                bitmask[i, t >> 5] |= _bit(t & 31)
        if any(n_spec):  # draft tokens: all-ones rows after each request's own, and none of its drafts accepted
            at = np.cumsum([0] + [1 + n for n in n_spec[:-1]])
            full = np.full((len(ids) + sum(n_spec), self.trie_words), -1, dtype=np.int32)
            full[at] = bitmask
            bitmask = full
        if out is None:
            return GrammarOutput(ids, bitmask, [0] * len(ids))
        drafts = out.num_acceptable_drafts
        return GrammarOutput(list(out.structured_output_request_ids) + ids,
                             np.concatenate([out.grammar_bitmask, bitmask]),
                             None if drafts is None else list(drafts) + [0] * len(ids))


def _apply_sparse(logits: torch.Tensor, indices: Sequence[int], allowed: Sequence[memoryview],
                  extra: Sequence[Any]) -> None:
    """Mask rows by keeping only their allowed entries: save them, fill the rows with -inf, put them back. Costs
    O(rows x V) for the fill (a memset) plus O(allowed), against a bit test per logit for a bitmask kernel: the
    faster path when few tokens are allowed, which is the usual case deep in a trie."""
    parts, counts = [], []
    for v, e in zip(allowed, extra):  # per row: its allowed ids, then its extra stop ids
        parts.append(np.frombuffer(v, dtype=np.int32))
        if e:
            parts.append(np.fromiter(e, dtype=np.int32, count=len(e)))
        counts.append(len(v) + len(e))
    cols = np.concatenate(parts)
    row_ids = np.repeat(np.asarray(indices, dtype=np.int64), counts)
    device = logits.device
    r = torch.from_numpy(row_ids).to(device, non_blocking=True)
    c = torch.from_numpy(cols.astype(np.int64)).to(device, non_blocking=True)
    keep = logits[r, c]
    start = 0  # fill runs of consecutive rows as slices (a plain memset; index_fill_ is several times slower)
    for k in range(1, len(indices) + 1):
        if k == len(indices) or indices[k] != indices[k - 1] + 1:
            logits[indices[start]:indices[k - 1] + 1].fill_(float("-inf"))
            start = k
    logits[r, c] = keep


def _bit(i: int) -> int:
    """Bit ``i`` of an int32 word as a Python int that fits int32 (bit 31 is negative)."""
    return -(1 << 31) if i == 31 else 1 << i
