"""Python tests of sets inside an output (Automaton.compile_template, member identity, hand-over) on a real
vocabulary. Run with the other tests: ``python3 -m unittest discover -s tests/python -v``."""

import json
import os
import random
import sys
import tempfile
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

    def spell(self, a: Automaton, text: bytes) -> int:
        """The state after ``text``, spelled with the longest allowed tokens."""
        state, done = a.start(), 0
        while done < len(text):
            rest = text[done:]
            t = max((t for t in a.allowed(state).tolist() if rest.startswith(self.v.token_bytes(t))),
                    key=lambda t: len(self.v.token_bytes(t)))
            state, done = a.advance(state, t), done + len(self.v.token_bytes(t))
        return state

    def test_members_carry_values_through_updates_and_files(self) -> None:
        values = [100 + i for i in range(len(TOOLS))]
        seg = lambda m: (PREFIX + json.dumps(m, ensure_ascii=False) + SUFFIX).encode()  # noqa: E731
        for end in ("eog", "open"):
            a = Automaton.compile_template(self.v, TOOLS + [TOOLS[0]], prefix=PREFIX, suffix=SUFFIX,
                                           render="json_string", end=end, values=values + [7])
            self.assertTrue(a.has_values)
            for i, m in enumerate(TOOLS):
                self.assertEqual(a.member_value(self.spell(a, seg(m))), values[i], m)  # first copy wins
            start = a.start()
            self.assertEqual(sorted(a.possible_values(start)), values)
            by_member = dict(zip(a.possible_members(start), a.possible_values(start)))
            self.assertEqual(by_member, {i: values[i] for i in range(len(TOOLS))})
            self.assertIsNone(a.member_value(start))
            # Re-add TOOLS[2] with a new value, remove TOOLS[0], add a new tool.
            b = a.with_changes(["new.tool", TOOLS[2]], [TOOLS[0]], values=[1, 2])
            want = {m: values[i] for i, m in enumerate(TOOLS)}
            del want[TOOLS[0]]
            want.update({"new.tool": 1, TOOLS[2]: 2})
            with tempfile.TemporaryDirectory() as d:
                b.save(Path(d) / "b.trie")
                for c in (b, Automaton.load(self.v, Path(d) / "b.trie"),
                          Automaton.load(self.v, Path(d) / "b.trie", lazy=True)):
                    for m, v in want.items():
                        self.assertEqual(c.member_value(self.spell(c, seg(m))), v, m)
                    self.assertEqual(sorted(c.possible_values(c.start())), sorted(want.values()))

    def test_values_are_all_or_nothing(self) -> None:
        a = Automaton(self.v, ["a", "b"], values=[1, 2])
        plain = Automaton(self.v, ["a", "b"])
        self.assertFalse(plain.has_values)
        self.assertEqual(plain.possible_values(plain.start()), ())
        self.assertIsNone(plain.member_value(self.spell(plain, b"a")))
        self.assertEqual(a.member_value(self.spell(a, b"b")), 2)
        with self.assertRaises(TrieError) as e:
            a.with_changes(["c"])
        self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
        self.assertIn("with_changes_and_values", str(e.exception))
        with self.assertRaises(TrieError) as e:
            plain.with_changes(["c"], values=[3])
        self.assertEqual(e.exception.status, Status.INVALID_ARGUMENT)
        with self.assertRaises(ValueError):
            Automaton(self.v, ["a", "b"], values=[1])
        with self.assertRaises(ValueError):
            a.with_changes(["c"], values=[-1])
        with self.assertRaises(ValueError):
            Automaton(self.v, ["a"], values=[2**64])
        self.assertEqual(Automaton(self.v, ["a"], values=[2**64 - 1]).possible_values(0), (2**64 - 1,))


if __name__ == "__main__":
    unittest.main()
