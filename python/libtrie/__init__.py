"""libtrie for Python: force a language model to output exactly one string of a large finite set.

Compile the set once against a tokenizer vocabulary; at each decoding step ask for the allowed tokens (a bitmask in
the layout XGrammar, LLGuidance, vLLM and SGLang share: ``ceil(n_vocab / 32)`` 32-bit words per row, token ``t`` is
bit ``t % 32`` of word ``t // 32``, 1 = allowed) and advance a state, which is a plain ``int``::

    import libtrie
    vocab = libtrie.Vocab.from_gguf("ggml-vocab-qwen2.gguf")        # or from_tokenizer_json / from_tokens
    tools = libtrie.compile(vocab, ["calendar.create_event", "maps.get_route"])
    state = tools.start()
    mask = torch.zeros(tools.mask_words, dtype=torch.int32)          # or numpy, array('i'), any writable buffer
    tools.fill_bitmask(state, mask)                                  # or tools.allowed(state): the ids
    state = tools.advance(state, token)                              # libtrie.FINISHED after an end-of-generation id

A batch of sequences that follow different sets fills one ``[B, ceil(V / 32)]`` int32 tensor in one call with
:func:`fill_bitmask_rows`. Serving: :mod:`libtrie.sets` (a request's set: checked, confined, compiled once and
cached, by libtrie's native front end), :mod:`libtrie.masks` (applying masks to logits) and :mod:`libtrie.vllm` (the
vLLM processor and scheduler; the only module that needs vLLM).

This package is a thin layer over the C ABI of ``libtrie.so`` (``include/trie.h``) through ctypes: the same library C,
C++, Go and Swift use, one wheel for every CPython version, no copy where a view will do, and the GIL released
during every native call (ctypes does it for ``CDLL`` functions), so batch fills of several threads run in
parallel. Errors raise :class:`TrieError` with the C status code and the library's message. Handles are freed when
the objects are collected, or at once with :meth:`close` / a ``with`` block. Objects may be shared across threads.
"""

from __future__ import annotations

import ctypes
import enum
import os
import threading
import weakref
from array import array
from itertools import accumulate
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from . import _native
from ._native import declared, i32p, library, sizep, u8p, vp

