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
  args S       the argument phase (issue 29): the same 10 tools in the prompt, a long free-text argument; S = 10:
               the request's tools (libtrie and stock), S > 10: a registry argsS of S tools whose first 10 are these
               (libtrie; filler tools with a schema each); reports the argument phase's tok/s from the server's
               per-chunk timings
  args-schema  stock only: the send_email arguments' schema as response_format json_schema, the same prompts (the
               stock sampler's own grammar decoding the same arguments: the baseline of the argument-speed goal, as
               the stock tool grammar does not trigger for Qwen2.5-Coder-0.5B)
  beyond S     stock only: the S tools of argsS (per-tool schemas) sent as "tools": what the stock server does
               with them (HTTP status, error, wall time within the cap)
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


# The argument-phase case (issue 29): the same 10 tools described in the prompt, one with a free-text body, and a
# prompt that asks for a long argument; libtrie serves the name from 10 tools or from a registry of R tools whose
# first 10 are these (the prompt and the arguments are the same, only the name's set grows), stock serves the same
# 10 tools with llama.cpp's tool grammar. Argument tok/s: from the server's per-chunk timings (timings_per_token),
# the tokens decoded after the first argument delta over the decode time they took.
ARG_EMAIL = {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                              "body": {"type": "string"}},
             "required": ["to", "subject", "body"], "additionalProperties": False}
ARG_PROMPTS = ["Send an email to bob@example.com with the subject 'Launch' and a body of four sentences that "
               "announce the launch of our new search engine, thank the team and invite everyone to the party.",
               "Email alice@example.com, subject 'Quarterly report', with a body of four sentences summarising "
               "that sales grew, costs fell, two new offices opened and hiring continues next quarter."]


def per_tool_schema(i):
    """A schema of its own for the i-th filler tool (a property named after it, one of three types)."""
    t = [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}][i % 3]
    return {"type": "object", "properties": {f"p{i}": t}, "required": [f"p{i}"], "additionalProperties": False}


