#!/usr/bin/env python3
"""Issue 37 item 1 on llama-server: deferred tools through the APIs' own fields, with no libtrie field.

Started by tests/llama-server/run.sh on the Qwen2.5 server (a JSON-native <tool_call> template). The client sends
only standard fields: "tools" marked "defer_loading": true (at the tool level and in "function"), "tool_choice",
a search function (tool_search_tool_bm25) and tool_reference items in the history. The server runs libtrie's plan
(trie_deferred_plan) before the template renders; the call's name set still covers every tool and the hand-over
each tool's own schema. Every tool has its own required key and no other, so another tool's arguments never
validate against it. Checked:

  - "required" with every tool deferred: one call, named from the deferred tools, its arguments valid (jsonschema)
    against that tool's own schema; each deferred tool named by "tool_choice": a call of it, valid against its own
    schema (nothing of it in the prompt);
  - the prompt (usage.prompt_tokens) smaller with the tools deferred than with the same tools in it;
  - a tool_reference in the history loads that tool: the prompt is the one with that tool not deferred (equal
    token counts), larger than with a reference to a name that is no tool; the next call is valid;
  - a search call whose result the client left empty is answered by libtrie's search: the tools found are loaded
    (the prompt grows by their schemas against the same history answered "No tool found." by the client);
  - a malformed tool next to a deferred one: HTTP 400 naming "tools[1]".

With --offered NAME (a server started with --trie-deferred-registry NAME, the registry written by --write-registry
PATH: these tools as an OpenAI tools list), the operator's registry offered as deferred tools, the request carrying
only the search function and tools of its own (no "defer_loading", no libtrie field):

  - each registry tool named by "tool_choice": a call of it, valid against its own schema (nothing of it in the
    request);
  - "required": one call, named from the registry, the search function or the request's own tool, valid;
  - the request's own tool the registry lacks, named: a call of it, valid against its schema (the name set is the
    registry's and the request's);
  - an empty search result answered by libtrie's search over the registry: the tools found are loaded;
  - a name that is neither the request's nor the registry's: HTTP 400 naming "tool_choice"; a request without tools
    is not offered the registry (no call).

Needs the `jsonschema` package. Prints one line per check and "N passed, M failed" last; exit status 1 when a check
failed.
"""
import argparse
import copy
import json
import os
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import check, finish, post  # noqa: E402
from check_routing import user, wait_healthy  # noqa: E402


def obj(key, prop):
    return {"type": "object", "properties": {key: prop}, "required": [key], "additionalProperties": False}


