"""vLLM `choice` requests as users send them (``StructuredOutputsParams(choice=members)``, no libtrie field), served by
one engine configuration per process (so that vLLM's process-wide plugins and patches of one do not leak into
another):

- ``libtrie``: ``LIBTRIE_VLLM_ROUTE=1`` (set by scripts/bench-vllm-routing.sh) with ``TrieScheduler``: routed;
- ``xgrammar`` / ``guidance``: vLLM's own backends.

Per K (tools-K.txt) and batch B: the cold time to first token (the first request naming the set, max_tokens=1, its
compile included), the warm TTFT (mean of --rounds), requests/s of B concurrent greedy decodes (up to 64 tokens), and
the share of outputs that are members. Appends JSON lines to --out.
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True, choices=["libtrie", "xgrammar", "guidance"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sets", required=True)
    ap.add_argument("--ks", default="100,1000,10000")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ks = [int(k) for k in a.ks.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    members = {k: (Path(a.sets) / f"tools-{k}.txt").read_text(encoding="utf-8").split("\n")[:-1] for k in ks}
    if a.engine == "libtrie" and os.environ.get("LIBTRIE_VLLM_ROUTE") != "1":
        raise SystemExit("the libtrie engine needs LIBTRIE_VLLM_ROUTE=1 in the environment")

    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kw = {"structured_outputs_config": {"backend": "xgrammar" if a.engine == "libtrie" else a.engine}}
    if a.engine == "libtrie":
        kw["scheduler_cls"] = "libtrie.vllm.TrieScheduler"
    t = time.perf_counter()
    llm = LLM(model=a.model, enforce_eager=True, max_model_len=512, max_num_seqs=max(batches), seed=0, **kw)
    load_s = time.perf_counter() - t
    out = open(a.out, "a")
    for k in ks:
        cold = None
        for b in batches:
            prompts = [f"Which tool should handle request #{i} (batch {b})? Tool:" for i in range(b)]

            def run(max_tokens, n=b):
                p = SamplingParams(temperature=0.0, max_tokens=max_tokens,
                                   structured_outputs=StructuredOutputsParams(choice=members[k]))
                t0 = time.perf_counter()
                outs = llm.generate(prompts[:n], [p] * n, use_tqdm=False)
                return time.perf_counter() - t0, outs

            if cold is None:
                cold, _ = run(1, 1)
            ttft = [run(1)[0] for _ in range(a.rounds)]
            walls, n_valid, n_out, n_tokens, finish = [], 0, 0, 0, {}
            for _ in range(a.rounds):
                w, outs = run(64)
                walls.append(w)
                for o in outs:
                    n_out += 1
                    n_valid += o.outputs[0].text in members[k]
                    n_tokens += len(o.outputs[0].token_ids)
                    reason = str(o.outputs[0].finish_reason)
                    finish[reason] = finish.get(reason, 0) + 1
            row = {"finish": finish, "engine": a.engine, "k": k, "batch": b, "rounds": a.rounds, "cold_ttft_s": cold,
                   "ttft_s": statistics.mean(ttft), "req_per_s": a.rounds * b / sum(walls),
                   "tokens_per_req": n_tokens / n_out, "valid_pct": 100.0 * n_valid / n_out, "engine_load_s": load_s,
                   "loadavg": os.getloadavg()[0], "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row), flush=True)
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
