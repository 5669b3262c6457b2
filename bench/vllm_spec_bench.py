#!/usr/bin/env python3
"""Speculative decoding stays exact (issue 31, item 2, vLLM): one in-process vLLM 0.32 engine with ngram speculative
decoding serves N constrained requests, a mix of four kinds, and every output is checked:

  set        structured_outputs.choice = 1,000 tool names          (libtrie: routed set)
  template   structured_outputs.json = {"type": "string", "enum": 1,000 cities}  (libtrie: routed, JSON-rendered)
  tools      vLLM's schema of tool_choice="required" for 20 tools with argument schemas (libtrie: TrieToolGrammar,
             the name from a trie then the chosen tool's arguments by xgrammar's matcher), checked with jsonschema
  strings    extra_args {"libtrie": {"strings": 1,000 JSON tool calls}} (libtrie: TrieScheduler's own sets, whose
             forced runs are proposed as speculative tokens); with --mode xgrammar the same list as a choice

  --mode libtrie    LIBTRIE_VLLM_ROUTE=1 + TrieScheduler (every kind served by libtrie)
  --mode xgrammar   vLLM's default structured-output backend (auto: xgrammar), vLLM's own scheduler

The prompts quote a few members, so the ngram drafter (prompt lookup) proposes tokens, some of which the
constraint rejects: the drafts are validated, verified and rolled back along the way. Greedy by default
(--temperature for sampled requests). Writes one JSON line per request and a summary line (--out), prints the
summary. A failure to produce an output (an exception, a crashed engine) is recorded, not hidden.

    nice -n 10 .cache/vllm-venv/bin/python bench/vllm_spec_bench.py --mode libtrie --n 1000 \\
        --model .cache/models/smollm2-135m-hf --out /tmp/spec-libtrie.jsonl
"""
import argparse
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KINDS = ("set", "template", "tools", "strings")
CITIES_PROMPT = ["Paris", "Berlin", "Tokyo", "Lima", "Oslo"]


def catalog(repo=REPO):
    tools = [ln.strip() for ln in open(repo / "data" / "tools.txt", encoding="utf-8") if ln.strip()]
    cities_file = repo / ".cache" / "bench-sets" / "cities-1000.txt"
    if cities_file.exists():
        cities = [ln.rstrip("\n") for ln in open(cities_file, encoding="utf-8") if ln.strip()]
    else:  # a fallback with the same shape (the bench sets come from scripts/fetch-cities.sh)
        cities = CITIES_PROMPT + [f"City {i}" for i in range(995)]
    calls = [json.dumps({"name": t, "arguments": {"city": c}}) for t in tools[:200] for c in CITIES_PROMPT]
    fn_tools = []
    for i, name in enumerate(tools[1000:1020]):
        props = {"city": {"type": "string", "maxLength": 16}, "units": {"type": "string", "enum": ["metric", "imperial"]}}
        if i % 2:
            props["days"] = {"type": "integer", "enum": [1, 2, 3, 7]}
        fn_tools.append({"type": "function", "function": {
            "name": name.replace(".", "_"), "description": f"tool {name}",
            "parameters": {"type": "object", "properties": props, "required": sorted(props),
                           "additionalProperties": False}}})
    return {"tools": tools[:1000], "cities": cities[:1000], "calls": calls, "fn_tools": fn_tools}


