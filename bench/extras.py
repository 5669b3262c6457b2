"""Targeted cases appended to OUT/results.jsonl after (or instead of the tail of) a full run:
    python bench/extras.py --out docs/bench ENGINE:VOCAB:WORKLOAD:FORM:K ...
"""
import argparse
import json
import os
import time

import bench
import common as C

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=str(C.REPO / "docs" / "bench"))
ap.add_argument("--cap", type=float, default=120.0)
ap.add_argument("cases", nargs="+")
a = ap.parse_args()
with open(os.path.join(a.out, "results.jsonl"), "a") as f:
    for case in a.cases:
        eng, vocab, workload, form, k = case.split(":")
        C.make_paths(vocab, workload, form, int(k), 200)
        r = bench.run_case(eng, vocab, workload, form, int(k), a.cap, 15.0, 8.0)
        r.update(run="full", date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), loadavg=os.getloadavg()[0])
        f.write(json.dumps(r) + "\n")
        f.flush()
        print(case, r["status"], r.get("compile_ms"), r.get("mask_mean_us"), (r.get("error") or "")[:120], flush=True)
