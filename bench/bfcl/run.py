#!/usr/bin/env python3
"""BFCL v4 through an OpenAI-compatible engine, four ways (issue 29; docs/bench/bfcl.md):

  bench/bfcl/run.py --engine {llama-server,vllm} --mode {stock,libtrie,catalog,deferred} --category C --limit N \\
                    --out ANSWERS.jsonl [--model PATH] [--summary SUMMARY.jsonl]

Run it with the venv of bench/bfcl/setup.sh (the pinned bfcl-eval wheel). Every request: temperature 0,
tool_choice "required", parallel_tool_calls true (OpenAI's default; BFCL's OpenAI handler leaves it so). Modes:
  stock    the case's functions as `tools` (bfcl-eval's convert_to_tool), tool_choice "required", the engine's own
           grammar (llama-server --trie-no-route; vLLM without libtrie);
  libtrie  the same request, routed through libtrie;
  catalog  every distinct BFCL function pooled into one registry (bfcl.catalog(): ~3,200 tools under ~1,850
           names, same-named functions with other schemas as NAME__v2, ...); the prompt's `tools` are the top 5 of
           libtrie's own search (libtrie.search.ToolSearch, BM25) over the catalog for the question's text; the
           call's name is constrained to the whole catalog (llama-server: "trie": {"registry": NAME}).
  deferred every catalog tool "defer_loading": true with OpenAI's {"type": "tool_search"}, standard fields only:
           nothing of the catalog in the prompt; a search call is sent back with an empty result (the server
           answers it with libtrie's search and loads what it found) and the model calls again (MAX_SEARCHES).

Engines: a module engine_<name>.py next to this file ("-" -> "_") with start(mode, registry, model) -> base URL
and stop(); `registry` is the path of the catalog's registry file (NAME.json, an OpenAI tools list) in catalog
mode, else None. An engine may define catalog_fields(registry_name) -> dict, the request fields that name the
registry (default {"trie": {"registry": NAME}}, llama-server's).

Per case, one JSON line in --out: the request's outcome (HTTP status, error), the calls as returned, whether they
parse (each call's arguments a JSON object), whether every name is in the set (the case's tools; the catalog), the
AST check of bfcl-eval's ast_checker (names mapped back from NAME__vK), TTFT and decode tokens/s (the server's
timings when it reports them: TTFT = wall time - decode time, tok/s = its predicted_per_second; else from the
stream: the first delta, completion tokens over the time after it). One summary line per run in --summary.
"""
import argparse
import importlib
import json
import os
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bfcl  # noqa: E402
import summary  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(1, os.path.join(REPO, "python"))  # libtrie's search (catalog, deferred): the tree's package
CATALOG_NAME = "bfcl_catalog"
CATALOG_PATH = os.path.join(REPO, ".cache", "bfcl", "registry", CATALOG_NAME + ".json")  # --catalog default


