#!/usr/bin/env python3
"""Speculative decoding stays exact (issue 31, llama-server): many requests against a running llama-server built with
libtrie that drafts with the engine's own drafter (a draft model, --model-draft, or n-gram lookup, --spec-type) and,
for sets and tool calls' names, with libtrie's forced runs (--trie-jump-forward, on by default). Started by
tests/llama-server/run-spec.sh (1,000 requests, opt-in) and tests/llama-server/run.sh (a short run). Standard
library only.

Requests, cycled (greedy and sampled at temperature 0.8 with a seed per request, alternately; --concurrency at a
time):
  enum      /completion, "json_schema": {"enum": [300 tool names]}: a templated set (the member as a JSON string
            between its quotes: the quotes and the rest of a unique name are forced runs);
  grammar   /completion, "grammar": a GBNF alternation of 62 multi-byte UTF-8 city names (data/cities-utf8.txt);
  chat      /v1/chat/completions, "response_format": json_schema enum of 40 names;
  tools     /v1/chat/completions, 8 "tools" (short arguments: enums, booleans) with "tool_choice": "required" (the
            name a libtrie segment, its arguments that tool's grammar; {"name": " and ", "arguments": are forced);
  set       /completion, "trie": {"set": "tools"} (the demo's 4,000 tool names, a plain set; libtrie's either way).

Every output is checked: a member of its set (the enum's JSON string decoded), a tool call parsed by the server
(message.tool_calls) naming a listed tool with arguments that fit its schema; every request answered 200. The model
steps of an answer are its tokens less the draft tokens accepted (timings: predicted_n - draft_n_accepted).

--expect exact   (routing on: the server under test) every answer is valid, no error, the server alive at the end,
                 draft tokens were proposed and accepted: a check fails otherwise;
--expect report  (the same requests with --trie-no-route: llama.cpp's grammars do the enum, grammar, chat and tools
                 kinds) nothing is asserted but the server being alive: the valid share and the errors are reported.
--summary FILE   writes the figures (per kind: requests, valid, errors, seconds, tokens, draft tokens, accepted) as
                 JSON; --outputs FILE the greedy answers (JSON lines), and --compare FILE the share of greedy
                 answers equal to another run's (for instance one without speculative decoding), reported.
Prints one line per check and "N passed, M failed" last; exit status 1 when a check failed.
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import check, finish, post, read_set  # noqa: E402
from check_routing import fits, tool, wait_healthy  # noqa: E402

KINDS = ["enum", "grammar", "chat", "tools", "set"]

# tools whose arguments are short (enums, booleans, none): a call is a few dozen tokens, so 1,000 requests fit in an
# hour of a shared 2-core machine; the names share stems (get_, set_, delete_) so parts of them are forced runs
SPEC_TOOLS = [
    ("get_weather", "Get the weather of a city", {"type": "object", "properties": {
        "city": {"enum": ["Paris", "London", "Tokyo", "Zürich"]}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}),
    ("get_time", "Get the current time", {"type": "object", "properties": {}, "additionalProperties": False}),
    ("get_weather_alerts", "Get the weather alerts of a city", {"type": "object", "properties": {
        "city": {"enum": ["Paris", "London", "Tokyo", "Zürich"]}}, "required": ["city"], "additionalProperties": False}),
    ("set_alarm", "Set or clear the alarm", {"type": "object", "properties": {"on": {"type": "boolean"}},
                                              "required": ["on"], "additionalProperties": False}),
    ("set_mode", "Set the mode of the thermostat", {"type": "object", "properties": {
        "mode": {"enum": ["heat", "cool", "auto", "off"]}}, "required": ["mode"], "additionalProperties": False}),
    ("delete_file", "Delete the open file", {"type": "object", "properties": {"force": {"type": "boolean"}},
                                             "required": ["force"], "additionalProperties": False}),
    ("delete_all_files", "Delete every file", {"type": "object", "properties": {}, "additionalProperties": False}),
    ("list_files", "List the files", {"type": "object", "properties": {}, "additionalProperties": False}),
]

ENUM_PROMPTS = [
    "Which tool posts a message to a Slack channel? Answer:",
    "Which tool opens a new bug report in a GitHub repository? Answer:",
    "Which tool creates a calendar event? Answer:",
    "Which tool deletes a file from cloud storage? Answer:",
    "Which tool lists the open pull requests? Answer:",
    "Which tool sends an email? Answer:",
    "Name a tool that archives something. Answer:",
    "Which tool refunds a payment? Answer:",
]
CITY_PROMPTS = [
    "Name a large city in Japan:",
    "Name a city in China:",
    "Name a city in Russia:",
    "Name a city in Greece:",
    "Name a city in Korea:",
    "Name a city in India:",
    "Name a city in Israel:",
    "Name a city:",
]
CHAT_PROMPTS = [
    "Pick the tool that sends a chat message.",
    "Pick the tool that creates an issue.",
    "Pick a tool that reads data.",
    "Pick a tool that deletes something.",
    "Pick any tool.",
]
TOOL_PROMPTS = [
    "What is the weather in Paris, in celsius?",
    "Are there weather alerts for Tokyo?",
    "Delete the file, force it.",
    "Turn the alarm on.",
    "What time is it?",
    "Set the thermostat to cool.",
    "Delete all my files.",
    "List the files.",
]


def load_sets(repo, sets_dir):
    tools_all = sorted(read_set(os.path.join(sets_dir, "tools.txt")))
    cities = sorted(read_set(os.path.join(repo, "data", "cities-utf8.txt")))
    enum = tools_all[::len(tools_all) // 300][:300]
    chat_enum = tools_all[7::len(tools_all) // 40][:40]
    return tools_all, cities, enum, chat_enum


def gbnf_alternation(members):
    def lit(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "root ::= " + " | ".join(lit(m) for m in members)


class Runner:
    def __init__(self, args, sets):
        self.args = args
        self.tools_all, self.cities, self.enum, self.chat_enum = sets
        self.tools_set = set(self.tools_all)
        self.tools = [tool(n, d, schema) for n, d, schema in SPEC_TOOLS]
        self.schema_of = {n: schema for n, _, schema in SPEC_TOOLS}
        self.grammar = gbnf_alternation(self.cities)
        self.lock = threading.Lock()
        self.stats = {k: {"requests": 0, "valid": 0, "errors": 0, "seconds": 0.0, "tokens": 0, "draft": 0,
                          "accepted": 0} for k in KINDS}
        self.bad = []       # (i, kind, detail) of invalid answers and errors
        self.greedy = {}    # i -> answer text, greedy requests only

    def request(self, i, url):
        kind = KINDS[i % len(KINDS)]
        greedy = (i // len(KINDS)) % 2 == 0
        sampling = {"temperature": 0.0} if greedy else {"temperature": 0.8, "seed": 1000 + i}
        n = i // len(KINDS)
        if kind == "enum":
            body = dict(prompt=ENUM_PROMPTS[n % len(ENUM_PROMPTS)], n_predict=32, json_schema={"enum": self.enum}, **sampling)
            status, res, dt = post(url + "/completion", body)
        elif kind == "grammar":
            body = dict(prompt=CITY_PROMPTS[n % len(CITY_PROMPTS)], n_predict=32, grammar=self.grammar, **sampling)
            status, res, dt = post(url + "/completion", body)
        elif kind == "set":
            body = dict(prompt=ENUM_PROMPTS[n % len(ENUM_PROMPTS)], n_predict=32, trie={"set": "tools"}, **sampling)
            status, res, dt = post(url + "/completion", body)
        elif kind == "chat":
            schema = {"type": "json_schema", "json_schema": {"name": "pick", "schema": {"enum": self.chat_enum}}}
            body = dict(messages=[{"role": "user", "content": CHAT_PROMPTS[n % len(CHAT_PROMPTS)]}], max_tokens=32,
                        response_format=schema, **sampling)
            status, res, dt = post(url + "/v1/chat/completions", body)
        else:
            body = dict(messages=[{"role": "user", "content": TOOL_PROMPTS[n % len(TOOL_PROMPTS)]}], max_tokens=64,
                        tools=self.tools, tool_choice="required", **sampling)
            status, res, dt = post(url + "/v1/chat/completions", body)
        ok, answer, detail = self.judge(kind, status, res)
        timings = res.get("timings", {}) if isinstance(res, dict) else {}
        with self.lock:
            s = self.stats[kind]
            s["requests"] += 1
            s["seconds"] += dt
            if status != 200:
                s["errors"] += 1
            elif ok:
                s["valid"] += 1
            s["tokens"] += int(timings.get("predicted_n", 0))
            s["draft"] += int(timings.get("draft_n", 0))
            s["accepted"] += int(timings.get("draft_n_accepted", 0))
            if not ok:
                self.bad.append((i, kind, detail))
            if greedy:
                self.greedy[i] = answer

    def judge(self, kind, status, res):
        """(valid, answer text, why not)"""
        if status != 200 or not isinstance(res, dict):
            err = res.get("error", res) if isinstance(res, dict) else res
            return False, None, f"status {status}: {str(err)[:200]}"
        if kind in ("enum", "grammar", "set"):
            text = res.get("content", "")
            if kind == "enum":
                try:
                    value = json.loads(text)
                except ValueError:
                    return False, text, f"not JSON: {text!r}"
                return value in self.enum, text, f"not in the enum: {text!r}"
            members = self.cities if kind == "grammar" else self.tools_set
            return text in members, text, f"not a member: {text!r}"
        msg = res["choices"][0]["message"]
        if kind == "chat":
            text = msg.get("content") or ""
            try:
                value = json.loads(text)
            except ValueError:
                return False, text, f"not JSON: {text!r}"
            return value in self.chat_enum, text, f"not in the enum: {text!r}"
        calls = msg.get("tool_calls") or []
        if len(calls) != 1:
            return False, None, f"{len(calls)} parsed calls; content {str(msg.get('content'))[:200]!r}"
        fn = calls[0]["function"]
        answer = fn["name"] + " " + fn["arguments"]
        try:
            arguments = json.loads(fn["arguments"])
        except ValueError:
            return False, answer, f"arguments do not parse: {fn['arguments']!r}"
        if fn["name"] not in self.schema_of:
            return False, answer, f"{fn['name']!r} is not a listed tool"
        return fits(self.schema_of[fn["name"]], arguments), answer, f"arguments do not fit: {answer!r}"

    def run(self, urls, n, concurrency, max_seconds):
        """Sends requests 0..n-1, `concurrency` at a time per server, until done or `max_seconds` have passed (then
        no new request is sent: the shortfall is a failed check in --expect exact). A progress line every 100."""
        nxt = [0]
        t0 = time.monotonic()

        def worker(url):
            while True:
                with self.lock:
                    i = nxt[0]
                    if i >= n or (max_seconds and time.monotonic() - t0 > max_seconds):
                        return
                    nxt[0] += 1
                self.request(i, url)
                with self.lock:
                    done = sum(s["requests"] for s in self.stats.values())
                    if done % 100 == 0:
                        bad = sum(s["requests"] - s["valid"] for s in self.stats.values())
                        print(f"[{self.args.label}] {done} answered, {bad} invalid or failed, "
                              f"{time.monotonic() - t0:.0f} s", flush=True)

        threads = [threading.Thread(target=worker, args=(u,)) for u in urls for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.monotonic() - t0


def alive(url, pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    status, _, _ = post(url + "/completion", {"prompt": "Hello", "n_predict": 2})
    return status == 200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, action="append", help="a server (repeat: the requests are shared out)")
    ap.add_argument("--pid", type=int, required=True, action="append", help="its process id (as many as --url)")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--sets", required=True, help="the server's set directory (with the demo's tools.txt)")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=4, help="requests at a time per server")
    ap.add_argument("--max-minutes", type=float, default=0, help="send no new request after this (0: no limit)")
    ap.add_argument("--label", default="spec")
    ap.add_argument("--expect", choices=["exact", "report"], default="exact")
    ap.add_argument("--summary", help="write the figures here (JSON)")
    ap.add_argument("--outputs", help="write the greedy answers here (JSON lines)")
    ap.add_argument("--compare", help="the greedy answers of another run (JSON lines): the share equal is reported")
    args = ap.parse_args()
    label = args.label
    up = all(wait_healthy(u, p, limit=300) for u, p in zip(args.url, args.pid))
    if not check(up and len(args.url) == len(args.pid), f"[{label}] the server(s) up"):
        return finish()

    runner = Runner(args, load_sets(args.repo, args.sets))
    wall = runner.run(args.url, args.requests, args.concurrency, args.max_minutes * 60)
    st = runner.stats
    total = {k: sum(s[k] for s in st.values()) for k in next(iter(st.values()))}
    print(f"[{label}] {total['requests']} of {args.requests} requests in {wall:.0f} s ({len(args.url)} server(s), "
          f"{args.concurrency} at a time each)")
    print(f"[{label}] kind     requests  valid  errors  s/answer  tokens/answer  steps/answer  draft  accepted")
    for k, s in list(st.items()) + [("all", total)]:
        r = max(1, s["requests"])
        print(f"[{label}] {k:8} {s['requests']:8d} {s['valid']:6d} {s['errors']:7d} {s['seconds'] / r:9.2f} "
              f"{s['tokens'] / r:14.2f} {(s['tokens'] - s['accepted']) / r:13.2f} {s['draft']:6d} {s['accepted']:9d}")
    for i, kind, detail in runner.bad[:20]:
        print(f"[{label}] request {i} ({kind}): {detail}")
    sys.stdout.flush()

    if args.summary:
        with open(args.summary, "w", encoding="utf-8") as f:
            json.dump({"label": label, "requests": args.requests, "answered": total["requests"], "wall_s": wall, "kinds": st, "all": total,
                       "bad": runner.bad[:100]}, f, indent=1)
    if args.outputs:
        with open(args.outputs, "w", encoding="utf-8") as f:
            for i in sorted(runner.greedy):
                f.write(json.dumps({"i": i, "answer": runner.greedy[i]}, ensure_ascii=False) + "\n")
    if args.compare:
        with open(args.compare, encoding="utf-8") as f:
            other = {r["i"]: r["answer"] for r in map(json.loads, f)}
        same = sum(1 for i, a in runner.greedy.items() if i in other and other[i] == a)
        both = sum(1 for i in runner.greedy if i in other)
        print(f"[{label}] greedy answers equal to {os.path.basename(args.compare)}'s: {same}/{both}")

    up = all(alive(u, p) for u, p in zip(args.url, args.pid))
    if args.expect == "report":
        check(up, f"[{label}] the server(s) alive after {total['requests']} requests (the rest is reported, not asserted)")
        return finish()
    check(total["requests"] == args.requests, f"[{label}] every request answered", str(total["requests"]))
    check(total["errors"] == 0, f"[{label}] no request failed", f"{total['errors']} errors")
    for k, s in st.items():
        if s["requests"]:
            check(s["valid"] == s["requests"], f"[{label}] {k}: every answer valid ({s['valid']}/{s['requests']})",
                  "; ".join(d for _, kk, d in runner.bad if kk == k)[:600])
    check(total["draft"] > 0 and total["accepted"] > 0, f"[{label}] draft tokens proposed and accepted",
          f"{total['draft']} proposed, {total['accepted']} accepted")
    check(up, f"[{label}] the server(s) alive after {total['requests']} requests")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
