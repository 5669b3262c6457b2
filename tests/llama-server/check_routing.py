#!/usr/bin/env python3
"""Checks, against a running llama-server built with libtrie, what reaches libtrie without the "trie" field (issue 22).

Started by tests/llama-server/run.sh after check.py. Standard library only. Two parts:

  --part routing   json_schema / response_format enums and literal GBNF alternations are served by libtrie (the
                   output is a JSON value / literal of the set, and the server log says it routed them); a schema
                   that is not a set goes llama.cpp's way (a valid object), and so does an enum over the inline
                   bounds (as without libtrie); bad schemas are a 400 naming the problem while the server goes on.
  --part hostile   requests a hostile client sends (issue 28): an expansion-bomb grammar (llama.cpp's to serve),
                   a 50,000-deep anyOf, a client-sent "trie_tools", tools whose parameters are not an object or
                   whose $ref points nowhere, a registry with such a tool: each a clear 400 (or a correct answer)
                   while the server goes on serving; /health is polled during each and its worst delay printed.
  --part reasoning (a server with tests/llama-server/think-template.jinja, a template that forces "<think>" open)
                   a json_schema enum is left to llama.cpp while the model reasons first (not forced into the
                   reasoning block), and routed to libtrie with "enable_thinking": false.
  --part tools     tool calls: 10 tools in "tools" with tool_choice "required" and a named tool, and a 10,000-tool
                   registry (written here into the set directory) named by "trie": {"registry": NAME}: every call
                   names a tool of the set and its arguments parse and fit that tool's schema, and comes back parsed
                   (message.tool_calls), in the template's JSON-native format or, for a template without one, as a
                   bare JSON object; "auto" (templates with a section marker): a call, when made, is valid; bad
                   tools, a named tool not in the list, a bad registry name: a 400, and the server goes on.

Prints one line per check and "N passed, M failed" last; exit status 1 when a check failed.
"""
import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import TIMEOUT, check, finish, get, post, read_set  # noqa: E402  (shared helpers and counters)

TOOL_SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
     "required": ["city", "unit"], "additionalProperties": False},
    {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
     "required": ["query"], "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "integer"}, "force": {"type": "boolean"}},
     "required": ["id", "force"], "additionalProperties": False},
    {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                      "priority": {"enum": ["low", "normal", "high"]}},
     "required": ["to", "subject", "priority"], "additionalProperties": False},
    {"type": "object", "properties": {}, "additionalProperties": False},
]

# the registry's schemas: small, so 10,000 tools stay under the test server's --trie-max-file-bytes (2 MB)
REG_SCHEMAS = [
    {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": False},
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False},
    {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False},
]

TEN_TOOLS = [
    ("get_weather", "Get the current weather in a city", 0),
    ("search_web", "Search the web", 1),
    ("delete_file", "Delete a file by id", 2),
    ("send_email", "Send an email", 3),
    ("get_time", "Get the current time", 4),
    ("search_docs", "Search the documentation", 1),
    ("cancel_order", "Cancel an order by id", 2),
    ("notify_team", "Send a message to the team", 3),
    ("lookup_city", "Look up facts about a city", 0),
    ("list_files", "List the files", 4),
]


def tool(name, desc, schema):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": schema}}


def fits(schema, value):
    """Whether `value` fits the small schema language of TOOL_SCHEMAS (type, properties, required, enum,
    additionalProperties: false)."""
    if "enum" in schema:
        return value in schema["enum"]
    t = schema.get("type")
    if t == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        if any(k not in value for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and any(k not in props for k in value):
            return False
        return all(fits(props[k], v) for k, v in value.items() if k in props)
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return True


class Server:
    def __init__(self, url):
        self.url = url

    def completion(self, prompt, extra, n_predict=48):
        body = {"prompt": prompt, "n_predict": n_predict, "temperature": 0.0, "seed": 1, "cache_prompt": False}
        body.update(extra)
        return post(self.url + "/completion", body)

    def chat(self, messages, extra, max_tokens=64):
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "seed": 1, "cache_prompt": False}
        body.update(extra)
        return post(self.url + "/v1/chat/completions", body)


