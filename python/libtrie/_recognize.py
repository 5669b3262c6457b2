"""Recognizers (``trie_recognize``): a request shape an engine already receives, read as a finite set or not.

    r = libtrie.recognize("grammar", 'root ::= "a" | "b"')
    if r:                                   # a Recognized (a NotASet is falsy and carries .reason)
        automaton = libtrie.compile(vocab, r.members)

Kinds: ``"choices"`` (a JSON array of strings, or a Python list), ``"json_schema"`` (text or a dict), ``"grammar"``
(as llama.cpp's GBNF reads it), ``"xgrammar_grammar"`` (as XGrammar's EBNF reads it: vLLM, SGLang), ``"regex"``, ``"tools"`` (an OpenAI ``tools`` list, text or a list), ``"vllm_tools"`` (the JSON schema
vLLM writes for ``tool_choice="required"``, exactly that form: the tool names, each tool's parameters as payload,
the template ``[{"name": NAME, "parameters": `` left open). Malformed input raises :class:`libtrie.TrieError`; "not a
set" is not an error. Bounds (``max_text_bytes``, ``max_members``, ``max_member_bytes``, ``max_depth``; None: the
library's defaults, 8 MiB, 10,000, 1 MiB, 64) are checked while the text is read, before members are built: a limit
hit raises :class:`libtrie.TrieError` with status ``LIMIT_EXCEEDED`` and a message naming the limit.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._native import declared, sizep, u8p, vp

KINDS = {"choices": 0, "json_schema": 1, "grammar": 2, "regex": 3, "tools": 4, "vllm_tools": 5,
         "xgrammar_grammar": 6}


class Limits(ctypes.Structure):
    """``trie_recognize_limits`` (versioned by ``struct_size``)."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("max_text_bytes", ctypes.c_uint64),
                ("max_members", ctypes.c_uint64), ("max_member_bytes", ctypes.c_uint64),
                ("max_depth", ctypes.c_uint32), ("flags", ctypes.c_uint64)]


#: ``Limits.flags``: a bound hit is "not a set" (its reason names the bound), not ``LIMIT_EXCEEDED``.
OVER_BOUNDS_NOT_A_SET = 1

RENDERS = ("raw", "json_string", "json_text")
ENDS = ("eog", "open")

_SIGNATURES: Dict[str, Tuple[List[Any], Any]] = {
    "trie_recognize": ([ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_recognize_with": ([ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(Limits),
                             ctypes.POINTER(vp)], ctypes.c_int),
    "trie_recognize_limits_init": ([ctypes.POINTER(Limits)], ctypes.c_int),
    "trie_json_check_depth": ([ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32], ctypes.c_int),
    "trie_recognize_reason": ([], ctypes.c_char_p),
    "trie_recognized_members": ([vp, ctypes.POINTER(ctypes.POINTER(u8p)), ctypes.POINTER(sizep)], ctypes.c_int),
    "trie_recognized_free": ([vp], None),
    "trie_recognized_n_members": ([vp], ctypes.c_size_t),
    "trie_recognized_member": ([vp, ctypes.c_size_t, ctypes.POINTER(u8p), sizep], ctypes.c_int),
    "trie_recognized_prefix": ([vp, ctypes.POINTER(u8p), sizep], ctypes.c_int),
    "trie_recognized_suffix": ([vp, ctypes.POINTER(u8p), sizep], ctypes.c_int),
    "trie_recognized_render": ([vp], ctypes.c_uint32),
    "trie_recognized_end": ([vp], ctypes.c_uint32),
    "trie_recognized_trailing_whitespace": ([vp], ctypes.c_bool),
    "trie_recognized_has_payloads": ([vp], ctypes.c_bool),
    "trie_recognized_payload": ([vp, ctypes.c_size_t, ctypes.POINTER(u8p), sizep], ctypes.c_int),
}
def _lib() -> ctypes.CDLL:
    return declared(_SIGNATURES, "recognize()")


