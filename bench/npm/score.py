#!/usr/bin/env python3
"""Scores trie-llama's answers to bench/npm/tasks.tsv against the npm registry's package names.

Per mode, one JSON line: n answers; `exact`: answers that are a package name as they stand (trie-llama's
"valid"); `named_existing`: answers whose named package exists once the answer is read leniently (first line,
surrounding quotes/backticks/asterisks, an `npm install` prefix and trailing punctuation dropped, then the first
word, as written or lower-cased); `fitting`: answers naming one of the task's well-known packages; `not_existing`:
the names read that are no package. With --table, a Markdown table of every answer per mode."""
import argparse
import json
import re
import sys


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append({"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def named(answer):
    """The package name an answer gives, read leniently ('' when none)."""
    line = answer.strip().split("\n")[0].strip()
    line = re.sub(r"^(npm (install|i|add)|yarn add|pnpm add)\s+", "", line.strip("`*\"' "))
    words = line.split()
    if not words:
        return ""
    return words[0].strip("`*\"'").rstrip(".,;:!)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", required=True)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--outputs", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--log", help="trie-llama's output: its JSON lines (timings) are attached")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    with open(a.names, encoding="utf-8") as f:
        names = set(f.read().split("\n"))
    names.discard("")
    tasks = []
    with open(a.tasks, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            task, ok = line.rstrip("\n").split("\t")
            tasks.append((task, set(ok.split(","))))
    answers = {}
    with open(a.outputs, encoding="utf-8") as f:
        for line in f:
            mode, i, out = line.rstrip("\n").split("\t", 2)
            answers.setdefault(mode, {})[int(i)] = unescape(out)
    timings = {}
    if a.log:
        with open(a.log, encoding="utf-8") as f:
            for line in f:
                if line.startswith("{"):
                    j = json.loads(line)
                    timings[j.get("mode")] = j
    for mode, got in answers.items():
        assert sorted(got) == list(range(len(tasks))), f"{mode}: answers for {len(got)} of {len(tasks)} tasks"
        exact = existing = fitting = 0
        missing = []
        rows = []
        for i, (task, ok) in enumerate(tasks):
            ans = got[i]
            n = named(ans)
            is_exact = ans in names
            hit = next((c for c in (n, n.lower()) if c and c in names), None)
            fit = hit is not None and hit.lower() in {o.lower() for o in ok}
            exact += is_exact
            existing += hit is not None
            fitting += fit
            if hit is None:
                missing.append(n or ans)
            rows.append((task, ans, hit is not None, fit))
        rec = {"kind": "npm_packages", "model": a.model, "mode": mode, "n": len(tasks), "exact": exact,
               "named_existing": existing, "fitting": fitting, "not_existing": missing}
        t = timings.get(mode)
        if t:
            rec["harness"] = t
        print(json.dumps(rec))
        if a.table:
            print(f"\n| task | {mode} answer | exists | fits |\n|---|---|:-:|:-:|")
            for task, ans, ex, fit in rows:
                shown = ans.replace("\n", " ").replace("|", "\\|")[:60]
                print(f"| {task} | `{shown}` | {'yes' if ex else '**no**'} | {'yes' if fit else ''} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
