"""Tests of libtrie.recognize (the C recognizers through ctypes): the committed engine vectors round-trip, near
misses are not sets, malformed input raises TrieError, and a recognized set compiles.

    python3 -m unittest discover -s tests/python -p 'test_recognize.py' -v
"""

import json
import os
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie import NotASet, Recognized, Status, TrieError  # noqa: E402
from libtrie._recognize import json_check_depth  # noqa: E402

VECTORS = sorted((REPO / "tests" / "data" / "recognize").glob("*.json"))


class RecognizeTest(unittest.TestCase):
    def test_engine_vectors_round_trip(self) -> None:
        self.assertGreaterEqual(len(VECTORS), 18)
        for path in VECTORS:
            v = json.loads(path.read_text())
            with self.subTest(v["name"]):
                r = libtrie.recognize(v["shape"], v["text"])
                if "not_a_set" in v["expect"]:
                    self.assertIsInstance(r, NotASet)
                    self.assertIn(v["expect"]["not_a_set"], r.reason)
                    continue
                self.assertIsInstance(r, Recognized)
                assert isinstance(r, Recognized)
                self.assertEqual(r.texts(), v["expect"]["members"])
                self.assertEqual(r.render, v["expect"]["render"])
                self.assertEqual(r.trailing_whitespace, v["expect"]["trailing_whitespace"])
                near = v["text"].replace("root ::= ", "root ::= [ab] | ", 1) if v["shape"] == "grammar" \
                    else v["text"][:-2] + ")*$"
                miss = libtrie.recognize(v["shape"], near)
                self.assertFalse(miss)
                self.assertIsInstance(miss, NotASet)

    def test_shapes(self) -> None:
        r = libtrie.recognize("choices", ["a", "b\"", "é😀", ""])
        assert isinstance(r, Recognized)
        self.assertEqual(r.members, (b"a", b"b\"", "é😀".encode(), b""))
        self.assertEqual((r.prefix, r.suffix, r.render, r.end, r.payloads), (b"", b"", "raw", "eog", None))
        r = libtrie.recognize("json_schema", {"anyOf": [{"const": "x"}, {"enum": [1, None]}]})
        assert isinstance(r, Recognized)
        self.assertEqual((r.texts(), r.render), (['"x"', "1", "null"], "json_text"))
        tools = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object", "b": 1, "a": 2}}},
                 {"type": "function", "function": {"name": "put"}}]
        r = libtrie.recognize("tools", tools)
        assert isinstance(r, Recognized)
        self.assertEqual(r.texts(), ["get", "put"])
        self.assertEqual((r.prefix, r.suffix, r.render, r.end), (b'{"name": ', b', "arguments": ', "json_string", "open"))
        assert r.payloads is not None
        self.assertEqual(json.loads(r.payloads[0]), tools[0]["function"]["parameters"])  # type: ignore[index]
        self.assertEqual(list(json.loads(r.payloads[0])), ["type", "b", "a"], "key order kept")
        r = libtrie.recognize("regex", r"^(?:a|b\.c)$")
        assert isinstance(r, Recognized)
        self.assertEqual(r.texts(), ["a", "b.c"])
        r = libtrie.recognize("grammar", b'root ::= ("\\"a\\"") space\nspace ::= " "?')
        assert isinstance(r, Recognized)
        self.assertEqual((r.texts(), r.render, r.trailing_whitespace), (["a"], "json_string", True))

    def test_each_engine_reads_its_own_grammar_dialect(self) -> None:
        # llama.cpp's `space ::= | " " | ...` opens with an empty alternative: GBNF reads it, XGrammar refuses it.
        text = 'root ::= ("\\"a\\"" | "1")\nspace ::= | " " | "\\n"{1,2} [ \\t]{0,20}\n'
        gbnf = libtrie.recognize("grammar", text)
        assert isinstance(gbnf, Recognized)
        self.assertEqual((gbnf.texts(), gbnf.render), (["\"a\"", "1"], "json_text"))
        xg = libtrie.recognize("xgrammar_grammar", text)
        assert isinstance(xg, NotASet)
        self.assertIn("empty alternative", xg.reason)
        both = 'root ::= ("1" | "2")\nspace ::= " "?\n'
        self.assertEqual(libtrie.recognize("xgrammar_grammar", both).texts(),  # type: ignore[union-attr]
                         libtrie.recognize("grammar", both).texts())  # type: ignore[union-attr]
        # vLLM's `grammar` and SGLang's `ebnf` go to XGrammar: they are read in its dialect (source, not import:
        # the engines are not installed in this stage).
        root = Path(__file__).resolve().parents[2] / "python" / "libtrie"
        self.assertIn('"GRAMMAR": "xgrammar_grammar"', (root / "vllm" / "route.py").read_text())
        self.assertIn('"ebnf": "xgrammar_grammar"', (root / "sglang" / "backend.py").read_text())

    def test_not_sets_and_errors(self) -> None:
        miss = libtrie.recognize("json_schema", {"type": "string", "pattern": "^a$", "enum": ["a"]})
        self.assertIsInstance(miss, NotASet)
        assert isinstance(miss, NotASet)
        self.assertIn("pattern", miss.reason)
        for kind, text, status, words in [
            ("choices", "[]", Status.EMPTY_SET, "no member"),
            ("choices", '["a", "a"]', Status.INVALID_ARGUMENT, "twice"),
            ("grammar", 'root ::= "a', Status.INVALID_ARGUMENT, "unterminated"),
            ("tools", [{"function": {"name": "a"}}, {"function": {"name": "a"}}], Status.INVALID_ARGUMENT,
             "tools 0 and 1 have the same name"),
            ("json_schema", b"\xff", Status.INVALID_ARGUMENT, "not UTF-8"),
        ]:
            with self.assertRaises(TrieError) as cm:
                libtrie.recognize(kind, text)  # type: ignore[arg-type]
            self.assertEqual(cm.exception.status, status)
            self.assertIn(words, cm.exception.message)
        with self.assertRaises(ValueError):
            libtrie.recognize("xml", "<a/>")

    def test_duplicates_limits_and_depth(self) -> None:
        # Duplicates that do not change the language are served once; a choice list's duplicate is an error.
        for kind, text, want in [("grammar", 'root ::= "a" | "a"', ["a"]), ("regex", "a|a", ["a"]),
                                 ("json_schema", {"enum": ["a", "a"]}, ["a"]),
                                 ("grammar", 'root ::= "a" ("b" | "") | "ab"', ["ab", "a"])]:
            r = libtrie.recognize(kind, text)  # type: ignore[arg-type]
            assert isinstance(r, Recognized)
            self.assertEqual(r.texts(), want)
        self.assertIsInstance(libtrie.recognize("grammar", 'root ::= ("a" # c\r "b" # )\n)'), Recognized)
        bomb = 'root ::= d d d d d d d ""\nd ::= "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9"'
        with self.assertRaises(TrieError) as cm:
            libtrie.recognize("grammar", bomb)
        self.assertEqual(cm.exception.status, Status.LIMIT_EXCEEDED)
        self.assertIn("max_members = 10000", cm.exception.message)
        for bounds, words in [({"max_members": 1}, "max_members = 1"), ({"max_member_bytes": 3}, "max_member_bytes"),
                              ({"max_text_bytes": 5}, "max_text_bytes"), ({"max_depth": 1}, "max_depth")]:
            with self.assertRaises(TrieError) as cm:
                libtrie.recognize("choices", '[["x"], "aa", "b"]' if "depth" in words else '["aa", "b"]', **bounds)
            self.assertEqual(cm.exception.status, Status.LIMIT_EXCEEDED, bounds)
            self.assertIn(words, cm.exception.message)
        self.assertEqual(libtrie.recognize("choices", ["aa", "b"], max_members=2).texts(),  # type: ignore[union-attr]
                         ["aa", "b"])
        json_check_depth("[[1]]", 2)
        with self.assertRaises(TrieError) as cm:
            json_check_depth("[" * 50_000, 64)
        self.assertEqual(cm.exception.status, Status.LIMIT_EXCEEDED)

    def test_vllm_tools(self) -> None:
        params = {"type": "object", "properties": {"city": {"type": "string"}}}
        schema = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [
            {"properties": {"name": {"type": "string", "enum": [n]}, "parameters": params},
             "required": ["name", "parameters"]} for n in ("get", "put")]}}
        r = libtrie.recognize("vllm_tools", schema)
        assert isinstance(r, Recognized)
        self.assertEqual((r.texts(), r.prefix, r.suffix, r.render, r.end),
                         (["get", "put"], b'[{"name": ', b', "parameters": ', "json_string", "open"))
        self.assertEqual([json.loads(p) for p in r.payloads or ()], [params, params])
        schema["minItems"] = 2
        self.assertIsInstance(libtrie.recognize("vllm_tools", schema), NotASet)

    def test_a_recognized_set_compiles(self) -> None:
        r = libtrie.recognize("grammar", 'root ::= "ab" | "ba" | "b"')
        assert isinstance(r, Recognized)
        vocab = libtrie.Vocab.from_tokens(["a", "b", "</s>"], eog_ids=[2], kinds=[1, 1, 3])
        automaton = libtrie.compile(vocab, r.members)
        self.assertEqual(automaton.n_members, 3)


if __name__ == "__main__":
    unittest.main()
