"""Tests of the Python package libtrie (python/libtrie) over the real library and real vocabularies.

Standard library unittest; the numpy and torch cases run when those are installed.

    TRIE_ASSETS=<assets> python3 -m unittest discover -s tests/python -v     # the source tree (after cargo build)
    LIBTRIE_TEST_INSTALLED=1 <venv>/bin/python -m unittest discover -s tests/python   # a pip-installed package
"""

import gc
import os
import random
import re
import sys
import tempfile
import threading
import unittest
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALLED = os.environ.get("LIBTRIE_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie import FINISHED, Automaton, Status, TrieError, Vocab  # noqa: E402

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))

TOOLS = ["calendar.create_event", "calendar.create", "calendar.delete_event", "maps.get_route", "maps.get_eta",
         "mail.send", "mail.search", "say \"hi\"", "a"]
CITIES = ["東京", "大阪", "京都", "São Paulo", "München", "Zürich", "Québec", "Kraków", "Ağrı", "año", "niño 🎉"]
WORDS = ["the", "then", "there", "therefore", "these", "thesis", "them", "theme", "\n", " spaced ", "tab\tbed"]


def bits_of(row, n_vocab):
    """The set bits of a row of 32-bit words (signed or unsigned), below n_vocab."""
    return [t for t in range(n_vocab) if (int(row[t // 32]) & 0xFFFFFFFF) >> (t % 32) & 1]


def walk(a, vocab, rng):
    """A random complete decode: (the member's bytes, the states visited before each token)."""
    state, text, states = a.start(), b"", []
    while state != FINISHED:
        states.append(state)
        t = rng.choice(a.allowed(state).tolist())
        if state != FINISHED and t in vocab.eog_ids:
            assert a.is_accepting(state)
        else:
            text += vocab.token_bytes(t)
        state = a.advance(state, t)
    return text, states


class PackageTest(unittest.TestCase):
    def test_imports_the_intended_copy(self) -> None:
        where = Path(libtrie.__file__).resolve()
        self.assertEqual(where.is_relative_to(REPO / "python"), not INSTALLED, where)
        lib = Path(libtrie.library()._name).resolve()
        if INSTALLED and not os.environ.get("TRIE_LIB"):
            self.assertEqual(lib.parent, where.parent, "the installed package must load its own bundled library")

    def test_version_matches_cargo(self) -> None:
        cargo = (REPO / "Cargo.toml").read_text()
        want = next(l.split('"')[1] for l in cargo.splitlines() if l.startswith("version = "))
        self.assertEqual(libtrie.version(), want)

    def test_status_codes_match_the_header(self) -> None:
        header = (REPO / "include" / "trie.h").read_text()
        codes = {m[2] or m[1]: int(m[3]) for m in re.finditer(r"TRIE_(OK|ERR_([A-Z_]+)) = (\d+)", header)}
        self.assertEqual(codes, {s.name: s.value for s in Status})


class RealVocabularyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.qwen = Vocab.from_gguf(ASSETS / "vocab" / "ggml-vocab-qwen2.gguf")
        cls.llama3 = Vocab.from_tokenizer_json(ASSETS / "tokenizers" / "llama3.tokenizer.json")

    def test_with_changes_equals_a_full_compile(self) -> None:
        def saved(a: libtrie.Automaton) -> bytes:
            with tempfile.TemporaryDirectory() as d:
                a.save(os.path.join(d, "a.trie"))
                with open(os.path.join(d, "a.trie"), "rb") as f:
                    return f.read()

        members = sorted(set(TOOLS + CITIES + WORDS))
        old = libtrie.compile(self.qwen, members[:-8])
        add, remove = members[-8:] + ["東京・新宿", ""], members[:12:3]
        new = old.with_changes(add=add, remove=remove)
        want = libtrie.compile(self.qwen, add + [m for m in members[:-8] if m not in remove])
        self.assertEqual(saved(new), saved(want))
        self.assertEqual(old.n_members, len(members) - 8)
        self.assertEqual(new.n_members, len(members) + 2 - len(remove))

    def test_random_walks_end_on_members_and_masks_match_allowed(self) -> None:
        for vocab in (self.qwen, self.llama3):
            for members in (TOOLS, CITIES, WORDS):
                a = libtrie.compile(vocab, members)
                self.assertEqual(a.n_members, len(set(members)))
                rng = random.Random(7)
                row = a.new_bitmask()
                seen = set()
                for i in range(60):
                    text, states = walk(a, vocab, rng)
                    self.assertIn(text.decode("utf-8"), members)
                    seen.add(text)
                    if i % 10 == 0:
                        for s in states[:3]:
                            a.fill_bitmask(s, row)
                            self.assertEqual(bits_of(row, a.n_vocab), a.allowed(s).tolist())

    def test_every_member_is_reachable_along_its_bytes(self) -> None:
        # Walk each member byte by byte with single-byte-or-longer tokens chosen greedily from the allowed list.
        a = libtrie.compile(self.qwen, CITIES)
        for m in CITIES:
            want, state, done = m.encode(), a.start(), b""
            while done != want:
                options = [t for t in a.allowed(state).tolist() if want[len(done):].startswith(self.qwen.token_bytes(t))
                           and self.qwen.token_bytes(t)]
                self.assertTrue(options, f"{m}: stuck after {done!r}")
                t = max(options, key=lambda t: len(self.qwen.token_bytes(t)))
                done += self.qwen.token_bytes(t)
                state = a.advance(state, t)
            self.assertTrue(a.is_accepting(state), m)

    def test_tokenizer_json_with_eog_ids_and_padded_width(self) -> None:
        v = Vocab.from_tokenizer_json(ASSETS / "tokenizers" / "qwen3.tokenizer.json", eog_ids=[151645, 151643],
                                      n_vocab=151936)
        self.assertEqual(v.n_vocab, 151936)
        self.assertEqual(v.eog_ids, (151643, 151645))
        a = libtrie.compile(v, ["yes", "no"])
        self.assertEqual(a.mask_words, 4748)
        s = a.advance(a.start(), next(t for t in a.allowed(0).tolist() if v.token_bytes(t) == b"yes"))
        self.assertEqual(a.allowed(s).tolist(), [151643, 151645])
        with self.assertRaises(TrieError) as ctx:
            Vocab.from_tokenizer_json(ASSETS / "tokenizers" / "qwen3.tokenizer.json", n_vocab=10)
        self.assertEqual(ctx.exception.status, Status.INVALID_ARGUMENT)

    def test_saved_sets_and_vocabularies_load_and_behave_the_same(self) -> None:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            a = libtrie.compile(self.qwen, CITIES + TOOLS)
            a.save(Path(tmp) / "set.trie")
            self.qwen.save(Path(tmp) / "qwen.vocab")
            v = Vocab.load(Path(tmp) / "qwen.vocab")
            self.assertEqual(v.fingerprint, self.qwen.fingerprint)
            self.assertEqual(len(v.fingerprint), 32)
            b = Automaton.load(v, Path(tmp) / "set.trie")
            self.assertEqual((b.n_states, b.n_members), (a.n_states, a.n_members))
            rng = random.Random(3)
            ra, rb = a.new_bitmask(), b.new_bitmask()
            for _ in range(30):
                _, states = walk(a, self.qwen, rng)
                for st in states:
                    self.assertEqual(a.allowed(st).tolist(), b.allowed(st).tolist())
                    a.fill_bitmask(st, ra)
                    b.fill_bitmask(st, rb)
                    self.assertEqual(ra, rb)
            # the lazy load (trie_automaton_load_lazy) behaves the same, state by state
            c = Automaton.load(v, Path(tmp) / "set.trie", lazy=True)
            self.assertEqual((c.n_states, c.n_members), (a.n_states, a.n_members))
            rc = c.new_bitmask()
            for _ in range(30):
                _, states = walk(a, self.qwen, rng)
                for st in states:
                    self.assertEqual(a.allowed(st).tolist(), c.allowed(st).tolist())
                    a.fill_bitmask(st, ra)
                    c.fill_bitmask(st, rc)
                    self.assertEqual(ra, rc)
            for lazy in (False, True):
                with self.assertRaises(TrieError) as ctx:
                    Automaton.load(self.llama3, Path(tmp) / "set.trie", lazy=lazy)
                self.assertEqual(ctx.exception.status, Status.VOCAB_MISMATCH)
                with self.assertRaises(TrieError) as ctx:
                    Automaton.load(self.qwen, Path(tmp) / "missing.trie", lazy=lazy)
                self.assertEqual(ctx.exception.status, Status.IO)
            (Path(tmp) / "bad.trie").write_bytes((Path(tmp) / "set.trie").read_bytes()[:-10])
            with self.assertRaises(TrieError) as ctx:
                Automaton.load(self.qwen, Path(tmp) / "bad.trie")
            self.assertEqual(ctx.exception.status, Status.MALFORMED_FILE)

    def test_allowed_is_a_read_only_view_that_outlives_close(self) -> None:
        a = libtrie.compile(self.qwen, TOOLS)
        view = a.allowed(a.start())
        self.assertTrue(view.readonly)
        self.assertEqual((view.format, view.itemsize), ("i", 4))
        before = view.tolist()
        self.assertEqual(before, sorted(before))
        with self.assertRaises(TypeError):
            view[0] = 1  # type: ignore[index]
        a.close()
        del a
        gc.collect()
        libtrie.compile(self.qwen, CITIES)  # reuse freed memory, if it was freed
        self.assertEqual(view.tolist(), before)
        if np is not None:
            arr = np.frombuffer(view, dtype=np.int32)
            self.assertFalse(arr.flags.writeable)
            self.assertEqual(arr.tolist(), before)

    def test_batches_of_mixed_sets_equal_single_rows(self) -> None:
        sets = [libtrie.compile(self.qwen, m) for m in (TOOLS, CITIES, WORDS)]
        rng = random.Random(3)
        rows = []
        for i in range(150):  # > 64 rows: the parallel path
            a = sets[i % 3] if i % 7 else None
            if a is None:
                rows.append((None, 12345))
                continue
            _, states = walk(a, self.qwen, rng)
            rows.append((a, rng.choice(states + [FINISHED])))
        words = sets[0].mask_words
        singles = []
        for a, s in rows:
            if a is None:
                singles.append([-1] * words)
            else:
                r = array("i", bytes(4 * words))
                a.fill_bitmask(s, r)
                singles.append(r.tolist())
        flat = array("i", bytes(4 * words * len(rows)))
        libtrie.fill_bitmask_rows(rows, flat)
        self.assertEqual([flat[i * words:(i + 1) * words].tolist() for i in range(len(rows))], singles)
        if np is not None:
            wide = np.full((len(rows), words + 3), 7, dtype=np.int32)  # wider rows: the tail is zeroed
            libtrie.fill_bitmask_rows(rows, wide)
            self.assertEqual(wide[:, :words].tolist(), singles)
            self.assertTrue(all((r[words:] == (-1 if a is None else 0)).all() for r, (a, _) in zip(wide, rows)))
            u = np.zeros((len(rows), words), dtype=np.uint32)
            libtrie.fill_bitmask_rows(rows, u)
            self.assertEqual(u.view(np.int32).tolist(), singles)
        if torch is not None:
            t = torch.zeros((len(rows), words), dtype=torch.int32)
            libtrie.fill_bitmask_rows(rows, t)
            self.assertEqual(t.tolist(), singles)
            one = torch.zeros(words, dtype=torch.int32)
            sets[1].fill_bitmask(rows[1][1], one)
            self.assertEqual(one.tolist(), singles[1])
        # One automaton, many states.
        a = sets[1]
        states = [s for b, s in rows if b is a]
        batch = a.new_bitmask(len(states))
        a.fill_bitmask_batch(states, batch)
        self.assertEqual([batch[i * words:(i + 1) * words].tolist() for i in range(len(states))],
                         [singles[i] for i, (b, _) in enumerate(rows) if b is a])

    def test_errors_carry_status_and_an_actionable_message(self) -> None:
        a = libtrie.compile(self.qwen, ["yes", "no"])
        with self.assertRaises(TrieError) as ctx:
            a.advance(a.start(), self.qwen.eog_ids[0])  # no member is empty: EOG not allowed at the start
        self.assertEqual(ctx.exception.status, Status.TOKEN_REJECTED)
        self.assertIn("not allowed", str(ctx.exception))
        with self.assertRaises(TrieError) as ctx:
            a.advance(10**6, 0)
        self.assertEqual(ctx.exception.status, Status.INVALID_STATE)
        with self.assertRaises(TrieError) as ctx:
            a.advance(0, 10**7)
        self.assertEqual(ctx.exception.status, Status.INVALID_ARGUMENT)
        with self.assertRaises(TrieError) as ctx:
            libtrie.compile(self.qwen, [])
        self.assertEqual(ctx.exception.status, Status.EMPTY_SET)
        with self.assertRaises(TrieError) as ctx:
            Vocab.from_gguf(ASSETS / "vocab" / "ggml-vocab-bert-bge.gguf")
        self.assertEqual(ctx.exception.status, Status.UNSUPPORTED_VOCABULARY)
        self.assertIn("WordPiece", ctx.exception.message)
        with self.assertRaises(TrieError) as ctx:
            Vocab.from_gguf(REPO / "does-not-exist.gguf")
        self.assertEqual(ctx.exception.status, Status.IO)
        short = array("i", [5] * (a.mask_words - 1))
        with self.assertRaises(TrieError) as ctx:
            a.fill_bitmask(0, short)
        self.assertEqual(ctx.exception.status, Status.BUFFER_TOO_SMALL)
        self.assertEqual(short.tolist(), [5] * (a.mask_words - 1), "nothing written on failure")
        with self.assertRaises(TypeError):
            a.fill_bitmask(0, array("f", [0.0] * a.mask_words))
        with self.assertRaises(TypeError):
            a.fill_bitmask(0, [0] * a.mask_words)
        with self.assertRaises(ValueError):
            a.fill_bitmask(0, bytes(4 * a.mask_words))
        rows = array("i", bytes(8 * a.mask_words))
        with self.assertRaises(TrieError) as ctx:
            libtrie.fill_bitmask_rows([(a, 0), (a, 999999)], rows)
        self.assertIn("row 1", ctx.exception.message)
        self.assertEqual(set(rows), {0})
        a.close()
        with self.assertRaises(ValueError):
            a.start()


class HeaderConstantsTest(unittest.TestCase):
    """The package's numbers are the C header's: token kinds and statuses (one source: include/trie.h)."""

    @unittest.skipIf(INSTALLED, "the header is in the source tree")
    def test_numbers_match_the_header(self) -> None:
        header = (REPO / "include" / "trie.h").read_text(encoding="utf-8")
        kinds = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define TRIE_TOKEN_(\w+) (\d+)", header)}
        self.assertEqual(kinds, {k.name: int(k) for k in libtrie.TokenKind})
        for name, value in kinds.items():
            self.assertEqual(getattr(libtrie, "TOKEN_" + name), value)
        statuses = {m.group(1): int(m.group(2)) for m in re.finditer(r"TRIE_(?:ERR_)?(\w+) = (\d+)", header)}
        self.assertEqual(statuses, {s.name: int(s) for s in Status})


class ToyVocabularyTest(unittest.TestCase):
    """A vocabulary from token strings: kinds, padding, unreachable strings, forced continuations."""

    def setUp(self) -> None:
        tokens = ["a", "b", "c", "ab", "abc", "é", "<eos>", None]
        kinds = [libtrie.TOKEN_NORMAL] * 6 + [libtrie.TOKEN_CONTROL, libtrie.TOKEN_UNUSED]
        self.v = Vocab.from_tokens(tokens, eog_ids=[6], kinds=kinds, n_vocab=40)

    def test_from_tokens(self) -> None:
        self.assertEqual((self.v.n_vocab, len(self.v), self.v.eog_ids), (40, 40, (6,)))
        self.assertEqual(self.v.token_bytes(5), "é".encode())
        self.assertEqual(self.v.token_bytes(7), b"")
        a = libtrie.compile(self.v, ["abc", "ab", "é"])
        self.assertEqual(a.allowed(0).tolist(), [0, 3, 4, 5])
        row = a.new_bitmask()
        self.assertEqual(len(row), 2)
        a.fill_bitmask(0, row)
        self.assertEqual(bits_of(row, 64), [0, 3, 4, 5])
        s = a.advance(0, 3)
        self.assertTrue(a.is_accepting(s))
        self.assertEqual(a.allowed(s).tolist(), [2, 6])
        self.assertEqual(a.advance(s, 6), FINISHED)
        with self.assertRaises(ValueError):
            Vocab.from_tokens(["a"], kinds=[0, 0])

    def test_control_tokens_from_tokens_never_spell_text(self) -> None:
        # "<x>" is a control token: it must not spell the member "<x>" (and no other token can).
        v = Vocab.from_tokens(["a", "<x>", "</s>"], eog_ids=[2],
                              kinds=[libtrie.TOKEN_NORMAL, libtrie.TOKEN_CONTROL, libtrie.TOKEN_CONTROL])
        a = libtrie.compile(v, ["a", "<x>"], drop_unreachable=True)
        self.assertEqual(a.dropped, (1,))
        self.assertEqual(a.allowed(0).tolist(), [0])
        for kind in (libtrie.TOKEN_UNKNOWN, libtrie.TOKEN_UNUSED):
            v = Vocab.from_tokens(["a", "<x>"], kinds=[libtrie.TOKEN_NORMAL, kind])
            self.assertEqual(libtrie.compile(v, ["a", "<x>"], drop_unreachable=True).dropped, (1,))
        for kind in (libtrie.TOKEN_USER_DEFINED, libtrie.TOKEN_BYTE):
            v = Vocab.from_tokens(["a", "<x>"], kinds=[libtrie.TOKEN_NORMAL, kind])
            self.assertEqual(libtrie.compile(v, ["a", "<x>"]).allowed(0).tolist(), [0, 1])

    def test_compile_tokens_allows_only_the_given_tokenizations(self) -> None:
        # tokens: a b c ab abc é <eos> (padding): "abc" only as [ab, c], "a" as [a].
        a = libtrie.compile_tokens(self.v, [[3, 2], [0]])
        self.assertEqual(a.n_members, 2)
        self.assertEqual(a.allowed(0).tolist(), [0, 3])
        s = a.advance(0, 3)
        self.assertEqual(a.allowed(s).tolist(), [2])
        with self.assertRaises(TrieError) as ctx:
            a.advance(0, 4)  # [abc] was not given
        self.assertEqual(ctx.exception.status, Status.TOKEN_REJECTED)
        with self.assertRaises(TrieError) as ctx:
            libtrie.compile_tokens(self.v, [[0, 6]])  # <eos> is not text
        self.assertEqual(ctx.exception.status, Status.INVALID_ARGUMENT)
        self.assertIn("token 1 of sequence 0", ctx.exception.message)

    def test_compile_bounds(self) -> None:
        strings = ["abc" * 20 + str(i) for i in range(50)]
        v = Vocab.from_tokens([str(d) for d in range(10)] + ["a", "b", "c"])
        with self.assertRaises(TrieError) as ctx:
            libtrie.compile(v, strings, max_states=100)
        self.assertEqual(ctx.exception.status, Status.LIMIT_EXCEEDED)
        self.assertIn("max_states", ctx.exception.message)
        with self.assertRaises(TrieError) as ctx:
            libtrie.compile(v, strings, max_bytes=1000)
        self.assertEqual(ctx.exception.status, Status.LIMIT_EXCEEDED)
        self.assertIn("max_bytes", ctx.exception.message)
        self.assertEqual(libtrie.compile(v, strings, max_states=10_000, max_bytes=10**8).n_members, 50)
        with self.assertRaises(ValueError):
            libtrie.compile(v, strings, max_bytes=0)

    def test_unreachable_strings_and_dropping_them(self) -> None:
        with self.assertRaises(TrieError) as ctx:
            libtrie.compile(self.v, ["ab", "zz"])
        self.assertEqual(ctx.exception.status, Status.UNREACHABLE_STRING)
        self.assertIn("zz", ctx.exception.message)
        a = libtrie.compile(self.v, ["ab", "zz", "q"], drop_unreachable=True)
        self.assertEqual(a.dropped, (1, 2))
        self.assertEqual(a.n_members, 1)

    def test_with_changes_semantics(self) -> None:
        a = libtrie.compile(self.v, ["abc", "ab"])
        b = a.with_changes(add=["ba", b"c"], remove=["ab", "zz"])  # "zz" is not a member: nothing to remove
        self.assertEqual((a.n_members, b.n_members), (2, 3))
        self.assertEqual(a.advance(a.advance(0, 3), 6), FINISHED)  # "ab" still ends in the old automaton
        with self.assertRaises(TrieError):
            b.advance(b.advance(0, 3), 6)
        with self.assertRaises(TrieError) as ctx:
            a.with_changes(remove=["abc", "ab"])
        self.assertEqual(ctx.exception.status, Status.EMPTY_SET)
        with self.assertRaises(TrieError) as ctx:
            a.with_changes(add=["ok", "zz"])
        self.assertEqual(ctx.exception.status, Status.UNREACHABLE_STRING)
        self.assertIn("zz", ctx.exception.message)
        d = a.with_changes(add=["c", "zz"], drop_unreachable=True)
        self.assertEqual((d.dropped, d.n_members), ((1,), 3))
        with self.assertRaises(TrieError) as ctx:
            a.with_changes(add=["abcabcabc"], max_states=5)
        self.assertEqual(ctx.exception.status, Status.LIMIT_EXCEEDED)

    def test_forced(self) -> None:
        a = libtrie.compile(self.v, ["abc", "bca"])
        self.assertIsNone(a.forced(0))
        f = a.forced(a.advance(0, 1))  # "b": only "bca" left
        self.assertEqual(f, libtrie.Forced(b"ca", (2, 0)))
        self.assertIsNone(a.forced(FINISHED))


class ThreadsTest(unittest.TestCase):
    def test_shared_automata_across_threads(self) -> None:
        v = Vocab.from_gguf(ASSETS / "vocab" / "ggml-vocab-qwen2.gguf")
        sets = [libtrie.compile(v, m) for m in (TOOLS, CITIES)]
        rows = [(sets[i % 2], 0) for i in range(100)]
        words = sets[0].mask_words
        want = array("i", bytes(4 * words * len(rows)))
        libtrie.fill_bitmask_rows(rows, want)
        results, errors = [], []

        def work() -> None:
            try:
                for _ in range(20):
                    out = array("i", bytes(4 * words * len(rows)))
                    libtrie.fill_bitmask_rows(rows, out)
                    results.append(out == want)
            except Exception as e:  # pragma: no cover
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(results, [True] * 80)


if __name__ == "__main__":
    unittest.main()
