"""defer_loading through libtrie's vLLM front end without vLLM (libtrie.vllm.deferred, .frontend): deferred tools
left out of the prompt but callable, tool_reference items loading tools, the search tool's call answered by
libtrie's search, the operator's registry offered as deferred tools (LIBTRIE_DEFERRED_REGISTRY).

    python3 -m unittest tests/python/test_vllm_deferred.py      # after cargo build --release
"""

import json
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

from libtrie.sets import Settings  # noqa: E402
from libtrie.vllm import calls, deferred, frontend  # noqa: E402

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
STOCK = {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}
TIME = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}


def tools():
    return [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                          "parameters": WEATHER}},
        {"type": "function", "defer_loading": True,
         "function": {"name": "stock_price", "description": "The latest price of a stock ticker",
                      "parameters": STOCK}},
        {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                          "parameters": TIME, "defer_loading": True}},
    ]


def names(prompt):
    return [t["function"]["name"] for t in prompt]


def plan(ts, messages):
    return deferred.request_plan(ts, messages)


USER = [{"role": "user", "content": "What does AAPL cost?"}]


class Hermes:
    tool_call_start_token = "<tool_call>"


def fake_vllm(test):
    """vllm.sampling_params.StructuredOutputsParams, for frontend.adjust without vLLM."""
    try:
        import vllm.sampling_params  # noqa: F401
        return
    except ImportError:
        pass
    saved = {k: sys.modules.get(k) for k in ("vllm", "vllm.sampling_params")}

    def restore():
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    test.addCleanup(restore)
    sys.modules.setdefault("vllm", SimpleNamespace())  # type: ignore[arg-type]
    sys.modules["vllm.sampling_params"] = SimpleNamespace(  # type: ignore[assignment]
        StructuredOutputsParams=lambda **kw: SimpleNamespace(**kw))


def request(ts, **kw):
    base = dict(tools=ts, tool_choice="required", parallel_tool_calls=False, structured_outputs=None,
                response_format=None, vllm_xargs=None, messages=USER)
    base.update(kw)
    return SimpleNamespace(**base)


class Env:
    def __init__(self, **values):
        self.values, self.saved = values, {}

    def __enter__(self):
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class PlanTest(unittest.TestCase):
    def test_deferred_tools_leave_the_prompt_and_stay_callable(self):
        p = plan(tools(), USER)
        self.assertEqual(names(p["tools"]), ["get_weather"], "tool-level and function-level defer_loading")
        self.assertEqual(p["messages"], USER)
        self.assertEqual((p["loaded"], p["search"]), ([], None))
        self.assertIsNone(plan(tools()[:1], USER), "nothing deferred: the request is left as it is")
        fake_vllm(self)
        r = request(tools())
        self.assertTrue(frontend.adjust(Hermes(), r, Settings()))
        spec = calls.parse_spec(r.structured_outputs.structural_tag)
        self.assertEqual(spec.names, ("get_weather", "stock_price", "get_time"), "the name set has every tool")
        self.assertEqual(json.loads(spec.schemas[1]), STOCK, "and the hand-over each one's schema")
        self.assertIsNone(spec.registry)

    def test_tool_references_load_tools(self):
        history = USER + [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "tool_search_tool_bm25", "arguments": '{"query": "stock"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "tool_reference", "name": "stock_price"}]},
            {"role": "user", "content": [{"type": "text", "text": "and the time?"},
                                         {"type": "tool_search_tool_search_result", "tool_references": [
                                             {"type": "tool_reference", "tool_name": "get_time"}]}]}]
        p = plan(tools(), history)
        self.assertEqual(p["loaded"], ["stock_price", "get_time"])
        self.assertEqual(names(p["tools"]), ["get_weather", "stock_price", "get_time"])
        self.assertNotIn("defer_loading", json.dumps(p["tools"]), "the template sees plain tools")
        self.assertEqual(p["messages"][2]["content"], "Tools found and now available: stock_price")
        self.assertEqual(p["messages"][3]["content"], "and the time?\nTools found and now available: get_time")
        self.assertEqual(p["messages"][1], history[1])

    def test_the_search_tool_is_served_by_libtrie(self):
        ts = tools() + [{"type": "function", "function": {"name": "tool_search_tool_bm25"}}]
        # Turn 1: the model sees the search function with its one argument, not the deferred tools.
        p = plan(ts, USER)
        self.assertEqual(names(p["tools"]), ["get_weather", "tool_search_tool_bm25"])
        self.assertEqual(p["tools"][1]["function"]["parameters"]["required"], ["query"])
        self.assertEqual(p["search"], {"name": "tool_search_tool_bm25", "form": "bm25"})
        # Its call is constrained like any call: in the name set, with the query as free text.
        fake_vllm(self)
        r = request(ts)
        frontend.adjust(Hermes(), r, Settings())
        spec = calls.parse_spec(r.structured_outputs.structural_tag)
        self.assertEqual(spec.names[3], "tool_search_tool_bm25")
        self.assertEqual(json.loads(spec.schemas[3]), p["tools"][1]["function"]["parameters"])
        # Turn 2: the client sent the call back with an empty result: libtrie answers it and loads what it found.
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "type": "function", "function": {
            "name": "tool_search_tool_bm25", "arguments": json.dumps({"query": "stock ticker price"})}}]}
        for tail in ([], [{"role": "tool", "tool_call_id": "s1", "content": ""}]):
            p = plan(ts, USER + [call] + tail)
            self.assertEqual(p["loaded"], ["stock_price"])
            self.assertEqual(names(p["tools"]), ["get_weather", "stock_price", "tool_search_tool_bm25"])
            self.assertEqual(p["messages"][-1], {"role": "tool", "tool_call_id": "s1",
                                                 "content": "Tools found and now available: stock_price"})
            self.assertEqual(len(p["messages"]), 3)
        # The regex form, by Anthropic's type: deferred tools only (get_weather is in the prompt).
        ts = tools() + [{"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}]
        call["tool_calls"][0]["function"] = {"name": "tool_search_tool_regex", "arguments": '{"pattern": "^get_"}'}
        p = plan(ts, USER + [call])
        self.assertEqual(names(p["tools"]), ["get_weather", "get_time", "tool_search_tool_regex"])
        self.assertEqual(p["tools"][2]["function"]["parameters"]["required"], ["pattern"])
        r = request(ts)
        frontend.adjust(Hermes(), r, Settings())
        spec = calls.parse_spec(r.structured_outputs.structural_tag)
        self.assertEqual(spec.names[-1], "tool_search_tool_regex", "a search tool of its own type is callable too")

    def test_a_bad_pattern_is_answered_and_a_bad_request_refused(self):
        ts = tools() + [{"type": "function", "function": {"name": "tool_search_tool_regex"}}]
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "type": "function", "function": {
            "name": "tool_search_tool_regex", "arguments": json.dumps({"pattern": "a(b"})}}]}
        messages, _ = deferred.apply(request(ts), USER + [call], [], Settings())
        self.assertTrue(messages[-1]["content"].startswith("The search failed: pattern: not a regular expression"))
        with self.assertRaisesRegex(ValueError, r"request.tools\[0\]: not a JSON object"):
            deferred.request_plan([3], USER)
        # Not a chat request (the Responses API: no messages): left alone.
        responses = SimpleNamespace(tools=ts, vllm_xargs=None, input="hi")
        self.assertEqual(deferred.apply(responses, USER + [call], [{"x": 1}], Settings()), (USER + [call], [{"x": 1}]))