def run_beyond(url, mode, size, base, cap, out):
    """The beyond-all row, stock side: `size` tools with per-tool schemas sent as "tools" (what a stock engine needs
    to constrain them), tool_choice "required"; the outcome (HTTP status, error, wall time) within the cap."""
    ten = arg_tools()
    extra = [n for n in names(size, base) if n not in {t["function"]["name"] for t in ten}][: size - 10]
    tools = ten + [tool(n, "", per_tool_schema(i)) for i, n in enumerate(extra)]
    body = {"messages": [{"role": "user", "content": ARG_PROMPTS[0]}], "tools": tools, "tool_choice": "required",
            "max_tokens": 200, "temperature": 0, "cache_prompt": False}
    status, res, dt = post(url, body, timeout=cap)
    row = {"mode": mode, "case": "beyond", "size": size, "status": status, "wall_s": round(dt, 1),
           "error": "" if status == 200 else str(res)[:300], "threads": int(os.environ.get("TRIE_SERVER_THREADS", "1")),
           "load": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def arg_tools():
    from check_routing import TEN_TOOLS
    return [tool(n, d, ARG_EMAIL if n == "send_email" else TOOL_SCHEMAS[s]) for n, d, s in TEN_TOOLS]


def post_stream(url, body, timeout):
    """A streamed chat completion with per-chunk timings: (status, name, arguments text, whole tok/s,
    argument tok/s, argument tokens, ttft) or (status, error, ...None)."""
    body = dict(body, stream=True, timings_per_token=True)
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    name, args, first, last = "", "", None, None
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                chunk = json.loads(line[5:])
                t = chunk.get("timings") or {}
                for ch in chunk.get("choices") or []:
                    for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                        f = tc.get("function") or {}
                        name += f.get("name") or ""
                        if f.get("arguments"):
                            args += f["arguments"]
                            if first is None and t:
                                first = t
                if t:
                    last = t
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")[:200], None, None, None, None, None
    except Exception as e:  # timeouts
        return 0, str(e), None, None, None, None, None
    wall = time.monotonic() - t0
    if not last:
        return 200, "no timings in the stream", None, None, None, None, None
    ttft = wall - last["predicted_ms"] / 1000
    arg_tps, arg_n = None, None
    if first and last["predicted_ms"] > first["predicted_ms"]:
        arg_n = last["predicted_n"] - first["predicted_n"]
        arg_tps = arg_n / (last["predicted_ms"] - first["predicted_ms"]) * 1000
    return 200, name, args, last.get("predicted_per_second"), arg_tps, arg_n, ttft


def run_args(url, mode, size, registry, n_req, cap, out):
    """One argument-phase row: `size` tools (10: in the request; more: the registry `registry`)."""
    tools = arg_tools()
    schema_of = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    t_case = time.monotonic()
    ok = good = 0
    ttft, tps, arg_tps, arg_n = [], [], [], []
    first_error = ""
    for i in range(n_req):
        left = cap - (time.monotonic() - t_case)
        if left <= 1:
            break
        body = {"messages": [{"role": "user", "content": ARG_PROMPTS[i % len(ARG_PROMPTS)]}], "tools": tools,
                "tool_choice": "required", "max_tokens": 200, "temperature": 0, "cache_prompt": False}
        if registry:
            body["trie"] = {"registry": registry}
        status, name, a, whole, atps, an, tt = post_stream(url, body, left)
        if status != 200 or whole is None:
            first_error = first_error or f"{status}: {name}"
            continue
        ok += 1
        ttft.append(tt)
        tps.append(whole)
        if atps:
            arg_tps.append(atps)
            arg_n.append(an)
        try:
            good += 1 if name in schema_of and fits(schema_of[name], json.loads(a)) else 0
        except ValueError:
            pass
    med = lambda xs, nd=1: round(statistics.median(xs), nd) if xs else None  # noqa: E731
    row = {"mode": mode, "case": "args", "size": size, "requests": n_req, "ok": ok, "valid": good,
           "ttft_s": med(ttft, 3), "tok_s": med(tps), "arg_tok_s": med(arg_tps), "arg_tokens": med(arg_n, 0),
           "threads": int(os.environ.get("TRIE_SERVER_THREADS", "1")), "load": os.getloadavg()[0],
           "wall_s": round(time.monotonic() - t_case, 1), "error": first_error}
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


def run_args_schema(url, mode, n_req, cap, out):
    """The stock sampler's own grammar on the same arguments: the send_email argument schema as response_format
    json_schema (llama.cpp's json-schema-to-grammar, checked by common_sampler), the same prompts; every decoded
    token is an argument token, so tok/s is the argument phase's speed under the stock grammar."""
    t_case = time.monotonic()
    ok = good = 0
    ttft, tps, ntok = [], [], []
    first_error = ""
    for i in range(n_req):
        left = cap - (time.monotonic() - t_case)
        if left <= 1:
            break
        body = {"messages": [{"role": "user", "content": ARG_PROMPTS[i % len(ARG_PROMPTS)]}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "send_email", "schema": ARG_EMAIL}},
                "max_tokens": 200, "temperature": 0, "cache_prompt": False}
        status, res, dt = post(url, body, timeout=left)
        if status != 200 or not isinstance(res, dict):
            first_error = first_error or f"{status}: {str(res)[:160]}"
            continue
        ok += 1
        t = res.get("timings", {})
        ttft.append(dt - t.get("predicted_ms", 0) / 1000)
        if t.get("predicted_per_second"):
            tps.append(t["predicted_per_second"])
            ntok.append(t.get("predicted_n"))
        try:
            content = res["choices"][0]["message"]["content"]
            good += 1 if fits(ARG_EMAIL, json.loads(content)) else 0
        except (ValueError, KeyError, IndexError, TypeError):
            pass
    med = lambda xs, nd=1: round(statistics.median(xs), nd) if xs else None  # noqa: E731
    row = {"mode": mode, "case": "args-schema", "size": 1, "requests": n_req, "ok": ok, "valid": good,
           "ttft_s": med(ttft, 3), "tok_s": med(tps), "arg_tok_s": med(tps), "arg_tokens": med(ntok, 0),
           "threads": int(os.environ.get("TRIE_SERVER_THREADS", "1")), "load": os.getloadavg()[0],
           "wall_s": round(time.monotonic() - t_case, 1), "error": first_error}
    print(json.dumps(row), flush=True)
    out.write(json.dumps(row) + "\n")
    out.flush()


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
    ap.add_argument("--arg-sizes", default="10,1000,10000,100000",
                    help="args case: 10 = the tools in the request; larger = a registry (libtrie only)")
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
    if args.sets and "args" in cases and args.mode == "libtrie":
        ten = arg_tools()
        for r in map(int, args.arg_sizes.split(",")):
            path = os.path.join(args.sets, f"args{r}.json")
            if r > 10 and not os.path.exists(path):
                extra = [n for n in names(r, base) if n not in {t["function"]["name"] for t in ten}][: r - 10]
                reg = [{"name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in ten]
                reg += [{"name": n, "parameters": per_tool_schema(i)} for i, n in enumerate(extra)]
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(reg, f, separators=(",", ":"))
    with open(args.out, "a", encoding="utf-8") as out:
        if "args" in cases:
            for r in map(int, args.arg_sizes.split(",")):
                if r == 10:
                    run_args(args.url, args.mode, r, None, args.requests, args.cap, out)
                    if args.mode == "stock":  # the stock grammar that does constrain: the schema of the arguments
                        run_args_schema(args.url, args.mode, args.requests, args.cap, out)
                elif args.mode == "libtrie":
                    run_args(args.url, args.mode, r, f"args{r}", args.requests, args.cap, out)
        if "beyond" in cases and args.mode == "stock":
            for r in map(int, args.arg_sizes.split(",")):
                if r > 10:
                    run_beyond(args.url, args.mode, r, base, args.cap, out)
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
