"""Tool calls through a real vLLM server with LIBTRIE_VLLM_ROUTE=1 alone (no scheduler flag: the one switch):
``auto`` with and without a call, parallel calls (two and three), ``parallel_tool_calls=false`` enforced, a
registry of 10,000 tools, bad input. Every call is parsed and checked against its tool's schema with jsonschema.
Opt-in and slow (a vLLM CPU server with SmolLM2-135M):

    scripts/test-vllm.sh                       # runs this file after tests/vllm/test_vllm.py
    LIBTRIE_TEST_ONLY=tools scripts/test-vllm.sh

SmolLM2 knows no tool format, so the calls are asked for by a few-shot prompt on /v1/completions with the
structural tag the chat frontend writes (libtrie.vllm.calls.build_tag: what a chat request with tools becomes), and
on /v1/chat/completions with ``tool_choice="required"`` (the ``hermes`` parser: the output opens with a call,
which vLLM parses into ``tool_calls``).
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema

from libtrie.vllm import calls

MODEL = Path(os.environ["LIBTRIE_TEST_MODEL"])
REPO = Path(__file__).resolve().parents[2]

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}}, "required": ["zone"],
        "additionalProperties": False}
TOOLS = [("get_weather", WEATHER), ("get_time", TIME)]
SCHEMAS = dict(TOOLS)

FEW_SHOT = (
    "You call tools by writing <tool_call> blocks.\n"
    "Q: Weather in Oslo?\nA: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
    "\"unit\": \"celsius\"}}\n</tool_call>\n"
    "Q: Time in Tokyo?\nA: <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Asia/Tokyo\"}}\n"
    "</tool_call>\n"
    "Q: Weather in Rome and time in Lima?\nA: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Rome\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
    "{\"zone\": \"America/Lima\"}}\n</tool_call>\n"
    "Q: Weather in Cairo, time in Quito and weather in Nice?\nA: <tool_call>\n{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Cairo\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
    "\"get_time\", \"arguments\": {\"zone\": \"America/Quito\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
    "\"get_weather\", \"arguments\": {\"city\": \"Nice\", \"unit\": \"celsius\"}}\n</tool_call>\n")
HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def registry_tools(n):
    """n tools with per-tool schemas (a required integer or string argument named after the tool)."""
    out = []
    for i in range(n):
        arg = {"type": "integer", "minimum": 0, "maximum": 1000} if i % 2 else {"type": "string", "maxLength": 12}
        out.append({"type": "function", "function": {"name": f"tool_{i:05d}", "description": f"tool number {i}",
                                                     "parameters": {"type": "object", "properties": {f"a{i}": arg},
                                                                    "required": [f"a{i}"],
                                                                    "additionalProperties": False}}})
    return out


class ToolServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            cls.port = sock.getsockname()[1]
        cls.tmp = Path(tempfile.mkdtemp(prefix="libtrie-tools-"))
        cls.sets = cls.tmp / "sets"
        cls.sets.mkdir()
        cls.registry = registry_tools(10_000)
        (cls.sets / "catalog.json").write_text(json.dumps(cls.registry))
        # the README's registry (examples/vllm/client.py names it "tools")
        shutil.copy(REPO / "data" / "registry" / "tools.json", cls.sets / "tools.json")
        cls.log = open(cls.tmp / "serve.log", "w")
        env = dict(os.environ, LIBTRIE_SET_DIR=str(cls.sets), LIBTRIE_VLLM_ROUTE="1",
                   RAYON_NUM_THREADS=os.environ.get("RAYON_NUM_THREADS", "1"))
        cls.server = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL), "--host", "127.0.0.1",
             "--port", str(cls.port), "--enforce-eager", "--max-model-len", "1024", "--max-num-seqs", "4",
             "--seed", "0", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
             "--trust-request-chat-template"],  # no --scheduler-cls; a request's template: the deferred-tools test
            env=env, stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 400
        while time.time() < deadline:
            if cls.server.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {cls.server.returncode}; see {cls.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{cls.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"the vLLM server did not come up in 400 s; see {cls.log.name}")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        try:
            cls.server.wait(60)
        except subprocess.TimeoutExpired:
            cls.server.kill()
        cls.log.close()
        shutil.copy(cls.log.name, Path(tempfile.gettempdir()) / "libtrie-vllm-tools-serve.log")
        shutil.rmtree(cls.tmp)

    def request(self, path, body, timeout=600):
        body = {"model": str(MODEL), "temperature": 0, **body}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)["choices"][0]

    def complete(self, question, tag, max_tokens=160):
        return self.request("/v1/completions", {"prompt": FEW_SHOT + f"Q: {question}\nA:", "max_tokens": max_tokens,
                                                "stop": ["\nQ:"], "structured_outputs": {"structural_tag": tag}})

    def served(self):
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace").count("is served by libtrie")

    def hermes_calls(self, text, schemas=SCHEMAS):
        found = HERMES.findall(text)
        out = []
        for body in found:
            call = json.loads(body)
            self.assertIn(call["name"], schemas, text)
            jsonschema.validate(call["arguments"], schemas[call["name"]])
            out.append(call)
        return out

    def test_the_readme_client_runs(self):
        """examples/vllm/client.py, the README's vLLM client, against this server: its choice answer is a member and
        every request it sends succeeds (it raises otherwise)."""
        out = subprocess.run([sys.executable, str(REPO / "examples" / "vllm" / "client.py"),
                              f"http://127.0.0.1:{self.port}/v1", str(MODEL)],
                             capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn(lines[0], ["Tokyo", "Osaka", "Kyoto"], out.stdout)
        self.assertIn(lines[1], ["Tokyo", "Osaka"], out.stdout)

    def test_auto_with_calls_parallel_and_enforced_single(self):
        before = self.served()
        c = self.complete("Weather in Paris and time in Berlin?", calls.build_tag("hermes", True, True, TOOLS))
        got = self.hermes_calls(c["text"])  # every complete call fits its tool (the model may go on calling)
        self.assertGreaterEqual(len(got), 2, c["text"])
        c = self.complete("Weather in Paris, time in Berlin and weather in Lima?",
                          calls.build_tag("hermes", True, True, TOOLS), 240)
        got = self.hermes_calls(c["text"])
        self.assertGreaterEqual(len(got), 3, c["text"])
        one = self.complete("Weather in Paris and time in Berlin?", calls.build_tag("hermes", True, False, TOOLS))
        self.assertEqual(len(self.hermes_calls(one["text"])), 1, one["text"])
        self.assertEqual(one["text"].count("<tool_call>"), 1, "parallel_tool_calls=false: one call, enforced")
        self.assertEqual(one["finish_reason"], "stop")
        self.assertEqual(self.served() - before, 3)

    def test_auto_without_a_call(self):
        c = self.request("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 12,
                                             "structured_outputs": {
                                                 "structural_tag": calls.build_tag("hermes", True, True, TOOLS)}})
        self.assertNotIn("<tool_call>", c["text"])
        self.assertTrue(c["text"].strip(), "free text is served")

    def chat_required(self, tools, parallel, xargs=None, question="What is the weather in Paris?", max_tokens=120):
        body = {"messages": [{"role": "user", "content": question}], "tools": tools, "tool_choice": "required",
                "parallel_tool_calls": parallel, "max_tokens": max_tokens}
        if xargs:
            body["vllm_xargs"] = xargs
        return self.request("/v1/chat/completions", body)

    def check_tool_calls(self, choice, schemas):
        calls_ = choice["message"].get("tool_calls") or []
        self.assertTrue(calls_, choice)
        for tc in calls_:
            name = tc["function"]["name"]
            self.assertIn(name, schemas)
            jsonschema.validate(json.loads(tc["function"]["arguments"]), schemas[name])
        return calls_

    def test_required_through_chat_one_call_enforced(self):
        tools = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in TOOLS]
        c = self.chat_required(tools, False)
        self.assertEqual(len(self.check_tool_calls(c, SCHEMAS)), 1)

    def test_registry_of_10000_tools(self):
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in self.registry}
        prompt_tools = self.registry[4200:4205]  # the candidates a retrieval would list in the prompt
        before = self.served()
        c = self.chat_required(prompt_tools, True, {"libtrie_registry": "catalog"}, "Call tool 4203 with 7.")
        got = self.check_tool_calls(c, schemas)
        self.assertTrue(all(tc["function"]["name"] in schemas for tc in got))
        self.assertEqual(self.served() - before, 1)
        t0 = time.monotonic()
        c = self.chat_required(prompt_tools, False, {"libtrie_registry": "catalog"}, "Call tool 4201 with 3.", 160)
        warm = time.monotonic() - t0
        self.assertEqual(len(self.check_tool_calls(c, schemas)), 1)
        print(f"\n    warm 10,000-tool registry request: {warm:.2f} s (load {os.getloadavg()[0]:.1f})",
              file=sys.stderr)

    def test_registry_updates_keep_each_name_on_its_own_schema(self):
        """Defect 1 of issue 36 on a real server: a registry in no byte order, changed three times on disk (a tool
        added, one removed from the middle, one schema changed); every name of every version is asked for, and
        every call's arguments must validate against the schema its name has in that version (each tool requires
        a key of its own, so another tool's schema cannot pass)."""
        names = ["zz_top", "alpha", "東京_search", "beta_2", "beta", "m", "get_x"]
        self.assertNotEqual(names, sorted(names))

        def spec(name, variant):
            key = f"k{names.index(name) if name in names else 99}_{variant}"
            return {"type": "object", "properties": {key: {"type": "integer", "minimum": 0, "maximum": 99}},
                    "required": [key], "additionalProperties": False}

        version = {n: 0 for n in names}
        versions = [dict(version)]
        version["added_tool"] = 0
        versions.append(dict(version))
        del version["東京_search"]
        versions.append(dict(version))
        version["beta"] = 1
        versions.append(dict(version))
        tag = calls.build_tag("hermes", False, False, [("x", {})], registry="updates")
        covered = []
        for k, v in enumerate(versions):
            tools = [{"type": "function", "function": {"name": n, "parameters": spec(n, var)}} for n, var in v.items()]
            tmp = self.sets / "updates.json.tmp"
            tmp.write_text(json.dumps(tools, ensure_ascii=False))
            os.replace(tmp, self.sets / "updates.json")
            schemas = {n: spec(n, var) for n, var in v.items()}
            called = set()
            shots = "".join(f"Q: Call {n} with {i}.\nA: <tool_call>\n{{\"name\": \"{n}\", \"arguments\": "
                            f"{{\"{next(iter(schemas[n]['properties']))}\": {i}}}}}\n</tool_call>\n"
                            for i, n in enumerate(list(v)[:2]))
            for n in v:
                text = self.request("/v1/completions", {
                    "prompt": shots + f"Q: Call {n} with 5.\nA:", "max_tokens": 80, "stop": ["\nQ:"],
                    "structured_outputs": {"structural_tag": tag}})["text"]
                got = self.hermes_calls(text, schemas)  # the name is of this version, its arguments fit its schema
                self.assertEqual(len(got), 1, text)
                called.add(got[0]["name"])
            covered.append(len(called))
            self.assertGreaterEqual(len(called), 2, f"version {k}: the model called {sorted(called)} only")
        print(f"\n    registry updates: distinct names called per version {covered} of "
              f"{[len(v) for v in versions]}", file=sys.stderr)

    def test_bad_input(self):
        tools = [{"type": "function", "function": {"name": "a", "parameters": WEATHER}},
                 {"type": "function", "function": {"name": "a", "parameters": TIME}}]
        for xargs, field in ((None, "listed twice"), ({"libtrie_registry": "../catalog"}, "libtrie_registry"),
                             ({"libtrie_registry": "missing"}, "does not exist")):
            t = tools if xargs is None else tools[:1]
            with self.assertRaises(urllib.error.HTTPError) as ctx:
                self.chat_required(t, True, xargs)
            body = ctx.exception.read().decode()
            self.assertEqual(ctx.exception.code, 400, body)
            self.assertIn(field, body)
            self.assertNotIn(str(self.sets), body)
        bad_schema = [{"type": "function", "function": {"name": "x", "parameters": {"type": "frobnicate"}}}]
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            self.chat_required(bad_schema, True)
        body = ctx.exception.read().decode()
        self.assertEqual(ctx.exception.code, 400, body)
        self.assertIn("not a JSON schema this server can compile", body)
        # A tool without parameters: vLLM's usual behaviour (an object).
        c = self.chat_required([{"type": "function", "function": {"name": "ping"}}], False)
        self.assertEqual(self.check_tool_calls(c, {"ping": {"type": "object"}})[0]["function"]["name"], "ping")


    def test_defer_loading_alone(self):
        """A client that uses only the API's fields (``defer_loading``, a search tool, ``tool_reference``; no libtrie
        field): every call is exact (a tool of the request, its arguments valid for its schema), the deferred tools
        are not in the prompt, a reference or a search answered by libtrie loads them. The request's chat template
        renders the tools (SmolLM2's own renders none), so the prompt's size shows what is in it."""
        catalog = [(f"tool_{i:05d}", t["function"]["parameters"]) for i, t in enumerate(registry_tools(8))] + TOOLS
        descr = {"get_weather": "The weather in a city", "get_time": "The time in a time zone"}

        def tools(defer):
            return [{"type": "function", "defer_loading": defer,
                     "function": {"name": n, "description": descr.get(n, f"tool number {n[-1]}"), "parameters": p}}
                    for n, p in catalog]

        schemas = dict(catalog)
        template = ("{%- if tools %}<|im_start|>system\nTools:\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
                    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                    "{{ m['content'] or '' }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n")

        def chat(tools_, messages, max_tokens=120):
            body = {"messages": messages, "tools": tools_, "tool_choice": "required", "parallel_tool_calls": False,
                    "max_tokens": max_tokens, "chat_template": template}
            req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                         json.dumps({"model": str(MODEL), "temperature": 0, **body}).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=600) as r:
                out = json.load(r)
            return out["choices"][0], out["usage"]["prompt_tokens"]

        questions = ["What is the weather in Paris?", "What time is it in Tokyo?", "Call tool 3 with 5.",
                     "Weather in Lima, please.", "Run tool 6."]
        before, exact, sizes, called = self.served(), 0, [], []
        for q in questions:
            c, n = chat(tools(True), [{"role": "user", "content": q}])
            got = self.check_tool_calls(c, schemas)
            self.assertEqual(len(got), 1)
            exact += 1
            sizes.append(n)
            called.append(got[0]["function"]["name"])
        full = chat(tools(False), [{"role": "user", "content": questions[0]}])[1]
        self.assertLess(max(sizes), full / 3, "the deferred tools are not in the prompt")
        # A tool_reference in the history (vLLM's shape) loads get_weather into the prompt.
        ask = [{"role": "user", "content": questions[0]}]
        turn = [{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "tool_search_tool_bm25", "arguments": json.dumps({"query": "weather city"})}}]}]
        ref = [{"role": "tool", "tool_call_id": "call_1",
                "content": [{"type": "tool_reference", "name": "get_weather"}]}]
        search_tool = [{"type": "function", "function": {"name": "tool_search_tool_bm25"}}]
        schemas["tool_search_tool_bm25"] = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 200}},
                                            "required": ["query"], "additionalProperties": False}
        c, with_ref = chat(tools(True) + search_tool, ask + turn + ref)
        called.append(self.check_tool_calls(c, schemas)[0]["function"]["name"])
        exact += 1
        # The same search with an empty result: libtrie's search answers it and loads what it found.
        c, searched = chat(tools(True) + search_tool, ask + turn + [{"role": "tool", "tool_call_id": "call_1",
                                                                     "content": ""}])
        called.append(self.check_tool_calls(c, schemas)[0]["function"]["name"])
        exact += 1
        bare = chat(tools(True) + search_tool, ask)[1]
        self.assertGreater(with_ref, bare + 20, "the referenced tool's schema is in the prompt")
        self.assertGreater(searched, bare + 20, "the tool found is in the prompt")
        self.assertEqual(self.served() - before, len(questions) + 4)
        print(f"\n    defer_loading alone: {exact} of {len(questions) + 2} calls exact; prompt tokens {max(sizes)} "
              f"deferred vs {full} in the prompt; {bare} → {with_ref} with a tool_reference, {searched} after a "
              f"search answered by libtrie; called {called}", file=sys.stderr)

if __name__ == "__main__":
    unittest.main()
