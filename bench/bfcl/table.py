#!/usr/bin/env python3
"""The Markdown table of docs/bench/bfcl.md: table.py [--limit N] [--cases] FILE.jsonl [...], each file either
run.py's summary lines (the last line of each engine x mode x category wins) or its answer lines (one per case, with
an "id"; summarized here the way run.py does, for a run stopped before its summary line: the row then says
"(partial)"; the load column is then the lowest and highest 1-minute load average at the end of the cell's cases).
--limit N: every cell from its answers' first N cases (runs of a larger limit cut to the table's), "(partial)"
where a cell has fewer.
--cases: also the "right function" column (every function the case's answer calls is called, and nothing else, by
name; catalog names NAME__vK read as NAME) and the answers at max_tokens; needs bench/bfcl/setup.sh's venv (the
BFCL data), and answer files."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summary  # noqa: E402


def answer_names(case):
    """The names the case's possible answer calls (OpenAI style: "." -> "_"), as a sorted list."""
    return sorted(next(iter(a)).replace(".", "_") for a in case["answer"])


def right_function(row, gold):
    calls = row.get("tool_calls") or []
    names = sorted(c["name"].split("__v")[0] for c in calls)
    return bool(calls) and set(names) == set(gold) and len(names) == len(gold)


def summarize(rows, gold=None):
    s = {"engine": rows[0]["engine"], "mode": rows[0]["mode"], "category": rows[0]["category"], **summary.counts(rows),
         "load_range": [min(r["load"] for r in rows), max(r["load"] for r in rows)] if all(
             r.get("load") is not None for r in rows) else None,
         "partial": True}
    mode = s["mode"]
    if gold is not None:
        s["right_function"] = sum(right_function(r, gold[r["id"]]) for r in rows)
        s["at_max_tokens"] = sum(1 for r in rows if r["status"] == 200 and r.get("completion_tokens") is not None and r.get("max_tokens")
                                 and r["completion_tokens"] >= r["max_tokens"] and mode != "deferred")
    return s


def main(args):
    limit, with_cases = None, False
    while args[:1] and args[0].startswith("--"):
        if args[0] == "--limit":
            limit, args = int(args[1]), args[2:]
        elif args[0] == "--cases":
            with_cases, args = True, args[1:]
        else:
            sys.exit(f"usage: {sys.argv[0]} [--limit N] [--cases] FILE.jsonl...")
    rows, answers = {}, {}
    for path in args:
        for line in open(path, encoding="utf-8"):
            if line.strip():
                s = json.loads(line)
                key = (s["engine"], s["category"], s["mode"])
                if "id" in s:
                    answers.setdefault(key, {})[s["id"]] = s  # a case run again: its last answer
                else:
                    rows[key] = s
    gold = None
    if with_cases:
        sys.path.insert(0, HERE)
        import bfcl
        gold = {}
        for cat in {k[1] for k in answers}:
            for c in bfcl.cases(cat):
                gold[c["id"]] = answer_names(c)
    summarized = set(rows)
    for key, by_id in answers.items():
        if limit:
            rows[key] = summarize(list(by_id.values())[:limit], gold)
            rows[key]["partial"] = len(by_id) < limit
        elif key not in rows or rows[key]["cases"] < len(by_id) or gold is not None:
            rows[key] = summarize(list(by_id.values()), gold)
            rows[key]["partial"] = key not in summarized
    extra_h = " right function |" if gold is not None else ""
    extra_s = "---:|" if gold is not None else ""
    print(f"| engine | category | mode | cases | calls that parse | names in the set |{extra_h} AST accuracy "
          "| gold in top 5 | prompt tokens | median TTFT | decode tok/s |" + (" at max_tokens |" if gold else "")
          + " failures | load |")
    print(f"|---|---|---|---:|---:|---:|{extra_s}---:|---:|---:|---:|---:|" + ("---:|" if gold else "") + "---|---:|")
    order = {"stock": 0, "libtrie": 1, "catalog": 2, "deferred": 3}
    for (engine, cat, mode), s in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9))):
        n = s["cases"]
        pct = lambda k: f"{s[k]} ({100 * s[k] / n:.0f} %)" if n else "-"  # noqa: E731
        gold_c = f"{s['gold_in_candidates']}/{n}" if s.get("gold_in_candidates") is not None else "-"
        fails = f"{s['n_failures']}: " + "; ".join(s["failures"]) if s["n_failures"] else "0"
        ttft = f"{s['ttft_s']:.2f} s" if s["ttft_s"] is not None else "-"
        tps = f"{s['tok_s']:.1f}" if s["tok_s"] else "-"
        ptok = f"{s['prompt_tokens']:.0f}" if s.get("prompt_tokens") else "-"
        # answers: the 1-minute load average when each case ended, lowest-highest; a summary line: when the run ended
        lr = s.get("load_range")
        load = f"{lr[0]:.1f}-{lr[1]:.1f}" if lr else f"{s['load'][0]:.1f}" if s.get("load") else "-"
        part = " (partial)" if s.get("partial") else ""
        right = f" {pct('right_function')} |" if gold is not None else ""
        at_max = f" {s['at_max_tokens']} |" if gold is not None else ""
        print(f"| {engine} | {cat} | {mode}{part} | {n} | {pct('parse')} | {pct('names_in_set')} |{right} "
              f"{pct('ast')} | {gold_c} | {ptok} | {ttft} | {tps} |{at_max} {fails} | {load} |")


if __name__ == "__main__":
    main(sys.argv[1:])
