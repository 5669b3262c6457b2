"""Loading ``libtrie.so`` and declaring the C ABI of ``include/trie.h`` for ctypes (private).

Every function is called through :class:`ctypes.CDLL`, which releases the GIL for the duration of each foreign call:
mask fills, batch fills and compiles run while other Python threads go on.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

u8p = ctypes.POINTER(ctypes.c_uint8)
i32p = ctypes.POINTER(ctypes.c_int32)
u32p = ctypes.POINTER(ctypes.c_uint32)
sizep = ctypes.POINTER(ctypes.c_size_t)
vp = ctypes.c_void_p


class Template(ctypes.Structure):
    """``trie_template`` (initialise with ``trie_template_init``, which sets ``struct_size``)."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("prefix", u8p), ("prefix_len", ctypes.c_size_t),
                ("suffix", u8p), ("suffix_len", ctypes.c_size_t), ("render", ctypes.c_uint32),
                ("end", ctypes.c_uint32)]


#: ``trie_overflow_fn``: keep(user, member, overflow, len) -> bool.
OVERFLOW_FN = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t, u8p, ctypes.c_size_t)


class Options(ctypes.Structure):
    """``trie_options`` (initialise with ``trie_options_init``, which sets ``struct_size``)."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("drop_unreachable", ctypes.c_bool),
                ("max_states", ctypes.c_uint64), ("max_bytes", ctypes.c_uint64)]


class SetConfig(ctypes.Structure):
    """``trie_set_config`` (initialise with ``trie_set_config_init``, which sets ``struct_size`` and the defaults)."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("set_dir", ctypes.c_char_p), ("allow_any_path", ctypes.c_bool),
                ("max_inline_strings", ctypes.c_uint64), ("max_inline_bytes", ctypes.c_uint64),
                ("max_file_bytes", ctypes.c_uint64), ("max_states", ctypes.c_uint64), ("max_bytes", ctypes.c_uint64),
                ("capacity", ctypes.c_uint64), ("cache_dir", ctypes.c_char_p)]


class SetInfo(ctypes.Structure):
    """``trie_set_info``: what one ``trie_set_cache_get`` did."""

    _fields_ = [("compiled", ctypes.c_bool), ("seconds", ctypes.c_double), ("what", ctypes.c_char * 256),
                ("loaded", ctypes.c_bool)]


class CompiledDirStats(ctypes.Structure):
    """``trie_compiled_dir_stats``: the counters of a compiled directory."""

    _fields_ = [("loaded", ctypes.c_uint64), ("compiled", ctypes.c_uint64), ("rejected", ctypes.c_uint64),
                ("save_failed", ctypes.c_uint64)]


class SetStats(ctypes.Structure):
    """``trie_set_stats``: the counters of a set cache."""

    _fields_ = [("compiles", ctypes.c_uint64), ("hits", ctypes.c_uint64), ("entries", ctypes.c_uint64),
                ("loaded", ctypes.c_uint64)]


def candidates() -> List[Path]:
    """Where the library is looked for, in order: ``$TRIE_LIB`` (a file), the copy built into this package by
    ``pip install`` (``_libtrie*.so``), then ``target/release/libtrie.so`` of the source tree this module sits in."""
    here = Path(__file__).resolve().parent
    found: List[Path] = []
    env = os.environ.get("TRIE_LIB")
    if env:
        return [Path(env)]
    suffix = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")
    found += sorted(here.glob("_libtrie*" + (".pyd" if sys.platform == "win32" else ".so")))
    found.append(here.parents[1] / "target" / "release" / ("libtrie" + suffix if sys.platform != "win32" else "trie.dll"))
    return found


#: A module's part of the C ABI: function name -> (argtypes, restype).
Signatures = Dict[str, Tuple[List[Any], Any]]

