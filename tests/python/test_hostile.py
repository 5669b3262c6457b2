"""A hostile client against the Python front door of the engine integrations, without an engine: the functions the
vLLM integration runs at admission and in its frontend (``libtrie.vllm.route.recognize_key``, which imports without
vLLM) and the recognition the SGLang backend runs (``libtrie.front.recognize_once`` with the operator's bounds).
Each request is answered quickly, within the operator's bounds: "not a set" (the engine's own backend decides, as
without libtrie: a request over the bounds keeps the engine's path and is never refused for its size) or, for a
malformed ``choice`` or tool list, a clear error (a ``ValueError`` naming the request's field, an HTTP 400); the
process lives on and does not grow (issue 28).

    python3 -m unittest discover -s tests/python -p 'test_hostile.py' -v
"""

import json
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie import NotASet, Recognized, Status, TrieError, front  # noqa: E402
from libtrie.sets import SetError, Settings  # noqa: E402
from libtrie.vllm import route  # noqa: E402
from libtrie.vllm.grammar import TrieGrammar  # noqa: E402
from libtrie.vllm.tools import TrieToolGrammar  # noqa: E402

#: The operator's defaults (10,000 members, 1 MiB): what a server runs with unless it raises them.
SETTINGS = Settings()
#: Seconds one hostile request may take here (a loaded 2-core machine; the recognizer's own bound is far lower).
# The expansion bomb of issue 28 took 1,342 MB; a bounded refusal allocates nothing near this.
MAX_GROWTH_KB = 192 * 1024

DIGITS = "d ::= " + " | ".join(f'"{i}"' for i in range(10))


def bomb(n: int) -> str:
    """``root ::= d d ... d ""`` (n digits): 10**n members from a few bytes."""
    return "root ::= " + "d " * n + '""\n' + DIGITS + "\n"


def nested_schema(depth: int) -> str:
    return '{"anyOf": [' * depth + '{"const": "a"}' + "]}" * depth


def vllm_tools_schema(tools, parallel=None):
    """vLLM 0.32's ``_get_json_schema_from_tools`` for ``tool_choice="required"`` (vllm/tool_parsers/utils.py),
    written out here so that the test needs no vLLM (tests/vllm compares it with vLLM's own function)."""
    schema = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [
        {"properties": {"name": {"type": "string", "enum": [t["name"]]},
                        "parameters": t.get("parameters") or {"type": "object", "properties": {}}},
         "required": ["name", "parameters"]} for t in tools]}}
    if parallel is False:
        schema["maxItems"] = 1
    return schema


TOOLS = [{"name": "weather.get", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                "required": ["city"]}},
         {"name": "mail.send", "parameters": {"type": "object", "properties": {"to": {"type": "string"}},
                                              "required": ["to"]}}]


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"/proc/self/status has no {field}")


class Timed:
    """A hostile request must not make the process grow: the peak resident size while it is answered may rise by
    at most ``MAX_GROWTH_KB`` over the resident size before it. The peak is reset first (``/proc/self/clear_refs``
    5 resets ``VmHWM``), so an earlier case's peak cannot hide this one's (``ru_maxrss`` never goes down: a bound
    on it measured nothing once an earlier test had grown the process). No time bound (speed goals live in
    ``benches/recognize.rs``); the time is only printed."""

    def __init__(self, case: unittest.TestCase, what: str) -> None:
        self.case, self.what = case, what

    def __enter__(self) -> "Timed":
        with open("/proc/self/clear_refs", "w") as f:  # Linux >= 4.0: VmHWM := VmRSS
            f.write("5")
        self.rss = _status_kb("VmRSS")
        self.case.assertLessEqual(_status_kb("VmHWM"), self.rss + 1024, "the peak was reset")
        self.t = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        took = time.monotonic() - self.t
        grew = _status_kb("VmHWM") - self.rss
        if os.environ.get("LIBTRIE_TEST_VERBOSE"):
            print(f"{self.what}: {took * 1e3:.1f} ms, peak RSS +{grew} KiB")
        self.case.assertLess(grew, MAX_GROWTH_KB, f"{self.what} grew the process by {grew} KiB")


