#!/usr/bin/env python3
"""Jump-forward through llama-server (issue 31): model steps and time per answer, unconstrained vs libtrie vs libtrie
with jump-forward (the set's forced runs as the slot's speculative draft, --trie-jump-forward), one task of
scripts/bench-jump.sh --server. Standard library only; started by bench-jump.sh, which starts the two servers:

  --plain URL   a server with --trie-jump-forward 0, for unconstrained requests
  --trie URL    another such server, for libtrie requests
  --jump URL    the same server with jump-forward on, for libtrie requests

One server per mode, so each keeps its prompt cache: every answer prefills its question after the shared system
prompt and few-shot turns (the same work in every mode). For each prompt the three modes run one after the other
(batch 1, greedy), so load changes hit the modes alike. A mode's model steps
per answer are the server's predicted tokens less the draft tokens it accepted (timings: predicted_n -
draft_n_accepted: the prefill's step, which gives the first token, and one step per verification or plain decode).
Prints one JSON line per mode: task, mode, n, valid, accuracy, steps, tokens, draft, accepted, prefill_ms, decode_ms,
wall_ms (sums).
"""
import argparse
import json
import time
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        res = json.load(r)
    return res, (time.monotonic() - t) * 1000


def chatml(system, shots, question):
    out = f"<|im_start|>system\n{system}<|im_end|>\n"
    for q, a in shots:
        out += f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"
    return out + f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def read_tsv(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                q, _, a = line.partition("\t")
                rows.append((q, a))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain", required=True)
    ap.add_argument("--trie", required=True)
    ap.add_argument("--jump", required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--set", required=True, help="the set's name in the servers' --trie-set-dir")
    ap.add_argument("--dir", required=True, help="the task's folder (choices.txt, prompts.tsv, shots.tsv, system)")
    ap.add_argument("--n-predict", type=int, default=48)
    args = ap.parse_args()
    d = args.dir
    with open(f"{d}/choices.txt", encoding="utf-8") as f:
        members = set(f.read().split("\n")) - {""}
    with open(f"{d}/system", encoding="utf-8") as f:
        system = f.read().strip()
    shots, prompts = read_tsv(f"{d}/shots.tsv"), read_tsv(f"{d}/prompts.tsv")
    modes = [("unconstrained", args.plain, {}), ("trie", args.trie, {"trie": {"set": args.set}}),
             ("trie-jump", args.jump, {"trie": {"set": args.set}})]
    acc = {m: dict(task=args.task, mode=m, k=len(members), n=0, valid=0, correct=0, steps=0, tokens=0, draft=0,
                   accepted=0, prefill_ms=0.0, decode_ms=0.0, wall_ms=0.0) for m, _, _ in modes}
    # warm-up: the set compiled and the vocabulary built on both servers, outside the figures
    for _, url, extra in modes[1:]:
        post(url + "/completion", dict({"prompt": "x", "n_predict": 1, "cache_prompt": False}, **extra))
    for q, gold in prompts:
        prompt = chatml(system, shots, q)
        for m, url, extra in modes:
            body = dict({"prompt": prompt, "n_predict": args.n_predict, "temperature": 0.0}, **extra)
            res, wall = post(url + "/completion", body)
            t = res["timings"]
            a = acc[m]
            text = res["content"]
            a["n"] += 1
            a["valid"] += text in members
            a["correct"] += text == gold
            a["tokens"] += t["predicted_n"]
            a["draft"] += t.get("draft_n", 0)
            a["accepted"] += t.get("draft_n_accepted", 0)
            a["steps"] += t["predicted_n"] - t.get("draft_n_accepted", 0)
            a["prefill_ms"] += t["prompt_ms"]
            a["decode_ms"] += t["predicted_ms"]
            a["wall_ms"] += wall
    for m, _, _ in modes:
        print(json.dumps(acc[m], ensure_ascii=False))


if __name__ == "__main__":
    main()
