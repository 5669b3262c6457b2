#!/usr/bin/env python3
"""Every code block of the README and the guides (docs/*.md) is a copy of a file that CI builds or runs, or a
command block that is at least syntax-checked: so no example can rot unnoticed. Pure Python, no build, < 1 s.

Each fenced code block must follow (blank lines aside) one marker comment:

  <!-- example: PATH -->          the block is the whole file PATH (repository-relative), byte for byte
  <!-- example: PATH#NAME -->     the block is the region NAME of PATH: the lines between a line containing
                                  `docs:begin NAME` and one containing `docs:end NAME` (any comment syntax), both
                                  dedented; the file itself is what CI compiles and runs
  <!-- commands -->              shell commands a reader types (servers, downloads, CI itself): checked with
                                  `bash -n`, every repository path they name must exist (scripts executable), and
                                  every JSON body (`-d '...'`) must parse; they are NOT run
  <!-- output -->                a program's output or a command's synopsis shown to a reader (a session of the
                                  `libtrie` command line): every `libtrie VERB` and `--option` it shows must exist in
                                  the command line's source (src/bin/libtrie/), and every repository path it names must
                                  exist; the output itself is what tests/cli.rs asserts, NOT run from the page

An example file must be listed in COVERAGE below, which says which CI stage builds or runs it; the checker
verifies that claim where it can (the runner names the file, a Go example has an `// Output:` line, a Python file
compiles, a shell file passes `bash -n`) and prints, per block, how far it is checked. Also: relative links of
these pages resolve (files, and `#anchors` of Markdown files), and the README stays short (at most 250 lines, the
test and demo commands present, no issue numbers or load averages).

    python3 scripts/check-docs.py [-v]
Not covered: docs/bench/ (measurement records), python/README.md, examples/llama/README.md, bindings/*/README.md.
"""
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250

# path -> (level, what runs it, [(runner file, text it must contain)]). Levels: "run" (executed in CI and its
# output checked), "build" (compiled in CI, not run), "compile" (syntax only in CI; run by hand or an opt-in test).
COVERAGE = {
    "examples/quickstart.rs": (
        "run", "cargo builds it (every CI cargo build has all targets); scripts/test-docs.sh runs it on a real vocabulary",
        [("scripts/test-docs.sh", "--example quickstart")]),
    "examples/c/quickstart.c": (
        "run", "CMake builds it; ctest example_c_quickstart runs it (scripts/test-c.sh)",
        [("CMakeLists.txt", "examples/c/quickstart.c"), ("CMakeLists.txt", "NAME example_c_quickstart")]),
    "examples/cpp/quickstart.cpp": (
        "run", "CMake builds it; ctest example_cpp_quickstart runs it (scripts/test-c.sh)",
        [("CMakeLists.txt", "examples/cpp/quickstart.cpp"), ("CMakeLists.txt", "NAME example_cpp_quickstart")]),
    "examples/llama/quickstart.c": (
        "run", "the llama.cpp stage builds it (examples/llama/CMakeLists.txt) and tests/llama/run.sh runs it on SmolLM2",
        [("examples/llama/CMakeLists.txt", "quickstart.c"), ("tests/llama/run.sh", "trie-llama-quickstart")]),
    "examples/python/quickstart.py": (
        "run", "scripts/test-docs.sh runs it with the source-tree package on a real vocabulary",
        [("scripts/test-docs.sh", "examples/python/quickstart.py")]),
    "bindings/go/example_test.go": (
        "run", "go test runs Example() and compares its // Output: (scripts/test-go.sh)",
        [("bindings/go/example_test.go", "// Output:"), ("scripts/test-go.sh", "go test")]),
    "bindings/go/examples/pick/main.go": (
        "run", "scripts/test-go.sh runs examples/pick on a real vocabulary and checks every pick is a member",
        [("scripts/test-go.sh", "./examples/pick")]),
    "bindings/swift/Sources/TriePick/main.swift": (
        "compile", "no Swift toolchain in CI: scripts/test-swift-module.sh checks every C name the Swift sources use "
        "against trie.h and builds the CTrie module with clang; swift build is NOT run",
        [("scripts/test-swift-module.sh", "Sources")]),
    "examples/vllm/client.py": (
        "compile", "no vLLM in CI: compiled here; the opt-in scripts/test-vllm.sh runs it against a real server "
        "(tests/vllm/test_vllm_tools.py)",
        [("tests/vllm/test_vllm_tools.py", '"client.py"')]),
    "examples/sglang/client.py": (
        "compile", "SGLang's server needs CUDA: compiled here, never run in CI", []),
    "examples/python/transformers_generate.py": (
        "compile", "no torch/transformers in CI: compiled here; needs the opt-in scripts/test-transformers.sh environment",
        []),
}

