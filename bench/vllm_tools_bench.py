#!/usr/bin/env python3
"""First-token latency of a tool registry through vLLM's server with LIBTRIE_VLLM_ROUTE=1 (issue 29, item 2: a warm
100,000-tool registry answers with the first token <= 200 ms beyond the stock prompt cost).

    scripts/setup-vllm.sh                          # the venv and SmolLM2 (HF folder)
    .cache/vllm-venv/bin/python bench/vllm_tools_bench.py --tools 100000 --model .cache/models/smollm2-135m-hf \\
        --out docs/bench/vllm-tools.jsonl

One server (CPU, --max-num-seqs 1, `nice -n 10` advised on a shared machine). The same chat request (one user
message, the 5 tools of the prompt) is timed with max_tokens=1 (prompt + first token, non-streamed), one request at
a time, in these modes, interleaved round by round:

  prompt     tool_choice "none": the stock prompt cost, no constraint;
  routed5    tool_choice "required" with the 5 tools: libtrie serving the prompt's tools (one server has routing on
             or off for all requests; vLLM's xgrammar on the same 5 tools is bench/bfcl's stock mode);
  registry   the same, plus vllm_xargs {"libtrie_registry": NAME}: the name constrained to the whole registry.

The first registry request (cold: the registry is read, its names compiled) is reported apart. Then one full call
through the registry (max_tokens 96) is parsed and checked with jsonschema.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def registry_tools(n):
    out = []
    for i in range(n):
        arg = {"type": "integer", "minimum": 0, "maximum": 1000} if i % 2 else {"type": "string", "maxLength": 12}
        out.append({"type": "function", "function": {
            "name": f"tool_{i:06d}", "description": f"tool number {i}",
            "parameters": {"type": "object", "properties": {f"a{i}": arg}, "required": [f"a{i}"],
                           "additionalProperties": False}}})
    return out


def post(url, body, timeout=900):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.load(r)
    return time.monotonic() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", type=int, default=100_000)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="libtrie-tools-bench-"))
    sets = tmp / "sets"
    sets.mkdir()
    tools = registry_tools(args.tools)
    (sets / "catalog.json").write_text(json.dumps(tools))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, LIBTRIE_VLLM_ROUTE="1", LIBTRIE_SET_DIR=str(sets), HF_HUB_OFFLINE="1",
               RAYON_NUM_THREADS=os.environ.get("RAYON_NUM_THREADS", "1"), TOKENIZERS_PARALLELISM="false")
    log = open(tmp / "serve.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model, "--host", "127.0.0.1",
         "--port", str(port), "--enforce-eager", "--max-model-len", "2048", "--max-num-seqs", "1", "--seed", "0",
         "--enable-auto-tool-choice", "--tool-call-parser", "hermes"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        deadline = time.time() + 600
        while True:
            if server.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the server did not come up; see {log.name}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        prompt_tools = tools[4200:4205]
        base = {"model": args.model, "temperature": 0, "max_tokens": 1, "tools": prompt_tools,
                "messages": [{"role": "user", "content": "Call tool 4203 with the value 7."}]}
        modes = {"prompt": {"tool_choice": "none"}, "routed5": {"tool_choice": "required"},
                 "registry": {"tool_choice": "required", "vllm_xargs": {"libtrie_registry": "catalog"}}}
        post(url, {**base, **modes["prompt"]})  # warm the server itself
        cold, _ = post(url, {**base, **modes["registry"]})
        times = {m: [] for m in modes}
        for _ in range(args.rounds):
            for m, extra in modes.items():
                times[m].append(post(url, {**base, **extra})[0])
        load = os.getloadavg()[0]
        med = {m: statistics.median(v) for m, v in times.items()}
        full_t, full = post(url, {**base, **modes["registry"], "max_tokens": 96, "parallel_tool_calls": False})
        msg = full["choices"][0]["message"]
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        valid = None
        try:
            import jsonschema

            calls = msg.get("tool_calls") or []
            valid = bool(calls) and all(c["function"]["name"] in schemas for c in calls)
            for c in calls:
                jsonschema.validate(json.loads(c["function"]["arguments"]), schemas[c["function"]["name"]])
        except ImportError:
            pass
        row = {"tools": args.tools, "model": os.path.basename(args.model.rstrip("/")), "rounds": args.rounds,
               "cold_registry_s": round(cold, 3), **{f"median_{m}_s": round(v, 4) for m, v in med.items()},
               "registry_minus_prompt_ms": round(1e3 * (med["registry"] - med["prompt"]), 1),
               "registry_minus_routed5_ms": round(1e3 * (med["registry"] - med["routed5"]), 1),
               "full_call_s": round(full_t, 2), "full_call": msg.get("tool_calls"), "calls_valid": valid,
               "loadavg_1m": round(load, 2), "threads": "RAYON_NUM_THREADS=%s" % env["RAYON_NUM_THREADS"]}
        rows.append(row)
        print(json.dumps(row))
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print(f"server log: {log.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