class RegistryTest(unittest.TestCase):
    """LIBTRIE_DEFERRED_REGISTRY: the operator's registry offered as deferred tools of every request."""

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="libtrie-deferred-"))
        self.addCleanup(shutil.rmtree, self.dir)
        catalog = [{"type": "function", "function": {"name": f"tool_{i:03d}", "description": f"does thing {i}",
                                                     "parameters": {"type": "object", "properties": {
                                                         f"a{i}": {"type": "integer"}}}}} for i in range(200)]
        catalog.append({"type": "function", "function": {"name": "convert_currency",
                                                         "description": "Convert money between currencies",
                                                         "parameters": {"type": "object"}}})
        (self.dir / "catalog.json").write_text(json.dumps(catalog))
        frontend._REG.clear()
        self.addCleanup(frontend._REG.clear)

    def test_the_registry_is_searched_loaded_and_callable(self):
        settings = Settings(set_dir=str(self.dir))
        ts = tools()[:1] + [{"type": "function", "function": {"name": "tool_search_tool_bm25"}}]
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "type": "function", "function": {
            "name": "tool_search_tool_bm25", "arguments": json.dumps({"query": "convert euros to dollars money"})}}]}
        with Env(LIBTRIE_DEFERRED_REGISTRY="catalog"):
            messages, prompt = deferred.apply(request(ts), USER + [call], [], settings)
            self.assertEqual(names(prompt), ["get_weather", "tool_search_tool_bm25", "convert_currency"])
            self.assertEqual(prompt[2]["function"]["description"], "Convert money between currencies")
            self.assertEqual(messages[-1]["content"], "Tools found and now available: convert_currency")
            _, prompt = deferred.apply(request(ts), USER, [], settings)
            self.assertEqual(names(prompt), ["get_weather", "tool_search_tool_bm25"], "no registry tool in the prompt")
            fake_vllm(self)
            r = request(tools()[:1])
            self.assertTrue(frontend.adjust(Hermes(), r, settings))
            spec = calls.parse_spec(r.structured_outputs.structural_tag)
            self.assertEqual((spec.registry, spec.extend, spec.names), ("catalog", True, ("get_weather",)))
        # Named by the client, without deferred tools of its own: the registry's names alone, as before.
        r = request(tools()[:1], vllm_xargs={"libtrie_registry": "catalog"})
        self.assertTrue(frontend.adjust(Hermes(), r, settings))
        spec = calls.parse_spec(r.structured_outputs.structural_tag)
        self.assertEqual((spec.registry, spec.extend), ("catalog", False))
        with Env(LIBTRIE_DEFERRED_REGISTRY="absent"):
            with self.assertRaisesRegex(ValueError, r"LIBTRIE_DEFERRED_REGISTRY \(the server's\): .*absent"):
                frontend.adjust(Hermes(), request(tools()[:1]), settings)
        # Without the variable: nothing of the registry.
        self.assertEqual(deferred.apply(request(tools()[:1]), USER, [{"x": 1}], settings), (USER, [{"x": 1}]))


if __name__ == "__main__":
    unittest.main()
