"""libtrie.search: the native tool search (trie_tool_search_*) through ctypes: BM25 and regex over a tool list, the
result block, errors naming the field, an index shared by threads.

    python3 -m unittest tests/python/test_search.py      # after cargo build --release
"""

import json
import os
import sys
import threading
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie.search import ToolSearch  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "the city's name"}}}}},
    {"type": "function", "function": {"name": "sendEmail", "description": "Send an email to someone"}},
    {"type": "function", "defer_loading": True,
     "function": {"name": "stock.price", "description": "The latest price of a stock ticker"}},
    {"name": "convert_currency", "description": "Convert money between currencies",
     "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}}},
]


class ToolSearchTest(unittest.TestCase):
    def setUp(self):
        self.s = ToolSearch(TOOLS)

    def test_bm25_finds_the_tool(self):
        self.assertEqual(self.s.names, ("get_weather", "sendEmail", "stock.price", "convert_currency"))
        self.assertEqual(len(self.s), 4)
        self.assertEqual(self.s.names_of("what is the weather in Oslo", 1), ["get_weather"])
        self.assertEqual(self.s.names_of("e-mail my boss: send email", 1), ["sendEmail"])
        self.assertEqual(self.s.names_of("AAPL stock price", 1), ["stock.price"])
        self.assertEqual(self.s.names_of("how much money is 3 euros in dollars amount", 1), ["convert_currency"])
        hits = self.s.search("city", 4)
        self.assertEqual([i for i, _ in hits], [0], "a parameter's description is searched; no match, no result")
        self.assertGreater(hits[0][1], 0)

    def test_regex_and_the_result_block(self):
        self.assertEqual(self.s.search("(?i)^SEND|price", 5, "regex"), [(1, 2.0), (2, 2.0)])
        self.assertEqual(self.s.names_of("currencies", 5, "regex"), ["convert_currency"])
        block = self.s.result_block("stock", 3)
        self.assertEqual(block, {"type": "tool_search_tool_search_result",
                                 "tool_references": [{"type": "tool_reference", "tool_name": "stock.price"}]})
        # JSON text is taken as it is
        self.assertEqual(ToolSearch(json.dumps(TOOLS)).names, self.s.names)

    def test_errors_name_the_field(self):
        cases = [(lambda: self.s.search("a(b", 3, "regex"), libtrie.Status.INVALID_ARGUMENT, "pattern:"),
                 (lambda: self.s.search("x", 0), libtrie.Status.INVALID_ARGUMENT, "k: 0"),
                 (lambda: self.s.search("x" * 5000, 1), libtrie.Status.LIMIT_EXCEEDED, "query (bytes): 5000"),
                 (lambda: self.s.search(".,;", 1), libtrie.Status.INVALID_ARGUMENT, "query: no word"),
                 (lambda: self.s.result_block("(", 1, "regex"), libtrie.Status.INVALID_ARGUMENT, "pattern:"),
                 (lambda: ToolSearch([{"name": "a"}, {"name": "a"}]), libtrie.Status.INVALID_ARGUMENT,
                  "tools[0] and tools[1] have the same name"),
                 (lambda: ToolSearch([{"type": "tool_search"}]), libtrie.Status.INVALID_ARGUMENT, "tools[0].type"),
                 (lambda: ToolSearch("{"), libtrie.Status.INVALID_ARGUMENT, "tools: not a JSON array")]
        for f, status, msg in cases:
            with self.assertRaises(libtrie.TrieError) as ctx:
                f()
            self.assertEqual(ctx.exception.status, status)
            self.assertTrue(str(ctx.exception.message).startswith(msg), ctx.exception.message)
        with self.assertRaises(ValueError):
            self.s.search("x", 1, "fuzzy")

    def test_a_large_catalog_shared_by_threads(self):
        tools = [{"name": f"tool_{i:05d}", "description": f"does thing number {i} for group{i % 97}"}
                 for i in range(20_000)]
        s = ToolSearch(tools)
        got = []

        def work():
            for _ in range(20):
                got.append(s.search("thing 12345", 3))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(got), 80)
        self.assertTrue(all(g == got[0] for g in got))
        self.assertEqual(got[0][0][0], 12345)
        self.assertEqual(s.names_of("group5", 3), ["tool_00005", "tool_00102", "tool_00199"], "ties in list order")


    def test_a_registry_is_searched(self):
        import shutil
        import tempfile

        from libtrie.registry import RegistryCache

        d = Path(tempfile.mkdtemp(prefix="libtrie-search-"))
        self.addCleanup(shutil.rmtree, d)
        (d / "catalog.json").write_text(json.dumps(TOOLS))
        cache = RegistryCache(str(d))
        s = cache.search("catalog")
        self.assertEqual(len(s), 4)
        self.assertEqual(s.names_of("stock price", 1), ["stock.price"])
        self.assertEqual(cache.search("catalog").search("city", 3), s.search("city", 3))
        with self.assertRaises(Exception) as ctx:
            cache.search("missing")
        self.assertIn("missing", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