class VllmFrontDoorTest(unittest.TestCase):
    """``recognize_key(type, text)``: what the vLLM API server runs on its event loop for every structured output."""

    def refused(self, request_type: str, text, field: str, *words: str) -> str:
        with Timed(self, f"{request_type} {str(text)[:40]!r}"):
            with self.assertRaises(SetError) as cm:
                route.recognize_key(request_type, text, SETTINGS)
        msg = str(cm.exception)
        self.assertIsInstance(cm.exception, ValueError, "an HTTP 400")
        self.assertTrue(msg.startswith(field + ": "), msg[:300])
        self.assertEqual(msg.count(field + ":"), 1, f"the field is named once: {msg[:300]}")
        self.assertNotIn(f'"{field}"', msg, f"the field is named once: {msg[:300]}")
        self.assertNotIn("trie_tools", msg)
        self.assertLess(len(msg), 2000, "the client's megabytes are not echoed back")
        for w in words:
            self.assertIn(w, msg)
        return msg

    def delegated(self, request_type: str, text) -> None:
        """Over the operator's bounds: not a set, vLLM's backend serves it (no 400 for its size), bounded work."""
        with Timed(self, f"{request_type} {str(text)[:40]!r}"):
            got = route.recognize_key(request_type, text, SETTINGS)
        self.assertIsNone(got, f"{str(text)[:200]!r} over the bounds keeps vLLM's path")

    def not_served(self, request_type: str, text) -> None:
        with Timed(self, f"{request_type} {str(text)[:40]!r}"):
            try:
                got = route.recognize_key(request_type, text, SETTINGS)
            except SetError as e:  # a clear 400 is fine too
                self.assertTrue(str(e).startswith(route.FIELDS[request_type] + ": ") or str(e).startswith("tools: "))
                return
        self.assertIsNone(got, f"{text[:200]!r} must not be served by libtrie")

    def test_expansion_bombs(self):
        for n in (7, 8, 400):
            self.delegated("GRAMMAR", bomb(n))
        # The same bomb as a regex (not a set: a concatenation), a regex and a schema listing more than the bound.
        self.not_served("REGEX", "(0|1|2|3|4|5|6|7|8|9)" * 8)
        self.delegated("REGEX", "|".join(f"m{i}" for i in range(20_000)))
        self.delegated("JSON", json.dumps({"anyOf": [{"enum": [f"{i}"]} for i in range(20_000)]}))
        # Within the bounds the same shapes are sets (the bound, not the shape, sent them to vLLM).
        self.assertEqual(len(route.recognize_key("GRAMMAR", bomb(3), SETTINGS).found.members), 1000)

    def test_deep_nesting(self):
        self.delegated("JSON", nested_schema(50_000))
        self.delegated("CHOICE", "[" * 50_000 + "]" * 50_000)
        self.delegated("GRAMMAR", "root ::= " + "(" * 50_000 + '"a"' + ")" * 50_000)
        tools = vllm_tools_schema(TOOLS)
        text = json.dumps(tools)
        deep = text.replace('{"type": "string"}', '{"anyOf": [' * 50_000 + '{"type": "string"}' + "]}" * 50_000, 1)
        self.not_served("JSON", deep)

    def test_a_million_members(self):
        members = [f"m{i}" for i in range(1_000_000)]
        self.delegated("CHOICE", json.dumps(members))
        self.delegated("JSON", json.dumps({"enum": members}))
        self.delegated("GRAMMAR", "root ::= " + " | ".join(json.dumps(m) for m in members[:200_000]))
        # Within the text bound, over the member bound.
        small = [str(i) for i in range(20_000)]
        self.delegated("CHOICE", json.dumps(small))
        # The operator's bounds, raised, are the bounds.
        big = Settings(max_inline_strings=20_000, max_inline_bytes=1 << 20)
        got = route.recognize_key("CHOICE", json.dumps(small), big)
        self.assertEqual(len(got.found.members), 20_000)

    def test_bad_unicode(self):
        # vLLM writes a choice list with json.dumps (ASCII escapes): a lone surrogate arrives as \\ud800.
        self.refused("CHOICE", json.dumps(["ok", "\ud800"]), "structured_outputs.choice")
        self.refused("CHOICE", '["ok", "\ud800"]', "structured_outputs.choice")  # not even encodable as UTF-8
        self.refused("CHOICE", b'["ok", "\xff"]', "structured_outputs.choice")
        self.not_served("JSON", json.dumps({"enum": ["ok", "\udfff"]}))
        self.not_served("GRAMMAR", 'root ::= "a" | "\udc80"')
        self.not_served("REGEX", "a|\ud800")

    def test_control_characters(self):
        for text in ("root ::= \"a\x00\" | \"b\"", "root ::= \"a\" \x1b| \"b\"", 'root ::= "a" |\x0b "b"'):
            self.not_served_or_exact("GRAMMAR", text)
        got = route.recognize_key("CHOICE", json.dumps(["a\x00", "b\x1b", "\x7f"]), SETTINGS)
        self.assertEqual(got.found.members, (b"a\x00", b"b\x1b", b"\x7f"), "served exactly as listed")

    def not_served_or_exact(self, request_type, text):
        with Timed(self, repr(text)):
            try:
                got = route.recognize_key(request_type, text, SETTINGS)
            except SetError:
                return
        if got is not None:
            self.assertEqual(got.kind, "set")

    def test_huge_numbers(self):
        for schema in ('{"enum": [1e999999]}', '{"enum": [-1e400, 1]}', '{"const": 123456789012345678901234567890}',
                       '{"enum": [' + "9" * 100_000 + "]}"):
            with Timed(self, schema[:40]):
                try:
                    got = route.recognize_key("JSON", schema, SETTINGS)
                except SetError:
                    continue
            if got is not None:  # served: each member is the JSON text of a value the schema lists
                for m in got.found.members:
                    json.loads(m)

    def test_tool_look_alikes_are_not_served(self):
        exact = vllm_tools_schema(TOOLS)
        got = route.recognize_key("JSON", json.dumps(exact), SETTINGS)
        self.assertIsNotNone(got, "vLLM's own form is served")
        self.assertEqual((got.kind, got.found.texts()), ("tools", ["weather.get", "mail.send"]))
        variants = {
            "minItems 2": lambda s: s.update(minItems=2),
            "maxItems 0": lambda s: s.update(maxItems=0),
            "not": lambda s: s["items"].update({"not": {"type": "object"}}),
            "extra required": lambda s: s["items"]["anyOf"][0].update(required=["name", "parameters", "x"]),
            "integer name enum": lambda s: s["items"]["anyOf"][0]["properties"].update(
                name={"type": "integer", "enum": [1]}),
            "extra property": lambda s: s["items"]["anyOf"][1]["properties"].update(x={"type": "string"}),
            "additionalItems": lambda s: s.update(prefixItems=[{"type": "string"}]),
        }
        for what, change in variants.items():
            s = json.loads(json.dumps(exact))
            change(s)
            with self.subTest(what):
                with Timed(self, what):
                    try:
                        got = route.recognize_key("JSON", json.dumps(s), SETTINGS)
                    except SetError as e:
                        self.assertTrue(str(e).startswith(("tools: ", "structured_outputs.json: ")), str(e))
                        continue
                self.assertIsNone(got, f"a look-alike ({what}) is vLLM's to serve")

    def test_tool_lists_beyond_the_bounds(self):
        many = [{"name": f"tool_{i}", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}
                for i in range(10_001)]
        self.delegated("JSON", json.dumps(vllm_tools_schema(many)))
        deep = {"type": "object", "properties": {"a": {"type": "string"}}}
        for _ in range(24):
            deep = {"type": "object", "properties": {"a": deep}}
        huge = [{"name": f"tool_{i}", "parameters": deep} for i in range(10_000)]
        text = json.dumps(vllm_tools_schema(huge))
        self.assertGreater(len(text), 8 << 20)
        self.delegated("JSON", text)

    def test_a_request_is_recognized_once(self):
        text = json.dumps([f"c{i}" for i in range(5000)])
        route.recognize_key("CHOICE", text, SETTINGS)
        before = dict(front.stats)
        for _ in range(3):
            self.assertEqual(len(route.recognize_key("CHOICE", text, SETTINGS).found.members), 5000)
        self.assertEqual(front.stats["recognized"], before["recognized"], "from the cache")
        self.assertEqual(front.stats["hits"], before["hits"] + 3)
        for _ in range(2):  # a request over the bounds is delegated from the cache too
            self.delegated("GRAMMAR", bomb(9))
        self.assertEqual(front.stats["recognized"], before["recognized"] + 1, "bomb(9) recognized once")

    def test_duplicates_and_empty_members(self):
        self.refused("CHOICE", json.dumps(["a", "b", "a"]), "structured_outputs.choice", "twice")
        self.refused("CHOICE", "[]", "structured_outputs.choice")
        got = route.recognize_key("GRAMMAR", 'root ::= "a" | "a" | "b"', SETTINGS)  # one language: deduplicated
        self.assertEqual(got.found.texts(), ["a", "b"])
        got = route.recognize_key("JSON", '{"enum": ["a", "a"]}', SETTINGS)
        self.assertEqual(len(got.found.members), 1)
        self.assertIsNone(route.recognize_key("JSON", '{"oneOf": [{"const": 1}, {"const": 1.0}]}', SETTINGS))


