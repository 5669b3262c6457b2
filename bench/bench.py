"""Driver of the side-by-side benchmark: every (engine, vocabulary, workload, form, K) case runs in its own process
under a wall-clock cap; a time-out or a crash is recorded as a result. Appends JSON lines to OUT/results.jsonl.

    python bench/bench.py --out docs/bench [--quick] [--cap 120] [--max-k 100000] [--groups VOCAB:WORKLOAD:FORM,...]

Engines: libtrie-c (libtrie natively through the C ABI, bench/trie_native.c), libtrie-py (the ctypes module
python/libtrie), xgrammar, llguidance (default limits, and again with raised limits where the default ones fail),
outlines (outlines-core), gbnf (llama.cpp's grammar sampler, bench/gbnf_bench.c). Once an engine fails or times out
at some K, the larger K of the same vocabulary, workload and form are recorded as skipped, not run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import common as C

BIN = C.CACHE / "bench-bin"
PY_ENGINES = ["libtrie-py", "xgrammar", "llguidance", "llguidance-regex", "outlines"]
ENGINES = ["libtrie-c"] + PY_ENGINES + ["gbnf"]


def plan(quick: bool, max_k: int) -> List[Tuple[str, str, str, List[int], List[str]]]:
    """(vocab, workload, form, Ks, engines) groups, most important first (a run cut short keeps the head)."""
    ks = [k for k in [10, 100, 1_000, 10_000, 100_000] if k <= max_k]
    if quick:
        return [("qwen2", "tools", "raw", [k for k in ks if k <= 1000], ENGINES),
                ("qwen2", "cities", "json", [k for k in ks if k <= 100], ENGINES)]
    groups = [
        ("qwen2", "tools", "raw", ks, ENGINES), ("qwen2", "tools", "json", ks, ENGINES),
        ("qwen2", "cities", "raw", ks, ENGINES), ("qwen2", "geonames", "raw", ks, ENGINES),
        ("qwen2", "words", "raw", ks, ENGINES),
        ("llama-bpe", "tools", "raw", ks, ENGINES),
    ]
    if max_k >= 100_000:  # the engines still standing at 100K (GBNF and Outlines-core are not)
        groups.append(("qwen2", "tools", "raw", [1_000_000], ["libtrie-c", "libtrie-py", "llguidance", "xgrammar"]))
    return groups + [
        ("qwen2", "cities", "json", ks, ENGINES), ("llama-bpe", "cities", "raw", ks, ENGINES),
        ("qwen2", "words", "json", ks, ENGINES),
    ]


def run_case(engine: str, vocab: str, workload: str, form: str, k: int, cap: float, compile_budget: float,
             mask_budget: float) -> Dict[str, Any]:
    base = {"engine": engine, "vocab": vocab, "workload": workload, "form": form, "k": k}
    if engine in ("libtrie-c", "gbnf"):
        exe = BIN / ("trie_native" if engine == "libtrie-c" else "gbnf_bench")
        cmd = [str(exe), str(C.vocab_path(vocab)), str(C.SETS / f"{workload}-{k}.txt"),
               str(C.paths_file(vocab, workload, form, k)), form, str(compile_budget), str(mask_budget)]
    else:
        cmd = [sys.executable, str(Path(__file__).with_name("run_case.py")), engine, vocab, workload, form, str(k),
               "--compile-budget", str(compile_budget), "--mask-budget", str(mask_budget)]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "error": f"no result within {cap:.0f} s", "wall_s": cap}
    wall = time.perf_counter() - t
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {**base, "status": "error", "error": f"exit {p.returncode}: " + " | ".join(tail)[:400],
                "wall_s": wall}
    res = json.loads(lines[-1])
    return {**base, **res, "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(C.REPO / "docs" / "bench"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cap", type=float, default=120.0, help="wall-clock cap of one case, seconds")
    ap.add_argument("--max-k", type=int, default=100_000)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--min-k", type=int, default=0, help="skip the smaller K of each group")
    ap.add_argument("--groups", default="", help="only these groups, e.g. llama-bpe:cities:raw,qwen2:words:json")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    engines = a.engines.split(",")
    compile_budget, mask_budget = (3.0, 2.0) if a.quick else (15.0, 8.0)
    n_paths = 50 if a.quick else 200
    with open(results, "a") as f:
        only = {g for g in a.groups.split(",") if g}
        for vocab, workload, form, ks, group_engines in plan(a.quick, a.max_k):
            if only and f"{vocab}:{workload}:{form}" not in only:
                continue
            dead: Dict[str, str] = {}
            for k in [k for k in ks if k >= a.min_k]:
                C.make_paths(vocab, workload, form, k, n_paths)
                for engine in [e for e in engines if e in group_engines]:
                    variants = [engine]
                    if engine == "llguidance" and "llguidance" in dead:
                        variants.append("llguidance-raised")
                    for eng in variants:
                        if eng in dead:
                            res = {"engine": eng, "vocab": vocab, "workload": workload, "form": form, "k": k,
                                   "status": "skipped", "error": f"{dead[eng]} at a smaller K"}
                        else:
                            res = run_case(eng, vocab, workload, form, k, a.cap, compile_budget, mask_budget)
                            if res["status"] in ("timeout", "error"):
                                dead[eng] = res["status"]
                                if eng == "llguidance":
                                    variants.append("llguidance-raised")
                        res["run"] = "quick" if a.quick else "full"
                        res["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                        res["loadavg"] = os.getloadavg()[0]
                        f.write(json.dumps(res) + "\n")
                        f.flush()
                        print(f"{vocab:9} {workload:6} {form:4} K={k:<7} {eng:17} {res['status']:8} "
                              f"compile={res.get('compile_ms', float('nan')):10.2f} ms "
                              f"mask={res.get('mask_mean_us', float('nan')):10.2f} us", flush=True)


if __name__ == "__main__":
    main()
