"""Tests of the ctypes module python/libtrie over the real libtrie.so (standard library unittest only).

Run: TRIE_ASSETS=<assets> python3 -m unittest discover -s tests/python -v   (after `cargo build --release`)
"""

import os
import random
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie import FINISHED, Automaton, TrieError, Vocab  # noqa: E402

ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))


class LibtrieTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.vocab = Vocab.from_gguf(ASSETS / "vocab" / "ggml-vocab-qwen2.gguf")

    def test_random_walks_end_on_members(self) -> None:
        members = ["東京", "大阪", "año", "niño", "calendar.create_event", "calendar.create", "say \"hi\""]
        a = Automaton(self.vocab, members)
        rng = random.Random(7)
        eog = set(self.vocab.eog_ids())
        row = a.new_mask()
        for _ in range(200):
            state, text = a.start(), b""
            while True:
                allowed = a.allowed(state)
                a.fill_mask(state, row)
                from_mask = [t for t in range(len(self.vocab)) if row[t // 32] >> (t % 32) & 1] if rng.random() < 0.02 else allowed
                self.assertEqual(from_mask, allowed)
                t = rng.choice(allowed)
                state = a.advance(state, t)
                if state == FINISHED:
                    self.assertIn(t, eog)
                    break
                text += self.vocab.token_bytes(t)
            self.assertIn(text.decode("utf-8"), members)

    def test_errors_carry_status_and_message(self) -> None:
        a = Automaton(self.vocab, ["yes", "no"])
        with self.assertRaises(TrieError) as ctx:
            a.advance(a.start(), self.vocab.eog_ids()[0])  # no member is empty: EOG not allowed at the start
        self.assertEqual(ctx.exception.status, 7)  # TRIE_ERR_TOKEN_REJECTED
        self.assertIn("not allowed", str(ctx.exception))
        with self.assertRaises(TrieError) as ctx:
            Automaton(self.vocab, [])
        self.assertEqual(ctx.exception.status, 10)  # TRIE_ERR_EMPTY_SET
        with self.assertRaises(TrieError) as ctx:
            Vocab.from_gguf(ASSETS / "vocab" / "ggml-vocab-bert-bge.gguf")
        self.assertEqual(ctx.exception.status, 4)  # TRIE_ERR_UNSUPPORTED_VOCABULARY

    def test_version_matches_cargo(self) -> None:
        cargo = (REPO / "Cargo.toml").read_text()
        want = next(l.split('"')[1] for l in cargo.splitlines() if l.startswith("version = "))
        self.assertEqual(libtrie.version(), want)


if __name__ == "__main__":
    unittest.main()