def user(text):
    return [{"role": "user", "content": text}]


def wait_healthy(url, pid, limit=180):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        status, _ = get(url + "/health", timeout=5)
        if status == 200:
            return True
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        time.sleep(0.5)
    return False


def log_count(path, pattern):
    with open(path, encoding="utf-8", errors="replace") as f:
        return len(re.findall(pattern, f.read()))


def error_text(res):
    if isinstance(res, dict):
        return json.dumps(res.get("error", res))
    return str(res)


def still_serves(srv, what):
    status, res, _ = srv.completion("Hello", {}, n_predict=4)
    check(status == 200, f"the server goes on after {what}", f"status {status}: {error_text(res)[:200]}")


# ---- part 1: routing ---------------------------------------------------------------------------------------------

def routing(srv, args):
    names = sorted(read_set(os.path.join(args.sets, "tools10k.txt")))
    routed_schema = r"libtrie: routed a json_schema set of"
    routed_grammar = r"libtrie: routed a grammar set of"

    # a 100-value string enum through /completion's json_schema
    k100 = names[:100]
    before = log_count(args.server_log, routed_schema)
    status, res, _ = srv.completion("Name one tool:", {"json_schema": {"enum": k100}})
    out = res.get("content") if isinstance(res, dict) else None
    try:
        value = json.loads(out) if out is not None else None
    except ValueError:
        value = None
    check(status == 200 and value in k100, "json_schema enum (K=100, /completion): the output is a JSON string of the set",
          f"status {status}, output {out!r}")
    check(log_count(args.server_log, routed_schema) == before + 1, "json_schema enum: served by libtrie (server log)")

    # the same schema again: compiled once (no new "routed" line), still valid
    status, res, _ = srv.completion("Pick a tool:", {"json_schema": {"enum": k100}})
    out = res.get("content") if isinstance(res, dict) else None
    check(status == 200 and out is not None and json.loads(out) in k100 and
          log_count(args.server_log, routed_schema) == before + 1, "json_schema enum again: served from the cache")

    # chat with response_format json_schema, a 1,000-value enum (the server's --trie-max-inline-strings)
    k1000 = names[100:1100]
    rf = {"type": "json_schema", "json_schema": {"name": "tool", "schema": {"type": "string", "enum": k1000}}}
    status, res, _ = srv.chat(user("Which tool lists the files?"), {"response_format": rf})
    content = res["choices"][0]["message"].get("content") if status == 200 else None
    try:
        value = json.loads(content) if content is not None else None
    except ValueError:
        value = None
    check(value in k1000, "response_format json_schema enum (K=1,000, chat): the content is a JSON string of the set",
          f"status {status}, content {content!r} {error_text(res)[:200] if status != 200 else ''}")
    check(log_count(args.server_log, routed_schema) == before + 2, "response_format enum: served by libtrie (server log)")

    # response_format json_object with a schema: anyOf of consts, mixed JSON values
    anyof = {"anyOf": [{"const": "on"}, {"const": 3}, {"const": None}, {"enum": ["off", True]}]}
    rf = {"type": "json_object", "schema": anyof}
    status, res, _ = srv.chat(user("Pick a value."), {"response_format": rf})
    content = res["choices"][0]["message"].get("content") if status == 200 else None
    try:
        value = json.loads(content) if content is not None else "bad"
    except ValueError:
        value = "bad"
    check(status == 200 and value in ["on", 3, None, "off", True] and type(value) in (str, int, type(None), bool),
          "response_format json_object anyOf of consts: a JSON value of the set", f"status {status}, content {content!r}")

    # a literal GBNF alternation, and llama.cpp's own enum form of a grammar
    lit = ["alpha", "beta", "gamma", "delta epsilon"]
    g = "root ::= " + " | ".join(json.dumps(s) for s in lit)
    before_g = log_count(args.server_log, routed_grammar)
    status, res, _ = srv.completion("Say a Greek letter:", {"grammar": g})
    out = res.get("content") if isinstance(res, dict) else None
    check(status == 200 and out in lit, "grammar literal alternation (/completion): the output is a literal of the set",
          f"status {status}, output {out!r}")
    enum_form = 'root ::= ("\\"red\\"" | "\\"green\\"" | "\\"blue\\"") space\nspace ::= | " " | "\\n"{1,2} [ \\t]{0,20}\n'
    status, res, _ = srv.chat(user("A colour?"), {"grammar": enum_form})
    content = res["choices"][0]["message"].get("content") if status == 200 else None
    check(content is not None and content in ['"red"', '"green"', '"blue"'],
          "grammar in llama.cpp's enum form (chat): a JSON string of the set", f"status {status}, content {content!r}")
    check(log_count(args.server_log, routed_grammar) == before_g + 2, "both grammars: served by libtrie (server log)")

    # not a set: llama.cpp's own path, untouched
    obj = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    before_all = log_count(args.server_log, r"libtrie: routed")
    status, res, _ = srv.completion("Give a number as JSON:", {"json_schema": obj}, n_predict=24)
    out = res.get("content") if isinstance(res, dict) else None
    try:
        value = json.loads(out)
    except (TypeError, ValueError):
        value = None
    check(status == 200 and isinstance(value, dict) and isinstance(value.get("n"), int),
          "a schema that is not a set (an object): llama.cpp's grammar, a valid object", f"status {status}, output {out!r}")
    status, res, _ = srv.completion("Yes or no:", {"grammar": 'root ::= "y" [a-z]*'}, n_predict=6)
    out = res.get("content") if isinstance(res, dict) else None
    check(status == 200 and isinstance(out, str) and re.fullmatch(r"y[a-z]*", out or "") is not None,
          "a grammar that is not a set: llama.cpp's grammar", f"status {status}, output {out!r}")
    check(log_count(args.server_log, r"libtrie: routed") == before_all, "neither was routed to libtrie (server log)")

    # bad requests: a 400 naming the problem, the server goes on
    bad = [
        ("an empty enum", srv.completion, ("x", {"json_schema": {"enum": []}}), r"empty"),
        ("\"trie\" together with a routed enum", srv.completion, ("x", {"json_schema": {"enum": ["a", "b"]},
                                                                        "trie": {"strings": ["a"]}}), r"cannot be combined"),
    ]
    for what, fn, fargs, pattern in bad:
        status, res, _ = fn(*fargs)
        msg = error_text(res)
        check(status == 400 and re.search(pattern, msg) is not None, f"{what}: HTTP 400 naming it",
              f"status {status}: {msg[:300]}")
    # over --trie-max-inline-strings: not a set for routing, llama.cpp's own grammar serves it (as without libtrie;
    # never a 400 for its size), the answer one of the enum
    before_over = log_count(args.server_log, r"libtrie: routed")
    status, res, _ = srv.completion("The tool is ", {"json_schema": {"enum": names[:1001]}}, n_predict=64)
    out = res.get("content") if status == 200 and isinstance(res, dict) else None
    # (the answer may be cut by n_predict: then it is the start of one of the enum's JSON strings)
    check(status == 200 and out is not None and any(json.dumps(n).startswith(out) for n in names[:1001]),
          "an enum over --trie-max-inline-strings: llama.cpp's grammar serves it, (the start of) one of the enum",
          f"status {status}: {str(out or error_text(res))[:300]}")
    check(log_count(args.server_log, r"libtrie: routed") == before_over, "it was not routed to libtrie (server log)")
    # a duplicate enum member does not change the language: served deduplicated (issue 28; a libtrie before that
    # refuses it with a 400 naming the duplicate)
    status, res, _ = srv.completion("x", {"json_schema": {"enum": ["a", "b", "a"]}})
    out = res.get("content") if status == 200 and isinstance(res, dict) else None
    check((status == 200 and out in ('"a"', '"b"')) or (status == 400 and re.search(r'lists \\?"a\\?" twice', error_text(res))),
          "a duplicate enum member: served deduplicated (or, before issue 28, a 400 naming it)", f"status {status}: {error_text(res)[:300]}")
    still_serves(srv, "the bad schemas")


