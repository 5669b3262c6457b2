"""The check of the whole-call proof (README.md here): every tool call that libtrie's engine wrote
(examples/calls_proof, one JSON line each) is read back by the serving engine's own parser and checked against the
tool list the request saw:

(a) the parser reads the output into the same tool calls (names, and arguments equal as JSON) the engine handed
    over, and no call where none was written;
(b) each call names a tool of that request's tool list or registry version (a named tool: that tool);
(c) its arguments validate (``jsonschema``) against *that* tool's parameters, found by the name the parser read;
plus the request's shape: ``required`` and named give at least one call, parallel off at most one.

Parsers: ``--llama DRIVER`` (llama.cpp's chat parser, tests/calls-proof/llama_chat_driver.cpp, with the model's
chat template from the pinned tree: TEMPLATES) and/or ``--vllm`` (vLLM's Hermes2ProToolParser,
Llama3JsonToolParser, MistralToolParser, imported from the running Python; needs ``--tokenizers``).

Usage: check.py CALLS.jsonl [--llama DRIVER --templates DIR] [--vllm --tokenizers DIR] [--out BAD.jsonl]
Exits 1 on any failure (each is written to --out), 2 on a usage or setup error."""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional

import jsonschema

#: The chat template of each format (a file of llama.cpp's models/templates): the model family whose tool-call
#: syntax the format writes.
#: `mistral` (pre-v11, `[TOOL_CALLS][{"name": ..., "arguments": ...}]`) is not read by llama.cpp: the only such
#: template of the tree, Mistral Nemo's, writes an `"id"` after the arguments and its parser requires the comma
#: before it (`{"name": "f", "arguments": {}}` does not parse; `{"name": "f", "arguments": {}, "id": "123456789"}`
#: does), so its calls are checked by vLLM's MistralToolParser only.
TEMPLATES = {
    "hermes": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "llama": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "mistral_v11": "unsloth-mistral-Devstral-Small-2507.jinja",
}


def rule_name(name: str) -> str:
    """llama.cpp's PEG rule name of a tool (common/peg-parser.cpp rule_name: each run of characters outside
    [a-zA-Z0-9-] becomes one "-"); the parser's rule "tool-<rule name>" is made once per rule name."""
    return re.sub(r"[^a-zA-Z0-9-]+", "-", name)


def known_llama(tools: Dict[str, List[dict]], c: dict, got: dict) -> Optional[str]:
    """A failure of llama.cpp's own parser, not of the call (counted apart, never hidden): two tools of the list
    whose names have the same rule name share one rule, the last one's, so a call of the other is not read (the
    parse fails, or, where the template's parser has no end (Devstral's), the calls from that one on are not
    read). Only such a failure, at a call of such a name, is put in this class."""
    names = [t["name"] for t in request_tools(tools, c)]
    seen = collections.Counter(rule_name(n) for n in names)
    called = [w["name"] for w in c["calls"]]
    read = [n for n, _ in got["calls"]]
    if not got["ok"]:
        unread = called
    elif len(read) < len(called) and read == called[: len(read)]:
        unread = called[len(read):len(read) + 1]
    else:
        return None
    if any(seen[rule_name(n)] > 1 for n in unread):
        return "llama.cpp: two tool names with one PEG rule name (peg-parser.cpp rule_name), the earlier unreadable"
    return None


def load(path: str):
    tools: Dict[str, List[dict]] = {}
    calls: List[dict] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "tools":
                tools[r["key"]] = r["tools"]
            else:
                calls.append(r)
    return tools, calls


def request_tools(tools: Dict[str, List[dict]], c: dict) -> List[dict]:
    """The tools of the request: its list, or the named tool alone (as llama-server and vLLM pass a named choice)."""
    if c["tool_choice"] == "named":
        return [t for t in tools[c["tools"]] if t["name"] == c["named"]]
    return tools[c["tools"]]


