#!/usr/bin/env python3
"""Benchmark client for llama-server with libtrie (driven by scripts/bench-llama-server.sh). Standard library only.

For each K and mode (libtrie "trie", GBNF "grammar", JSON-schema "json_schema": {"enum": [...]}, and an
unconstrained baseline), sends N streaming /completion requests through C concurrent clients (the server has
parallel slots) and reports requests/s (completed requests / wall time of the case), time to first token (first
streamed content; the first request of a case separately: it pays the set's compile or grammar parse), tokens/s and
validity (outputs that are exact members). Each case is capped in wall time: requests not started by the cap are
skipped, requests running past it are abandoned (counted as not completed).
"""
import argparse
import concurrent.futures as cf
import json
import statistics
import sys
import threading
import time
import urllib.request

SYSTEM = "Answer with exactly one of the allowed names."


def chatml(user):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def gbnf(strings):
    def lit(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return "root ::= " + " | ".join(lit(s) for s in strings)


def stream(url, body, timeout):
    """(ttft seconds or None, total seconds, content, n_tokens, ok)"""
    req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft = None
    content = []
    n_tok = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data: "):
                    continue
                ev = json.loads(line[6:])
                piece = ev.get("content", "")
                if piece and ttft is None:
                    ttft = time.monotonic() - t0
                content.append(piece)
                if ev.get("stop"):
                    n_tok = ev.get("timings", {}).get("predicted_n", 0) or ev.get("tokens_predicted", 0)
                    break
                if time.monotonic() - t0 > timeout:
                    return ttft, time.monotonic() - t0, "".join(content), n_tok, False
    except Exception as e:  # timeouts, 400s: the case reports them as not completed
        return ttft, time.monotonic() - t0, f"<error {e}>", n_tok, False
    return ttft, time.monotonic() - t0, "".join(content), n_tok, True


def run_case(url, mode, k, strings, prompts, n_req, conc, cap, n_predict):
    members = set(strings)
    deadline = time.monotonic() + cap
    lock = threading.Lock()
    out = []

    def one(i):
        if time.monotonic() > deadline:
            return None
        body = {"prompt": chatml(prompts[i % len(prompts)]), "n_predict": n_predict, "temperature": 0.0,
                "stream": True, "cache_prompt": False}
        if mode == "trie":
            body["trie"] = {"set": f"tools{k}"}
        elif mode == "gbnf":
            body["grammar"] = gbnf(strings)
        elif mode == "json_schema":
            body["json_schema"] = {"enum": strings}
        r = stream(url, body, max(1.0, deadline - time.monotonic() + 5))
        with lock:
            out.append((i,) + r)
        return r

    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=conc) as ex:
        list(ex.map(one, range(n_req)))
    wall = time.monotonic() - t0
    done = [o for o in out if o[5]]
    def valid(text):
        if mode == "json_schema":
            try:
                return json.loads(text) in members
            except ValueError:
                return False
        return text in members
    first = min(out, key=lambda o: o[0]) if out else None
    ttfts = [o[1] for o in done if o[1] is not None]
    toks = sum(o[4] for o in done)
    return {
        "mode": mode, "k": k, "requests": n_req, "started": len(out), "completed": len(done),
        "capped": len(done) < n_req, "wall_s": round(wall, 2),
        "req_per_s": round(len(done) / wall, 3) if wall > 0 else 0.0,
        "ttft_first_s": round(first[1], 3) if first and first[1] is not None else None,
        "ttft_median_s": round(statistics.median(ttfts), 3) if ttfts else None,
        "tok_per_s": round(toks / wall, 1) if wall > 0 else 0.0,
        "valid": sum(1 for o in done if valid(o[3])) if mode != "none" else None,
        "example": done[0][3] if done else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--sets", required=True, help="the server's set directory (tools<K>.txt)")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--ks", default="100,1000,10000")
    ap.add_argument("--modes", default="none,trie,gbnf,json_schema")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--n-predict", type=int, default=48)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    prompts = [l.split("\t")[0] for l in open(args.prompts, encoding="utf-8").read().splitlines() if l]
    rows = []
    baseline_done = False
    for k in [int(x) for x in args.ks.split(",")]:
        strings = open(f"{args.sets}/tools{k}.txt", encoding="utf-8").read().splitlines()
        for mode in args.modes.split(","):
            if mode == "none":
                if baseline_done:
                    continue
                baseline_done = True
            row = run_case(args.url, mode, k if mode != "none" else 0, strings, prompts, args.requests,
                           args.concurrency, args.cap, args.n_predict)
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False))
            sys.stdout.flush()
            if args.out:
                with open(args.out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print()
    print("| K | mode | completed / sent | requests/s | TTFT first | TTFT median | tokens/s | valid |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        f = lambda v, u="": "—" if v is None else f"{v}{u}"
        print(f"| {r['k'] or '—'} | {r['mode']} | {r['completed']} / {r['started']}{' (capped)' if r['capped'] else ''}"
              f" | {r['req_per_s']} | {f(r['ttft_first_s'], ' s')} | {f(r['ttft_median_s'], ' s')} | {r['tok_per_s']}"
              f" | {f(r['valid'])} |")


if __name__ == "__main__":
    main()