class SglangFrontDoorTest(unittest.TestCase):
    """The recognition the SGLang backend runs (``front.recognize_once`` within ``front.limits(settings)``): over a
    bound, not a set (the default backend serves it, as without libtrie); anything else is a set or delegated. The
    same bounds without routing (a set named through libtrie's own fields) are errors."""

    def test_over_the_bounds_is_delegated_and_unknown_shapes_are_not_refused(self):
        lim = front.limits(SETTINGS)
        for kind, text, bound in (("grammar", bomb(8), "max_members"),
                                  ("json_schema", nested_schema(50_000), "max_depth"),
                                  ("json_schema", json.dumps({"enum": list(range(1_000_000))}), "max_")):
            with Timed(self, kind):
                got = front.recognize_once(kind, text, lim)
            self.assertIsInstance(got, NotASet)
            self.assertIn(bound, got.reason)
            with self.assertRaises(TrieError) as cm:
                front.recognize_once(kind, text, lim._replace(routing=False))
            self.assertTrue(front.is_limit(cm.exception), cm.exception.message)
        # XGrammar's own syntax libtrie does not read: not a set (or a parse error), and delegated, never refused.
        tag = 'root ::= TagDispatch(("<a>", b), stop_eos=true)\nb ::= "x"'
        try:
            r = front.recognize_once("grammar", tag, lim)
            self.assertIsInstance(r, NotASet)
        except TrieError as e:
            self.assertFalse(front.is_limit(e))


