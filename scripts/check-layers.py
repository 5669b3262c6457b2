#!/usr/bin/env python3
"""Fails when a module of src/ imports from a layer above its own (ARCHITECTURE.md: the layers and why), or when a
file of src/ grows past MAX_FILE_LINES or a function past MAX_FN_LINES (files a reader can hold in mind).

  scripts/check-layers.py          prints each broken import (file:line, from -> to) or oversized item, exits 1

src/bin/ holds binaries (the `libtrie` command): crates of their own above every layer, held to the same sizes,
that use the library through its public API only (`trie::...`; never the C ABI or the hidden `profile` module).

Reads every `crate::name` path in code (comments and doc comments are skipped, so intra-doc links may point
anywhere), including `crate::{A, B}` lists and the crate root's re-exports (`crate::Automaton` is automaton). A
module may use its own layer and the layers below; modules of one layer do not use each other. No cargo, no
build: a few milliseconds, run by scripts/test.sh.
"""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Lowest first. A module may import from its own layer's module and any earlier layer.
LAYERS = [
    ["error", "ids"],
    ["util"],
    ["format"],
    ["template"],
    ["vocab"],
    ["load"],
    ["automaton"],
    ["compile"],
    ["sets"],
    ["calls"],
    ["capi"],
    ["profile"],
]
MAX_FILE_LINES = 800
MAX_FN_LINES = 160

RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}

# The crate root's re-exports (src/lib.rs), by the module they come from.
ROOT_NAMES = {
    "Automaton": "automaton", "AlignmentMethod": "automaton", "Allowed": "automaton", "CompileOptions": "automaton",
    "Forced": "automaton", "State": "automaton", "Step": "automaton",
    "Error": "error", "ErrorKind": "error", "Result": "error",
    "End": "template", "Render": "template", "Template": "template",
    "TokenId": "vocab", "TokenKind": "vocab", "Vocabulary": "vocab",
    "gguf": "load", "hf": "load", "ffi": "capi",
}


def code_lines(text):
    """(line number, code) with // comments removed (good enough: no `crate::` inside string literals here)."""
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("//", 1)[0] if "//" in line else line
        if code.strip():
            yield n, code


def targets(code):
    for m in re.finditer(r"\bcrate::(\{[^}]*\}?|\w+)", code):
        what = m.group(1)
        names = re.findall(r"\w+", what) if what.startswith("{") else [what]
        for name in names[:1] if not what.startswith("{") else names:
            yield ROOT_NAMES.get(name, name)


def oversized(path, text):
    """Messages for a file over MAX_FILE_LINES and its functions over MAX_FN_LINES (a function ends at the first
    line that is its own indentation followed by `}`, which rustfmt guarantees)."""
    lines = text.splitlines()
    if len(lines) > MAX_FILE_LINES:
        yield f"{path}: {len(lines)} lines (at most {MAX_FILE_LINES}): split it by concern"
    for i, line in enumerate(lines):
        m = re.match(r'^(\s*)(?:pub(?:\([\w: ]+\))? )?(?:const )?(?:unsafe )?(?:extern "C" )?fn (\w+)', line)
        if not m or line.rstrip().endswith(";"):
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == m.group(1) + "}"), i)
        if end - i + 1 > MAX_FN_LINES:
            yield f"{path}:{i + 1}: fn {m.group(2)} is {end - i + 1} lines (at most {MAX_FN_LINES}): split it"


# What a binary of src/bin/ may not use: the C ABI (for C callers) and hidden modules.
BIN_FORBIDDEN = re.compile(r"\btrie::(capi|ffi|profile)\b")


def check_bins(broken):
    """src/bin/: sizes, and only the library's public Rust API."""
    bins = sorted((SRC / "bin").rglob("*.rs")) if (SRC / "bin").is_dir() else []
    for path in bins:
        rel = f"src/{path.relative_to(SRC)}"
        text = path.read_text()
        broken.extend(oversized(rel, text))
        for n, code in code_lines(text):
            m = BIN_FORBIDDEN.search(code)
            if m:
                broken.append(f"{rel}:{n}: a binary uses {m.group(0)}: use the library's public Rust API")
    return len(bins)


def main():
    files = sorted(p for p in SRC.rglob("*.rs") if p.name != "lib.rs" and p.relative_to(SRC).parts[0] != "bin")
    broken, unknown = [], set()
    n_bins = check_bins(broken)
    for path in files:
        rel = path.relative_to(SRC)
        module = rel.parts[0].removesuffix(".rs")
        if module not in RANK:
            unknown.add(module)
            continue
        text = path.read_text()
        broken.extend(oversized(f"src/{rel}", text))
        for n, code in code_lines(text):
            for to in targets(code):
                if to == module:
                    continue
                if to not in RANK:
                    if to[:1].islower():
                        unknown.add(to)
                    continue
                if RANK[to] >= RANK[module]:
                    broken.append(f"src/{rel}:{n}: a lower layer imports a higher one: {module} -> {to}")
    if unknown:
        print(f"check-layers: modules missing from the LAYERS table of {__file__}: {', '.join(sorted(unknown))}",
              file=sys.stderr)
    for b in broken:
        print(f"check-layers: {b}", file=sys.stderr)
    if broken or unknown:
        sys.exit(1)
    print(f"check-layers: {len(files)} files (+ {n_bins} of src/bin), files and functions within {MAX_FILE_LINES} / {MAX_FN_LINES} lines, every import points down ({' < '.join('/'.join(l) for l in LAYERS)})")


if __name__ == "__main__":
    main()