# Declared on first use, so that an older library without it still loads (the lazy load came with format v2).
_LAZY_LOAD: _native.Signatures = {
    "trie_automaton_load_lazy": ([vp, ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
}

# Members that carry values (libtrie 0.3): declared on first use, so that an older library still loads.
_u64p = ctypes.POINTER(ctypes.c_uint64)
_VALUES: _native.Signatures = {
    "trie_compile_with_values": ([vp, ctypes.POINTER(u8p), sizep, _u64p, ctypes.c_size_t,
                                  ctypes.POINTER(_native.Options), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_compile_template_with_values": ([vp, ctypes.POINTER(u8p), sizep, _u64p, ctypes.c_size_t,
                                           ctypes.POINTER(_native.Template), ctypes.POINTER(_native.Options),
                                           ctypes.POINTER(vp)], ctypes.c_int),
    "trie_automaton_with_values": ([vp, ctypes.POINTER(u8p), sizep, _u64p, ctypes.c_size_t, ctypes.POINTER(u8p),
                                    sizep, ctypes.c_size_t, ctypes.POINTER(_native.Options), ctypes.POINTER(vp)],
                                   ctypes.c_int),
    "trie_automaton_has_values": ([vp], ctypes.c_bool),
    "trie_member_value": ([vp, ctypes.c_uint32, _u64p, ctypes.POINTER(ctypes.c_bool)], ctypes.c_int),
    "trie_possible_values": ([vp, ctypes.c_uint32, _u64p, ctypes.c_size_t, sizep], ctypes.c_int),
}


def _values_lib() -> ctypes.CDLL:
    return declared(_VALUES, "member values")


def _value_array(values: Iterable[int], n: int, what: str) -> Any:
    """``values`` as a C array of ``n`` ``uint64_t`` (one per string of ``what``); ``ValueError`` otherwise."""
    vals = list(values)
    if len(vals) != n:
        raise ValueError(f"{len(vals)} values for {n} {what}: give one value per string, in the same order")
    for v in vals:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**64:
            raise ValueError(f"values must be integers in 0..2**64-1, not {v!r}")
    return (ctypes.c_uint64 * max(n, 1))(*vals)


__all__ = [
    "FINISHED", "Status", "TrieError", "Vocab", "Automaton", "Forced", "Crossing", "compile", "compile_tokens", "fill_bitmask_rows",
    "bitmask_words", "library", "version", "TokenKind", "TOKEN_NORMAL", "TOKEN_UNKNOWN", "TOKEN_CONTROL",
    "TOKEN_USER_DEFINED", "TOKEN_UNUSED", "TOKEN_BYTE", "recognize", "Recognized", "NotASet",
]

#: The state after an end-of-generation token (``TRIE_STATE_FINISHED``): only end-of-generation ids are allowed.
FINISHED = 0xFFFFFFFF



class TokenKind(enum.IntEnum):
    """Token kinds for :meth:`Vocab.from_tokens`: the ``TRIE_TOKEN_*`` numbers of ``include/trie.h`` (GGUF's
    ``tokenizer.ggml.token_type``; the tests check them against the header). Normal, user-defined and byte tokens
    are text and can spell members; the others never appear in a mask (but end-of-generation ids do)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


#: The :class:`TokenKind` numbers under their C names.
TOKEN_NORMAL = TokenKind.NORMAL
TOKEN_UNKNOWN = TokenKind.UNKNOWN
TOKEN_CONTROL = TokenKind.CONTROL
TOKEN_USER_DEFINED = TokenKind.USER_DEFINED
TOKEN_UNUSED = TokenKind.UNUSED
TOKEN_BYTE = TokenKind.BYTE

StrOrBytes = Union[str, bytes]
#: The ``array`` type code of ``size_t`` (and of pointers, which have its size on every platform libtrie builds for).
_SIZE_T = next(c for c in "LQI" if array(c).itemsize == ctypes.sizeof(ctypes.c_size_t))
_H = TypeVar("_H", bound="_Handle")
PathLike = Union[str, "os.PathLike[str]"]


class Status(enum.IntEnum):
    """``trie_status`` (``include/trie.h``): the code of every failure (0 is success)."""

    # BEGIN GENERATED Status (scripts/gen-status.py from include/trie.h; do not edit)
    OK = 0
    NULL_ARGUMENT = 1
    INVALID_ARGUMENT = 2
    IO = 3
    UNSUPPORTED_VOCABULARY = 4
    UNREACHABLE_STRING = 5
    BUFFER_TOO_SMALL = 6
    TOKEN_REJECTED = 7
    PANIC = 8
    MALFORMED_FILE = 9
    EMPTY_SET = 10
    LIMIT_EXCEEDED = 11
    INVALID_STATE = 12
    VOCAB_MISMATCH = 13
    # END GENERATED Status


class TrieError(RuntimeError):
    """A libtrie call failed. ``status`` is the :class:`Status` (an ``int`` for an unknown code) and the message is
    the library's ``trie_last_error()``, which names the argument, state, token or limit at fault."""

    def __init__(self, status: int, message: str) -> None:
        try:
            self.status: Union[Status, int] = Status(status)
            name = self.status.name
        except ValueError:
            self.status, name = status, "UNKNOWN"
        super().__init__(f"libtrie {name} ({status}): {message}")
        self.message = message

    def __reduce__(self) -> Tuple[Any, Tuple[int, str]]:
        """Pickled with its status and message (vLLM carries a request's error across processes)."""
        return type(self), (int(self.status), self.message)


def _check(status: int) -> None:
    if status != 0:
        msg = library().trie_last_error()
        raise TrieError(status, msg.decode("utf-8", "replace") if msg else "")


def version() -> str:
    """The version of the loaded library (``trie_version()``)."""
    v: bytes = library().trie_version()
    return v.decode()


def bitmask_words(n_vocab: int) -> int:
    """The number of 32-bit words of one bitmask row for a vocabulary of ``n_vocab`` ids."""
    return (n_vocab + 31) // 32


def _words(out: Any, what: str = "bitmask") -> Tuple[int, int, int]:
    """(address, length in words, row length in words: 0 for a flat buffer) of a writable buffer of 32-bit integers: a CPU torch tensor
    (int32 or uint32, contiguous), or anything with the buffer protocol (numpy array, ``array('i')`` or
    ``array('I')``, ctypes array, ``bytearray`` of a multiple of 4 bytes). The row length is the last dimension."""
    if type(out).__module__.split(".")[0] == "torch":
        import torch  # type: ignore[import-not-found,unused-ignore]

        if out.dtype not in (torch.int32, getattr(torch, "uint32", torch.int32)):
            raise TypeError(f"{what} must be an int32 tensor, not {out.dtype}")
        if out.device.type != "cpu":
            raise ValueError(f"{what} must be on the CPU (fill a CPU tensor, then copy it to {out.device})")
        if not out.is_contiguous():
            raise ValueError(f"{what} must be contiguous")
        row = int(out.shape[-1]) if out.dim() >= 2 else 0
        return int(out.data_ptr()), int(out.numel()), row
    try:
        mv = memoryview(out)
    except TypeError:
        raise TypeError(f"{what} must be a torch tensor or a buffer of 32-bit integers, not {type(out).__name__}")
    if mv.readonly:
        raise ValueError(f"{what} is read-only")
    if not mv.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    if mv.itemsize == 1 and mv.format in ("B", "b", "c"):
        if mv.nbytes % 4:
            raise ValueError(f"{what} has {mv.nbytes} bytes, not a whole number of 32-bit words")
        n, row = mv.nbytes // 4, 0
    elif mv.itemsize == 4 and mv.format.lstrip("<=@") in ("i", "I", "l", "L"):
        n = mv.nbytes // 4
        row = mv.shape[-1] if mv.shape is not None and mv.ndim >= 2 else 0
    else:
        raise TypeError(f"{what} must hold 32-bit integers (format {mv.format!r}, item size {mv.itemsize})")
    if n == 0:
        return 0, 0, 0
    return ctypes.addressof(ctypes.c_char.from_buffer(mv)), n, row


def _byte_strings(data: Sequence[bytes]) -> Tuple[Any, Any, Any]:
    """``(pointers, lengths, keep)`` for an array of byte strings of the C ABI: one buffer holds them all (keep
    ``keep`` alive during the call), pointers by offset, lengths and pointers built in ``array`` objects by C-level
    passes over chunks of the strings, so that a compile on a worker thread (a million strings: about 0.1 s here,
    not 0.7 s) holds the GIL for a few milliseconds at a time, not for the whole list."""
    joined = b"".join(data) or b"\0"
    base = ctypes.cast(ctypes.c_char_p(joined), ctypes.c_void_p).value or 0  # the bytes' own buffer, no copy
    lens, ptrs = array(_SIZE_T), array(_SIZE_T)
    for i in range(0, len(data), 1 << 16):
        lens.extend(map(len, data[i : i + (1 << 16)]))
        ptrs.extend(accumulate(lens[i : i + (1 << 16)], initial=base))
        base = ptrs.pop()
    if not data:
        lens.append(0)
        ptrs.append(base)

    def address(a: "array[int]") -> int:
        return a.buffer_info()[0]

    return ctypes.cast(address(ptrs), ctypes.POINTER(u8p)), ctypes.cast(address(lens), sizep), (joined, lens, ptrs)


class _Owner:
    """The owner of one native handle: the handle, its lock, the count of native calls in flight and whether it is
    closing. Released once, by :meth:`close` of its :class:`_Handle`, or when that object is collected: through a
    ``weakref.finalize`` on the object, which runs after every weak reference to it is dead. So a weakly-referenced
    object (a :class:`~libtrie.sets.SetCache` entry) is never handed out while its handle is being released: a
    ``__del__`` would run while weak references still return the object, and release the handle under it."""

    __slots__ = ("h", "guard", "users", "closing", "release")

    def __init__(self, handle: vp, release: Callable[[vp], None]) -> None:
        self.h = handle
        self.guard = threading.Lock()
        self.users = 0
        self.closing = False
        self.release = release

    def close(self) -> None:
        with self.guard:
            if self.closing:
                return
            self.closing = True
            if self.users:
                return
            h, self.h = self.h, vp(0)
        if h.value:
            self.release(h)


class _Handle:
    """A native handle, released once: by :meth:`close`, at the end of a ``with`` block, or when collected.

    Every native call on the handle runs between :meth:`_enter` and :meth:`_exit` (``with self._use() as h``,
    or :meth:`_call`): ctypes releases the GIL during the call, so another thread may :meth:`close` the object
    meanwhile; the handle is then released by the last call in flight, never under it. The handle belongs to an
    inner :class:`_Owner`, never finalized through this object (no ``__del__``)."""

    __slots__ = ("_owner", "__weakref__")
    _owner: _Owner
    _kind = "object"

    def _set(self, handle: vp) -> None:
        self._owner = owner = _Owner(handle, self._release)
        if handle.value:
            weakref.finalize(self, owner.close).atexit = False  # the process's exit frees the memory anyway

    @property
    def _h(self) -> vp:
        return self._owner.h

    @property
    def _guard(self) -> threading.Lock:
        return self._owner.guard

    @property
    def _users(self) -> int:
        return self._owner.users

    @property
    def _closing(self) -> bool:
        return self._owner.closing

    def _enter(self) -> vp:
        """The handle, counted as in use until :meth:`_exit`; ``ValueError`` once closed."""
        o = self._owner
        with o.guard:
            if o.closing or not o.h.value:
                raise ValueError(f"this {self._kind} was closed")
            o.users += 1
            return o.h

    def _exit(self) -> None:
        o = self._owner
        with o.guard:
            o.users -= 1
            if o.users or not o.closing:
                return
            h, o.h = o.h, vp(0)
        if h.value:
            o.release(h)

    def _use(self) -> "_Use":
        return _Use(self)

    def _call(self, fn: Any, *args: Any) -> Any:
        """``fn(handle, *args)`` with the handle held in use."""
        h = self._enter()
        try:
            return fn(h, *args)
        finally:
            self._exit()

    def _live(self) -> vp:
        """The handle for a check only (no native call follows): ``ValueError`` once closed."""
        o = self._owner
        if o.closing or not o.h.value:
            raise ValueError(f"this {self._kind} was closed")
        return o.h

    @staticmethod
    def _release(handle: vp) -> None:
        """Frees the native handle (a static method: the finalizer must not hold the object)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the native handle now, or, while other threads are inside native calls on it, when the last
        of them returns. Later calls raise ``ValueError``."""
        self._owner.close()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Use:
    """``with obj._use() as handle``: the handle held in use for the block."""

    __slots__ = ("_o",)

    def __init__(self, o: _Handle) -> None:
        self._o = o

    def __enter__(self) -> vp:
        return self._o._enter()

    def __exit__(self, *exc: object) -> None:
        self._o._exit()


class Vocab(_Handle):
    """A tokenizer vocabulary (``trie_vocab``): the exact bytes of every token id, their kinds and the
    end-of-generation ids. Immutable; share it between threads and compiled sets."""

    __slots__ = ()
    _kind = "Vocab"

    def __init__(self, _handle: int) -> None:
        """Internal: use :meth:`from_gguf`, :meth:`from_tokenizer_json` or :meth:`from_tokens`."""
        self._set(vp(_handle))

    @classmethod
    def from_gguf(cls, path: PathLike) -> "Vocab":
        """The vocabulary of a GGUF file (a model or a vocab-only file; only the metadata is read)."""
        out = vp()
        _check(library().trie_vocab_from_gguf(os.fsencode(path), ctypes.byref(out)))
        return cls(out.value or 0)

    @classmethod
    def from_tokenizer_json(cls, path: PathLike, eog_ids: Optional[Iterable[int]] = None,
                            n_vocab: int = 0) -> "Vocab":
        """A Hugging Face ``tokenizer.json``. ``eog_ids``: the end-of-generation ids (e.g. ``eos_token_id`` of
        ``generation_config.json``; ``None`` infers them from the special tokens' names). ``n_vocab``: the model's
        logits width when it is larger than the tokenizer (padding, e.g. 151,936 for Qwen2); 0 for the largest
        id + 1."""
        out = vp()
        if eog_ids is None:
            ids, n = None, 0
        else:
            lst = [int(i) for i in eog_ids]
            ids, n = (ctypes.c_int32 * max(len(lst), 1))(*lst), len(lst)
        _check(library().trie_vocab_from_tokenizer_json_ex(os.fsencode(path), ids, n, n_vocab, ctypes.byref(out)))
        return cls(out.value or 0)

    @classmethod
    def from_tokens(cls, tokens: Sequence[Optional[StrOrBytes]], eog_ids: Iterable[int] = (),
                    kinds: Optional[Sequence[int]] = None, n_vocab: int = 0) -> "Vocab":
        """A vocabulary from the bytes of every token id ``0..len(tokens)``: ``bytes`` as they are, ``str`` as
        UTF-8, ``None`` for an id with no text (padding). ``kinds[i]`` is one of ``TOKEN_*`` (default: all
        normal); only normal tokens spell members. ``n_vocab``: the logits width, at least ``len(tokens)``."""
        data = [b"" if t is None else (t.encode("utf-8") if isinstance(t, str) else bytes(t)) for t in tokens]
        n = len(data)
        ptrs, lens, _keep = _byte_strings(data)
        kind_arr = None
        if kinds is not None:
            if len(kinds) != n:
                raise ValueError(f"kinds has {len(kinds)} entries for {n} tokens")
            kind_arr = (ctypes.c_uint32 * max(n, 1))(*kinds)
        eog = [int(i) for i in eog_ids]
        eog_arr = (ctypes.c_int32 * max(len(eog), 1))(*eog)
        out = vp()
        _check(library().trie_vocab_new_ex(ptrs, lens, kind_arr, n, eog_arr,
                                           len(eog), n_vocab, ctypes.byref(out)))
        return cls(out.value or 0)

    @classmethod
    def load(cls, path: PathLike) -> "Vocab":
        """A vocabulary saved by :meth:`save`: memory-mapped (pages shared between processes) and checked, not
        rebuilt: milliseconds where a tokenizer.json takes a second. Raises :class:`TrieError` ``IO`` or
        ``MALFORMED_FILE`` (truncated, corrupt, other format version)."""
        out = vp()
        _check(library().trie_vocab_load(os.fsencode(path), ctypes.byref(out)))
        return cls(out.value or 0)

    def save(self, path: PathLike) -> None:
        """Save the vocabulary with its alignment index (written atomically) for :meth:`load`."""
        _check(self._call(library().trie_vocab_save, os.fsencode(path)))

    @property
    def fingerprint(self) -> str:
        """A hex digest of the mask width, token bytes, kinds and end-of-generation ids: equal fingerprints mean
        interchangeable vocabularies (a key for caches of compiled sets)."""
        buf = ctypes.create_string_buffer(16)
        _check(self._call(library().trie_vocab_fingerprint, buf))
        return buf.raw.hex()

    @property
    def n_vocab(self) -> int:
        """The number of token ids, which is the mask width in bits."""
        return int(self._call(library().trie_vocab_n_tokens))

    def __len__(self) -> int:
        return self.n_vocab

    @property
    def memory_usage(self) -> int:
        """Heap bytes held by the vocabulary and its token index."""
        return int(self._call(library().trie_vocab_memory_usage))

    def token_bytes(self, token: int) -> bytes:
        """The bytes token ``token`` stands for (empty for padding and for control tokens without text)."""
        p, n = u8p(), ctypes.c_size_t()
        with self._use() as h:  # a view into the vocabulary: copied while it is held
            _check(library().trie_vocab_token(h, token, ctypes.byref(p), ctypes.byref(n)))
            return ctypes.string_at(p, n.value) if n.value else b""

    @property
    def eog_ids(self) -> Tuple[int, ...]:
        """The end-of-generation ids, ascending."""
        p, n = i32p(), ctypes.c_size_t()
        with self._use() as h:
            _check(library().trie_vocab_eog_ids(h, ctypes.byref(p), ctypes.byref(n)))
            return tuple(p[: n.value])

    @staticmethod
    def _release(handle: vp) -> None:
        """Sets compiled from this vocabulary keep their own reference."""
        library().trie_vocab_free(handle)


class Crossing(NamedTuple):
    """A token that finishes a segment and goes on past it: its last ``overflow`` bytes belong to what follows."""

    token: int
    member: int
    overflow: int


class Forced(NamedTuple):
    """The rest of the only member left below a state: its bytes and a token path spelling them (no EOG)."""

    bytes: bytes
    tokens: Tuple[int, ...]


def _options(drop_unreachable: bool, max_states: Optional[int], max_bytes: Optional[int]) -> "_native.Options":
    """``trie_options`` for a compile; a bound of ``None`` is no bound."""
    opts = _native.Options()
    _check(library().trie_options_init(ctypes.byref(opts)))
    opts.drop_unreachable = drop_unreachable
    for name, bound in (("max_states", max_states), ("max_bytes", max_bytes)):
        if bound is not None:
            if bound <= 0:
                raise ValueError(f"{name} must be positive, not {bound}")
            setattr(opts, name, min(bound, 2**64 - 1))
    return opts


class Automaton(_Handle):
    """A set of strings compiled against a vocabulary (``trie_automaton``). Immutable and thread-safe; the decoding
    state of each sequence is a plain ``int`` (start: :meth:`start`; end: :data:`FINISHED`)."""

    __slots__ = ("vocab", "n_vocab", "mask_words", "_advance", "_mask")
    _kind = "Automaton"

    def __init__(self, vocab: Vocab, strings: Iterable[StrOrBytes], drop_unreachable: bool = False,
                 max_states: Optional[int] = None, max_bytes: Optional[int] = None, *,
                 values: Optional[Iterable[int]] = None) -> None:
        """Compile ``strings`` (``str`` as UTF-8, or ``bytes``; duplicates and prefixes allowed) against ``vocab``.
        ``max_states`` bounds the states (checked on the set's trie before any alignment work) and ``max_bytes``
        the memory compiling may allocate; ``None``: no bound. Raises :class:`TrieError`: ``EMPTY_SET``;
        ``UNREACHABLE_STRING`` naming the strings no token sequence can spell (or pass ``drop_unreachable=True``
        and read :attr:`dropped`); ``LIMIT_EXCEEDED`` (a bound or a 32-bit limit), never an abort.

        ``values``: one integer (``0 <= v < 2**64``) per string, carried by its member (the first copy's value for
        a duplicate; ``trie_compile_with_values``): see :meth:`member_value`, :meth:`possible_values`; kept by
        :meth:`with_changes` (which then needs ``values`` for the added strings) and by :meth:`save`."""
        self._set(vp(0))
        data = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in strings]
        n = len(data)
        ptrs, lens, _keep = _byte_strings(data)
        opts = _options(drop_unreachable, max_states, max_bytes)
        out = vp()
        if values is None:
            _check(vocab._call(library().trie_compile, ptrs, lens, n, ctypes.byref(opts), ctypes.byref(out)))
        else:
            vals = _value_array(values, n, "strings")
            _check(vocab._call(_values_lib().trie_compile_with_values, ptrs, lens, vals, n, ctypes.byref(opts),
                               ctypes.byref(out)))
        self._adopt(vocab, out)

    @classmethod
    def load(cls, vocab: Vocab, path: PathLike, *, lazy: bool = False) -> "Automaton":
        """An automaton saved by :meth:`save`, for use with ``vocab``: memory-mapped (processes loading the same
        file share its pages) and checked, not compiled. Raises :class:`TrieError` ``IO``, ``MALFORMED_FILE``
        (truncated, corrupt, another format version) or ``VOCAB_MISMATCH`` (compiled against another
        vocabulary). ``lazy=True`` (``trie_automaton_load_lazy``): milliseconds whatever the file's size, the
        header, sizes and block hashes checked at load and each state's part of the file on its first use, so a
        damaged part is noticed then (``MALFORMED_FILE`` from that state), never a crash."""
        out = vp()
        if lazy:
            lib = declared(_LAZY_LOAD, "Automaton.load(lazy=True)")
            _check(vocab._call(lib.trie_automaton_load_lazy, os.fsencode(path), ctypes.byref(out)))
        else:
            _check(vocab._call(library().trie_automaton_load, os.fsencode(path), ctypes.byref(out)))
        self = cls.__new__(cls)
        self._adopt(vocab, out)
        return self

    def with_changes(self, add: Iterable[StrOrBytes] = (), remove: Iterable[StrOrBytes] = (), *,
                     drop_unreachable: bool = False, max_states: Optional[int] = None,
                     max_bytes: Optional[int] = None, values: Optional[Iterable[int]] = None) -> "Automaton":
        """A new automaton for this set with ``add`` added and ``remove`` removed (``trie_automaton_with``): the
        same as compiling the resulting set, built from this one (rows no change touches are copied). This
        automaton is unchanged: sequences decoding on it go on. The resulting set is ``(members - remove) + add``:
        removing a non-member does nothing, a string in both stays, duplicates merge; :attr:`dropped` of the
        result holds positions in ``add``. Raises :class:`TrieError` like :class:`Automaton` (``EMPTY_SET`` when
        nothing remains, ``UNREACHABLE_STRING`` for an added string, ``LIMIT_EXCEEDED``).

        ``values``: for an automaton whose members carry values (and only for one: ``INVALID_ARGUMENT`` either
        way), one per added string (``trie_automaton_with_values``). A kept member keeps its value; an added string
        takes its first copy's value, also when it was a member already (re-adding a member changes its value)."""
        adds = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in add]
        removes = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in remove]
        a_ptrs, a_lens, _keep_a = _byte_strings(adds)
        r_ptrs, r_lens, _keep_r = _byte_strings(removes)
        opts = _options(drop_unreachable, max_states, max_bytes)
        out = vp()
        if values is None:
            _check(self._call(library().trie_automaton_with, a_ptrs, a_lens, len(adds), r_ptrs, r_lens,
                              len(removes), ctypes.byref(opts), ctypes.byref(out)))
        else:
            vals = _value_array(values, len(adds), "added strings")
            _check(self._call(_values_lib().trie_automaton_with_values, a_ptrs, a_lens, vals, len(adds), r_ptrs,
                              r_lens, len(removes), ctypes.byref(opts), ctypes.byref(out)))
        result = Automaton.__new__(Automaton)
        result._adopt(self.vocab, out)
        return result

    def save(self, path: PathLike) -> None:
        """Save the compiled set (written atomically: a temporary file renamed into place) for :meth:`load`."""
        _check(self._call(library().trie_automaton_save, os.fsencode(path)))

    def _adopt(self, vocab: Vocab, out: vp) -> None:
        lib = library()
        self._set(out)
        #: The vocabulary this set was compiled against.
        self.vocab = vocab
        #: The mask width in bits (the vocabulary's size).
        self.n_vocab: int = int(lib.trie_automaton_n_vocab(out))
        #: 32-bit words per bitmask row: ``ceil(n_vocab / 32)``.
        self.mask_words: int = int(lib.trie_automaton_mask_words(out))
        self._advance = lib.trie_advance
        self._mask = lib.trie_mask

    # ---- facts -------------------------------------------------------------------------------------------------

    @property
    def n_states(self) -> int:
        """The number of states (valid states: ``0..n_states`` and :data:`FINISHED`)."""
        return int(self._call(library().trie_automaton_n_states))

    @property
    def n_members(self) -> int:
        """The number of distinct strings the automaton can produce."""
        return int(self._call(library().trie_automaton_n_members))

    @property
    def memory_usage(self) -> int:
        """Heap bytes held by the automaton, not counting the shared vocabulary."""
        return int(self._call(library().trie_automaton_memory_usage))

    @property
    def dropped(self) -> Tuple[int, ...]:
        """Input positions of the strings dropped as unreachable (with ``drop_unreachable=True``), ascending."""
        p, n = sizep(), ctypes.c_size_t()
        with self._use() as h:
            _check(library().trie_automaton_dropped(h, ctypes.byref(p), ctypes.byref(n)))
            return tuple(p[: n.value])

    # ---- decoding ----------------------------------------------------------------------------------------------

    def start(self) -> int:
        """The start state (0)."""
        return int(self._call(library().trie_start))

    def advance(self, state: int, token: int) -> int:
        """The state after ``token`` (:data:`FINISHED` after an end-of-generation id). Raises :class:`TrieError`
        ``TOKEN_REJECTED`` for a token the state does not allow, ``INVALID_STATE`` / ``INVALID_ARGUMENT`` for a
        state or id that does not exist."""
        nxt = ctypes.c_uint32()
        _check(self._call(self._advance, state, token, ctypes.byref(nxt)))
        return nxt.value

    def advance_many(self, state: int, tokens: Iterable[int]) -> int:
        """:meth:`advance` over each token in turn."""
        nxt, adv = ctypes.c_uint32(), self._advance
        ref = ctypes.byref(nxt)
        with self._use() as h:
            for t in tokens:
                _check(adv(h, state, t, ref))
                state = nxt.value
        return state

    def is_accepting(self, state: int) -> bool:
        """Whether a member may end in ``state`` (end-of-generation ids are allowed there); true for FINISHED."""
        return bool(self._call(library().trie_is_accepting, state))

    def allowed(self, state: int) -> memoryview:
        """The allowed token ids of ``state``, ascending, as a read-only ``int32`` memoryview of a fresh copy
        (``numpy.frombuffer(view, numpy.int32)`` or ``view.tolist()``). Deep in a trie a state allows a handful of
        tokens: one native call fills a small buffer; larger lists take a second call."""
        lib = library()
        n = ctypes.c_size_t()
        buf = array("i", bytes(4 * 64))
        address = buf.buffer_info()[0]
        with self._use() as h:
            st = lib.trie_allowed(h, state, address, len(buf), ctypes.byref(n))
            if st == Status.BUFFER_TOO_SMALL:
                buf = array("i", bytes(4 * n.value))
                st = lib.trie_allowed(h, state, buf.buffer_info()[0], len(buf), ctypes.byref(n))
        _check(st)
        del buf[n.value:]
        return memoryview(buf).toreadonly()

    def fill_bitmask(self, state: int, out: Any) -> None:
        """Write the bitmask of ``state`` into ``out``: a CPU int32 torch tensor row, a numpy int32/uint32 array,
        an ``array('i')``, ... of at least :attr:`mask_words` words (every word is written; bits past the
        vocabulary are 0). Raises :class:`TrieError` ``BUFFER_TOO_SMALL`` (nothing written) when it is short."""
        address, n, _ = _words(out)
        _check(self._call(self._mask, state, address or None, n))

    def fill_bitmask_batch(self, states: Sequence[int], out: Any) -> None:
        """One row per state into ``out`` of shape ``[len(states), W]`` (``W >= mask_words``; a flat buffer is
        taken as rows of :attr:`mask_words`). Every state is checked before anything is written."""
        address, n, row = _words(out)
        st = (ctypes.c_uint32 * max(len(states), 1))(*states)
        _check(self._call(library().trie_mask_batch, st, len(states), address or None, n, row or self.mask_words))

    def new_bitmask(self, rows: Optional[int] = None) -> "array[int]":
        """A zeroed ``array('i')`` of :attr:`mask_words` words (times ``rows``): a dependency-free buffer."""
        return array("i", bytes(4 * self.mask_words * (rows or 1)))

    def forced(self, state: int) -> Optional[Forced]:
        """When exactly one member remains below ``state``: the rest of its bytes and a token path spelling them
        (lets an engine emit several tokens at once). ``None`` when several remain, or for FINISHED."""
        lib = library()
        nb, nt, is_forced = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_bool()
        with self._use() as h:
            st = lib.trie_forced(h, state, None, 0, ctypes.byref(nb), None, 0, ctypes.byref(nt),
                                 ctypes.byref(is_forced))
            if st not in (0, Status.BUFFER_TOO_SMALL):
                _check(st)
            if not is_forced.value:
                return None
            buf = (ctypes.c_uint8 * max(nb.value, 1))()
            toks = (ctypes.c_int32 * max(nt.value, 1))()
            _check(lib.trie_forced(h, state, buf, nb.value, ctypes.byref(nb), toks, nt.value, ctypes.byref(nt),
                                   ctypes.byref(is_forced)))
        return Forced(bytes(buf[: nb.value]), tuple(toks[: nt.value]))

    # ---- sets inside an output ---------------------------------------------------------------------------------

    @classmethod
    def compile_template(cls, vocab: Vocab, members: Iterable[StrOrBytes], *, prefix: StrOrBytes = b"",
                         suffix: StrOrBytes = b"", render: str = "raw", end: str = "eog", drop_unreachable: bool = False,
                         max_states: Optional[int] = None, max_bytes: Optional[int] = None,
                         values: Optional[Iterable[int]] = None,
                         compiled_dir: Optional["_Handle"] = None) -> "Automaton":
        """Compile ``members`` written inside a larger output: the language is exactly
        ``{prefix + render(m) + suffix}`` (each a *segment*), then end-of-generation (``end="eog"``) or handed over
        to what follows (``end="open"``: see :meth:`crossing`). ``render``: ``"raw"`` (the bytes), ``"json_string"``
        (a JSON string literal, escaped like ``json.dumps(m, ensure_ascii=False)``) or ``"json_text"`` (the member
        is the JSON text of one value, e.g. ``"42"``). Members are identified by their index in ``members`` (the
        first copy of a duplicate): see :meth:`member`. Raises :class:`TrieError` (``INVALID_ARGUMENT`` naming a
        member the rendering refuses, or with ``end="open"`` a segment that is a prefix of another; and the errors
        of :class:`Automaton`). ``values``: one per member, as for :class:`Automaton`. With ``compiled_dir`` (a
        :class:`libtrie.sets.CompiledDir`), the compiled set is mapped from that directory's file when another
        process compiled it, and saved there otherwise (not with ``values``: ``ValueError``)."""
        renders = {"raw": 0, "json_string": 1, "json_text": 2}
        ends = {"eog": 0, "open": 1}
        if render not in renders:
            raise ValueError(f"render must be one of {sorted(renders)}, not {render!r}")
        if end not in ends:
            raise ValueError(f"end must be one of {sorted(ends)}, not {end!r}")
        data = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in members]
        ptrs, lens, _keep = _byte_strings(data)
        lib = library()
        t = _native.Template()
        _check(lib.trie_template_init(ctypes.byref(t)))
        pre = prefix.encode("utf-8") if isinstance(prefix, str) else bytes(prefix)
        suf = suffix.encode("utf-8") if isinstance(suffix, str) else bytes(suffix)
        pre_buf = (ctypes.c_uint8 * max(len(pre), 1)).from_buffer_copy(pre or b"\0")
        suf_buf = (ctypes.c_uint8 * max(len(suf), 1)).from_buffer_copy(suf or b"\0")
        t.prefix, t.prefix_len = ctypes.cast(pre_buf, u8p), len(pre)
        t.suffix, t.suffix_len = ctypes.cast(suf_buf, u8p), len(suf)
        t.render, t.end = renders[render], ends[end]
        opts = _options(drop_unreachable, max_states, max_bytes)
        out = vp()
        if values is not None and compiled_dir is not None:
            raise ValueError("compile_template: values and compiled_dir together are not supported (a shared "
                             "compiled file carries no values yet)")
        if values is not None:
            vals = _value_array(values, len(data), "members")
            _check(vocab._call(_values_lib().trie_compile_template_with_values, ptrs, lens, vals, len(data),
                               ctypes.byref(t), ctypes.byref(opts), ctypes.byref(out)))
        elif compiled_dir is not None:
            with compiled_dir._use() as d:
                _check(vocab._call(lambda v: lib.trie_compiled_dir_compile_template(
                    d, v, ptrs, lens, len(data), ctypes.byref(t), ctypes.byref(opts), ctypes.byref(out), None)))
        else:
            _check(vocab._call(lib.trie_compile_template, ptrs, lens, len(data), ctypes.byref(t),
                               ctypes.byref(opts), ctypes.byref(out)))
        self = cls.__new__(cls)
        self._adopt(vocab, out)
        return self

    @property
    def is_open(self) -> bool:
        """Whether segments are handed over at their end (compiled with ``end="open"``)."""
        return bool(self._call(library().trie_automaton_is_open))

    def member(self, state: int) -> Optional[int]:
        """The member whose segment is complete in ``state`` (its index in the input of :meth:`compile_template`;
        its rank in byte order for a plain set), or ``None``."""
        m = ctypes.c_size_t()
        _check(self._call(library().trie_member, state, ctypes.byref(m)))
        return None if m.value == ctypes.c_size_t(-1).value else m.value

    def possible_members(self, state: int) -> Tuple[int, ...]:
        """The members still possible in ``state`` (ids as :meth:`member`), in byte order of their segments."""
        lib, n = library(), ctypes.c_size_t()
        with self._use() as h:
            st = lib.trie_possible_members(h, state, None, 0, ctypes.byref(n))
            if st != Status.BUFFER_TOO_SMALL:
                _check(st)
            buf = (ctypes.c_size_t * max(n.value, 1))()
            _check(lib.trie_possible_members(h, state, buf, n.value, ctypes.byref(n)))
        return tuple(buf[: n.value])

    @property
    def has_values(self) -> bool:
        """Whether the members carry values (compiled with ``values=``)."""
        return bool(self._call(_values_lib().trie_automaton_has_values))

    def member_value(self, state: int) -> Optional[int]:
        """The value of the member whose segment is complete in ``state`` (where :meth:`member` names it), or
        ``None`` (no member complete there, or an automaton without values)."""
        value, found = ctypes.c_uint64(), ctypes.c_bool()
        _check(self._call(_values_lib().trie_member_value, state, ctypes.byref(value), ctypes.byref(found)))
        return value.value if found.value else None

    def possible_values(self, state: int) -> Tuple[int, ...]:
        """The values of the members still possible in ``state``, in the order of :meth:`possible_members` (empty
        without values)."""
        lib, n = _values_lib(), ctypes.c_size_t()
        with self._use() as h:
            st = lib.trie_possible_values(h, state, None, 0, ctypes.byref(n))
            if st != Status.BUFFER_TOO_SMALL:
                _check(st)
            buf = (ctypes.c_uint64 * max(n.value, 1))()
            _check(lib.trie_possible_values(h, state, buf, n.value, ctypes.byref(n)))
        return tuple(buf[: n.value])

    def crossing(self, state: int, keep: Optional[Callable[[int, bytes], bool]] = None) -> List[Crossing]:
        """Tokens that finish a segment below ``state`` and go on past its end (open automata): the engine offers
        one when the constraint that follows accepts its last ``overflow`` bytes, then hands over (see
        ``trie_crossing``). ``keep(member, overflow_prefix)`` prunes them by what may follow (called once per
        prefix; false skips every token extending it). Ascending by token."""
        lib, n = library(), ctypes.c_size_t()
        fn = _native.OVERFLOW_FN(0)
        if keep is not None:
            def call(_user: Any, member: int, overflow: Any, length: int) -> bool:
                try:
                    return bool(keep(member, ctypes.string_at(overflow, length)))
                except Exception:  # never unwind into C: a failing filter keeps nothing
                    return False
            fn = _native.OVERFLOW_FN(call)
        with self._use() as h:
            st = lib.trie_crossing(h, state, fn, None, None, None, None, 0, ctypes.byref(n))
            if st != Status.BUFFER_TOO_SMALL:
                _check(st)
            k = max(n.value, 1)
            toks, over, mem = (ctypes.c_int32 * k)(), (ctypes.c_uint32 * k)(), (ctypes.c_size_t * k)()
            _check(lib.trie_crossing(h, state, fn, None, toks, over, mem, n.value, ctypes.byref(n)))
        return [Crossing(toks[i], mem[i], over[i]) for i in range(n.value)]

    def cross(self, state: int, token: int) -> Crossing:
        """The hand-over by ``token`` (an entry of :meth:`crossing`). Raises :class:`TrieError`
        ``TOKEN_REJECTED`` when it does not finish a segment and go on past it here."""
        m, o = ctypes.c_size_t(), ctypes.c_size_t()
        _check(self._call(library().trie_cross, state, token, ctypes.byref(m), ctypes.byref(o)))
        return Crossing(token, m.value, o.value)

    # ---- lifetime ----------------------------------------------------------------------------------------------

    @staticmethod
    def _release(handle: vp) -> None:
        library().trie_automaton_free(handle)