def post_stream(url, body, timeout):
    """POST a streamed chat completion; returns (status, message dict or error text, timing dict)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    msg = {"content": "", "tool_calls": {}}
    t_first = t_last = None
    usage, timings = {}, {}
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                usage = chunk.get("usage") or usage
                timings = chunk.get("timings") or timings
                for ch in chunk.get("choices") or []:
                    d = ch.get("delta") or {}
                    if d.get("content") or d.get("tool_calls"):
                        t_last = time.monotonic()
                        t_first = t_first or t_last
                    msg["content"] += d.get("content") or ""
                    for tc in d.get("tool_calls") or []:
                        slot = msg["tool_calls"].setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                        f = tc.get("function") or {}
                        slot["name"] += f.get("name") or ""
                        slot["arguments"] += f.get("arguments") or ""
        status = 200
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")[:500], {"wall_s": time.monotonic() - t0}
    except Exception as e:  # timeouts, resets
        return 0, f"{type(e).__name__}: {e}"[:500], {"wall_s": time.monotonic() - t0}
    wall = time.monotonic() - t0
    tm = {"wall_s": wall, "completion_tokens": usage.get("completion_tokens"),
          "prompt_tokens": usage.get("prompt_tokens", timings.get("prompt_n"))}
    if timings.get("predicted_ms") is not None:
        tm["ttft_s"] = wall - timings["predicted_ms"] / 1000
        tm["tok_s"] = timings.get("predicted_per_second")
        tm["completion_tokens"] = timings.get("predicted_n", tm["completion_tokens"])
    elif t_first is not None:
        tm["ttft_s"] = t_first - t0
        n = tm["completion_tokens"]
        tm["tok_s"] = (n - 1) / (t_last - t_first) if n and n > 1 and t_last > t_first else None
    msg["tool_calls"] = [msg["tool_calls"][k] for k in sorted(msg["tool_calls"])]
    return status, msg, tm


def parse_calls(msg):
    """The calls as [{name: arguments dict}], or None when a call's arguments are not a JSON object."""
    calls = []
    for c in msg["tool_calls"]:
        try:
            args = json.loads(c["arguments"])
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        calls.append({c["name"]: args})
    return calls


def request_of(case, mode, index, engine, k, max_tokens=512):
    """The chat request of a case (and the candidate names the prompt lists in catalog mode)."""
    body = {"messages": case["messages"], "tool_choice": "required", "parallel_tool_calls": True, "temperature": 0,
            "max_tokens": max_tokens, "cache_prompt": False}
    if mode in ("stock", "libtrie"):
        body["tools"] = bfcl.tools_of(case["functions"])
        return body, None
    if mode == "deferred":  # every catalog tool deferred, the search tool shown: standard fields only
        body["tools"] = index.deferred_tools
        return body, None
    query = " ".join(m["content"] for m in case["messages"] if m.get("role") == "user")
    top = [index.tools[i] for i, _ in index.top(query, k)]
    body["tools"] = top
    fields = engine.catalog_fields(CATALOG_NAME) if hasattr(engine, "catalog_fields") else {
        "trie": {"registry": CATALOG_NAME}}
    body.update(fields)
    return body, [t["function"]["name"] for t in top]


