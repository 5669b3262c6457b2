#!/usr/bin/env python3
"""Retrieval recall@k of libtrie's tool search over the pooled BFCL catalog (issue 37, item 3's measured cause):

  bench/bfcl/recall.py --limit 50 --seed 37 [--k 1,3,5,10,20] [--category C,...] [--out RECALL.jsonl]

No model: for each case (the same cases run.py draws with --limit/--seed), the question's text (every user
message, cut to the search's bounds as run.py's catalog mode does) is searched with libtrie.search.ToolSearch over
the catalog, and the case is found at k when every function of BFCL's answer (same name and schema: the catalog's
NAME__vK) is among the top k. Prints one markdown row per category; --out gets one JSON line per case with the rank
of each gold function (null: not in the top max(k)). Run it with the venv of bench/bfcl/setup.sh."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bfcl  # noqa: E402
import run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--k", default="1,3,5,10,20")
    ap.add_argument("--category", default="simple_python,multiple,live_simple,parallel,parallel_multiple")
    ap.add_argument("--out")
    args = ap.parse_args()
    ks = sorted({int(k) for k in args.k.split(",")})
    if not ks or ks[0] < 1:
        ap.error("--k: positive integers separated by commas")
    categories = args.category.split(",")
    for c in categories:
        if c not in bfcl.CATEGORIES:
            ap.error(f"--category {c!r}: expected one of {', '.join(bfcl.CATEGORIES)}")
    tools, base = bfcl.catalog()
    index = run.Catalog(tools)
    by_key = bfcl.catalog_by_key(tools, base)
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    print(f"catalog: {len(tools)} tools, {len(set(base.values()))} distinct names; cases: {args.limit} a category, "
          f"seed {args.seed}")
    print("| category | cases | " + " | ".join(f"all gold in top {k}" for k in ks) + " |")
    print("|---|---:|" + "---:|" * len(ks))
    for category in categories:
        cases = bfcl.drawn(category, args.limit, args.seed)
        found = {k: 0 for k in ks}
        for case in cases:
            query = " ".join(m["content"] for m in case["messages"] if m.get("role") == "user")
            ranked = [index.tools[i]["function"]["name"] for i, _ in index.top(query, ks[-1])]
            called = {next(iter(a)).replace(".", "_") for a in case["answer"]}  # the functions the answer calls
            gold = sorted({bfcl.catalog_name_of(t, by_key) for t in bfcl.tools_of(case["functions"])
                           if t["function"]["name"] in called})
            ranks = {g: (ranked.index(g) + 1 if g in ranked else None) for g in gold}
            for k in ks:
                found[k] += all(r is not None and r <= k for r in ranks.values())
            if out:
                out.write(json.dumps({"category": category, "id": case["id"], "gold_ranks": ranks}) + "\n")
        print(f"| {category} | {len(cases)} | " + " | ".join(f"{found[k]} ({100 * found[k] / len(cases):.0f} %)"
                                                              for k in ks) + " |")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
