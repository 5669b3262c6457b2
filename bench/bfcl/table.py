#!/usr/bin/env python3
"""The Markdown table of docs/bench/bfcl.md from run.py's summary lines: table.py SUMMARY.jsonl [...]
(the last line of each engine x mode x category wins)."""
import json
import sys

rows = {}
for path in sys.argv[1:]:
    for line in open(path, encoding="utf-8"):
        if line.strip():
            s = json.loads(line)
            rows[(s["engine"], s["category"], s["mode"])] = s
print("| engine | category | mode | cases | calls that parse | names in the set | AST accuracy | gold in top 5 "
      "| median TTFT | decode tok/s | failures |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
order = {"stock": 0, "libtrie": 1, "catalog": 2}
for (engine, cat, mode), s in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9))):
    n = s["cases"]
    pct = lambda k: f"{s[k]} ({100 * s[k] / n:.0f} %)" if n else "-"  # noqa: E731
    gold = f"{s['gold_in_candidates']}/{n}" if s.get("gold_in_candidates") is not None else "-"
    fails = f"{s['n_failures']}: " + "; ".join(s["failures"]) if s["n_failures"] else "0"
    ttft = f"{s['ttft_s']:.2f} s" if s["ttft_s"] is not None else "-"
    tps = f"{s['tok_s']:.1f}" if s["tok_s"] else "-"
    print(f"| {engine} | {cat} | {mode} | {n} | {pct('parse')} | {pct('names_in_set')} | {pct('ast')} | {gold} "
          f"| {ttft} | {tps} | {fails} |")