@dataclass(frozen=True)
class Recognized:
    """A request shape that is exactly a finite set: its language is ``prefix + render(m) + suffix`` for each
    member ``m`` (members distinct, in the request's order), followed by end-of-generation (``end == "eog"``) or
    handed over to another constraint (``"open"``: a tool's arguments). ``payloads``: one JSON text per member (a
    tool's ``parameters``) or None. ``trailing_whitespace``: the request also allows optional whitespace after a
    segment (llama.cpp's ``space`` rule), which the set does not emit."""

    members: Tuple[bytes, ...]
    prefix: bytes
    suffix: bytes
    render: str
    end: str
    payloads: Optional[Tuple[str, ...]]
    trailing_whitespace: bool

    def texts(self) -> List[str]:
        """The members as ``str`` (every recognizer's members are UTF-8)."""
        return [m.decode("utf-8") for m in self.members]

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True)
class NotASet:
    """The request is not a finite set libtrie can serve exactly (keep the engine's own backend); falsy."""

    reason: str

    def __bool__(self) -> bool:
        return False


def _view(call: Callable[..., int], *args: Any) -> bytes:
    from . import _check

    p = u8p()
    n = ctypes.c_size_t()
    _check(call(*args, ctypes.byref(p), ctypes.byref(n)))
    return ctypes.string_at(p, n.value) if n.value else b""


def _limits(lib: ctypes.CDLL, flags: int = 0, **bounds: Optional[int]) -> Optional[Limits]:
    if all(v is None for v in bounds.values()) and not flags:
        return None
    from . import _check

    limits = Limits()
    _check(lib.trie_recognize_limits_init(ctypes.byref(limits)))
    limits.flags = flags
    for name, value in bounds.items():
        if value is not None:
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
            setattr(limits, name, value)
    return limits


def json_check_depth(text: Union[str, bytes], max_depth: int) -> None:
    """Checks that the JSON text nests arrays and objects at most ``max_depth`` deep, by a byte scan that skips
    strings, before any parser touches it. Raises :class:`libtrie.TrieError` (``LIMIT_EXCEEDED``, the message naming
    the depth) when deeper; malformed JSON passes (its parser refuses it)."""
    from . import _check

    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    _check(_lib().trie_json_check_depth(data, len(data), max_depth))


def recognize(kind: str, text: Union[str, bytes, List[Any], Dict[str, Any]], *, max_text_bytes: Optional[int] = None,
              max_members: Optional[int] = None, max_member_bytes: Optional[int] = None,
              max_depth: Optional[int] = None, over_bounds_not_a_set: bool = False) -> Union[Recognized, NotASet]:
    """Reads ``text`` as the request shape ``kind`` (see the module docs) within the given bounds (None: the
    library's defaults); lists and dicts are written as JSON first. Raises :class:`libtrie.TrieError` on malformed
    input or a limit hit (with ``over_bounds_not_a_set``, for routing a request the engine serves itself, a limit
    hit is a :class:`NotASet` whose reason names the bound) and ``ValueError`` for an unknown kind."""
    from . import _check

    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    if isinstance(text, (list, dict)):
        text = json.dumps(text, ensure_ascii=False)
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    lib = _lib()
    limits = _limits(lib, OVER_BOUNDS_NOT_A_SET if over_bounds_not_a_set else 0, max_text_bytes=max_text_bytes,
                     max_members=max_members, max_member_bytes=max_member_bytes, max_depth=max_depth)
    handle = vp()
    _check(lib.trie_recognize_with(KINDS[kind], data, len(data), ctypes.byref(limits) if limits else None,
                                   ctypes.byref(handle)))
    if not handle.value:
        reason: bytes = lib.trie_recognize_reason()
        return NotASet(reason.decode("utf-8", "replace"))
    h = handle.value
    try:
        n = lib.trie_recognized_n_members(h)
        members: Tuple[bytes, ...] = ()
        if n:
            # One call for every member: the arrays trie_compile takes, views into the set.
            strings = ctypes.POINTER(u8p)()
            lens = sizep()
            _check(lib.trie_recognized_members(h, ctypes.byref(strings), ctypes.byref(lens)))
            members = tuple(ctypes.string_at(strings[i], lens[i]) if lens[i] else b"" for i in range(n))
        payloads = None
        if lib.trie_recognized_has_payloads(h):
            payloads = tuple(_view(lib.trie_recognized_payload, h, i).decode("utf-8") for i in range(n))
        return Recognized(members=members, prefix=_view(lib.trie_recognized_prefix, h),
                          suffix=_view(lib.trie_recognized_suffix, h), render=RENDERS[lib.trie_recognized_render(h)],
                          end=ENDS[lib.trie_recognized_end(h)], payloads=payloads,
                          trailing_whitespace=bool(lib.trie_recognized_trailing_whitespace(h)))
    finally:
        lib.trie_recognized_free(h)
