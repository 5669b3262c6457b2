#!/usr/bin/env python3
"""Benchmark client for tool calls and enum schemas on llama-server, libtrie vs stock (driven by
scripts/bench-llama-server-tools.sh, which starts the same patched binary with and without --trie-no-route).
Standard library only.

Cases (one server at a time, requests sent one after another so the figures are per request):
  enum K       /v1/chat/completions with response_format json_schema {"enum": K tool names}; valid = the content
               is a JSON string of the set
  tools T      T tools in "tools", tool_choice "required"; valid = one call to a listed tool whose arguments fit
               its schema
  registry R   "trie": {"registry": "regR"} (libtrie only: stock llama-server cannot express a tool registry
               that is not in the prompt); valid as for tools
Per case: requests that succeed (HTTP 200 within the cap), time to first token (wall time minus the server's
decode time: queueing, compile or grammar parse, prompt), tokens/s of the decode (the server's timings), valid
outputs. Each case is capped in wall time; requests not finished by the cap count as failed.
"""
import argparse
import json
import os
import statistics
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "llama-server"))
from check_routing import REG_SCHEMAS, TOOL_SCHEMAS, fits, tool  # noqa: E402

PROMPTS = ["Which tool opens a new issue?", "Call a tool to list the files.", "Use a tool to send a message."]


def names(n, base):
    """n distinct tool names: the generated ones, then numbered variants."""
    out = list(base[:n])
    i = 0
    while len(out) < n:
        out.append(f"{base[i % len(base)]}_v{2 + i // len(base)}")
        i += 1
    return out


def post(url, body, timeout):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            res = json.loads(r.read())
            status = r.status
    except urllib.error.HTTPError as e:
        status, res = e.code, e.read().decode("utf-8", "replace")
    except Exception as e:  # timeouts
        status, res = 0, str(e)
    return status, res, time.monotonic() - t0


def call_of(res):
    msg = res["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    if calls:
        try:
            return calls[0]["function"]["name"], json.loads(calls[0]["function"]["arguments"])
        except ValueError:
            return calls[0]["function"]["name"], None
    try:
        c = json.loads((msg.get("content") or "").strip())
        return c.get("name"), c.get("arguments")
    except (ValueError, AttributeError):
        return None, None


def run_case(url, mode, kind, size, body_of, valid, n_req, cap, out):
    t_case = time.monotonic()
    ok = good = 0
    ttft, tps = [], []
    first_error = ""
    for i in range(n_req):
        left = cap - (time.monotonic() - t_case)
        if left <= 1:
            break
        status, res, dt = post(url, body_of(i), timeout=left)
        if status != 200 or not isinstance(res, dict):
            first_error = first_error or f"{status}: {str(res)[:160]}"
            continue
        ok += 1
        t = res.get("timings", {})
        ttft.append(dt - t.get("predicted_ms", 0) / 1000)
        if t.get("predicted_per_second"):
            tps.append(t["predicted_per_second"])
        good += 1 if valid(res) else 0
    row = {"mode": mode, "case": kind, "size": size, "requests": n_req, "ok": ok, "valid": good,
           "ttft_s": round(statistics.median(ttft), 3) if ttft else None,
           "tok_s": round(statistics.median(tps), 1) if tps else None,
           "wall_s": round(time.monotonic() - t_case, 1), "error": first_error}
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--mode", required=True, choices=["libtrie", "stock"])
    ap.add_argument("--names", required=True, help="a file of tool names, one a line")
    ap.add_argument("--cases", default="enum,tools,registry")
    ap.add_argument("--enum-sizes", default="100,1000,10000,100000")
    ap.add_argument("--tool-sizes", default="10,30,100")
    ap.add_argument("--registry-sizes", default="1000,10000,100000")
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--cap", type=float, default=90)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sets", help="the server's set directory: regR.json is written there (libtrie mode)")
    args = ap.parse_args()
    base = [l.strip() for l in open(args.names, encoding="utf-8") if l.strip()]
    cases = args.cases.split(",")
    if args.sets and "registry" in cases and args.mode == "libtrie":
        for r in map(int, args.registry_sizes.split(",")):
            path = os.path.join(args.sets, f"reg{r}.json")
            if not os.path.exists(path):
                reg = names(r, base)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump([{"name": n, "parameters": REG_SCHEMAS[i % len(REG_SCHEMAS)]} for i, n in enumerate(reg)],
                              f, separators=(",", ":"))
    with open(args.out, "a", encoding="utf-8") as out:
        if "enum" in cases:
            for k in map(int, args.enum_sizes.split(",")):
                members = names(k, base)
                member_set = set(members)
                rf = {"type": "json_schema", "json_schema": {"name": "tool", "schema": {"enum": members}}}

                def body(i, rf=rf):
                    return {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                            "response_format": rf, "max_tokens": 48, "temperature": 0, "cache_prompt": False}

                def valid(res, s=member_set):
                    try:
                        return json.loads(res["choices"][0]["message"]["content"]) in s
                    except (ValueError, TypeError, KeyError):
                        return False
                run_case(args.url, args.mode, "enum", k, body, valid, args.requests, args.cap, out)
        if "tools" in cases:
            for t in map(int, args.tool_sizes.split(",")):
                tool_names = names(t, base)
                schema_of = {n: TOOL_SCHEMAS[i % 4] for i, n in enumerate(tool_names)}
                tools = [tool(n, "", schema_of[n]) for n in tool_names]

                def body(i, tools=tools):
                    return {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], "tools": tools,
                            "tool_choice": "required", "max_tokens": 96, "temperature": 0, "cache_prompt": False}

                def valid(res, s=schema_of):
                    name, a = call_of(res)
                    return name in s and a is not None and fits(s[name], a)
                run_case(args.url, args.mode, "tools", t, body, valid, args.requests, args.cap, out)
        if "registry" in cases and args.mode == "libtrie":
            for r in map(int, args.registry_sizes.split(",")):
                reg = names(r, base)
                schema_of = {n: REG_SCHEMAS[i % len(REG_SCHEMAS)] for i, n in enumerate(reg)}

                def body(i, r=r):
                    return {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                            "trie": {"registry": f"reg{r}"}, "tool_choice": "required", "max_tokens": 96,
                            "temperature": 0, "cache_prompt": False}

                def valid(res, s=schema_of):
                    name, a = call_of(res)
                    return name in s and a is not None and fits(s[name], a)
                run_case(args.url, args.mode, "registry", r, body, valid, args.requests, args.cap, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
