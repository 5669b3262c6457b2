"""vLLM with libtrie's logits processor against vLLM's own structured outputs (``choice``) with the xgrammar and
guidance backends, in one run on one machine: requests/s and time to first token, per set size K and batch size B.

    scripts/bench-vllm.sh [--ks 100,1000,10000] [--batches 1,8,32] [--rounds 2]

Per engine, K and B: a *cold* round (the first request naming that set: its compile is included) with
``max_tokens=1`` gives the cold time to first token; then ``--rounds`` rounds with ``max_tokens=1`` (warm TTFT, mean)
and ``--rounds`` rounds of full decodes of B concurrent requests (requests/s = requests / wall time). Every output is
checked against the set (valid %). Greedy decoding, the same prompts for every engine.

Engines: ``libtrie`` (the set named by file path, compiled once per process and shared), ``libtrie-inline`` (the
members inline in every request, as ``choice`` sends them), ``xgrammar`` and ``guidance`` (``StructuredOutputsParams
(choice=members)``; each backend gets its own engine). Writes JSON lines (--out) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--sets", required=True, help="folder of tools-K.txt files")
    ap.add_argument("--ks", default="100,1000,10000")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--engines", default="libtrie,libtrie-inline,xgrammar,guidance")
    ap.add_argument("--out", required=True, help="JSON lines, appended")
    ap.add_argument("--md", help="write the Markdown report of this run here")
    a = ap.parse_args()

    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from libtrie.vllm import TrieLogitsProcessor

    ks = [int(k) for k in a.ks.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    engines = a.engines.split(",")
    sets = {k: (Path(a.sets) / f"tools-{k}.txt") for k in ks}
    # The operator's settings (inherited by the engine processes): the set directory, and inline sets as large as
    # the largest K (the default bound, 10,000 strings, is for servers of remote clients).
    os.environ["LIBTRIE_SET_DIR"] = a.sets
    os.environ["LIBTRIE_MAX_INLINE_STRINGS"] = str(max(ks))
    os.environ["LIBTRIE_MAX_INLINE_BYTES"] = str(max(sets[k].stat().st_size for k in ks))  # a newline per member
    members = {k: p.read_text(encoding="utf-8").split("\n")[:-1] for k, p in sets.items()}
    results: List[Dict[str, Any]] = []
    out = open(a.out, "a")

    def params(engine: str, k: int, max_tokens: int) -> "SamplingParams":
        common = dict(temperature=0.0, max_tokens=max_tokens)
        if engine == "libtrie":
            return SamplingParams(extra_args={"libtrie": {"set": f"tools-{k}"}}, **common)
        if engine == "libtrie-inline":
            return SamplingParams(extra_args={"libtrie": {"strings": members[k]}}, **common)
        return SamplingParams(structured_outputs=StructuredOutputsParams(choice=members[k]), **common)

    backends = {"libtrie": "xgrammar", "libtrie-inline": "xgrammar", "xgrammar": "xgrammar", "guidance": "guidance"}
    for backend in dict.fromkeys(backends[e] for e in engines):
        t = time.perf_counter()
        llm = LLM(model=a.model, enforce_eager=True, max_model_len=512, max_num_seqs=max(batches), seed=0,
                  logits_processors=[TrieLogitsProcessor], structured_outputs_config={"backend": backend})
        load_s = time.perf_counter() - t
        for engine in [e for e in engines if backends[e] == backend]:
            for k in ks:
                cold_done = False
                for b in batches:
                    prompts = [f"Which tool should handle request #{i} (batch {b})? Tool:" for i in range(b)]

                    def run(max_tokens: int):
                        t0 = time.perf_counter()
                        outs = llm.generate(prompts, [params(engine, k, max_tokens)] * b, use_tqdm=False)
                        return time.perf_counter() - t0, outs

                    cold = None
                    if not cold_done:
                        cold, _ = run(1)
                        cold_done = True
                    ttft = [run(1)[0] for _ in range(a.rounds)]
                    walls, n_valid, n_out, n_tokens = [], 0, 0, 0
                    for _ in range(a.rounds):
                        w, outs = run(64)
                        walls.append(w)
                        for o in outs:
                            n_out += 1
                            n_valid += o.outputs[0].text in members[k]
                            n_tokens += len(o.outputs[0].token_ids)
                    row = {"engine": engine, "backend": backend, "k": k, "batch": b, "rounds": a.rounds,
                           "cold_ttft_s": cold, "ttft_s": statistics.mean(ttft),
                           "req_per_s": (a.rounds * b) / sum(walls), "tokens_per_req": n_tokens / n_out,
                           "valid_pct": 100.0 * n_valid / n_out, "engine_load_s": load_s,
                           "loadavg": os.getloadavg()[0], "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                    results.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(f"{engine:15} K={k:<6} B={b:<3} req/s={row['req_per_s']:8.2f} ttft={row['ttft_s'] * 1e3:8.1f} ms"
                          f" cold={'' if cold is None else f'{cold * 1e3:.0f} ms':>9} valid={row['valid_pct']:.0f}%"
                          f" tokens/req={row['tokens_per_req']:.1f}", flush=True)
        del llm
    if a.md:
        Path(a.md).write_text(report(results))


def report(rows: List[Dict[str, Any]]) -> str:
    """A Markdown table of one run: per K and B, requests/s and TTFT of each engine, and libtrie's ratios."""
    by = {(r["engine"], r["k"], r["batch"]): r for r in rows}
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    peers = [e for e in engines if not e.startswith("libtrie")]
    lines = ["| K | batch | " + " | ".join(f"{e} req/s" for e in engines) + " | "
             + " | ".join(f"libtrie ÷ {p}" for p in peers) + " | "
             + " | ".join(f"{e} TTFT ms (cold)" for e in engines) + " | valid % |",
             "|" + "---:|" * (2 + 2 * len(engines) + len(peers) + 1)]
    for k in sorted({r["k"] for r in rows}):
        for b in sorted({r["batch"] for r in rows}):
            cells = [by.get((e, k, b)) for e in engines]
            if not any(cells):
                continue
            rps = [f"{c['req_per_s']:.2f}" if c else "—" for c in cells]
            lt = by.get(("libtrie", k, b))
            ratios = [f"{lt['req_per_s'] / by[(p, k, b)]['req_per_s']:.1f}×" if lt and (p, k, b) in by else "—"
                      for p in peers]
            ttft = [(f"{c['ttft_s'] * 1e3:.0f}" + (f" ({c['cold_ttft_s'] * 1e3:.0f})" if c.get("cold_ttft_s") else ""))
                    if c else "—" for c in cells]
            valid = "/".join(f"{c['valid_pct']:.0f}" for c in cells if c)
            lines.append(f"| {k:,} | {b} | " + " | ".join(rps) + " | " + " | ".join(ratios) + " | "
                         + " | ".join(ttft) + f" | {valid} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
