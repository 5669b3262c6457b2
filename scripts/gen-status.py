#!/usr/bin/env python3
"""Generates the status tables of the Python and Swift bindings from include/trie.h (its `enum trie_status`, which
cbindgen writes from the one Rust table in src/capi/mod.rs), between the GENERATED markers of:

  python/libtrie/__init__.py        the members of `class Status(enum.IntEnum)`
  bindings/swift/Sources/Trie/Trie.swift   the cases of `TrieError`, its two switches and its message case list

  scripts/gen-status.py           rewrite the tables
  scripts/gen-status.py --check   exit 1 (naming the file) when a table differs from the header (scripts/check-header.sh)

Generated rather than read from the header at run time: a pip-installed package or a Swift build has no header to
read, and the numbers are stable (never renumbered), so a table only changes when a status is added.
"""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "trie.h"
PYTHON = ROOT / "python" / "libtrie" / "__init__.py"
SWIFT = ROOT / "bindings" / "swift" / "Sources" / "Trie" / "Trie.swift"


def statuses():
    """[(NAME without TRIE_ / TRIE_ERR_, number)] of the header's enum trie_status, in order."""
    text = HEADER.read_text()
    body = re.search(r"enum trie_status \{(.*?)\n\}", text, re.S)
    if not body:
        sys.exit(f"gen-status: no `enum trie_status {{ ... }};` in {HEADER}")
    found = re.findall(r"^\s*TRIE_(?:ERR_)?(\w+) = (\d+),?$", body.group(1), re.M)
    if not found or found[0] != ("OK", "0"):
        sys.exit(f"gen-status: cannot read the statuses of {HEADER} (TRIE_OK = 0 first)")
    return [(name, int(n)) for name, n in found]


def camel(name):
    first, *rest = name.lower().split("_")
    return first + "".join(w.capitalize() for w in rest)


def python_block(st):
    return "".join(f"    {name} = {n}\n" for name, n in st)


def swift_blocks(st):
    errs = [(camel(name), n) for name, n in st if n != 0]
    cases = "".join(f"    case {c}(String)\n" for c, _ in errs)
    init = "".join(f"        case {n}: self = .{c}(message)\n" for c, n in errs)
    number = "".join(f"        case .{c}: return {n}\n" for c, n in errs)
    pats = [f".{c}(let m)" for c, _ in errs]
    lines, line = [], "        case "
    for i, p in enumerate(pats):
        piece = p + (",\n" if i + 1 < len(pats) else ":\n")
        if len(line) + len(piece) > 118 and line.strip() != "case":
            lines.append(line.rstrip() + "\n")
            line = "             "
        line += piece.rstrip("\n") + (" " if i + 1 < len(pats) else "")
    lines.append(line.rstrip() + "\n")
    message = "".join(lines)
    return {"cases": cases, "init": init, "status": number, "message": message}


def replace(text, path, tag, block, comment):
    begin = f"{comment} BEGIN GENERATED {tag} (scripts/gen-status.py from include/trie.h; do not edit)\n"
    end = f"{comment} END GENERATED {tag}\n"
    pattern = re.compile(r"^([ \t]*)" + re.escape(begin.strip()) + r"\n(.*?)^[ \t]*" + re.escape(end.strip()) + r"\n", re.S | re.M)
    m = pattern.search(text)
    if not m:
        sys.exit(f"gen-status: no GENERATED {tag} markers in {path}")
    indent = m.group(1)
    return text[: m.start()] + indent + begin + block + indent + end + text[m.end():]


def main():
    check = sys.argv[1:] == ["--check"]
    st = statuses()
    outputs = {PYTHON: [("Status", python_block(st), "#")]}
    outputs[SWIFT] = [(f"TrieError.{k}", v, "//") for k, v in swift_blocks(st).items()]
    stale = []
    for path, blocks in outputs.items():
        old = path.read_text()
        new = old
        for tag, block, comment in blocks:
            new = replace(new, path, tag, block, comment)
        if new != old:
            if check:
                stale.append(path.relative_to(ROOT))
            else:
                path.write_text(new)
                print(f"gen-status: wrote {path.relative_to(ROOT)}")
    if stale:
        for p in stale:
            print(f"gen-status: the status table of {p} differs from include/trie.h: run scripts/gen-status.py", file=sys.stderr)
        sys.exit(1)
    if check:
        print(f"gen-status: the Python and Swift status tables match include/trie.h ({len(st)} statuses)")


if __name__ == "__main__":
    main()
