"""libtrie from Python: a thin ctypes layer over the C ABI of ``libtrie.so`` (see ``include/trie.h``).

libtrie forces a language model to output exactly one string of a large finite set. Compile the set once against a
tokenizer vocabulary, then at each decoding step ask for the allowed tokens (a bitmask in the layout of XGrammar,
LLGuidance, vLLM and SGLang: ``ceil(n_vocab / 32)`` little-endian 32-bit words, token ``t`` is bit ``t % 32`` of word
``t // 32``) and advance a 32-bit state with the sampled token::

    from libtrie import Vocab, Automaton, FINISHED
    vocab = Vocab.from_gguf("ggml-vocab-qwen2.gguf")
    a = Automaton(vocab, ["calendar.create_event", "maps.get_route"])
    state = a.start()
    row = a.new_mask()                # array('I') of a.mask_words words
    a.fill_mask(state, row)           # or a.allowed(state) -> list of ids
    state = a.advance(state, token)   # FINISHED after an end-of-generation token

The library is found in ``$TRIE_LIB`` (a file path) or else in ``<repo>/target/release/libtrie.so``. Pure Python, no
dependency; the only per-call overhead is ctypes. Errors raise :class:`TrieError` carrying the status code and
``trie_last_error()``. Objects free their native handle when garbage collected (or on :meth:`close`).
"""

from __future__ import annotations

import ctypes
import os
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

__all__ = ["TrieError", "Vocab", "Automaton", "FINISHED", "library", "version"]

#: The state after an end-of-generation token (``TRIE_STATE_FINISHED``).
FINISHED = 0xFFFFFFFF

_u8p = ctypes.POINTER(ctypes.c_uint8)
_i32p = ctypes.POINTER(ctypes.c_int32)
_u32p = ctypes.POINTER(ctypes.c_uint32)
_sizep = ctypes.POINTER(ctypes.c_size_t)


class _Options(ctypes.Structure):
    _fields_ = [("drop_unreachable", ctypes.c_bool)]