# ---- part 2: tool calls ------------------------------------------------------------------------------------------

def the_call(status, res):
    """(name, arguments, how) of the one tool call of a chat response, or (None, None, why)."""
    if status != 200 or not isinstance(res, dict):
        return None, None, f"status {status}: {error_text(res)[:300]}"
    msg = res["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    if calls:
        fn = calls[0]["function"]
        try:
            return fn["name"], json.loads(fn["arguments"]), "parsed"
        except ValueError:
            return fn["name"], None, f"arguments do not parse: {fn['arguments']!r}"
    content = msg.get("content") or ""
    body = content.strip()
    m = re.fullmatch(r"(?s)(?:<[a-z_]+>\s*)?(\{.*\})(?:\s*</[a-z_]+>)?", body)
    if m:
        try:
            call = json.loads(m.group(1))
            return call.get("name"), call.get("arguments"), "content"
        except ValueError:
            pass
    return None, None, f"no call in {content!r}"


def tools_part(srv, args):
    tools = [tool(n, d, TOOL_SCHEMAS[s]) for n, d, s in TEN_TOOLS]
    schema_of = {n: TOOL_SCHEMAS[s] for n, _, s in TEN_TOOLS}
    prompts = ["What is the weather in Paris, in celsius?", "Search the web for llama recipes.",
               "Delete file 42 without asking.", "Email bob@example.com about the launch, high priority.",
               "What time is it?"]
    label = args.model_label
    for i, p in enumerate(prompts):
        status, res, _ = srv.chat(user(p), {"tools": tools, "tool_choice": "required"}, max_tokens=96)
        name, arguments, how = the_call(status, res)
        # the format is logged by the first chat request with tools
        native = log_count(args.server_log, r"libtrie: tool-call format: JSON native") > 0
        ok = how == "parsed" and name in schema_of and arguments is not None and fits(schema_of[name], arguments)
        check(ok, f"[{label}] 10 tools, tool_choice required #{i}: a parsed call to a listed tool, arguments fit its schema"
              + ("" if native else " (bare JSON: the template has no tool-call format)"), f"{how}: {name!r} {arguments!r}")

    # a named tool
    status, res, _ = srv.chat(user("Tell me about Rome."), {"tools": tools, "tool_choice": {
        "type": "function", "function": {"name": "lookup_city"}}}, max_tokens=96)
    name, arguments, how = the_call(status, res)
    check(how == "parsed" and name == "lookup_city" and arguments is not None and fits(schema_of["lookup_city"], arguments),
          f"[{label}] named tool_choice: a parsed call to that tool", f"{how}: {name!r} {arguments!r}")

    # "auto": lazily, the stage waits for the template's section marker. A small model seldom opens a call by
    # itself (Qwen2.5-Coder-0.5B writes a markdown JSON block), so one request biases the marker's token
    # (logit_bias, every step: the tools here take no strings, where the marker's text would fit) to fire the
    # trigger; the other is left alone and must come back as content or as a valid call.
    if native:
        status, res = post(srv.url + "/tokenize", {"content": "<tool_call>", "parse_special": True})[:2]
        marker = res.get("tokens", []) if isinstance(res, dict) else []
        no_strings = [t for t in tools if t["function"]["name"] in ("delete_file", "cancel_order", "get_time", "list_files")]
        extra = {"tools": no_strings, "tool_choice": "auto"}
        if len(marker) == 1:
            extra["logit_bias"] = [[marker[0], 100]]
        status, res, _ = srv.chat(user("Delete file 7, force it."), extra, max_tokens=96)
        name, arguments, how = the_call(status, res)
        check(len(marker) == 1 and how == "parsed" and name in schema_of and arguments is not None
              and fits(schema_of[name], arguments), f"[{label}] auto, the marker token biased: the trigger fires, a parsed"
              " call to a listed tool follows, arguments fit its schema", f"marker {marker}; {how}: {name!r} {arguments!r}")
        status, res, _ = srv.chat(user("What is the weather in Paris, in celsius?"), {"tools": tools, "tool_choice": "auto"},
                                  max_tokens=96)
        msg = res["choices"][0]["message"] if status == 200 else {}
        if msg.get("tool_calls"):
            name, arguments, how = the_call(status, res)
            check(name in schema_of and arguments is not None and fits(schema_of[name], arguments),
                  f"[{label}] auto, unbiased: the call names a listed tool, arguments fit its schema", f"{name!r} {arguments!r}")
        else:
            check(status == 200 and isinstance(msg.get("content"), str) and "<tool_call>" not in msg["content"],
                  f"[{label}] auto, unbiased: no call, plain content", f"status {status}: {error_text(res)[:200]}")
    else:
        print(f"# [{label}] auto: the template has no section marker to wait for; llama.cpp's own path")

    # a 10,000-tool registry in the set directory, three candidates described in the prompt
    reg_names = sorted(read_set(os.path.join(args.sets, "tools10k.txt")))
    reg_schema = {n: REG_SCHEMAS[i % len(REG_SCHEMAS)] for i, n in enumerate(reg_names)}
    path = os.path.join(args.sets, "reg10k.json")
    if not os.path.exists(path):  # the flat form {"name", "parameters"} of an OpenAI tool
        with open(path, "w", encoding="utf-8") as f:
            json.dump([{"name": n, "parameters": reg_schema[n]} for n in reg_names], f, separators=(",", ":"))
    print(f"# [{label}] registry reg10k.json: {len(reg_names)} tools, {os.path.getsize(path)} bytes")
    candidates = [tool(n, "a tool of the registry", reg_schema[n]) for n in reg_names[:3]]
    for i, p in enumerate(["Call the first tool you know.", "Use a tool to search for cats."]):
        extra = {"trie": {"registry": "reg10k"}, "tool_choice": "required"}
        if i == 0:
            extra["tools"] = candidates
        status, res, _ = srv.chat(user(p), extra, max_tokens=96)
        name, arguments, how = the_call(status, res)
        ok = how == "parsed" and name in reg_schema and arguments is not None and fits(reg_schema[name], arguments)
        check(ok, f"[{label}] 10,000-tool registry #{i} ({'3 candidates in tools' if i == 0 else 'no tools in the prompt'}):"
              " a parsed call to a registry tool, arguments fit its schema", f"{how}: {name!r} {arguments!r}")
    check(log_count(args.server_log, r"libtrie: compiled 10000 tool names of the registry reg10k") == 1,
          f"[{label}] the registry was compiled once")

    # a parameter named tool_args (the old argument grammar renamed root to tool-args in the grammar text, and the
    # converter's rule of this parameter replaced the whole arguments object): the arguments are an object
    targs = {"type": "object", "properties": {"tool_args": {"type": "integer"}, "note": {"enum": ["a", "b"]}},
             "required": ["tool_args", "note"], "additionalProperties": False}
    status, res, _ = srv.chat(user("Call it with 7."), {"tools": [tool("run", "run it", targs)], "tool_choice": "required"},
                              max_tokens=64)
    name, arguments, how = the_call(status, res)
    check(how == "parsed" and name == "run" and isinstance(arguments, dict) and fits(targs, arguments),
          f"[{label}] a parameter named tool_args: the arguments are the object its schema describes",
          f"{how}: {name!r} {arguments!r}")

    # bad tools: a 400 naming the problem, the server goes on
    dup = tools + [tool("get_weather", "again", TOOL_SCHEMAS[4])]
    badparams = [tool("x", "", "not an object")]
    bad = [
        ("a duplicate tool name", {"tools": dup, "tool_choice": "required"}, r"same name"),
        ("parameters that are not an object", {"tools": badparams, "tool_choice": "required"}, r"must be a JSON object"),
        ("a named tool not in tools", {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         r"not one of"),
        ("an unknown registry", {"trie": {"registry": "nosuch"}}, r"registry .nosuch. does not exist"),
        ("a registry name with a path", {"trie": {"registry": "../reg10k"}}, r"registry name"),
    ]
    for what, extra, pattern in bad:
        status, res, _ = srv.chat(user("x"), extra)
        msg = error_text(res)
        check(status == 400 and re.search(pattern, msg) is not None, f"[{label}] {what}: HTTP 400 naming it",
              f"status {status}: {msg[:300]}")
    still_serves(srv, "the bad tools")


# ---- part 3: hostile requests (issue 28) -----------------------------------------------------------------------

def post_raw(url, data, timeout=TIMEOUT):
    """POST `data` (bytes, sent as is): (status, parsed json or text, seconds)."""
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    except OSError as e:
        return 0, str(e), time.monotonic() - t
    dt = time.monotonic() - t
    try:
        return status, json.loads(raw), dt
    except ValueError:
        return status, raw.decode("utf-8", "replace"), dt


class HealthProbe:
    """Polls /health every 20 ms in a thread while a request runs; `worst` is the slowest answer (seconds)."""

    def __init__(self, url):
        self.url, self.worst, self.failures = url, 0.0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            status, _ = get(self.url + "/health", timeout=60)
            self.worst = max(self.worst, time.monotonic() - t)
            self.failures += status != 200
            self.stop.wait(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def deep_any_of(depth):
    """{"anyOf": [{"anyOf": [ ... {"const": "x"} ... ]}]} nested `depth` deep, as text (json.dumps recurses)."""
    return '{"json_schema": ' + '{"anyOf": [' * depth + '{"const": "x"}' + ']}' * depth + ', "prompt": "x", "n_predict": 4}'


def hostile(srv, args):
    digits = " | ".join(f'"{d}"' for d in range(10))
    bomb = 'root ::= d d d d d d d ""\nd ::= ' + digits + "\n"
    string_tool = [tool("say", "say it", {"type": "string"})]
    dangling = [tool("look", "look it up", {"type": "object", "properties": {"q": {"$ref": "#/$defs/nowhere"}},
                                            "required": ["q"]})]
    with open(os.path.join(args.sets, "regbad.json"), "w", encoding="utf-8") as f:
        json.dump([{"name": "ok", "parameters": {"type": "object"}}, {"name": "bad", "parameters": {"type": "string"}}], f)
    cases = [
        # (what, endpoint, body bytes, accepted statuses, pattern of the 400's message)
        ("an expansion-bomb grammar (10,000,000 members in 90 bytes)", "/completion",
         json.dumps({"prompt": "x", "n_predict": 8, "grammar": bomb}).encode(), (400, 200),
         r"max_members|max_member_bytes|--trie-max-inline|more than"),
        ("a 50,000-deep anyOf", "/completion", deep_any_of(50_000).encode(), (400,),
         r"nest|deep.*--trie-max-json-depth"),
        ("a 50,000-deep anyOf in chat", "/v1/chat/completions",
         ('{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object", "schema": '
          + '{"anyOf": [' * 50_000 + '{"const": "x"}' + ']}' * 50_000 + '}}').encode(), (400,),
         r"--trie-max-json-depth"),
        # (A 1,000,000-member enum is over the inline bounds: not a set for routing, so llama.cpp's own json-schema
        # grammar gets it, as without libtrie; what llama.cpp does with it is llama.cpp's, not checked here.)
        ("a client-sent trie_tools on /completion", "/completion",
         json.dumps({"prompt": "x", "n_predict": 4, "trie_tools": {"tools": [tool("f", "", {"type": "object"})]}}).encode(),
         (400,), r"not a request field"),
        ("a client-sent trie_tools on chat", "/v1/chat/completions",
         json.dumps({"messages": user("x"), "trie_tools": {"registry": "reg10k"}}).encode(), (400,), r"not a request field"),
        ("a tool whose parameters are {\"type\": \"string\"}", "/v1/chat/completions",
         json.dumps({"messages": user("x"), "tools": string_tool, "tool_choice": "required"}).encode(), (400,),
         r"tools.*'say'.*must describe an object"),
        ("a tool whose $ref points nowhere", "/v1/chat/completions",
         json.dumps({"messages": user("x"), "tools": dangling, "tool_choice": "required"}).encode(), (400,),
         r"tools.*'look'.*(Unresolved|\$ref)"),
        ("a registry with a non-object tool", "/v1/chat/completions",
         json.dumps({"messages": user("x"), "trie": {"registry": "regbad"}, "tool_choice": "required"}).encode(), (400,),
         r"registry 'regbad'.*'bad'.*must describe an object"),
    ]
    for what, path, data, statuses, pattern in cases:
        with HealthProbe(srv.url) as probe:
            status, res, dt = post_raw(srv.url + path, data)
        msg = error_text(res)
        if status == 200 and 200 in statuses:
            ok = True  # served by llama.cpp (not a set libtrie reads): a normal answer
        else:
            ok = status == 400 and re.search(pattern, msg) is not None
        print(f"# {what}: HTTP {status} in {dt * 1000:.0f} ms, /health worst {probe.worst * 1000:.0f} ms"
              f" ({len(data)} bytes): {msg[:160]}")
        check(ok, f"{what}: a clear 400 ({'or a normal answer, ' if 200 in statuses else ''}the message names the bound)",
              f"status {status}: {msg[:300]}")
        check(probe.failures == 0, f"{what}: /health answered 200 throughout", f"{probe.failures} failures")
        still_serves(srv, what)
    # the messages name the client's field once
    status, res, _ = srv.completion("x", {"json_schema": {"enum": []}})
    msg = error_text(res)
    check(status == 400 and msg.count("json_schema") == 1, "a bad json_schema: the field is named once", msg[:300])
    status, res, _ = srv.chat(user("x"), {"response_format": {"type": "json_schema", "json_schema": {"schema": {"enum": []}}}})
    msg = error_text(res)
    check(status == 400 and "response_format" in msg and "json_schema\\\": \\\"json_schema" not in msg and "trie_tools" not in msg,
          "a bad response_format schema in chat: the client's field named, not an internal one", msg[:300])


# ---- part 4: a reasoning template --------------------------------------------------------------------------------

def reasoning(srv, args):
    rf = {"type": "json_schema", "json_schema": {"schema": {"enum": ["yes", "no"]}}}
    routed = r"libtrie: routed a json_schema set of"
    left = r"libtrie: not routed: the template reasons before the content"
    before_routed, before_left = log_count(args.server_log, routed), log_count(args.server_log, left)
    status, res, _ = srv.chat(user("Is water wet? Answer yes or no."), {"response_format": rf}, max_tokens=32)
    msg = res["choices"][0]["message"] if status == 200 else {}
    print(f"# reasoning on: status {status}, message {json.dumps(msg)[:300]}")
    check(status == 200 and log_count(args.server_log, left) == before_left + 1
          and log_count(args.server_log, routed) == before_routed,
          "a template that forces <think> open: the enum is left to llama.cpp (not forced into the reasoning block)",
          f"status {status}: {error_text(res)[:200]}")
    check(msg.get("content") in (None, "", '"yes"', '"no"'),
          "a template that forces <think> open: the content, if any, is a member", repr(msg.get("content")))
    status, res, _ = srv.chat(user("Is water wet? Answer yes or no."), {
        "response_format": rf, "chat_template_kwargs": {"enable_thinking": False}}, max_tokens=32)
    content = res["choices"][0]["message"].get("content") if status == 200 else None
    check(status == 200 and content in ('"yes"', '"no"') and log_count(args.server_log, routed) == before_routed + 1,
          "the same with enable_thinking false (the block closed by the prompt): routed to libtrie, a member",
          f"status {status}: {content!r} {error_text(res)[:200] if status != 200 else ''}")
    still_serves(srv, "the reasoning template")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--server-log", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--sets", required=True)
    ap.add_argument("--part", choices=["routing", "tools", "hostile", "reasoning"], action="append", required=True)
    ap.add_argument("--model-label", default="model")
    args = ap.parse_args()
    if not wait_healthy(args.url, args.pid):
        check(False, "server healthy", "the server did not start; see its log")
        return finish()
    srv = Server(args.url)
    if "routing" in args.part:
        routing(srv, args)
    if "tools" in args.part:
        tools_part(srv, args)
    if "hostile" in args.part:
        hostile(srv, args)
    if "reasoning" in args.part:
        reasoning(srv, args)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