class FrontCacheTest(unittest.TestCase):
    """The recognition cache (``front.recognize_once``) is charged by what its entries hold, not by the request's
    size (issue 36, defect 4: 256 grammars of 178 bytes, each a set of 10,000 members, pinned 377 MB)."""

    def test_the_cache_is_charged_by_the_results_size(self):
        lim = front.limits(SETTINGS)
        with front._CACHE_LOCK:
            saved = (front.CACHE_BYTES, dict(front._CACHE), front._CACHE_BYTES[0])
            front._CACHE.clear()
            front._CACHE_BYTES[0] = 0
        front.CACHE_BYTES = 4 << 20

        def restore():
            with front._CACHE_LOCK:
                front.CACHE_BYTES = saved[0]
                front._CACHE.clear()
                front._CACHE.update(saved[1])
                front._CACHE_BYTES[0] = saved[2]

        self.addCleanup(restore)
        texts = [f'root ::= "{chr(97 + i % 26)}{i}" d d d d\n{DIGITS}\n' for i in range(40)]  # 10,000 members each
        self.assertLess(max(len(t) for t in texts), 200)
        for t in texts:
            got = front.recognize_once("grammar", t, lim)
            self.assertEqual(len(got.members), 10_000)
        with front._CACHE_LOCK:
            held = sum(size for size, _ in front._CACHE.values())
            entries = len(front._CACHE)
        self.assertEqual(held, front._CACHE_BYTES[0])
        self.assertLessEqual(held, 4 << 20, "the bound holds")
        # Each entry is charged at least its members' bytes (10,000 bytes objects), so at most a handful fit.
        self.assertGreater(held / entries, 10_000 * 37, f"{entries} entries charged {held} bytes")
        self.assertLess(entries, 40)