def compile_tokens(vocab: Vocab, sequences: Iterable[Sequence[int]], *, max_states: Optional[int] = None,
                   max_bytes: Optional[int] = None) -> Automaton:
    """Compile token sequences instead of strings: the automaton allows exactly these token paths (each then an
    end-of-generation id). Pass the model tokenizer's own tokenization of every member to allow only canonical
    tokenizations. Every id must be a text token of ``vocab`` (else :class:`TrieError` ``INVALID_ARGUMENT``)."""
    seqs = [array("i", [int(t) for t in s]) for s in sequences]
    n = len(seqs)
    ptrs = (i32p * max(n, 1))(*[ctypes.cast(s.buffer_info()[0], i32p) for s in seqs])
    lens = (ctypes.c_size_t * max(n, 1))(*[len(s) for s in seqs])
    lib = library()
    opts = _options(False, max_states, max_bytes)
    out = vp()
    _check(vocab._call(lib.trie_compile_tokens, ptrs, lens, n, ctypes.byref(opts), ctypes.byref(out)))
    a = Automaton.__new__(Automaton)
    a._adopt(vocab, out)
    return a


def compile(vocab: Vocab, strings: Iterable[StrOrBytes], *, drop_unreachable: bool = False,
            max_states: Optional[int] = None, max_bytes: Optional[int] = None,
            values: Optional[Iterable[int]] = None) -> Automaton:
    """Compile ``strings`` against ``vocab``: ``Automaton(vocab, strings, drop_unreachable, max_states,
    max_bytes, values=values)``."""
    return Automaton(vocab, strings, drop_unreachable, max_states, max_bytes, values=values)