# Files the pages link to or name that other branches add (the `libtrie` command line and its guide, the wheel
# build): a missing one is reported as pending, not as an error. Empty this set once they are merged.
PENDING: set = set()

MARKER = re.compile(r"^\s*<!--\s*(example:\s*(?P<path>[^\s#]+)(?:#(?P<region>[\w.-]+))?|(?P<commands>commands)|(?P<output>output))\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")
REPO_PATH = re.compile(r"(?<![\w./-])((?:scripts|tests|data|examples|bench|docs|bindings|include|python)/[\w./-]*[\w/])")
LINK = re.compile(r"\]\(([^)\s]+)\)")


class Report:
    def __init__(self):
        self.errors = []
        self.lines = []
        self.counts = {}
        self.pending = set()

    def error(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def block(self, where, what, level, how):
        self.counts[level] = self.counts.get(level, 0) + 1
        self.lines.append(f"{where}  {what}  [{level}] {how}")


def region(path, name):
    """The lines of `name` in `path` (the whole file when name is None), dedented, without the final newline."""
    text = path.read_text(encoding="utf-8")
    if name is None:
        return text.rstrip("\n")
    lines = text.split("\n")
    begins = [i for i, l in enumerate(lines) if re.search(rf"docs:begin {re.escape(name)}\b", l)]
    ends = [i for i, l in enumerate(lines) if re.search(rf"docs:end {re.escape(name)}\b", l)]
    if len(begins) != 1 or len(ends) != 1 or ends[0] <= begins[0]:
        raise ValueError(f"region {name!r}: need one `docs:begin {name}` line before one `docs:end {name}` line "
                         f"(found {len(begins)} and {len(ends)})")
    return textwrap.dedent("\n".join(lines[begins[0] + 1:ends[0]])).rstrip("\n")


def blocks(text):
    """(line number of the fence, marker match or None, info string, block text) for each fenced block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        start = i
        i += 1
        body = []
        close = re.compile(re.escape(fence[0]) + "{%d,}" % len(fence))
        while i < len(lines) and not close.fullmatch(lines[i].strip()):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        marker = MARKER.match(lines[j]) if j >= 0 else None
        yield start + 1, marker, m.group("info").strip(), "\n".join(body)
        i += 1


def bash_syntax(text):
    r = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    return r.returncode == 0, r.stderr.strip()


def check_commands(rep, where, body):
    ok, err = bash_syntax(body)
    if not ok:
        rep.error(where, f"bash -n: {err}")
    paths = sorted(set(REPO_PATH.findall(body)))
    for p in paths:
        f = REPO / p
        if not f.exists() and p in PENDING:
            rep.pending.add(p)
        elif not f.exists():
            rep.error(where, f"names {p}, which does not exist")
        elif p.startswith("scripts/") and f.suffix in (".sh", ".py", "") and f.is_file() and not f.stat().st_mode & 0o111:
            rep.error(where, f"{p} is not executable")
    bodies = re.findall(r"-d\s+'([^']*)'", body)
    for b in bodies:
        try:
            json.loads(b)
        except json.JSONDecodeError as e:
            rep.error(where, f"JSON body does not parse ({e}): {b[:80]}")
    rep.block(where, "commands", "syntax",
              f"bash -n; {len(paths)} repository path(s) exist; {len(bodies)} JSON bod{'y' if len(bodies) == 1 else 'ies'} parse; NOT run")


def check_output(rep, where, body):
    src = "\n".join(f.read_text(encoding="utf-8") for f in sorted((REPO / "src/bin/libtrie").glob("*.rs")))
    # A verb where a command starts (`$ libtrie VERB`, `| libtrie VERB`, a synopsis line); an unknown one only in a
    # block that shows its refusal.
    verbs = sorted(set(re.findall(r"(?m)(?:^\s*|\$ |\| )libtrie (\w+)", body)))
    for v in verbs:
        if f'"{v}"' not in src and "unknown verb" not in body:
            rep.error(where, f"shows the verb 'libtrie {v}', which src/bin/libtrie/ does not have")
    options = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", body)))
    for o in options:
        if f'name: "{o[2:]}"' not in src and f'"{o}"' not in src and "unknown option" not in body:
            rep.error(where, f"shows the option {o}, which src/bin/libtrie/ does not have")
    for p in sorted(set(REPO_PATH.findall(body))):
        if not (REPO / p).exists():
            rep.error(where, f"names {p}, which does not exist")
    rep.block(where, "output", "illustration",
              f"{len(verbs)} verb(s) and {len(options)} option(s) exist in src/bin/libtrie; output asserted by "
              "tests/cli.rs, NOT run from the page")


def check_example(rep, where, marker, body, checked_files):
    rel, name = marker.group("path"), marker.group("region")
    f = REPO / rel
    what = f"example {rel}" + (f"#{name}" if name else "")
    if not f.is_file():
        rep.error(where, f"{rel} does not exist")
        return
    try:
        expected = region(f, name)
    except ValueError as e:
        rep.error(where, f"{rel}: {e}")
        return
    if body.rstrip("\n") != expected:
        import difflib
        diff = "\n".join(difflib.unified_diff(expected.split("\n"), body.rstrip("\n").split("\n"),
                                              f"{rel}" + (f"#{name}" if name else ""), where, lineterm="", n=1))
        rep.error(where, f"the block differs from {what[8:]}; copy the file's text into the page:\n{diff}")
    if rel not in COVERAGE:
        rep.error(where, f"{rel} is not in scripts/check-docs.py's COVERAGE: say which CI stage builds or runs it")
        return
    level, how, claims = COVERAGE[rel]
    for runner, needle in claims:
        if needle not in (REPO / runner).read_text(encoding="utf-8"):
            rep.error(where, f"COVERAGE says {runner} runs {rel}, but {runner} has no {needle!r}")
    if rel not in checked_files:
        checked_files.add(rel)
        if f.suffix == ".py":
            try:
                compile(f.read_text(encoding="utf-8"), str(f), "exec")
            except SyntaxError as e:
                rep.error(where, f"{rel} does not compile: {e}")
        elif f.suffix == ".sh":
            ok, err = bash_syntax(f.read_text(encoding="utf-8"))
            if not ok:
                rep.error(where, f"{rel}: bash -n: {err}")
    rep.block(where, what, level, how + ("; compiles (Python)" if f.suffix == ".py" else ""))


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(md):
    out = set()
    seen = {}
    in_fence = False
    for line in md.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_links(rep, page, text):
    for n, line in enumerate(text.split("\n"), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() and str(dest.relative_to(REPO)) in PENDING:
                rep.pending.add(str(dest.relative_to(REPO)))
            elif not dest.exists():
                rep.error(f"{page.relative_to(REPO)}:{n}", f"link to {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                rep.error(f"{page.relative_to(REPO)}:{n}", f"link to {target}: no heading #{anchor} in {path or 'this page'}")


def check_readme(rep, text):
    lines = text.split("\n")
    n = len(lines) - (1 if text.endswith("\n") else 0)
    if n > README_MAX_LINES:
        rep.error("README.md", f"{n} lines: at most {README_MAX_LINES} (reference material belongs in docs/)")
    for command in ("scripts/test.sh", "scripts/demo.sh"):
        if command not in text:
            rep.error("README.md", f"the quick start must show {command}")
    for i, line in enumerate(lines, 1):
        for pat, why in ((r"\bissue\s+#?\d+", "an issue number"), (r"load average|\bload \d", "a load average")):
            if re.search(pat, line, re.I):
                rep.error(f"README.md:{i}", f"{why} in the README (history and measurement conditions go to docs/bench/)")
    return n


def main():
    verbose = "-v" in sys.argv
    rep = Report()
    pages = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
    checked_files = set()
    readme_lines = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(REPO)
        if rel.name == "README.md" and page.parent == REPO:
            readme_lines = check_readme(rep, text)
        check_links(rep, page, text)
        for line, marker, info, body in blocks(text):
            where = f"{rel}:{line}"
            if marker is None:
                rep.error(where, "a code block without a marker: put `<!-- example: PATH#REGION -->` (a file CI "
                                 "builds or runs), `<!-- commands -->` or `<!-- output -->` on the line before it")
            elif marker.group("commands"):
                check_commands(rep, where, body)
            elif marker.group("output"):
                check_output(rep, where, body)
            else:
                check_example(rep, where, marker, body, checked_files)
    for line in rep.lines if verbose else []:
        print(line)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(rep.counts.items()))
    print(f"check-docs: {len(pages)} pages (README {readme_lines} lines), {sum(rep.counts.values())} code blocks: "
          f"{summary or 'none'}")
    print("  run = executed by a CI stage with its output checked; compile = compiled/syntax-checked only (the engine"
          " is not in CI); syntax = shell commands checked with bash -n, paths and JSON bodies, not run;"
          " illustration = output shown to a reader, its verbs and options checked against the source, not run")
    if rep.pending:
        print(f"  pending (added by another branch, not here yet): {', '.join(sorted(rep.pending))}")
    if rep.errors:
        for e in rep.errors:
            print(f"ERROR {e}", file=sys.stderr)
        print(f"check-docs: {len(rep.errors)} error(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
