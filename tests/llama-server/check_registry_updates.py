#!/usr/bin/env python3
"""Issue 36, defect 1 on llama-server: a registry whose file changes hands every name to ITS OWN tool's arguments.

Started by tests/llama-server/run.sh on the Qwen2.5 server (a JSON-native <tool_call> template). The registry
upd36.json of the set directory lists its tools in non-byte order (a registry updated in place renumbers members by
the byte order of their names: a caller that models the numbering as list order hands a name to another tool's
schema). Every tool has its own required key, so another tool's grammar cannot produce arguments that validate.
The file then changes three times (each a new file renamed into place): a tool added (its name sorts in the
middle), a tool removed (from the middle), a tool's schema changed (another key and type). For the registry's
first version and after each update, EVERY name of that version is called (tool_choice naming it, so the output
must be a call of it) and its parsed arguments are checked with jsonschema against that name's schema in that
version; one "required" call per version must be a tool of that version, valid against its own schema; a removed
name is refused (HTTP 400), and the changed schema is the one served (the old key does not validate).

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
from check_routing import user, wait_healthy  # noqa: E402

REGISTRY = "upd36"


def schema(key, kind):
    """An object with one required key of its own (nothing else allowed)."""
    prop = {"int": {"type": "integer"}, "bool": {"type": "boolean"},
            "enum": {"type": "string", "enum": ["low", "high"]}}[kind]
    return {"type": "object", "properties": {key: prop}, "required": [key], "additionalProperties": False}


# Names in non-byte order ("zz_" first, upper case after lower case, a name that is a prefix of another).
FIRST = [
    ("zz_last", schema("k_zz", "int")),
    ("tool_b", schema("k_b", "bool")),
    ("Alpha", schema("k_alpha", "enum")),
    ("tool_a", schema("k_a", "int")),
    ("m_tool", schema("k_m", "bool")),
    ("tool", schema("k_t", "enum")),
    ("a_first", schema("k_first", "int")),
]


def write(sets, tools):
    """The registry file, replaced atomically (a new file renamed into place: a new identity)."""
    path = os.path.join(sets, REGISTRY + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump([{"name": n, "parameters": s} for n, s in tools], f)
    os.replace(tmp, path)


def call(url, extra, prompt, max_tokens=64):
    body = {"messages": user(prompt), "max_tokens": max_tokens, "temperature": 0, "trie": {"registry": REGISTRY}}
    body.update(extra)
    return post(url + "/v1/chat/completions", body)


def parsed_calls(status, res):
    if status != 200 or not isinstance(res, dict):
        return None, f"status {status}: {str(res)[:300]}"
    calls = res["choices"][0]["message"].get("tool_calls") or []
    out = []
    for c in calls:
        try:
            out.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
        except ValueError:
            return None, f"arguments do not parse: {c['function']['arguments']!r}"
    return out, ""


def valid(args, s):
    try:
        jsonschema.validate(args, s)
        return True, ""
    except jsonschema.ValidationError as e:
        return False, e.message


def check_version(url, label, tools):
    schema_of = dict(tools)
    for name, s in tools:
        status, res, _ = call(url, {"tool_choice": {"type": "function", "function": {"name": name}}},
                              f"Call the tool {name}.")
        calls, why = parsed_calls(status, res)
        ok = calls is not None and len(calls) == 1 and calls[0][0] == name
        detail = why or f"{calls}"
        if ok:
            ok, detail = valid(calls[0][1], s)
            detail = detail or json.dumps(calls[0][1])
        check(ok, f"[{label}] {name}: one call of it, arguments valid against its own schema", detail)
    status, res, _ = call(url, {"tool_choice": "required"}, "Call one of the tools.")
    calls, why = parsed_calls(status, res)
    ok = calls is not None and len(calls) == 1 and calls[0][0] in schema_of
    detail = why or f"{calls}"
    if ok:
        ok, detail = valid(calls[0][1], schema_of[calls[0][0]])
        detail = detail or f"{calls[0][0]} {json.dumps(calls[0][1])}"
    check(ok, f"[{label}] required: a tool of this version, valid against its own schema", detail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--sets", required=True, help="the server's set directory (upd36.json is written there)")
    args = ap.parse_args()
    wait_healthy(args.url, args.pid)

    tools = list(FIRST)
    write(args.sets, tools)
    check_version(args.url, "v1", tools)

    # 1. a tool added at the end of the file (its name sorts in the middle)
    tools = tools + [("n_added", schema("k_added", "enum"))]
    write(args.sets, tools)
    check_version(args.url, "v2 +n_added", tools)

    # 2. a tool removed from the middle; its name is refused now
    removed = "tool_a"
    tools = [t for t in tools if t[0] != removed]
    write(args.sets, tools)
    status, res, _ = call(args.url, {"tool_choice": {"type": "function", "function": {"name": removed}}},
                          f"Call the tool {removed}.")
    check(status == 400, f"[v3 -{removed}] the removed tool is refused (400)", f"{status} {str(res)[:200]}")
    check_version(args.url, f"v3 -{removed}", tools)

    # 3. a tool's schema changed (another key and type): the new one is served, the old key does not validate
    changed = "tool_b"
    tools = [(n, schema("k_b2", "int") if n == changed else s) for n, s in tools]
    write(args.sets, tools)
    check_version(args.url, f"v4 ~{changed}", tools)
    status, res, _ = call(args.url, {"tool_choice": {"type": "function", "function": {"name": changed}}},
                          f"Call the tool {changed}.")
    calls, why = parsed_calls(status, res)
    old_ok = calls is not None and len(calls) == 1 and valid(calls[0][1], schema("k_b", "bool"))[0]
    check(calls is not None and len(calls) == 1 and not old_ok,
          f"[v4 ~{changed}] the old schema's arguments are not what is served", why or f"{calls}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
