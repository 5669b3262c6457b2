#!/usr/bin/env python3
"""The Markdown table of docs/bench/bfcl.md: table.py FILE.jsonl [...], each file either run.py's summary lines
(the last line of each engine x mode x category wins) or its answer lines (one per case, with an "id"; summarized
here the way run.py does, for a run stopped before its summary line: the row then says "(partial)"; the load column
is then the lowest and highest 1-minute load average at the end of the cell's cases).
--limit N: every cell from its answers' first N cases (runs of a larger limit cut to the table's), "(partial)"
where a cell has fewer."""
import json
import statistics
import sys


def summarize(rows):
    ok = [r for r in rows if r["status"] == 200]
    med = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    mode = rows[0]["mode"]
    return {"engine": rows[0]["engine"], "mode": mode, "category": rows[0]["category"], "cases": len(rows),
            "parse": sum(r["parse"] for r in rows), "names_in_set": sum(r["names_in_set"] for r in rows),
            "ast": sum(r["ast_valid"] for r in rows),
            "gold_in_candidates": sum(r.get("gold_in_candidates", False) for r in rows) if mode == "catalog" else None,
            "ttft_s": med([r["ttft_s"] for r in ok if r.get("ttft_s") is not None]),
            "tok_s": med([r["tok_s"] for r in ok if r.get("tok_s")]),
            "failures": sorted({f"{r['status']}: {r['error'][:120]}" for r in rows if r["status"] != 200})[:5],
            "n_failures": len(rows) - len(ok),
            "load_range": [min(r["load"] for r in rows), max(r["load"] for r in rows)] if all(
                r.get("load") is not None for r in rows) else None,
            "partial": True}


args = sys.argv[1:]
limit = None
if args[:1] == ["--limit"]:
    limit, args = int(args[1]), args[2:]
rows = {}
answers = {}
for path in args:
    for line in open(path, encoding="utf-8"):
        if line.strip():
            s = json.loads(line)
            key = (s["engine"], s["category"], s["mode"])
            if "id" in s:
                answers.setdefault(key, {})[s["id"]] = s  # a case run again: its last answer
            else:
                rows[key] = s
for key, by_id in answers.items():
    if limit:
        rows[key] = summarize(list(by_id.values())[:limit])
        rows[key]["partial"] = len(by_id) < limit
    elif key not in rows or rows[key]["cases"] < len(by_id):
        rows[key] = summarize(list(by_id.values()))
print("| engine | category | mode | cases | calls that parse | names in the set | AST accuracy | gold in top 5 "
      "| median TTFT | decode tok/s | failures | load |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
order = {"stock": 0, "libtrie": 1, "catalog": 2}
for (engine, cat, mode), s in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9))):
    n = s["cases"]
    pct = lambda k: f"{s[k]} ({100 * s[k] / n:.0f} %)" if n else "-"  # noqa: E731
    gold = f"{s['gold_in_candidates']}/{n}" if s.get("gold_in_candidates") is not None else "-"
    fails = f"{s['n_failures']}: " + "; ".join(s["failures"]) if s["n_failures"] else "0"
    ttft = f"{s['ttft_s']:.2f} s" if s["ttft_s"] is not None else "-"
    tps = f"{s['tok_s']:.1f}" if s["tok_s"] else "-"
    # answers: the 1-minute load average when each case ended, lowest-highest; a summary line: when the run ended
    lr = s.get("load_range")
    load = f"{lr[0]:.1f}-{lr[1]:.1f}" if lr else f"{s['load'][0]:.1f}" if s.get("load") else "-"
    part = " (partial)" if s.get("partial") else ""
    print(f"| {engine} | {cat} | {mode}{part} | {n} | {pct('parse')} | {pct('names_in_set')} | {pct('ast')} | {gold} "
          f"| {ttft} | {tps} | {fails} | {load} |")
