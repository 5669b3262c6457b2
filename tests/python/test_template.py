"""Python tests of sets inside an output (Automaton.compile_template, member identity, hand-over) on a real
vocabulary. Run with the other tests: ``python3 -m unittest discover -s tests/python -v``."""

import json
import os
import random
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

from libtrie import FINISHED, Automaton, Crossing, Status, TrieError, Vocab  # noqa: E402

ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))
TOOLS = ["calendar.create_event", "mail.send", 'say "hi"', "naïve\\path", "東京.search", "line\nbreak"]
PREFIX, SUFFIX = '{"name": ', ', "arguments": '


class TemplateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        path = ASSETS / "vocab" / "ggml-vocab-qwen2.gguf"
        if not path.exists():
            raise AssertionError(f"{path} is missing: run scripts/fetch-assets.sh or set TRIE_ASSETS")
        cls.v = Vocab.from_gguf(path)

    def test_walks_are_framed_json_members_named_by_index(self) -> None:
        a = Automaton.compile_template(self.v, TOOLS, prefix=PREFIX, suffix=SUFFIX, render="json_string")
        self.assertFalse(a.is_open)
        self.assertEqual(sorted(a.possible_members(a.start())), list(range(len(TOOLS))))
        rng = random.Random(5)
        eog = set(self.v.eog_ids)
        for _ in range(40):
            state, text, last = a.start(), b"", None
            while state != FINISHED:
                t = rng.choice(a.allowed(state).tolist())
                if t in eog:
                    last = state
                else:
                    text += self.v.token_bytes(t)
                state = a.advance(state, t)
            s = text.decode()
            self.assertTrue(s.startswith(PREFIX) and s.endswith(SUFFIX), s)
            name = json.loads(s[len(PREFIX):-len(SUFFIX)])
            self.assertEqual(a.member(last), TOOLS.index(name))
            self.assertEqual(s, PREFIX + json.dumps(name, ensure_ascii=False) + SUFFIX)

    def test_open_end_hands_over_with_crossing_tokens(self) -> None:
        a = Automaton.compile_template(self.v, TOOLS, prefix=PREFIX, suffix=SUFFIX, render="json_string", end="open")
        self.assertTrue(a.is_open)
        target = 1
        seg = (PREFIX + json.dumps(TOOLS[target], ensure_ascii=False) + SUFFIX).encode()
        # Spell all but the last byte (" ") with the longest allowed tokens.
        state, done = a.start(), 0
        while done < len(seg) - 1:
            rest = seg[done:len(seg) - 1]
            t = max((t for t in a.allowed(state).tolist() if rest.startswith(self.v.token_bytes(t))),
                    key=lambda t: len(self.v.token_bytes(t)))
            state, done = a.advance(state, t), done + len(self.v.token_bytes(t))
        self.assertEqual(a.possible_members(state), (target,))
        self.assertIsNone(a.member(state))
        every = a.crossing(state)
        self.assertGreater(len(every), 1000)  # every token beginning with " "
        braces = a.crossing(state, keep=lambda m, overflow: overflow[:1] == b"{")
        self.assertTrue(braces, "qwen2 has ' {' tokens that begin the arguments")
        self.assertEqual(braces, [c for c in every if self.v.token_bytes(c.token)[1:2] == b"{"])
        for c in braces:
            self.assertIsInstance(c, Crossing)
            self.assertEqual((c.member, c.overflow), (target, len(self.v.token_bytes(c.token)) - 1))
            self.assertNotIn(c.token, a.allowed(state).tolist())
            self.assertEqual(a.cross(state, c.token), c)
        # A filter that raises keeps nothing (it never unwinds into C).
        self.assertEqual(a.crossing(state, keep=lambda m, o: 1 / 0), [])
        space = next(t for t in a.allowed(state).tolist() if self.v.token_bytes(t) == b" ")
        with self.assertRaises(TrieError) as e:
            a.cross(state, space)
        self.assertEqual(e.exception.status, Status.TOKEN_REJECTED)
        end = a.advance(state, space)
        self.assertEqual(a.member(end), target)
        self.assertEqual(a.allowed(end).tolist(), [])

    def test_bad_members_and_templates(self) -> None:
        with self.assertRaises(TrieError) as e:
            Automaton.compile_template(self.v, ["a", "ab"], end="open")
        self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
        with self.assertRaises(TrieError) as e:
            Automaton.compile_template(self.v, ["1", "tru"], render="json_text")
        self.assertIn("member 1", str(e.exception))
        with self.assertRaises(ValueError):
            Automaton.compile_template(self.v, ["a"], render="yaml")
        with self.assertRaises(TrieError) as e:
            Automaton.compile_template(self.v, [])
        self.assertEqual(e.exception.status, Status.EMPTY_SET)


if __name__ == "__main__":
    unittest.main()
