"""The oracles: each engine's own code deciding whether a request text is valid and which strings it accepts.

- ``xgrammar``: XGrammar's ``GrammarMatcher`` from its PyPI wheel (``Grammar.from_ebnf`` for grammars,
  ``Grammar.from_regex`` for regexes, ``Grammar.from_json_schema`` with its default settings for schemas), compiled
  against an empty ``TokenizerInfo`` and fed strings with ``accept_string`` + ``is_terminated`` (what
  ``xgrammar.testing._is_grammar_accept_string`` does). The wheel imports torch and transformers at module level but
  the matcher never uses them: when they are missing, this module installs empty stand-ins before importing it.
- ``llama``: llama.cpp's grammar parser and matcher (llama_oracle.cpp, built against scripts/fetch-llama.sh's tree).
- ``re``: Python's ``re.fullmatch``.
- ``jsonschema``: the ``jsonschema`` package, validating the JSON value of each string.

Every oracle answers ``parse(kind, text)`` → a handle or an error message, and ``accepts(handle, strings)`` → bools.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import types
from typing import Any, List, Optional, Tuple

KINDS_OF = {"xgrammar": ("grammar", "regex", "json_schema", "vllm_tools"), "llama": ("grammar",), "re": ("regex",),
            "jsonschema": ("json_schema", "vllm_tools")}


class Refused(Exception):
    """The oracle refuses the request text (it does not parse)."""


class XGrammar:
    name = "xgrammar"

    def __init__(self) -> None:
        try:
            import tvm_ffi  # noqa: F401  (imported before the stand-ins: it probes for torch itself)
        except ImportError:
            pass
        for mod in ("torch", "transformers"):
            try:
                __import__(mod)
            except ImportError:
                sys.modules[mod] = _standin(mod)
        import xgrammar

        self.xgr = xgrammar
        self.version = xgrammar.__version__ if hasattr(xgrammar, "__version__") else _dist_version("xgrammar")
        self.compiler = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False)

    def parse(self, kind: str, text: str) -> Any:
        xgr = self.xgr
        try:
            if kind == "grammar":
                g = xgr.Grammar.from_ebnf(text)
            elif kind == "regex":
                g = xgr.Grammar.from_regex(text)
            else:
                g = xgr.Grammar.from_json_schema(text)
            compiled = self.compiler.compile_grammar(g)
            return xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        except Exception as e:  # XGrammar raises RuntimeError / ValueError / its own errors on a bad text
            raise Refused(f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}")

    def accepts(self, matcher: Any, strings: List[str]) -> List[bool]:
        out = []
        for s in strings:
            matcher.reset()
            try:
                ok = matcher.accept_string(s) and matcher.is_terminated()
            except Exception:
                ok = False
            out.append(bool(ok))
        return out


class Llama:
    name = "llama"

    def __init__(self, path: str) -> None:
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"the llama.cpp oracle {path} is not built (scripts/test-differential.sh builds it)")
        self.path = path
        self.version = "llama.cpp 0c1e57098 (llama-cpp-python 0.3.36 sdist)"
        self.proc: Optional[subprocess.Popen] = None
        self.crashes = 0

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
        return self.proc

    def _ask(self, text: str, strings: List[str]) -> Tuple[bool, List[bool]]:
        p = self._start()
        buf = [_frame(text.encode("utf-8", "surrogatepass")), struct.pack("<I", len(strings))]
        buf += [_frame(s.encode("utf-8", "surrogatepass")) for s in strings]
        try:
            assert p.stdin and p.stdout
            p.stdin.write(b"".join(buf))
            p.stdin.flush()
            head = p.stdout.read(1)
            if head == b"\x00":
                return False, []
            if head != b"\x01":
                raise BrokenPipeError("no answer")
            body = p.stdout.read(len(strings))
            if len(body) != len(strings):
                raise BrokenPipeError("short answer")
            return True, [b == 1 for b in body]
        except (BrokenPipeError, OSError) as e:
            self.crashes += 1
            self.proc = None
            raise OracleCrash(f"llama oracle died ({e}; exit {p.poll()})")

    def parse(self, kind: str, text: str) -> Any:
        ok, _ = self._ask(text, [])
        if not ok:
            raise Refused("llama_grammar_init_impl returned NULL")
        return text

    def accepts(self, text: Any, strings: List[str]) -> List[bool]:
        ok, res = self._ask(text, strings)
        if not ok:
            raise OracleCrash("the grammar parsed once and not again")
        return res


class OracleCrash(Exception):
    pass


class Re:
    name = "re"
    version = "Python %d.%d.%d re" % sys.version_info[:3]

    def parse(self, kind: str, text: str) -> Any:
        try:
            return re.compile(text)
        except (re.error, OverflowError, RecursionError) as e:
            raise Refused(f"re.error: {e}")

    def accepts(self, pat: Any, strings: List[str]) -> List[bool]:
        return [pat.fullmatch(s) is not None for s in strings]


class JsonSchema:
    """Validates the JSON value of each string (a string that is not one JSON text is rejected)."""

    name = "jsonschema"

    def __init__(self) -> None:
        import jsonschema

        self.js = jsonschema
        self.version = _dist_version("jsonschema")

    def parse(self, kind: str, text: str) -> Any:
        try:
            schema = json.loads(text)
        except ValueError as e:
            raise Refused(f"not JSON: {e}")
        try:
            cls = self.js.validators.validator_for(schema, default=self.js.Draft202012Validator)
            cls.check_schema(schema)
            return cls(schema)
        except Exception as e:
            raise Refused(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")

    def accepts(self, validator: Any, strings: List[str]) -> List[bool]:
        out = []
        for s in strings:
            try:
                v = json.loads(s)
            except ValueError:
                out.append(False)
                continue
            try:
                out.append(bool(validator.is_valid(v)))
            except Exception:
                out.append(False)
        return out


def _frame(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def _dist_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "?"


def _standin(name: str) -> types.ModuleType:
    """An empty module that satisfies XGrammar's module-level imports of torch/transformers (never called)."""

    class _Any:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

    m = types.ModuleType(name)
    m.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
    m.dtype = type("dtype", (), {})  # type: ignore[attr-defined]
    m.int32 = object()  # type: ignore[attr-defined]
    m.__getattr__ = lambda n: (_Any if n[:1].isupper() else (lambda *a, **k: None))  # type: ignore[assignment]
    m.__libtrie_standin__ = True  # type: ignore[attr-defined]
    return m


def load(names: List[str], llama_path: str) -> Tuple[List[Any], List[str]]:
    """The oracles that load, and a message for each that does not."""
    loaded, failed = [], []
    for n in names:
        try:
            if n == "xgrammar":
                loaded.append(XGrammar())
            elif n == "llama":
                loaded.append(Llama(llama_path))
            elif n == "re":
                loaded.append(Re())
            elif n == "jsonschema":
                loaded.append(JsonSchema())
            else:
                failed.append(f"{n}: unknown oracle")
        except Exception as e:
            failed.append(f"{n}: {type(e).__name__}: {e}")
    return loaded, failed