_SIGNATURES: Signatures = {
    "trie_last_error": ([], ctypes.c_char_p),
    "trie_status_str": ([ctypes.c_int], ctypes.c_char_p),
    "trie_version": ([], ctypes.c_char_p),
    "trie_sampler_name": ([], ctypes.c_char_p),
    "trie_vocab_new_ex": ([ctypes.POINTER(u8p), sizep, u32p, ctypes.c_size_t, i32p, ctypes.c_size_t, ctypes.c_size_t,
                           ctypes.POINTER(vp)], ctypes.c_int),
    "trie_vocab_from_gguf": ([ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_vocab_from_tokenizer_json_ex": ([ctypes.c_char_p, i32p, ctypes.c_size_t, ctypes.c_size_t,
                                           ctypes.POINTER(vp)], ctypes.c_int),
    "trie_vocab_free": ([vp], None),
    "trie_vocab_n_tokens": ([vp], ctypes.c_size_t),
    "trie_vocab_memory_usage": ([vp], ctypes.c_size_t),
    "trie_vocab_token": ([vp, ctypes.c_int32, ctypes.POINTER(u8p), sizep], ctypes.c_int),
    "trie_vocab_eog_ids": ([vp, ctypes.POINTER(i32p), sizep], ctypes.c_int),
    "trie_compile": ([vp, ctypes.POINTER(u8p), sizep, ctypes.c_size_t, ctypes.POINTER(Options), ctypes.POINTER(vp)],
                     ctypes.c_int),
    "trie_automaton_with": ([vp, ctypes.POINTER(u8p), sizep, ctypes.c_size_t, ctypes.POINTER(u8p), sizep,
                             ctypes.c_size_t, ctypes.POINTER(Options), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_automaton_retain": ([vp], vp),
    "trie_automaton_free": ([vp], None),
    "trie_automaton_n_vocab": ([vp], ctypes.c_size_t),
    "trie_automaton_mask_words": ([vp], ctypes.c_size_t),
    "trie_automaton_n_states": ([vp], ctypes.c_size_t),
    "trie_automaton_n_members": ([vp], ctypes.c_size_t),
    "trie_automaton_memory_usage": ([vp], ctypes.c_size_t),
    "trie_automaton_dropped": ([vp, ctypes.POINTER(sizep), sizep], ctypes.c_int),
    "trie_start": ([vp], ctypes.c_uint32),
    "trie_options_init": ([vp], ctypes.c_int),
    "trie_compile_tokens": ([vp, ctypes.POINTER(i32p), sizep, ctypes.c_size_t, ctypes.POINTER(Options),
                             ctypes.POINTER(vp)], ctypes.c_int),
    "trie_vocab_save": ([vp, ctypes.c_char_p], ctypes.c_int),
    "trie_vocab_load": ([ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_vocab_fingerprint": ([vp, ctypes.c_char_p], ctypes.c_int),
    "trie_automaton_save": ([vp, ctypes.c_char_p], ctypes.c_int),
    "trie_automaton_load": ([vp, ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_allowed": ([vp, ctypes.c_uint32, vp, ctypes.c_size_t, sizep], ctypes.c_int),
    "trie_mask": ([vp, ctypes.c_uint32, vp, ctypes.c_size_t], ctypes.c_int),
    "trie_mask_batch": ([vp, u32p, ctypes.c_size_t, vp, ctypes.c_size_t, ctypes.c_size_t], ctypes.c_int),
    "trie_mask_rows": ([ctypes.POINTER(vp), u32p, ctypes.c_size_t, vp, ctypes.c_size_t, ctypes.c_size_t],
                       ctypes.c_int),
    "trie_advance": ([vp, ctypes.c_uint32, ctypes.c_int32, u32p], ctypes.c_int),
    "trie_is_accepting": ([vp, ctypes.c_uint32], ctypes.c_bool),
    "trie_set_config_init": ([ctypes.POINTER(SetConfig)], ctypes.c_int),
    "trie_set_cache_new": ([vp, ctypes.POINTER(SetConfig), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_set_cache_check": ([vp, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    "trie_set_cache_get": ([vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp), ctypes.POINTER(SetInfo)],
                           ctypes.c_int),
    "trie_set_cache_lookup": ([vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_set_cache_stats": ([vp, ctypes.POINTER(SetStats)], ctypes.c_int),
    "trie_set_cache_free": ([vp], None),
    "trie_template_init": ([ctypes.POINTER(Template)], ctypes.c_int),
    "trie_compile_template": ([vp, ctypes.POINTER(u8p), sizep, ctypes.c_size_t, ctypes.POINTER(Template),
                               ctypes.POINTER(Options), ctypes.POINTER(vp)], ctypes.c_int),
    "trie_compiled_dir_new": ([ctypes.c_char_p, ctypes.POINTER(vp)], ctypes.c_int),
    "trie_compiled_dir_compile_template": ([vp, vp, ctypes.POINTER(u8p), sizep, ctypes.c_size_t,
                                            ctypes.POINTER(Template), ctypes.POINTER(Options), ctypes.POINTER(vp),
                                            ctypes.POINTER(ctypes.c_bool)], ctypes.c_int),
    "trie_compiled_dir_stats": ([vp, ctypes.POINTER(CompiledDirStats)], ctypes.c_int),
    "trie_compiled_dir_free": ([vp], None),
    "trie_automaton_is_open": ([vp], ctypes.c_bool),
    "trie_member": ([vp, ctypes.c_uint32, sizep], ctypes.c_int),
    "trie_possible_members": ([vp, ctypes.c_uint32, sizep, ctypes.c_size_t, sizep], ctypes.c_int),
    "trie_crossing": ([vp, ctypes.c_uint32, OVERFLOW_FN, ctypes.c_void_p, i32p, u32p, sizep, ctypes.c_size_t, sizep],
                      ctypes.c_int),
    "trie_cross": ([vp, ctypes.c_uint32, ctypes.c_int32, sizep, sizep], ctypes.c_int),
    "trie_forced": ([vp, ctypes.c_uint32, u8p, ctypes.c_size_t, sizep, i32p, ctypes.c_size_t, sizep,
                     ctypes.POINTER(ctypes.c_bool)], ctypes.c_int),
}

_lib: Optional[ctypes.CDLL] = None


def library() -> ctypes.CDLL:
    """The loaded library with every signature declared (loaded on first use; raises ``OSError`` naming the paths
    tried when none loads)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    lib = None
    for path in candidates():
        if not path.exists():
            tried.append(f"{path} (missing)")
            continue
        try:
            lib = ctypes.CDLL(str(path))
            break
        except OSError as e:
            tried.append(f"{path} ({e})")
    if lib is None:
        raise OSError("libtrie: no loadable libtrie shared library; tried " + "; ".join(tried) +
                      ". Install the package with `pip install <repo>` (builds it with cargo), run `cargo build "
                      "--release` in the source tree, or set TRIE_LIB to the file.")
    _declare(lib, _SIGNATURES, "this module")
    _lib = lib
    return lib


_declared: Set[int] = set()  # the signature tables (by id) declared on the loaded library
_declare_lock = threading.Lock()


def _declare(lib: ctypes.CDLL, signatures: Signatures, what: str) -> None:
    missing = [name for name in signatures if not hasattr(lib, name)]
    if missing:
        raise OSError(f"libtrie: the library at {lib._name} is too old for {what}: it lacks {', '.join(missing)}")
    for name, (args, res) in signatures.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res


def declared(signatures: Signatures, what: str) -> ctypes.CDLL:
    """The loaded library with ``signatures`` (a module's part of the C ABI) declared, once per table; an older
    library that lacks one of them raises ``OSError`` naming ``what`` and the missing functions."""
    lib = library()
    if id(signatures) not in _declared:
        with _declare_lock:
            if id(signatures) not in _declared:
                _declare(lib, signatures, what)
                _declared.add(id(signatures))
    return lib
