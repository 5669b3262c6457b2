#!/usr/bin/env python3
"""The markdown tables of bench/npm/quiet-item4.sh from its JSON lines: `item4-table.py RESULTS.jsonl SAME`, where
SAME says whether the two layouts saved byte-identical cities files (yes / NO). The columns are named by the
environment's OLD_COMMIT and NEW_COMMIT (the script's defaults otherwise)."""
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
same = sys.argv[2]
def cells(set_, key, fmt=lambda v: f"{v:,}" if isinstance(v, int) else f"{v:.2f}"):
    out = []
    for lay in ("old", "new"):
        vals = [r["run"] for r in rows if r["layout"] == lay and r["set"] == set_]
        vs = [key(v) for v in vals]
        out.append(" / ".join(fmt(v) for v in vs) if vs else "")
    return out
def line(name, set_, key, **kw):
    o, n = cells(set_, key, **kw)
    print(f"| {name} | {o} | {n} |")
loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
print(f"\nload average (1 min) over the runs: {min(loads):.2f} to {max(loads):.2f}\n")
old_name, new_name = os.environ.get("OLD_COMMIT", "189d39f"), os.environ.get("NEW_COMMIT", "rows")
print(f"| all npm names, qwen2 (runs 1 / 2) | old ({old_name}) | new ({new_name}) |")
print("|---|---:|---:|")
mb = lambda v: f"{v / 1e6:,.1f} MB"
line("automaton (`memory_usage`)", "npm", lambda r: r["automaton_bytes"], fmt=mb)
line("saved file (version)", "npm", lambda r: (r["file_bytes"], r["file_version"]), fmt=lambda v: f"{v[0] / 1e6:,.1f} MB (v{v[1]})")
parts = []  # every part either layout reports, in the order they first appear, those of 0 bytes everywhere left out
for r in rows:
    if r["set"] == "npm":
        parts += [p for p, b in r["run"]["parts"].items() if p not in parts and b]
for part in parts:
    line(f"— `{part}`", "npm", lambda r, p=part: r["parts"].get(p, 0), fmt=mb)
line("transitions stored", "npm", lambda r: r["transitions"])
line("compile, ms", "npm", lambda r: r["compile_ms"], fmt=lambda v: f"{v:,.0f}")
line("— trie / align / freeze, ms", "npm", lambda r: (r["trie_ms"], r["align_ms"], r["freeze_ms"]),
     fmt=lambda v: f"{v[0]:,.0f}·{v[1]:,.0f}·{v[2]:,.0f}")
line("peak RSS of the compile", "npm", lambda r: r["peak_rss"], fmt=mb)
line("masks per state p50, µs", "npm", lambda r: r["mask_us_p50"])
line("masks per state p99, µs", "npm", lambda r: r["mask_us_p99"])
line("masks per state max, µs", "npm", lambda r: r["mask_us_max"])
line("first use after `load_lazy` p50, µs", "npm", lambda r: r["first_use_us_p50"])
line("first use after `load_lazy` p99, µs", "npm", lambda r: r["first_use_us_p99"])
line("first mask after an eager `load` (the walk alone) p99, µs", "npm", lambda r: r.get("first_eager_us_p99", float("nan")))
line("`advance` p50, ns", "npm", lambda r: r["advance_ns_p50"], fmt=lambda v: f"{v:.0f}")
line("`load` (eager), ms", "npm", lambda r: r["load_ms"], fmt=lambda v: f"{v:,.0f}")
line("`load_lazy`, ms", "npm", lambda r: r["load_lazy_ms"])
print()
print("| 100,000 cities (runs 1 / 2 / 3) | old | new |")
print("|---|---:|---:|")
line("compile, ms", "cities", lambda r: r["compile_ms"], fmt=lambda v: f"{v:,.0f}")
line("automaton, file bytes", "cities", lambda r: (r["automaton_bytes"], r["file_bytes"]), fmt=lambda v: f"{v[0]:,} · {v[1]:,}")
line("masks p50 / p99, µs", "cities", lambda r: (r["mask_us_p50"], r["mask_us_p99"]), fmt=lambda v: f"{v[0]:.2f}·{v[1]:.2f}")
line("first use after `load_lazy` p99, µs", "cities", lambda r: r["first_use_us_p99"])
line("`advance` p50, ns", "cities", lambda r: r["advance_ns_p50"], fmt=lambda v: f"{v:.0f}")
print(f"\ncities files byte-identical (old vs new, last run): {same}")
