"""The differential harness's own checks (tests/differential), with the stdlib oracle only (``re``): the generators
are reproducible, and the checks flag a recognizer that serves a wrong set, refuses a valid request, or serves a string
the oracle rejects. The full run against XGrammar, llama.cpp and jsonschema is scripts/test-differential.sh."""

import os
import random
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "differential"))

import gen_grammar as gg  # noqa: E402
import oracles as orc  # noqa: E402
import run  # noqa: E402


class FakeRecognized:
    def __init__(self, members):
        self.members = tuple(m.encode() for m in members)
        self.prefix = self.suffix = b""
        self.render = "raw"


class FakeLib:
    """A recognizer with canned answers: text -> ("set", [members]) | ("error", message) | ("not-a-set", reason)."""

    has_vllm_tools = False

    def __init__(self, answers):
        self.answers = answers

    def recognize(self, kind, text):
        outcome, got = self.answers[text]
        return (outcome, FakeRecognized(got)) if outcome == "set" else (outcome, got)


def checks(answers, case):
    runner = run.Runner(FakeLib(answers), [orc.Re()])
    _, findings, _ = runner.check(case, random.Random(0))
    return [f.check for f in findings]


class TestDifferential(unittest.TestCase):
    def test_cases_are_reproducible(self):
        families = list(run.FAMILIES)
        for i in range(50):
            a, b = run.case_for(7, i, families), run.case_for(7, i, families)
            self.assertEqual((a.family, a.text, a.ref), (b.family, b.text, b.ref))

    def test_portable_grammars_have_finite_references(self):
        for i in range(200):
            c = gg.portable(random.Random(i))
            self.assertIsNotNone(c.ref)
            self.assertLessEqual(len(c.ref), gg.CAP)
            self.assertTrue(c.text.startswith(("root", "\n", "\r", " ", "\t", "#")) or "::=" in c.text)

    def test_a_wrong_set_is_a_disagreement(self):
        case = gg.Case("regex", "regex", "a|b", {"a", "b"})
        self.assertEqual(checks({"a|b": ("set", ["a", "b"])}, case), [])
        self.assertIn("set differs from the reference", checks({"a|b": ("set", ["a"])}, case))
        got = checks({"a|b": ("set", ["a", "b", "c"])}, case)
        self.assertIn("re rejects a served member", got)

    def test_a_refused_valid_request_is_a_disagreement(self):
        case = gg.Case("regex", "regex", "a|a", {"a"})
        self.assertEqual(checks({"a|a": ("error", "lists a twice")}, case), ["valid request refused"])
        self.assertEqual(checks({"a|a": ("not-a-set", "why")}, case), [])
        self.assertEqual(checks({"a|a": ("limit", "max_members")}, case), [])

    def test_a_near_miss_the_oracle_accepts_is_a_disagreement(self):
        case = gg.Case("regex-near", "regex", "ab?", None, candidates=["a", "ab"])
        got = checks({"ab?": ("set", ["ab"])}, case)
        self.assertIn("re accepts a string libtrie does not serve", got)

    def test_served_text_the_oracle_refuses(self):
        case = gg.Case("regex-near", "regex", "a(", None)
        self.assertIn("served a text re refuses", checks({"a(": ("set", ["a("])}, case))

    def test_shrink_keeps_the_property(self):
        text = "root ::= x # c\rx ::= \"b\" | \"long tail that does not matter\""
        small = run.shrink(text, lambda t: "#" in t and "\r" in t)
        self.assertEqual(small, "#\r")


if __name__ == "__main__":
    unittest.main()
