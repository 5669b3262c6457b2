#!/usr/bin/env python3
"""Nothing waits for a registry (issue 36, item 5): while an operator's 100,000-tool registry changes on disk and
the first call through it is served, does another client's one-token request still answer quickly?

Against a running server (llama-server built with libtrie and started with `--trie-set-dir DIR`, or vLLM with
`LIBTRIE_VLLM_ROUTE=1 LIBTRIE_SET_DIR=DIR`), standard library only:

- a background client sends one-token completions (`/v1/completions`, `max_tokens` 1, no constraint), one after
  another, and records each latency with its start time;
- the foreground writes the registry `DIR/NAME.json` (T tools, names in no byte order; the file replaced atomically),
  then sends one tool call naming it (llama-server: `"trie": {"registry": NAME}`; vLLM:
  `vllm_xargs.libtrie_registry`), and records that call's latency (the first call through the changed registry: the
  server reads, recognizes and compiles the new version); then it changes the registry (a tool added, one removed,
  one schema changed) and does the same, ROUNDS times.

Reports the background latencies that overlapped a change window (from the file's replacement to the end of the
first call through it) against those that did not (p50/p99/max), and each round's first-call latency. One JSON line
per round and a summary line go to --out.

  scripts/bench-registry-change.py --url http://127.0.0.1:8080 --engine llama-server --dir /tmp/reg --out r.jsonl
"""
import argparse
import json
import os
import random
import statistics
import threading
import time
import urllib.error
import urllib.request


def post(url, body, timeout=600):
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, payload = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, payload = e.code, e.read()
    return status, time.monotonic() - t, payload


def tool(name, variant):
    props = {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50 + variant}}
    return {"type": "function", "function": {"name": name, "description": f"tool {name}",
                                             "parameters": {"type": "object", "properties": props,
                                                            "required": ["query"]}}}


def write_registry(path, tools):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(tools, f)
    os.replace(tmp, path)


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs):
    return {"n": len(xs), "p50_ms": _ms(pct(xs, 0.5)), "p99_ms": _ms(pct(xs, 0.99)), "max_ms": _ms(max(xs) if xs else None)}


def _ms(x):
    return None if x is None else round(1000 * x, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--engine", choices=["llama-server", "vllm"], required=True)
    ap.add_argument("--model", default=None, help="the model field (vLLM needs the served model's name)")
    ap.add_argument("--dir", required=True, help="the server's set directory (written here)")
    ap.add_argument("--name", default="change100k")
    ap.add_argument("--tools", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of quiet background traffic between rounds")
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    names = [f"{rng.choice(['zz', 'get', 'set', 'list', 'Éd', 'a'])}_{i:06d}_{rng.randrange(10**6):x}"
             for i in range(args.tools)]
    rng.shuffle(names)
    variant = {n: 0 for n in names}
    path = os.path.join(args.dir, args.name + ".json")
    base = args.url.rstrip("/")
    model = {"model": args.model} if args.model else {}

    lat = []  # (start, seconds, status)
    stop = threading.Event()

    def background():
        while not stop.is_set():
            t0 = time.monotonic()
            status, dt, _ = post(base + "/v1/completions",
                                 {"prompt": "The capital of France is", "max_tokens": 1, "temperature": 0, **model})
            lat.append((t0, dt, status))

    windows = []
    rounds = []
    bg = threading.Thread(target=background, daemon=True)
    bg.start()
    time.sleep(args.settle)
    for r in range(args.rounds + 1):
        if r > 0:  # a small change: one tool added, one removed, one schema changed
            names.append(f"added_{r}_{rng.randrange(10**6):x}")
            variant[names[-1]] = 0
            gone = names.pop(rng.randrange(len(names) - 1))
            del variant[gone]
            variant[names[rng.randrange(len(names))]] += 1
        tools = [tool(n, variant[n]) for n in names]
        t_write = time.monotonic()
        write_registry(path, tools)
        t_change = time.monotonic()
        body = {"messages": [{"role": "user", "content": "Call one tool to look something up."}],
                "max_tokens": 48, "temperature": 0, "tool_choice": "required", **model}
        if args.engine == "llama-server":
            body["trie"] = {"registry": args.name}
        else:
            body["tools"] = [tool(names[0], variant[names[0]])]
            body["vllm_xargs"] = {"libtrie_registry": args.name}
        status, dt, payload = post(base + "/v1/chat/completions", body)
        t_end = time.monotonic()
        windows.append((t_write, t_end))
        rounds.append({"round": r, "kind": "first version" if r == 0 else "changed (add, remove, schema)",
                       "tools": len(names), "write_s": round(t_change - t_write, 3), "status": status,
                       "first_call_ms": _ms(dt), "body": payload[:200].decode("utf-8", "replace")})
        print(json.dumps(rounds[-1]), flush=True)
        time.sleep(args.settle)
    stop.set()
    bg.join(timeout=120)

    during, outside, failed = [], [], 0
    for t0, dt, status in lat:
        if status != 200:
            failed += 1
        hit = any(t0 < e and t0 + dt > s for s, e in windows)
        (during if hit else outside).append(dt)
    load = os.getloadavg()
    out = {"summary": True, "engine": args.engine, "tools": args.tools, "rounds": args.rounds,
           "background_during_change": summary(during), "background_outside": summary(outside),
           "background_failed": failed, "first_call_ms": [x["first_call_ms"] for x in rounds],
           "loadavg": [round(x, 2) for x in load]}
    print(json.dumps(out), flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for x in rounds:
            f.write(json.dumps(x) + "\n")
        f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
