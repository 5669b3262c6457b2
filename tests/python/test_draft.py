"""Python tests of libtrie.draft (forced token runs, draft validation, rollback) on a real vocabulary. Run with the
other tests: ``python3 -m unittest discover -s tests/python -v``."""

import os
import random
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

from libtrie import FINISHED, Automaton, Status, TrieError, Vocab, compile  # noqa: E402
from libtrie.draft import History, draft, jump_forward, validate  # noqa: E402

ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))
TOOLS = ["weather.get_forecast", "weather.get_alerts", "calendar.create_event", "mail.send"]
PREFIX, SUFFIX = '<tool_call>\n{"name": ', ', "arguments": '


class DraftTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        path = ASSETS / "vocab" / "ggml-vocab-qwen2.gguf"
        if not path.exists():
            raise AssertionError(f"{path} is missing: run scripts/fetch-assets.sh or set TRIE_ASSETS")
        cls.v = Vocab.from_gguf(path)

    def text(self, tokens) -> bytes:
        return b"".join(self.v.token_bytes(t) for t in tokens)

    def test_template_prefix_member_and_suffix_are_forced(self) -> None:
        a = Automaton.compile_template(self.v, TOOLS, prefix=PREFIX, suffix=SUFFIX, render="json_string")
        d = draft(a, a.start())
        self.assertEqual(self.text(d.tokens), (PREFIX + '"').encode())
        self.assertFalse(d.complete)
        self.assertEqual(validate(a, a.start(), d.tokens)[-1], d.end_state)
        # "cal" leaves one member: the rest of its name, the closing quote and the suffix are one run.
        s = d.end_state
        cal = next(t for t in a.allowed(s).tolist() if self.v.token_bytes(t) == b"cal")
        s = a.advance(s, cal)
        d = draft(a, s)
        self.assertEqual(self.text(d.tokens), ('endar.create_event"' + SUFFIX).encode())
        self.assertTrue(d.complete)
        self.assertEqual(a.member(d.end_state), 2)
        self.assertTrue(all(t in self.v.eog_ids for t in a.allowed(d.end_state).tolist()))
        # The same as forced() where one member is left; a cut and a resume give the same run.
        f = a.forced(s)
        self.assertEqual(tuple(f.tokens), d.tokens)
        d1 = draft(a, s, 2)
        self.assertEqual(len(d1.tokens), 2)
        self.assertFalse(d1.complete)
        self.assertEqual(d1.tokens + draft(a, d1.end_state).tokens, d.tokens)
        # "weather." is shared by two members: forced, but not complete.
        s = validate(a, a.start(), draft(a, a.start()).tokens)[-1]
        w = next(t for t in a.allowed(s).tolist() if self.v.token_bytes(t) == b"weather")
        d = draft(a, a.advance(s, w))
        self.assertEqual(self.text(d.tokens), b".get_")
        self.assertFalse(d.complete)
        # Nothing forced in FINISHED; a state that does not exist is an error.
        self.assertEqual(draft(a, FINISHED).tokens, ())
        with self.assertRaises(TrieError) as e:
            draft(a, 10**9)
        self.assertEqual(e.exception.status, Status.INVALID_STATE)

    def test_jump_forward_text_is_cut_at_whole_characters(self) -> None:
        # SGLang's try_jump_forward: tokens and text; a run ending inside a character is cut before it.
        a = compile(self.v, ["caf\u00e9 1", "caf\u00e8 2"])  # é and è share their first UTF-8 byte
        toks, text = jump_forward(a, a.start())
        self.assertEqual(text, "caf")
        self.assertEqual(self.text(toks), b"caf")
        self.assertEqual(draft(a, a.start()).tokens[: len(toks)], tuple(toks))
        self.assertEqual(self.text(draft(a, a.start()).tokens), b"caf\xc3")
        s = validate(a, a.start(), toks)[-1]
        self.assertIsNone(jump_forward(a, s), "only a partial character is forced")
        t = Automaton.compile_template(self.v, TOOLS, prefix=PREFIX, suffix=SUFFIX, render="json_string")
        toks, text = jump_forward(t, t.start())
        self.assertEqual(text, PREFIX + '"')
        self.assertIsNone(jump_forward(t, FINISHED))

    def test_partial_acceptance_and_rollback(self) -> None:
        a = compile(self.v, TOOLS)
        eog = self.v.eog_ids[0]
        path = list(a.forced(a.start()).tokens) if a.forced(a.start()) else None
        self.assertIsNone(path, "four members: nothing is forced at the start")
        # Spell "mail.send" with the longest allowed tokens, then check drafts against it.
        s, toks = a.start(), []
        rest = b"mail.send"
        while rest:
            t = max((t for t in a.allowed(s).tolist() if t not in self.v.eog_ids
                     and rest.startswith(self.v.token_bytes(t))), key=lambda t: len(self.v.token_bytes(t)))
            toks.append(t)
            rest = rest[len(self.v.token_bytes(t)):]
            s = a.advance(s, t)
        states = validate(a, a.start(), toks + [eog, eog])
        self.assertEqual(len(states), len(toks) + 2)
        self.assertEqual(states[-1], FINISHED)
        bad = next(t for t in range(1000) if t not in a.allowed(states[0]).tolist())
        self.assertEqual(len(validate(a, a.start(), toks[:1] + [bad] + toks[1:])), 1)
        self.assertEqual(validate(a, a.start(), [-5, toks[0]]), [])
        h = History(a)
        self.assertEqual(h.accept_draft(toks + [bad]), len(toks))
        self.assertTrue(a.is_accepting(h.state))
        h.rollback(len(toks) - 1)
        self.assertEqual(h.state, states[0])
        with self.assertRaises(ValueError):
            h.rollback(2)
        self.assertEqual(h.n_accepted, 1)
        with self.assertRaises(TrieError):
            h.accept(bad)
        self.assertEqual(h.n_accepted, 1)

    def test_random_drafts_are_accepted_up_to_the_first_rejected_token(self) -> None:
        names = [f"svc{i % 7}.{verb}_{obj}" for i, (verb, obj) in
                 enumerate((v, o) for v in ("get", "list", "create") for o in ("user", "issue", "page", "file"))]
        a = compile(self.v, names)
        rng = random.Random(3)
        eog = set(self.v.eog_ids)
        for _ in range(60):
            s = a.start()
            while s != FINISHED:
                d = draft(a, s, rng.randint(0, 6))
                self.assertEqual(len(validate(a, s, d.tokens)), len(d.tokens))
                if d.complete:
                    self.assertTrue(set(a.allowed(d.end_state).tolist()) <= eog)
                proposal, cur, expect = [], s, None
                for i in range(5):
                    allowed = a.allowed(cur).tolist()
                    t = rng.choice(allowed) if allowed and rng.random() < 0.8 else rng.randrange(self.v.n_vocab)
                    proposal.append(t)
                    if expect is None:
                        try:
                            cur = a.advance(cur, t)
                        except TrieError:
                            expect = i
                self.assertEqual(len(validate(a, s, proposal)), len(proposal) if expect is None else expect)
                s = a.advance(s, rng.choice(a.allowed(s).tolist()))


if __name__ == "__main__":
    unittest.main()