class TrieError(RuntimeError):
    """A libtrie call failed: ``status`` is the ``trie_status`` code, the message is ``trie_last_error()``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"libtrie status {status}: {message}")
        self.status = status


def _find_library() -> Path:
    env = os.environ.get("TRIE_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "target" / "release" / "libtrie.so"


_lib: Optional[ctypes.CDLL] = None


def library() -> ctypes.CDLL:
    """The loaded ``libtrie.so`` with argument and result types declared (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(str(_find_library()))
    vp, st = ctypes.c_void_p, ctypes.c_int
    sigs = {
        "trie_last_error": ([], ctypes.c_char_p),
        "trie_status_str": ([ctypes.c_int], ctypes.c_char_p),
        "trie_version": ([], ctypes.c_char_p),
        "trie_vocab_from_gguf": ([ctypes.c_char_p, ctypes.POINTER(vp)], st),
        "trie_vocab_from_tokenizer_json": ([ctypes.c_char_p, ctypes.POINTER(vp)], st),
        "trie_vocab_free": ([vp], None),
        "trie_vocab_n_tokens": ([vp], ctypes.c_size_t),
        "trie_vocab_token": ([vp, ctypes.c_int32, ctypes.POINTER(_u8p), _sizep], st),
        "trie_vocab_eog_ids": ([vp, ctypes.POINTER(_i32p), _sizep], st),
        "trie_compile": ([vp, ctypes.POINTER(_u8p), _sizep, ctypes.c_size_t, ctypes.POINTER(_Options),
                          ctypes.POINTER(vp)], st),
        "trie_automaton_free": ([vp], None),
        "trie_automaton_n_vocab": ([vp], ctypes.c_size_t),
        "trie_automaton_mask_words": ([vp], ctypes.c_size_t),
        "trie_automaton_n_states": ([vp], ctypes.c_size_t),
        "trie_automaton_memory_usage": ([vp], ctypes.c_size_t),
        "trie_start": ([vp], ctypes.c_uint32),
        "trie_allowed": ([vp, ctypes.c_uint32, ctypes.POINTER(_i32p), _sizep], st),
        "trie_mask": ([vp, ctypes.c_uint32, _u32p, ctypes.c_size_t], st),
        "trie_advance": ([vp, ctypes.c_uint32, ctypes.c_int32, _u32p], st),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res
    _lib = lib
    return lib


def version() -> str:
    """The version string of the loaded library."""
    return library().trie_version().decode()


def _check(status: int) -> None:
    if status != 0:
        msg = library().trie_last_error()
        raise TrieError(status, msg.decode("utf-8", "replace") if msg else "")


class Vocab:
    """A tokenizer vocabulary: token bytes, kinds and end-of-generation ids (``trie_vocab``)."""

    def __init__(self, handle: int) -> None:
        self._h = ctypes.c_void_p(handle)

    @classmethod
    def from_gguf(cls, path: Union[str, os.PathLike]) -> "Vocab":
        """Load the vocabulary of a GGUF file (a vocab-only GGUF is enough)."""
        out = ctypes.c_void_p()
        _check(library().trie_vocab_from_gguf(os.fsencode(path), ctypes.byref(out)))
        return cls(out.value or 0)

    @classmethod
    def from_tokenizer_json(cls, path: Union[str, os.PathLike]) -> "Vocab":
        """Load a Hugging Face ``tokenizer.json`` (end-of-generation ids inferred from the special tokens)."""
        out = ctypes.c_void_p()
        _check(library().trie_vocab_from_tokenizer_json(os.fsencode(path), ctypes.byref(out)))
        return cls(out.value or 0)

    def __len__(self) -> int:
        """The number of listed token ids."""
        return int(library().trie_vocab_n_tokens(self._h))

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token stands for (empty for padding ids)."""
        p, n = _u8p(), ctypes.c_size_t()
        _check(library().trie_vocab_token(self._h, token, ctypes.byref(p), ctypes.byref(n)))
        return ctypes.string_at(p, n.value) if n.value else b""

    def eog_ids(self) -> List[int]:
        """The end-of-generation ids."""
        p, n = _i32p(), ctypes.c_size_t()
        _check(library().trie_vocab_eog_ids(self._h, ctypes.byref(p), ctypes.byref(n)))
        return [p[i] for i in range(n.value)]

    def close(self) -> None:
        """Release the native handle now (automata compiled from it keep their own reference)."""
        if self._h.value:
            library().trie_vocab_free(self._h)
            self._h = ctypes.c_void_p(0)

    __del__ = close


class Automaton:
    """A set of strings compiled against a vocabulary (``trie_automaton``); states are plain ``int``."""

    def __init__(self, vocab: Vocab, strings: Iterable[Union[str, bytes]], drop_unreachable: bool = False) -> None:
        self._h = ctypes.c_void_p(0)
        data = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in strings]
        n = len(data)
        # One buffer for all strings (kept alive during the call), pointers by offset: O(1) ctypes objects.
        blob = ctypes.create_string_buffer(b"".join(data), sum(map(len, data)) or 1)
        base = ctypes.addressof(blob)
        lens = (ctypes.c_size_t * n)(*map(len, data))
        ptrs = (ctypes.c_void_p * n)(*list(accumulate(map(len, data), initial=base))[:n])
        opts = _Options(drop_unreachable)
        out = ctypes.c_void_p()
        lib = library()
        _check(lib.trie_compile(vocab._h, ctypes.cast(ptrs, ctypes.POINTER(_u8p)), lens, n, ctypes.byref(opts),
                                ctypes.byref(out)))
        self._h = out
        self.n_vocab: int = int(lib.trie_automaton_n_vocab(out))
        self.mask_words: int = int(lib.trie_automaton_mask_words(out))
        self._mask = lib.trie_mask
        self._advance = lib.trie_advance
        self._next = ctypes.c_uint32()

    @property
    def n_states(self) -> int:
        return int(library().trie_automaton_n_states(self._h))

    @property
    def memory_usage(self) -> int:
        """Bytes held by the automaton (excluding the shared vocabulary)."""
        return int(library().trie_automaton_memory_usage(self._h))

    def start(self) -> int:
        """The start state."""
        return int(library().trie_start(self._h))

    def new_mask(self) -> "array[int]":
        """A zeroed bitmask row of :attr:`mask_words` 32-bit words."""
        return array("I", bytes(4 * self.mask_words))

    def fill_mask(self, state: int, row: "Union[array[int], object]", address: Optional[int] = None) -> None:
        """Write the allowed-token bitmask of ``state`` into ``row`` (an ``array('I')`` of :attr:`mask_words`
        words), or into the memory at ``address`` (e.g. ``numpy_array.ctypes.data``) when given."""
        if address is None:
            address, n = row.buffer_info()  # type: ignore[union-attr]
            if n < self.mask_words:
                raise ValueError("mask row too short")
        _check(self._mask(self._h, state, ctypes.cast(address, _u32p), self.mask_words))

    def allowed(self, state: int) -> List[int]:
        """The allowed token ids of ``state``, ascending."""
        p, n = _i32p(), ctypes.c_size_t()
        _check(library().trie_allowed(self._h, state, ctypes.byref(p), ctypes.byref(n)))
        return p[: n.value]

    def advance(self, state: int, token: int) -> int:
        """The state after ``token`` (:data:`FINISHED` after an end-of-generation token); raises
        :class:`TrieError` (status 7) for a token that is not allowed."""
        _check(self._advance(self._h, state, token, ctypes.byref(self._next)))
        return int(self._next.value)

    def close(self) -> None:
        """Release the native handle now."""
        if self._h.value:
            library().trie_automaton_free(self._h)
            self._h = ctypes.c_void_p(0)

    __del__ = close


def compile_set(vocab: Vocab, strings: Sequence[Union[str, bytes]]) -> Automaton:
    """Shorthand for ``Automaton(vocab, strings)``."""
    return Automaton(vocab, strings)