def requests(n, cat, seed=0):
    """(kind, prompt) for n requests, kinds in turn."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        if kind == "set":
            ex = rng.choice(cat["tools"])
            p = f"Tool for request {i}: {ex}. Again, tool:"
        elif kind == "template":
            ex = rng.choice(cat["cities"])
            p = f'City {i} as JSON: "{ex}". Another:'
        elif kind == "tools":
            t = rng.choice(cat["fn_tools"])["function"]["name"]
            c = rng.choice(CITIES_PROMPT)
            p = f'[{{"name": "{t}", "parameters": {{"city": "{c}"'
            p = f"Call {i}: {p}. Weather in {c}:"
        else:
            c = rng.choice(CITIES_PROMPT)
            p = f"Call {i}, weather in {c}:"
        out.append((kind, p))
    return out


def params_for(kind, cat, mode, tools_schema, max_tokens, temperature, seed):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kw = dict(temperature=temperature, max_tokens=max_tokens, seed=seed if temperature > 0 else None)
    if kind == "set":
        return SamplingParams(structured_outputs=StructuredOutputsParams(choice=cat["tools"]), **kw)
    if kind == "template":
        return SamplingParams(structured_outputs=StructuredOutputsParams(json={"type": "string", "enum": cat["cities"]}),
                              **kw)
    if kind == "tools":
        return SamplingParams(structured_outputs=StructuredOutputsParams(json=tools_schema), **kw)
    if mode == "libtrie":
        return SamplingParams(extra_args={"libtrie": {"strings": cat["calls"]}}, **kw)
    return SamplingParams(structured_outputs=StructuredOutputsParams(choice=cat["calls"]), **kw)


def check(kind, text, cat, tools_schema, sets):
    """None when the output is valid for its request, else why not."""
    if kind == "set":
        return None if text in sets["tools"] else "not a member"
    if kind == "strings":
        return None if text in sets["calls"] else "not a member"
    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    if kind == "template":
        if value not in sets["cities"]:
            return "not a member"
        return None if text == json.dumps(value, ensure_ascii=False) else "not the member's JSON form"
    import jsonschema

    try:
        jsonschema.validate(value, tools_schema)
    except jsonschema.ValidationError as e:
        return f"schema: {e.message[:120]}"
    return None


def engine(mode, model, k=4, max_num_seqs=16, log_stats=True):
    """An in-process vLLM engine (LLM) for ``mode``: ``libtrie`` (LIBTRIE_VLLM_ROUTE=1, TrieScheduler) or
    ``xgrammar`` (vLLM's default backend, its own scheduler); ngram speculative decoding with ``k`` tokens (None:
    none). Returns the engine, TrieScheduler (or None) and vLLM's schema of the tool list."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the scheduler is read in this process
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("LIBTRIE_MAX_INLINE_STRINGS", "20000")
    os.environ.setdefault("LIBTRIE_MAX_INLINE_BYTES", str(4 << 20))
    if mode == "libtrie":
        os.environ["LIBTRIE_VLLM_ROUTE"] = "1"
        if str(REPO / "python") not in sys.path and os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
            sys.path.insert(0, str(REPO / "python"))
    else:
        os.environ.pop("LIBTRIE_VLLM_ROUTE", None)
    from vllm import LLM
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam
    from vllm.tool_parsers.utils import get_json_schema_from_tools

    tools_schema = get_json_schema_from_tools("required", [ChatCompletionToolsParam(**t)
                                                           for t in catalog()["fn_tools"]])
    kw = dict(model=model, enforce_eager=True, max_model_len=512, max_num_seqs=max_num_seqs, seed=0,
              gpu_memory_utilization=0.5, disable_log_stats=not log_stats)
    if k:
        kw["speculative_config"] = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4,
                                    "prompt_lookup_min": 2}
    if mode == "libtrie":
        from libtrie.vllm import route
        from libtrie.vllm.scheduler import TrieScheduler

        route.register()  # the general plugin: vLLM loaded it before the switch was set in this process
        kw.update(scheduler_cls=TrieScheduler, async_scheduling=False)
    llm = LLM(**kw)
    sched = llm.llm_engine.engine_core.engine_core.scheduler if mode == "libtrie" else None
    return llm, sched, tools_schema


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("libtrie", "xgrammar"), required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="skip the first START requests (a run resumed)")
    ap.add_argument("--model", default=str(REPO / ".cache" / "models" / "smollm2-135m-hf"))
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("--no-spec", action="store_true", help="no speculative configuration (a baseline)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--batch", type=int, default=100, help="requests per generate() call (progress lines)")
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--out")
    args = ap.parse_args()

    cat = catalog()
    t0 = time.monotonic()
    llm, sched, tools_schema = engine(args.mode, args.model, None if args.no_spec else args.k, args.max_num_seqs)
    t_start = time.monotonic() - t0
    sets = {"tools": set(cat["tools"]), "calls": set(cat["calls"]), "cities": set(cat["cities"])}
    reqs = requests(args.n, cat)[args.start:]
    rows, errors = [], []
    out = open(args.out, "w") if args.out else None
    t0 = time.monotonic()
    load0 = os.getloadavg()
    for b in range(0, len(reqs), args.batch):
        chunk = reqs[b:b + args.batch]
        b += args.start
        params = [params_for(k, cat, args.mode, tools_schema, args.max_tokens, args.temperature, b + j)
                  for j, (k, _) in enumerate(chunk)]
        try:
            outs = llm.generate([p for _, p in chunk], params, use_tqdm=False)
        except Exception as e:  # a crashed engine or a refused batch: recorded, and the run stops
            errors.append({"at": b, "error": f"{type(e).__name__}: {e}"[:2000], "trace": traceback.format_exc()[-3000:]})
            print(f"batch at {b}: {type(e).__name__}: {e}"[:500], file=sys.stderr, flush=True)
            break
        for j, ((kind, prompt), o) in enumerate(zip(chunk, outs)):
            c = o.outputs[0]
            why = check(kind, c.text, cat, tools_schema, sets)
            row = {"i": b + j, "kind": kind, "text": c.text, "finish": c.finish_reason, "tokens": len(c.token_ids),
                   "valid": why is None, "why": why}
            rows.append(row)
            if out:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        if out:
            out.flush()  # a run stopped between batches keeps every finished request
        el = time.monotonic() - t0
        nbad = sum(not r["valid"] for r in rows)
        print(f"{len(rows)}/{args.n} done, {nbad} invalid, {el:.0f} s, load {os.getloadavg()[0]:.2f}", flush=True)
    elapsed = time.monotonic() - t0
    per_kind = {}
    for k in KINDS:
        rk = [r for r in rows if r["kind"] == k]
        per_kind[k] = {"n": len(rk), "valid": sum(r["valid"] for r in rk),
                       "finish_length": sum(r["finish"] == "length" for r in rk),
                       "tokens": sum(r["tokens"] for r in rk)}
    spec = {}
    try:
        stats = llm.llm_engine.get_metrics() if hasattr(llm.llm_engine, "get_metrics") else []
        for m in stats:
            if "spec_decode" in m.name:
                spec[m.name] = getattr(m, "value", None) if hasattr(m, "value") else getattr(m, "values", None)
    except Exception as e:  # metrics are a bonus
        spec["error"] = str(e)[:200]
    summary = {"summary": True, "mode": args.mode, "spec": None if args.no_spec else {"method": "ngram", "k": args.k},
               "temperature": args.temperature, "n": args.n, "done": len(rows),
               "valid": sum(r["valid"] for r in rows), "errors": errors, "per_kind": per_kind,
               "engine_start_s": round(t_start, 1), "elapsed_s": round(elapsed, 1),
               "s_per_request": round(elapsed / max(1, len(rows)), 3), "load_start": [round(x, 2) for x in load0],
               "load_end": [round(x, 2) for x in os.getloadavg()], "spec_metrics": spec,
               "invalid_examples": [r for r in rows if not r["valid"]][:10]}
    if sched is not None:
        summary["trie_routed"] = sched.trie_routed
        summary["trie_forced_proposed"] = sched.trie_forced_proposed
    if out:
        out.write(json.dumps(summary, ensure_ascii=False) + "\n")
        out.close()
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    try:
        llm.llm_engine.engine_core.shutdown()
    except Exception:
        pass
    return 0 if not errors and summary["valid"] == len(rows) == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
