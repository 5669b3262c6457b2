#!/usr/bin/env python3
"""Checks, against a running llama-server built with libtrie, the README's registry example (issue 29), started by
tests/llama-server/run.sh with `--trie-set-dir data/registry`:

  the README's request exactly as written ("trie": {"registry": "tools"}, no tools in the request) answers 200
  with one parsed call to a tool of data/registry/tools.json whose arguments validate (jsonschema) against that
  tool's parameters; the same with the registry's tools described in the prompt; and, on a server started with
  --trie-no-route (--no-route here), the registry is still served by libtrie (the "trie" field is libtrie's
  either way, as --trie-no-route's help says) while "tools" with tool_choice "required" is left to llama.cpp.

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
from check_routing import log_count, the_call, user, wait_healthy  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    def __init__(self, url):
        self.url = url

    def chat(self, messages, extra, max_tokens=128):
        body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
        body.update(extra)
        return post(self.url + "/v1/chat/completions", body)


def valid_call(status, res, schema_of):
    """(ok, detail): one parsed call to a registry tool whose arguments validate against its schema."""
    name, arguments, how = the_call(status, res)
    if how != "parsed" or name not in schema_of or not isinstance(arguments, dict):
        return False, f"{status} {how}: {name!r} {arguments!r}"
    try:
        jsonschema.validate(arguments, schema_of[name])
    except jsonschema.ValidationError as e:
        return False, f"{name}: {e.message}"
    return True, f"{name} {json.dumps(arguments)[:120]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--server-log", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--no-route", action="store_true", help="the server runs with --trie-no-route")
    args = ap.parse_args()
    wait_healthy(args.url, args.pid)
    srv = Server(args.url)
    tools = json.load(open(os.path.join(REPO, "data", "registry", "tools.json"), encoding="utf-8"))
    schema_of = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    label = "no-route" if args.no_route else "routed"

    # the README's request, as written
    status, res, _ = srv.chat([{"role": "user", "content": "Open a ticket"}], {"trie": {"registry": "tools"}})
    ok, detail = valid_call(status, res, schema_of)
    check(ok, f"[{label}] the README's registry request: one call to a tool of data/registry/tools.json, "
              "arguments valid (jsonschema)", detail)
    # the registry's tools described in the prompt, as a catalog's candidates would be
    for p in ["Open a ticket in project OPS: the login page is down.", "Post 'deploy done' to the ops channel."]:
        status, res, _ = srv.chat(user(p), {"trie": {"registry": "tools"}, "tools": tools, "tool_choice": "required"})
        ok, detail = valid_call(status, res, schema_of)
        check(ok, f"[{label}] registry + its tools in the prompt ({p[:30]}...): a valid call", detail)
    compiled = log_count(args.server_log, r"libtrie: compiled \d+ tool names of the registry tools")
    check(compiled >= 1, f"[{label}] the registry is compiled by libtrie", f"{compiled} compile lines")
    if args.no_route:
        before = log_count(args.server_log, r"libtrie: compiled \d+ tool names")
        srv.chat(user("Open a ticket"), {"tools": tools[:2], "tool_choice": "required"}, max_tokens=24)
        after = log_count(args.server_log, r"libtrie: compiled \d+ tool names")
        check(after == before, f"[{label}] \"tools\" + \"required\" is left to llama.cpp (nothing compiled by libtrie)",
              f"{before} -> {after}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