class Catalog:
    """The catalog's tools, libtrie's search index over them (libtrie.search.ToolSearch: BM25 over names,
    descriptions and parameters, the search the server answers a deferred request's search call with), and the
    deferred request's tools (every catalog tool "defer_loading": true, then OpenAI's {"type": "tool_search"})."""

    def __init__(self, tools):
        from libtrie.search import ToolSearch
        self.tools = tools
        self.search = ToolSearch(tools)
        self.deferred_tools = [dict(t, defer_loading=True) for t in tools] + [{"type": "tool_search"}]

    def top(self, query, k):
        """The search's top `k` for a question: its first words within the search's bounds (4,096 bytes, 64
        distinct words: a longer question is cut, as a client must)."""
        from libtrie import Status, TrieError
        words = query.encode("utf-8")[:MAX_QUERY_BYTES].decode("utf-8", "ignore").split()
        while words:
            try:
                return self.search.search(" ".join(words), k)
            except TrieError as e:
                if e.status != Status.LIMIT_EXCEEDED:
                    raise
                words = words[: len(words) * 4 // 5]
        return []


MAX_QUERY_BYTES = 4096  # libtrie's search reads queries of up to 4,096 bytes
SEARCH_NAMES = ("tool_search", "tool_search_tool_bm25", "tool_search_tool_regex")
MAX_SEARCHES = 2  # deferred mode: search calls answered before the answer must be a call of a tool


def answer_deferred(url, body, args):
    """A deferred-mode case: the first request; while the model's calls are search calls (at most MAX_SEARCHES
    rounds), the calls go into the history with an empty result (the server answers them with libtrie's search
    and loads the tools found) and the next request is sent. Returns (status, final message, timing, searches):
    the timing sums the rounds (TTFT: everything before the final answer's first token; prompt tokens: every
    round's), `searches` the search calls' arguments in order."""
    messages = list(body["messages"])
    searches, total = [], {"wall_s": 0.0, "ttft_s": 0.0, "prompt_tokens": 0, "completion_tokens": 0}
    for rnd in range(MAX_SEARCHES + 1):
        status, msg, tm = post_stream(url, dict(body, messages=messages), args.timeout)
        total["wall_s"] += tm["wall_s"]
        if status != 200:
            return status, msg, total, searches
        for key in ("prompt_tokens", "completion_tokens"):
            total[key] += tm.get(key) or 0
        search_calls = [c for c in msg["tool_calls"] if c["name"] in SEARCH_NAMES]
        if not search_calls or rnd == MAX_SEARCHES:
            total["ttft_s"] += tm.get("ttft_s") or 0
            total["tok_s"] = tm.get("tok_s")
            return status, msg, total, searches
        total["ttft_s"] += tm["wall_s"]
        calls = [{"id": f"call_{rnd}_{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]}} for i, c in enumerate(search_calls)]
        searches += [c["arguments"] for c in search_calls]
        messages = messages + [{"role": "assistant", "content": msg["content"] or None, "tool_calls": calls}] + [
            {"role": "tool", "tool_call_id": c["id"], "content": ""} for c in calls]
    raise AssertionError("unreachable")


def write_catalog(path):
    tools, base = bfcl.catalog()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(tools, f, separators=(",", ":"))
    os.replace(tmp, path)
    return tools, base


def summarize(rows, engine, mode, category, limit):
    return {"engine": engine, "mode": mode, "category": category, "limit": limit, **summary.counts(rows)}


def run_category(args, category, cases, url, engine, index, base, by_key):
    """Every case of one category through the engine at `url`; the answers' rows (also appended to --out)."""
    rows, done = [], {}
    if args.resume and os.path.exists(args.out):
        for line in open(args.out, encoding="utf-8"):
            r = json.loads(line) if line.strip() else {}
            if (r.get("engine"), r.get("mode"), r.get("category"), r.get("max_tokens")) == (
                    args.engine, args.mode, category, args.max_tokens) and r.get("status") == 200:
                done[r["id"]] = r
    with open(args.out, "a", encoding="utf-8") as out:
        for case in cases:
            if case["id"] in done:  # --resume: answered before with the same max_tokens
                rows.append(done[case["id"]])
                print(f"[bfcl] {args.mode} {case['id']}: answered before (--resume)", file=sys.stderr)
                continue
            body, cands = request_of(case, args.mode, index, engine, args.candidates, args.max_tokens)
            searches = None
            if args.mode == "deferred":
                status, msg, tm, searches = answer_deferred(url, body, args)
            else:
                status, msg, tm = post_stream(url, body, args.timeout)
            row = {"engine": args.engine, "mode": args.mode, "category": category, "id": case["id"],
                   "status": status, "error": "" if status == 200 else str(msg), "parse": False,
                   "names_in_set": False, "ast_valid": False, "ast_error": "", **{k: v for k, v in tm.items()},
                   "load": round(os.getloadavg()[0], 2), "max_tokens": args.max_tokens, "seed": args.seed}
            if args.mode == "catalog":
                gold = {bfcl.catalog_name_of(t, by_key) for t in bfcl.tools_of(case["functions"])}
                row["candidates"] = cands
                row["gold_in_candidates"] = bool(gold & set(cands))
            if searches is not None:  # what the server's search found for each query (the same index)
                gold = {bfcl.catalog_name_of(t, by_key) for t in bfcl.tools_of(case["functions"])}
                row["searches"] = searches
                found = set()
                for a in searches:
                    try:
                        q = json.loads(a).get("query", "")
                    except (ValueError, AttributeError):
                        q = ""
                    if isinstance(q, str) and q.strip():
                        found |= {index.tools[i]["function"]["name"] for i, _ in index.top(q, 5)}
                row["gold_in_candidates"] = bool(gold & found)
            if status == 200:
                row["content"] = msg["content"][:2000]
                row["tool_calls"] = msg["tool_calls"]
                calls = parse_calls(msg) if msg["tool_calls"] else None
                row["parse"] = calls is not None
                if calls is not None:
                    allowed = set(base) if args.mode in ("catalog", "deferred") else {
                        t["function"]["name"] for t in body["tools"]}
                    row["names_in_set"] = all(next(iter(c)) in allowed for c in calls)
                    if args.mode in ("catalog", "deferred"):  # NAME__vK is the BFCL function NAME
                        calls = [{base.get(n, n): a for n, a in c.items()} for c in calls]
                    row["ast_valid"], row["ast_error"] = bfcl.score(category, case["functions"], calls,
                                                                    case["answer"])
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(f"[bfcl] {args.mode} {case['id']}: {status} parse={row['parse']} ast={row['ast_valid']} "
                  f"ttft={row.get('ttft_s') or 0:.2f}s tok/s={row.get('tok_s') or 0:.1f}", file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True, choices=["llama-server", "vllm"])
    ap.add_argument("--mode", required=True, choices=["stock", "libtrie", "catalog", "deferred"])
    ap.add_argument("--category", required=True,
                    help="a category, or several separated by commas (one engine start for all: vLLM starts slowly)")
    ap.add_argument("--limit", type=int, default=0, help="N cases of the category (0: all): the first N, or with "
                    "--seed a sample of N drawn with that seed (in file order)")
    ap.add_argument("--seed", type=int, help="draw the --limit cases at random with this seed")
    ap.add_argument("--out", required=True, help="JSONL of every answer (appended to)")
    ap.add_argument("--summary", help="JSONL of one summary line per run (appended to)")
    ap.add_argument("--model", default=os.environ.get("BFCL_MODEL", ""), help="the engine's model (llama-server: a GGUF path)")
    ap.add_argument("--url", help="an engine already running (skips start/stop; its mode must match --mode)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per request")
    ap.add_argument("--max-tokens", type=int, default=512, help="every request's max_tokens (the same in every mode)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the cases --out already answered (HTTP 200, same engine, mode, category, max_tokens)")
    ap.add_argument("--candidates", type=int, default=5, help="catalog mode: tools listed in the prompt")
    ap.add_argument("--catalog", default=CATALOG_PATH)
    args = ap.parse_args()

    categories = args.category.split(",")
    for c in categories:
        if c not in bfcl.CATEGORIES:
            ap.error(f"--category {c!r}: expected one of {', '.join(bfcl.CATEGORIES)}")
    engine = importlib.import_module("engine_" + args.engine.replace("-", "_"))
    index = base = by_key = registry = None
    if args.mode in ("catalog", "deferred"):
        tools, base = write_catalog(args.catalog)
        index = Catalog(tools)
        by_key = bfcl.catalog_by_key(tools, base)
        registry = args.catalog if args.mode == "catalog" else None
        print(f"[bfcl] catalog: {len(tools)} tools, {len(set(base.values()))} distinct names -> {args.catalog}",
              file=sys.stderr)
    url = args.url or engine.start(args.mode, registry, args.model)
    try:
        for category in categories:
            cases = bfcl.drawn(category, args.limit, args.seed)
            print(f"[bfcl] {args.engine} {args.mode} {category}: {len(cases)} cases; "
                  f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
            rows = run_category(args, category, cases, url, engine, index, base, by_key)
            s = summarize(rows, args.engine, args.mode, category, args.limit)
            s["load"] = [round(x, 2) for x in os.getloadavg()]
            s["max_tokens"] = args.max_tokens
            s["seed"] = args.seed
            print(json.dumps(s))
            if args.summary:
                with open(args.summary, "a", encoding="utf-8") as f:
                    f.write(json.dumps(s) + "\n")
    finally:
        if not args.url:
            engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