def run_llama(driver: str, templates: str, tools: Dict[str, List[dict]], calls: List[dict]) -> List[dict]:
    """llama.cpp's reading of each call's output, in order."""
    lines: List[str] = []
    sent = set()
    for c in calls:
        key = c["tools"] + ("#" + c["named"] if c["tool_choice"] == "named" else "")
        if key not in sent:
            lines.append(json.dumps({"kind": "tools", "key": key, "tools": request_tools(tools, c)}))
            sent.add(key)
        choice = "auto" if c["tool_choice"] == "auto" else "required"
        lines.append(json.dumps({"kind": "call", "id": c["id"], "tools": key, "template": TEMPLATES[c["format"]],
                                 "tool_choice": choice, "parallel": c["parallel"], "output": c["output"]}))
    p = subprocess.run([driver, templates], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit(f"{driver} exited {p.returncode}")
    out = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    if len(out) != len(calls):
        raise SystemExit(f"{driver}: {len(out)} answers for {len(calls)} calls")
    return [{"ok": o["ok"], "error": o.get("error"), "content": o.get("content"),
             "calls": [(t["name"], t["arguments"]) for t in o.get("tool_calls", [])]} for o in out]


class Vllm:
    """vLLM's own tool parsers (the classes its OpenAI server uses for --tool-call-parser hermes, llama3_json,
    mistral), called as the server calls them on a finished answer: extract_tool_calls(output, request)."""

    #: The parser (vLLM's --tool-call-parser name) and the model tokenizer (a tokenizer.json of TRIE_ASSETS) of
    #: each format, with the marker token the parser requires added where that tokenizer.json lacks it (the
    #: Llama 3.1 and Mistral tool-calling releases have `<|python_tag|>` and `[TOOL_CALLS]`; a Mistral tokenizer
    #: without `[ARGS]` is read as pre-v11: `[TOOL_CALLS][{...}]`).
    PARSERS = {"hermes": ("hermes", "qwen3", []), "llama": ("llama3_json", "llama3", ["<|python_tag|>"]),
               "mistral": ("mistral", "mistral-7b-v0.1", ["[TOOL_CALLS]"]),
               "mistral_v11": ("mistral", "mistral-7b-v0.1", ["[TOOL_CALLS]", "[ARGS]"])}

    def __init__(self, tokenizers: str):
        from vllm.tool_parsers import ToolParserManager

        self.dir = tokenizers
        self.manager = ToolParserManager
        self.names = {f: p for f, (p, _, _) in self.PARSERS.items()}
        self.parsers: Dict[str, Any] = {}
        self.requests: Dict[Any, Any] = {}

    def parser(self, fmt: str) -> Any:
        if fmt not in self.parsers:
            from transformers import PreTrainedTokenizerFast

            name, tok, extra = self.PARSERS[fmt]
            t = PreTrainedTokenizerFast(tokenizer_file=f"{self.dir}/{tok}.tokenizer.json")
            if extra:
                t.add_special_tokens({"additional_special_tokens": extra})
            self.parsers[fmt] = self.manager.get_tool_parser(name)(t)
        return self.parsers[fmt]

    def parse(self, tools: List[dict], c: dict) -> dict:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        fmt = c["format"]
        parser = self.parser(fmt)
        choice: Any = {"auto": "auto", "required": "required"}.get(c["tool_choice"])
        if choice is None:
            choice = {"type": "function", "function": {"name": c["named"]}}
        key = (c["tools"], c["tool_choice"], c["named"], c["parallel"])
        req = self.requests.get(key)
        if req is None:  # one request object per tool list and choice (100,000 tools validate in seconds)
            self.requests = {}
            req = self.requests[key] = ChatCompletionRequest(
                model="m", messages=[{"role": "user", "content": "Call a tool."}],
                tools=[{"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}}
                       for t in tools], tool_choice=choice, parallel_tool_calls=c["parallel"])
        try:
            info = parser.extract_tool_calls(c["output"], req)
        except Exception as e:  # noqa: BLE001 -- a parser that raises is a failure of (a), reported
            return {"ok": False, "error": f"{type(e).__name__}: {e}", "content": None, "calls": []}
        return {"ok": True, "error": None, "content": info.content,
                "calls": [(t.function.name, t.function.arguments) for t in info.tool_calls]}


def check_one(tools: Dict[str, List[dict]], c: dict, got: dict) -> List[str]:
    """The failures of one call: [] when (a), (b), (c) and the request's shape hold."""
    bad: List[str] = []
    if not got["ok"]:
        return [f"(a) the parser failed: {got['error']}"]
    listed = {t["name"]: t["parameters"] for t in request_tools(tools, c)}
    want = [(w["name"], w["arguments"]) for w in c["calls"]]
    names = [n for n, _ in got["calls"]]
    if names != [n for n, _ in want]:
        bad.append(f"(a) the parser read the calls {names}, the engine handed over to {[n for n, _ in want]}")
    for (name, args), (_, want_args) in zip(got["calls"], want):
        try:
            value = json.loads(args) if isinstance(args, str) else args
        except ValueError as e:
            bad.append(f"(a) {name}: arguments are not JSON ({e}): {args!r}")
            continue
        if want_args is None or value != json.loads(want_args):
            bad.append(f"(a) {name}: arguments {value!r}, written {want_args!r}")
        if name not in listed:
            bad.append(f"(b) {name!r} is not a tool of {c['tools']}")
            continue
        try:
            jsonschema.validate(value, listed[name])
        except jsonschema.ValidationError as e:
            bad.append(f"(c) {name}: arguments do not validate against its parameters: {e.message}")
    if c["tool_choice"] != "auto" and not got["calls"]:
        bad.append("required: no call")
    if not c["parallel"] and len(got["calls"]) > 1:
        bad.append(f"parallel off: {len(got['calls'])} calls")
    return bad


def report(label: str, tools, calls, results, out, known=None) -> int:
    counts: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    known_counts: Dict[str, int] = collections.Counter()
    failures = 0
    examples: Dict[str, int] = collections.Counter()
    for c, got in zip(calls, results):
        k = f"{c['format']:8s} {c['tool_choice']:8s} parallel={str(c['parallel']):5s}"
        bad = check_one(tools, c, got)
        counts[k]["walks"] += 1
        counts[k]["calls"] += len(c["calls"])
        why = known(tools, c, got) if known is not None and bad else None
        if why is not None:
            counts[k]["known"] += 1
            known_counts[why] += 1
        elif bad:
            failures += 1
            counts[k]["FAILED"] += 1
            if out is not None:
                out.write(json.dumps({"parser": label, "id": c["id"], "failures": bad, "call": c,
                                      "parsed": got}, ensure_ascii=False) + "\n")
            first = bad[0].split(":")[0]
            if examples[first] < 3:
                examples[first] += 1
                print(f"  FAIL {label} #{c['id']} ({c['format']} {c['tool_choice']} tools {c['tools']}): {bad[0]}\n"
                      f"       output {c['output'][:300]!r}", file=sys.stderr)
    for k in sorted(counts):
        v = counts[k]
        print(f"  {label}: {k}  {v['walks']:6d} walks {v['calls']:6d} calls  {v['FAILED']} failed"
              + (f"  ({v['known']} the parser's known defect)" if v["known"] else ""))
    for why, n in known_counts.items():
        print(f"  {label}: {n} walks not read for a known defect of the parser: {why}")
    total = sum(v["walks"] for v in counts.values())
    n_calls = sum(v["calls"] for v in counts.values())
    print(f"{label}: {total} call walks, {n_calls} calls, {failures} failed, {sum(known_counts.values())} known")
    return failures


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("calls")
    ap.add_argument("--llama", help="the llama.cpp chat-parser driver (llama_chat_driver)")
    ap.add_argument("--templates", help="llama.cpp's models/templates folder")
    ap.add_argument("--llama-max-tools", type=int, default=2000,
                    help="tool lists over this size are not given to llama.cpp (its template and parser build took "
                         "over 10 minutes and 6.7 GB at 10,000 tools), said in the counts (default 2000)")
    ap.add_argument("--vllm", action="store_true", help="vLLM's tool parsers (import vllm)")
    ap.add_argument("--tokenizers", help="the folder of tokenizer.json files for vLLM's parsers (TRIE_ASSETS/tokenizers)")
    ap.add_argument("--out", help="write each failure here (JSON lines)")
    a = ap.parse_args(argv)
    if not a.llama and not a.vllm:
        ap.error("give --llama DRIVER and/or --vllm")
    tools, calls = load(a.calls)
    out = open(a.out, "w", encoding="utf-8") if a.out else None
    failures = 0
    if a.llama:
        if not a.templates:
            ap.error("--llama needs --templates")
        mine = [c for c in calls if c["format"] in TEMPLATES]
        over = [c for c in mine if len(request_tools(tools, c)) > a.llama_max_tools]
        if over:
            print(f"llama.cpp: {len(over)} call walks NOT READ: their tool lists are over --llama-max-tools "
                  f"{a.llama_max_tools} (read by vLLM's parsers with --vllm)")
            mine = [c for c in mine if len(request_tools(tools, c)) <= a.llama_max_tools]
        failures += report("llama.cpp", tools, mine, run_llama(a.llama, a.templates, tools, mine), out, known_llama)
    if a.vllm:
        if not a.tokenizers:
            ap.error("--vllm needs --tokenizers")
        v = Vllm(a.tokenizers)
        mine = [c for c in calls if c["format"] in v.names]
        failures += report("vLLM", tools, mine, [v.parse(request_tools(tools, c), c) for c in mine], out)
    if out is not None:
        out.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