def fill_bitmask_rows(rows: Sequence[Tuple[Optional[Automaton], int]], out: Any) -> None:
    """Fill one bitmask row per ``(automaton, state)`` pair into ``out`` of shape ``[len(rows), W]`` (a CPU int32
    tensor, a numpy array, ...; ``W`` at least every automaton's :attr:`~Automaton.mask_words`) in one native call,
    in parallel for large batches, with the GIL released. The sequences of a serving batch may follow different
    sets; an automaton of ``None`` marks an unconstrained row (all ones). Every pair is checked first: on an error
    nothing is written and the message names the row."""
    n = len(rows)
    address, words, row = _words(out)
    if not row:  # a flat buffer: rows as wide as the widest automaton needs (all unconstrained: split evenly)
        row = max((a.mask_words for a, _ in rows if a is not None), default=words // n if n else 0)
    held: List[Automaton] = []  # each distinct automaton held in use once for the call
    seen: Dict[int, int] = {}
    try:
        values: List[Optional[int]] = []
        for a, _ in rows:
            if a is None:
                values.append(None)
                continue
            key = id(a)
            if key not in seen:
                seen[key] = a._enter().value or 0
                held.append(a)
            values.append(seen[key])
        handles = (vp * max(n, 1))(*values)
        states = (ctypes.c_uint32 * max(n, 1))(*[s for _, s in rows])
        _check(library().trie_mask_rows(handles, states, n, address or None, words, row))
    finally:
        for a in held:
            a._exit()


from ._recognize import NotASet, Recognized, recognize  # noqa: E402  (it uses _check from here)