# (name, description, parameters): one required key of its own each
TOOLS = [
    ("get_weather", "Get the current weather in a city, with temperature, wind and humidity.",
     obj("city", {"type": "string", "description": "The city, e.g. Paris"})),
    ("send_email", "Send an email message to one recipient address.",
     obj("recipient", {"type": "string", "description": "The email address of the recipient"})),
    ("convert_currency", "Convert an amount of money from one currency into US dollars at today's rate.",
     obj("amount_eur", {"type": "number", "description": "The amount in euros"})),
    ("set_alarm", "Set an alarm clock for a given hour of the day.",
     obj("hour", {"type": "integer", "minimum": 0, "maximum": 23})),
    ("book_flight", "Book a flight ticket to a destination airport.",
     obj("airport", {"type": "string", "enum": ["CDG", "JFK", "LHR", "NRT"]})),
    ("toggle_lights", "Turn the lights of the house on or off.",
     obj("on", {"type": "boolean"})),
    ("search_recipes", "Search cooking recipes by their main ingredient.",
     obj("ingredient", {"type": "string"})),
    ("translate_text", "Translate a text into French.",
     obj("text_to_translate", {"type": "string"})),
]
SEARCH = {"type": "function", "function": {"name": "tool_search_tool_bm25",
                                           "description": "Search the deferred tools.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}

SCHEMA = {n: p for n, _, p in TOOLS}
SCHEMA["tool_search_tool_bm25"] = SEARCH["function"]["parameters"]


def tools(deferred=(), level="tool"):
    """The tools, those named in `deferred` marked "defer_loading": true at the tool level or in "function"."""
    out = []
    for i, (n, d, p) in enumerate(TOOLS):
        t = {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
        if n in deferred:
            if level == "tool" or (level == "mixed" and i % 2 == 0):
                t["defer_loading"] = True
            else:
                t["function"]["defer_loading"] = True
        out.append(t)
    return out


ALL = [n for n, _, _ in TOOLS]


def chat(url, messages, extra, max_tokens=96):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    return post(url + "/v1/chat/completions", body)


def one_call(status, res, names):
    """(name, args, prompt_tokens, problem): the request's one call, checked against its own tool's schema."""
    if status != 200 or not isinstance(res, dict):
        return None, None, None, f"status {status}: {str(res)[:300]}"
    ptoks = (res.get("usage") or {}).get("prompt_tokens")
    calls = res["choices"][0]["message"].get("tool_calls") or []
    if len(calls) != 1:
        return None, None, ptoks, f"{len(calls)} calls: {res['choices'][0]['message']}"
    name = calls[0]["function"]["name"]
    try:
        args = json.loads(calls[0]["function"]["arguments"])
    except ValueError:
        return name, None, ptoks, f"arguments do not parse: {calls[0]['function']['arguments']!r}"
    if name not in names:
        return name, args, ptoks, f"{name!r} is not one of {sorted(names)}"
    try:
        jsonschema.validate(args, SCHEMA[name])
    except jsonschema.ValidationError as e:
        return name, args, ptoks, f"{name} {json.dumps(args)}: {e.message}"
    return name, args, ptoks, ""


def prompt_tokens(status, res):
    return (res.get("usage") or {}).get("prompt_tokens") if status == 200 and isinstance(res, dict) else None


def history(tool_message_content, call_name="tool_search_tool_bm25", query="weather"):
    """A turn where the model called the search tool, then the tool's answer."""
    return [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": call_name, "arguments": json.dumps({"query": query})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": tool_message_content},
    ]


# the request's own tool in --offered mode, one the registry lacks
OWN = ("ping_host", "Check whether a network host answers.", obj("host_name", {"type": "string"}))
SCHEMA[OWN[0]] = OWN[2]


def offered(url, name):
    """--offered: the registry `name` (TOOLS) offered by the server as deferred tools of every request with tools."""
    own = {"type": "function", "function": {"name": OWN[0], "description": OWN[1], "parameters": OWN[2]}}
    req_tools = [own, copy.deepcopy(SEARCH)]
    for n in ALL:
        st, res, _ = chat(url, user(f"Call the tool {n}."),
                          {"tools": req_tools, "tool_choice": {"type": "function", "function": {"name": n}}})
        got, a, _, why = one_call(st, res, {n})
        check(not why, f"[registry '{name}' offered] named registry tool {n}: a call of it, valid against its own "
              "schema", why or json.dumps(a))
    st, res, _ = chat(url, user("What is the weather in Paris? Use a tool."), {"tools": req_tools, "tool_choice": "required"})
    got, a, p_offered, why = one_call(st, res, set(ALL) | {OWN[0], "tool_search_tool_bm25"})
    check(not why, f"[registry '{name}' offered] required: one call of the registry, the search or the request's own "
          "tool, valid", why or f"{got} {json.dumps(a)}")
    st, res, _ = chat(url, user("Is example.org up?"),
                      {"tools": req_tools, "tool_choice": {"type": "function", "function": {"name": OWN[0]}}})
    got, a, _, why = one_call(st, res, {OWN[0]})
    check(not why, f"[registry '{name}' offered] the request's own tool, named: a call of it, valid", why or json.dumps(a))
    st, res, _ = chat(url, history(""), {"tools": req_tools, "tool_choice": "required"})
    p_searched = prompt_tokens(st, res)
    st, res, _ = chat(url, history("No tool found."), {"tools": req_tools, "tool_choice": "required"})
    p_answered = prompt_tokens(st, res)
    check(p_searched is not None and p_answered is not None and p_searched > p_answered + 20,
          f"[registry '{name}' offered] an empty search result is answered by libtrie's search over the registry: "
          "the tools found are loaded", f"{p_searched} (answered by libtrie) vs {p_answered} (by the client)")
    st, res, _ = chat(url, user("Call it."),
                      {"tools": req_tools, "tool_choice": {"type": "function", "function": {"name": "no_such_tool"}}})
    check(st == 400 and "tool_choice" in json.dumps(res) and "no_such_tool" in json.dumps(res),
          f"[registry '{name}' offered] a name neither the request's nor the registry's: 400 naming tool_choice",
          f"{st} {str(res)[:300]}")
    st, res, _ = chat(url, user("Say hello."), {}, max_tokens=16)
    calls = (res["choices"][0]["message"].get("tool_calls") if st == 200 and isinstance(res, dict) else None)
    check(st == 200 and not calls, f"[registry '{name}' offered] a request without tools gets no call",
          f"{st} {str(res)[:300]}")
    return finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--write-registry", metavar="PATH", help="write the tools as a registry file and exit")
    ap.add_argument("--offered", metavar="NAME", help="the server offers the registry NAME as deferred tools")
    args = ap.parse_args()
    if args.write_registry:
        with open(args.write_registry, "w", encoding="utf-8") as f:
            json.dump(tools(), f)
        return 0
    if not args.url or args.pid is None:
        ap.error("--url and --pid are required")
    wait_healthy(args.url, args.pid)
    if args.offered:
        return offered(args.url, args.offered)
    url = args.url
    msgs = user("What is the weather in Paris? Use a tool.")

    # 1. every tool deferred, "required": a deferred tool, valid against its own schema; the prompt smaller
    for level in ("tool", "function", "mixed"):
        st, res, _ = chat(url, msgs, {"tools": tools(ALL, level), "tool_choice": "required"})
        name, a, p_def, why = one_call(st, res, set(ALL))
        check(not why, f"[{level} level] required, all deferred: a deferred tool, valid against its own schema",
              why or f"{name} {json.dumps(a)}")
        if level == "tool":
            deferred_tokens = p_def
    st, res, _ = chat(url, msgs, {"tools": tools(), "tool_choice": "required"})
    name, a, p_plain, why = one_call(st, res, set(ALL))
    check(not why, "required, none deferred: a tool, valid", why or f"{name} {json.dumps(a)}")
    check(isinstance(deferred_tokens, int) and isinstance(p_plain, int) and deferred_tokens < p_plain,
          "usage.prompt_tokens smaller with the tools deferred", f"deferred {deferred_tokens}, in the prompt {p_plain}")
    print(f"     prompt tokens: {deferred_tokens} with {len(ALL)} tools deferred, {p_plain} with them in the prompt")

    # 2. each deferred tool named by tool_choice: a call of it, its arguments valid against its own schema
    for n in ALL:
        st, res, _ = chat(url, user(f"Call the tool {n}."),
                          {"tools": tools(ALL), "tool_choice": {"type": "function", "function": {"name": n}}})
        name, a, _, why = one_call(st, res, {n})
        check(not why, f"named deferred tool {n}: a call of it, valid against its own schema",
              why or json.dumps(a))

    # 3. a tool_reference in the history loads that tool
    ref = history([{"type": "tool_reference", "name": "get_weather"}])
    noref = history([{"type": "tool_reference", "name": "no_such_tool"}])
    with_search = lambda ts: ts + [copy.deepcopy(SEARCH)]  # noqa: E731
    st, res, _ = chat(url, ref, {"tools": with_search(tools(ALL)), "tool_choice": "required"})
    name, a, p_ref, why = one_call(st, res, set(ALL) | {"tool_search_tool_bm25"})
    check(not why, "after a tool_reference: a valid call", why or f"{name} {json.dumps(a)}")
    st, res, _ = chat(url, ref, {"tools": with_search(tools([n for n in ALL if n != "get_weather"])),
                                 "tool_choice": "required"})
    p_loaded = prompt_tokens(st, res)
    st, res, _ = chat(url, noref, {"tools": with_search(tools(ALL)), "tool_choice": "required"})
    p_noref = prompt_tokens(st, res)
    check(p_ref is not None and p_ref == p_loaded,
          "a tool_reference loads the tool: the prompt is the one with it not deferred", f"{p_ref} vs {p_loaded}")
    check(p_ref is not None and p_noref is not None and p_ref > p_noref,
          "a reference to a name that is no tool loads nothing (a smaller prompt)", f"{p_ref} vs {p_noref}")

    # 4. a search call left unanswered (empty result) is answered by libtrie's search, which loads what it finds
    st, res, _ = chat(url, history(""), {"tools": with_search(tools(ALL)), "tool_choice": "required"})
    p_searched = prompt_tokens(st, res)
    st, res, _ = chat(url, history("No tool found."), {"tools": with_search(tools(ALL)), "tool_choice": "required"})
    p_answered = prompt_tokens(st, res)
    check(p_searched is not None and p_answered is not None and p_searched > p_answered + 20,
          "an empty search result is answered by libtrie: the tools found are loaded",
          f"{p_searched} (answered by libtrie) vs {p_answered} (answered by the client)")

    # 5. a malformed tool next to a deferred one: a 400 naming the field
    st, res, _ = chat(url, msgs, {"tools": [tools(ALL)[0], "not a tool"], "tool_choice": "required"})
    check(st == 400 and "tools[1]" in json.dumps(res), "a malformed tool: 400 naming tools[1]",
          f"{st} {str(res)[:300]}")
    st, _, _ = chat(url, msgs, {"tools": tools(ALL), "tool_choice": "required"}, max_tokens=8)
    check(st == 200, "the server goes on serving after the 400", f"{st}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
