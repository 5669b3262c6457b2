#!/usr/bin/env python3
"""Checks, against a running llama-server built with libtrie and a model whose template has a JSON-native tool-call
format with section markers (Qwen2.5: <tool_call> ... </tool_call>), the tool calls of issue 29; started by
tests/llama-server/run.sh on the Qwen2.5 server:

  - a 10,000-tool registry (reg10k.json of the set directory, per-tool schemas): each call parsed
    (message.tool_calls), named from the registry, its arguments valid against that tool's schema (jsonschema);
  - "auto": a greeting gets content and no call (this model never opens a call under "auto", see below);
  - "parallel_tool_calls": true with a request for two and for three things (end-of-generation banned by
    logit_bias: this model stops after one call by choice): several calls, each named from the tools and each
    argument object valid against its own tool's schema; "parallel_tool_calls": false (and absent): one call.

Needs the `jsonschema` package. Prints one line per check and "N passed, M failed" last; exit status 1 when a check
failed.
"""
import argparse
import json
import os
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import check, finish, post  # noqa: E402
from check_routing import REG_SCHEMAS, TEN_TOOLS, TOOL_SCHEMAS, tool, user, wait_healthy  # noqa: E402


def chat(url, messages, extra, max_tokens=160):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    return post(url + "/v1/chat/completions", body)


def calls_of(status, res, schema_of):
    """(calls, problems): the parsed calls [(name, arguments)] and what is wrong with them."""
    if status != 200 or not isinstance(res, dict):
        return [], [f"status {status}: {str(res)[:200]}"]
    msg = res["choices"][0]["message"]
    out, bad = [], []
    for c in msg.get("tool_calls") or []:
        name = c["function"]["name"]
        try:
            args = json.loads(c["function"]["arguments"])
        except ValueError:
            bad.append(f"{name}: arguments do not parse: {c['function']['arguments']!r}")
            continue
        if name not in schema_of:
            bad.append(f"{name!r} is not a tool of the set")
            continue
        try:
            jsonschema.validate(args, schema_of[name])
        except jsonschema.ValidationError as e:
            bad.append(f"{name}: {e.message}")
        out.append((name, args))
    return out, bad


def tokenize(url, text):
    """The model's token ids of `text` (special tokens parsed)."""
    status, res, _ = post(url + "/tokenize", {"content": text, "parse_special": True})
    return res.get("tokens", []) if status == 200 and isinstance(res, dict) else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--sets", required=True, help="the server's set directory (reg10k.json is written there)")
    args = ap.parse_args()
    wait_healthy(args.url, args.pid)
    url = args.url

    # a 10,000-tool registry with per-tool schemas, checked with jsonschema
    names = [f"svc{i // 100}_op{i % 100}" for i in range(10000)]
    reg_schema = {n: REG_SCHEMAS[i % len(REG_SCHEMAS)] for i, n in enumerate(names)}
    path = os.path.join(args.sets, "calls10k.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump([{"name": n, "parameters": reg_schema[n]} for n in names], f, separators=(",", ":"))
    cands = [tool(n, "a tool of the registry", reg_schema[n]) for n in names[:3]]
    for p in ["Call svc0_op1 with q set to 'cats'.", "Switch svc0_op2 on."]:
        status, res, _ = chat(url, user(p), {"trie": {"registry": "calls10k"}, "tools": cands, "tool_choice": "required"})
        calls, bad = calls_of(status, res, reg_schema)
        check(len(calls) == 1 and not bad, f"10,000-tool registry ({p[:24]}...): one parsed call, jsonschema-valid",
              f"{calls} {bad}")

    tools = [tool(n, d, TOOL_SCHEMAS[s]) for n, d, s in TEN_TOOLS]
    schema_of = {n: TOOL_SCHEMAS[s] for n, _, s in TEN_TOOLS}
    # "auto" without a call: content. (With a call: Qwen2.5-Coder-0.5B answers a tool request under "auto" with a
    # fenced JSON object in the content, never with <tool_call>, with or without libtrie, even with a logit bias on
    # the marker; a call made under "auto" is checked by check_routing.py's tools part.)
    status, res, _ = chat(url, user("Hi! Just say hello back, no tools needed."), {"tools": tools, "tool_choice": "auto"},
                          max_tokens=32)
    calls, bad = calls_of(status, res, schema_of)
    content = res["choices"][0]["message"].get("content") if status == 200 else None
    check(status == 200 and not calls and not bad and bool(content), "auto, a greeting: content, no call",
          f"{status} {content!r} {calls} {bad}")

    # parallel calls: this model ends the response after its first call even when asked for two things (the stage
    # offers end-of-generation or another call); end-of-generation is banned by logit_bias here, so the response
    # runs to max_tokens: the first N calls must be complete and valid, only the last one may be cut by the length
    eog = [t for t in tokenize(url, "<|im_end|>")[:1] + tokenize(url, "<|endoftext|>")[:1]]
    asks = {2: ("Get the weather in Paris and in London, both in celsius.", 75),
            3: ("Get the weather in Paris, in London and in Tokyo, all in celsius.", 105),
            "mixed": ("Search the web for llama recipes, then delete file 42 without asking.", 90)}
    for n, (p, max_tokens) in asks.items():
        status, res, _ = chat(url, user(p), {"tools": tools, "tool_choice": "required", "parallel_tool_calls": True,
                                             "logit_bias": [[t, False] for t in eog]}, max_tokens=max_tokens)
        calls, bad = calls_of(status, res, schema_of)
        raw = res["choices"][0]["message"].get("tool_calls") or [] if status == 200 else []
        cut = len(raw) > len(calls) + len(bad) or (bad and bad[-1].endswith("do not parse: '{'")) or len(bad) <= 1
        want = 2 if n == "mixed" else n
        check(len(calls) >= want and all(b == bad[-1] for b in bad) and cut,
              f"parallel_tool_calls true ({n}): {want}+ calls, each named from the tools and valid against its own "
              "tool's schema (the last may be cut by max_tokens)", f"{calls} {bad}")
    for flag in (False, None):
        extra = {"tools": tools, "tool_choice": "required"}
        if flag is not None:
            extra["parallel_tool_calls"] = flag
        status, res, _ = chat(url, user(asks[3][0]), extra, max_tokens=200)
        calls, bad = calls_of(status, res, schema_of)
        check(len(calls) == 1 and not bad, f"parallel_tool_calls {flag}: exactly one valid call", f"{calls} {bad}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