class ProcessSurvivesTest(unittest.TestCase):
    def test_a_bomb_that_aborted_the_process_before(self):
        # A 4 KB variant of the bomb made the allocation fail, which aborts a process (issue 28).
        code = ("import sys\nif sys.argv[1]: sys.path.insert(0, sys.argv[1])\n"
                "from libtrie import TrieError, front\nfrom libtrie.sets import Settings\n"
                "text = 'root ::= ' + 'd ' * 2000 + '\"\"\\n' + 'd ::= ' + ' | '.join('\"%d\"' % i for i in range(10))\n"
                "print('routed:', front.recognize_once('grammar', text, front.limits(Settings())))\n"
                "try:\n    front.recognize_once('grammar', text, front.limits(Settings())._replace(routing=False))\n"
                "except TrieError as e:\n    print('refused:', front.client_error('structured_outputs.grammar', e))\n")
        installed = os.environ.get("LIBTRIE_TEST_INSTALLED") == "1"
        out = subprocess.run([sys.executable, "-c", code, "" if installed else str(REPO / "python")],
                             capture_output=True, text=True, timeout=300, env={**os.environ})
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertIn("routed: NotASet(", out.stdout)
        self.assertIn("refused: structured_outputs.grammar: ", out.stdout)


class RollbackTest(unittest.TestCase):
    """vLLM's grammar contract at the start (issue 28: ``del states[-0:]`` emptied the stack)."""

    @classmethod
    def setUpClass(cls):
        tokens = [bytes([b]) for b in range(128)] + [b"</s>"]
        kinds = [libtrie.TOKEN_NORMAL] * 128 + [libtrie.TOKEN_CONTROL]
        cls.vocab = libtrie.Vocab.from_tokens(tokens, eog_ids=[128], kinds=kinds)

    def test_rollback_at_the_start_keeps_the_start(self):
        a = libtrie.compile(self.vocab, ["ab", "b"])
        g = TrieGrammar(a, set())
        for n in (0, 1, 5):
            g.rollback(n)
            self.assertEqual(g.states, [a.start()])
        self.assertTrue(g.accept_tokens("r", [ord("a")]))
        g.rollback(3)  # more than was accepted: back to the start, not past it
        self.assertEqual(g.states, [a.start()])
        self.assertTrue(g.accept_tokens("r", [ord("a"), ord("b"), 128]))
        self.assertTrue(g.is_terminated())

    def test_tool_grammar_rollback_at_the_start(self):
        t = libtrie.Automaton.compile_template(self.vocab, ["x", "y"], prefix='[{"name": ', suffix=", ",
                                               render="json_string", end="open")
        g = TrieToolGrammar(t, lambda m: None)
        g.rollback(1)
        g.rollback(4)
        self.assertEqual(g.states, [t.start()])
        self.assertEqual(g.validate_tokens([ord("[")]), [ord("[")])
        self.assertEqual(g.states, [t.start()], "validate_tokens does not advance")


if __name__ == "__main__":
    unittest.main()
