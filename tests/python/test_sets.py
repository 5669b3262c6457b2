"""The request-set front end from Python (libtrie.sets over trie_set_cache_*), the handle guard of every native
object (B11), and the import of libtrie.vllm's non-vLLM parts: without vLLM or torch.

    python3 -m unittest discover -s tests/python -v     # after cargo build --release
"""

import gc
import os
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie import Status, TrieError, Vocab  # noqa: E402
from libtrie.sets import SetCache, SetError, Settings, parse_spec, read_set_file, spec_json  # noqa: E402

#: Every ASCII byte a token, "ab" and "red", an end-of-generation token: non-ASCII text is unreachable.
TOKENS = [bytes([b]) for b in range(128)] + [b"ab", b"red", b"</s>"]
EOS = len(TOKENS) - 1


def ascii_vocab() -> Vocab:
    kinds = [libtrie.TOKEN_NORMAL] * len(TOKENS)
    kinds[EOS] = libtrie.TOKEN_CONTROL
    return Vocab.from_tokens(TOKENS, eog_ids=[EOS], kinds=kinds)


class SetDir(unittest.TestCase):
    """A set directory: colors.txt, sub/pets.txt, links out and in, a directory, a fifo, a big file."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name) / "sets"
        self.outside = Path(tmp.name) / "secret.txt"
        self.outside.write_text("root:x:0:0\n")
        (self.root / "sub").mkdir(parents=True)
        (self.root / "colors.txt").write_text("red\ngreen\n")
        (self.root / "sub" / "pets.txt").write_text("cat\ndog\n")
        (self.root / "escape.txt").symlink_to(self.outside)  # a link out of the set directory
        (self.root / "alias.txt").symlink_to(self.root / "colors.txt")  # a link that stays inside
        (self.root / "linkdir").symlink_to(self.root / "sub")  # a link as an intermediate component
        (self.root / "dir.txt").mkdir()
        os.mkfifo(self.root / "fifo.txt")
        (self.root / "big.txt").write_bytes(b"x\n" * 600)
        self.settings = Settings.from_env({"LIBTRIE_SET_DIR": str(self.root), "LIBTRIE_MAX_FILE_BYTES": "1000"})

    def refused(self, value, reason, settings=None):
        with self.assertRaisesRegex(ValueError, reason, msg=repr(value)) as ctx:
            parse_spec(value, settings or self.settings)
        self.assertIsInstance(ctx.exception, SetError)
        if str(self.root) not in repr(value):
            self.assertNotIn(str(self.root.resolve()), str(ctx.exception), "the set directory is not disclosed")
        return str(ctx.exception)


class SpecTest(SetDir):
    def test_forms(self):
        for value in ("colors", {"set": "colors"}, {"file": "colors.txt"}, "./colors.txt", "sub/pets.txt",
                      ["a", "b"], {"strings": ["a"], "drop_unreachable": True, "add": ["b"], "remove": []}):
            parse_spec(value, self.settings)
        self.assertEqual(parse_spec(["a", "b"], self.settings).key, spec_json(["a", "b"]))

    def test_paths_are_confined_to_the_set_directory(self):
        self.refused("/etc/passwd", "absolute paths are not allowed")
        self.refused({"file": str(self.root / "colors.txt")}, "absolute paths are not allowed")
        self.refused({"file": "~root/.bashrc"}, "absolute paths are not allowed")
        self.refused("../secret.txt", r"'\.\.' is not allowed")
        self.refused("sub/../colors.txt", r"'\.\.' is not allowed")
        self.refused("../../../../../../etc/passwd", r"'\.\.' is not allowed")
        self.refused("escape", "a symbolic link .*resolves outside the set directory")
        self.refused("alias", "a symbolic link")  # no link is followed, even one that stays inside
        self.refused("linkdir/pets.txt", "a symbolic link")
        self.refused("dir", "not a regular file")
        self.refused("fifo", "not a regular file")
        self.refused("big", "1200 bytes, more than this server reads")
        self.refused("nope", "does not exist in the set directory")
        self.refused({"file": "nul\x00.txt"}, "not a valid path")
        self.assertLess(len(self.refused("x" * 100_000, "cannot be read: File name too long")), 400)
        for name in ("../x", ".hidden", "", "a\\b", 3):
            self.refused({"set": name}, "must be a plain set name")
        nodir = Settings.from_env({})
        for value in ("colors", "/etc/passwd", "sub/pets.txt", {"file": str(self.outside)}):
            self.refused(value, "does not read sets from files", nodir)
        trusted = Settings.from_env({"LIBTRIE_ALLOW_ANY_PATH": "1"})
        parse_spec(str(self.outside), trusted)
        self.refused(str(self.root / "fifo.txt"), "not a regular file", trusted)

    def test_inline_sets_are_bounded(self):
        st = Settings.from_env({"LIBTRIE_MAX_INLINE_STRINGS": "100", "LIBTRIE_MAX_INLINE_BYTES": "64"})
        parse_spec(["x" * 10] * 5, st)
        self.assertIn("LIBTRIE_MAX_INLINE_STRINGS", self.refused(["x"] * 101, "101 strings, more than", st))
        self.refused(["x" * 10] * 6, "larger than this server accepts .64 bytes, LIBTRIE_MAX_INLINE_BYTES", st)
        self.refused(["é" * 40], "LIBTRIE_MAX_INLINE_BYTES", st)
        self.refused({"strings": ["a", "b"], "add": ["c", "d"], "remove": ["a"]}, "5 strings",
                     Settings(max_inline_strings=4))

    def test_bad_values(self):
        for b in (42, {"strings": []}, {"strings": "abc"}, {"strings": [1]}, {"strings": ["a"], "file": "x"}, {},
                  {"strings": ["a"], "drop_unreachable": 1}, {"strings": ["a"], "x": 1}, {"file": ""},
                  {"set": "colors", "add": "blue"}, {"add": ["x"]}, float("nan"), {"strings": [b"bytes"]}):
            with self.assertRaises(ValueError, msg=repr(b)):
                parse_spec(b, self.settings)
        with self.assertRaisesRegex(ValueError, "LIBTRIE_MAX_INLINE_STRINGS='lots' is not an integer"):
            Settings.from_env({"LIBTRIE_MAX_INLINE_STRINGS": "lots"})
        with self.assertRaisesRegex(ValueError, "LIBTRIE_SET_DIR is not a directory"):
            Settings.from_env({"LIBTRIE_SET_DIR": str(self.outside)})

    def test_lone_surrogates_are_refused_at_admission(self):
        # B6: "\ud800" passed admission, then failed at compile and poisoned the cache entry.
        for value in (["ok", "\ud800"], {"strings": ["a"], "add": ["\udcff"]}, {"set": "colors", "remove": ["x\ud800"]}):
            msg = self.refused(value, "valid Unicode")  # the native front end's message
            self.assertIn("lone surrogate", msg)
        cache = SetCache(ascii_vocab(), settings=self.settings)
        with self.assertRaisesRegex(ValueError, "lone surrogate"):
            cache.get(["ok", "\ud800"])
        self.assertEqual(cache.compiles, 0, "refused before anything is compiled")
        self.assertEqual(cache.get(["ok"]).n_members, 1, "the cache goes on")

    def test_read_set_file(self):
        self.assertEqual(read_set_file(str(self.root / "sub" / "pets.txt"), 100), [b"cat", b"dog"])
        with self.assertRaises(OSError):
            read_set_file(str(self.root / "escape.txt"))
        with self.assertRaises(OSError):
            read_set_file(str(self.root / "fifo.txt"))


class SetCacheTest(SetDir):
    def setUp(self) -> None:
        super().setUp()
        self.vocab = ascii_vocab()
        self.cache = SetCache(self.vocab, settings=self.settings)

    def test_sets_are_compiled_once_and_shared(self):
        a = self.cache.get("colors")
        self.assertEqual(a.n_members, 2)
        for same in ({"set": "colors"}, {"file": "colors.txt"}, "./colors.txt", parse_spec("colors", self.settings)):
            self.assertIs(self.cache.get(same), a, same)
        self.assertEqual((self.cache.compiles, self.cache.hits), (1, 4))
        s = a.start()
        for t in b"red":
            s = a.advance(s, t)
        self.assertEqual(a.advance(s, EOS), libtrie.FINISHED)

    def test_lru(self):
        cache = SetCache(self.vocab, capacity=2, settings=self.settings)
        a0 = cache.get(["x0", "y"])
        cache.get(["x1", "y"])
        cache.get(["x2", "y"])  # drops x0 from the LRU
        self.assertIs(cache.get(["x0", "y"]), a0, "still referenced: found, not compiled again")
        self.assertEqual(cache.compiles, 3)
        cache.get(["x1", "y"])  # dropped, referenced by nobody: compiled again
        self.assertEqual(cache.compiles, 4)

    def test_a_changed_file_is_a_new_set(self):
        self.assertEqual(self.cache.get("colors").n_members, 2)
        tmp = self.root / "colors.tmp"
        tmp.write_text("red\ngreen\nblue\n")
        os.replace(tmp, self.root / "colors.txt")
        self.assertEqual(self.cache.get("colors").n_members, 3)
        os.remove(self.root / "colors.txt")
        (self.root / "colors.txt").symlink_to(self.outside)
        with self.assertRaisesRegex(SetError, "a symbolic link"):
            self.cache.get("colors")

    def test_failures_are_kept_with_their_reason(self):
        (self.root / "latin1.txt").write_bytes(b"ok\ncaf\xe9\n")
        (self.root / "empty.txt").write_bytes(b"")
        (self.root / "kanji.txt").write_text("東京\nred\n")
        for _ in range(2):
            with self.assertRaisesRegex(SetError, r"the set 'latin1' is not valid UTF-8 \(line 2\)") as ctx:
                self.cache.get("latin1")
            self.assertEqual(ctx.exception.status, Status.INVALID_ARGUMENT)
            with self.assertRaisesRegex(SetError, "is empty") as ctx:
                self.cache.get("empty")
            self.assertEqual(ctx.exception.status, Status.EMPTY_SET)
            with self.assertRaisesRegex(SetError, "unreachable string.*drop_unreachable") as ctx:
                self.cache.get("kanji")
            self.assertIsInstance(ctx.exception, TrieError)
        self.assertEqual(self.cache.compiles, 3, "a failing set is not compiled again")
        self.assertEqual(self.cache.get({"set": "kanji", "drop_unreachable": True}).n_members, 1)
        (self.root / "empty.txt").write_text("now\nfixed\n")
        self.assertEqual(self.cache.get("empty").n_members, 2)
        small = SetCache(self.vocab, settings=Settings(set_dir=str(self.root), max_states=3))
        with self.assertRaisesRegex(SetError, "limit exceeded.*LIBTRIE_MAX_STATES") as ctx:
            small.get("colors")
        self.assertEqual(ctx.exception.status, Status.LIMIT_EXCEEDED)

    def test_changes(self):
        changed = self.cache.get({"set": "colors", "add": ["blue", "red"], "remove": ["green", "nope"]})
        self.assertEqual(changed.n_members, 2)
        self.assertEqual(self.cache.compiles, 2, "the base, then the changed set from it")
        self.assertEqual(self.cache.get("colors").n_members, 2)
        self.assertEqual(self.cache.compiles, 2)
        with self.assertRaises(SetError) as ctx:
            self.cache.get({"strings": ["yes", "no"], "remove": ["yes", "no"]})
        self.assertEqual(ctx.exception.status, Status.EMPTY_SET)

    def test_concurrent_requests_compile_once(self):
        (self.root / "tools.txt").write_text("".join(f"tool_{i:06d}_{i * 7919 % 10007}\n" for i in range(30_000)))
        settings = Settings(set_dir=str(self.root))
        cache = SetCache(self.vocab, settings=settings)
        results = []
        threads = [threading.Thread(target=lambda: results.append(cache.get("tools"))) for _ in range(4)]
        futures = [cache.submit("tools") for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(cache.compiles, 1)
        self.assertTrue(all(r is results[0] for r in results))
        self.assertTrue(all(f.result(timeout=60) is results[0] for f in futures))
        self.assertEqual(results[0].n_members, 30_000)
        bad = cache.submit({"set": "nope"})
        with self.assertRaisesRegex(SetError, "does not exist"):
            bad.result(timeout=0)  # refused at once, on the calling thread
        self.assertIs(cache.submit("tools").result(timeout=0), results[0], "ready: done at once")
        self.assertIs(cache.lookup("tools"), results[0])
        self.assertIsNone(cache.lookup(["not", "compiled"]))
        self.assertEqual(cache.compiles, 1, "a lookup compiles nothing")


class SetCacheCollectTest(unittest.TestCase):
    def test_a_set_collected_on_one_thread_is_never_handed_out_closed_on_another(self):
        # vLLM's engine loop drops the last reference to a finished request's set while its grammar threads get the
        # same set for new requests. The wrapper's __del__ runs while the weak dictionary still holds it and its
        # close() releases the GIL: a get() then returned the closed wrapper ("this Automaton was closed"; found by
        # the vLLM routing benchmark, thousands of times in this loop before the fix).
        cache = SetCache(ascii_vocab(), settings=Settings())
        spec = {"strings": ["red", "ab"]}
        errors, stop = [], threading.Event()

        def engine_loop():
            while not stop.is_set():
                a = cache.get(spec)
                del a  # the last reference: collected here, on this thread

        def grammar_thread():
            for _ in range(5000):
                try:
                    cache.get(spec).start()
                except ValueError as e:
                    errors.append(str(e))

        loop = threading.Thread(target=engine_loop)
        loop.start()
        getters = [threading.Thread(target=grammar_thread) for _ in range(2)]
        for t in getters:
            t.start()
        for t in getters:
            t.join()
        stop.set()
        loop.join()
        self.assertEqual(errors[:1], [])

    def test_a_set_being_collected_is_not_handed_out(self):
        # Issue 28: the race above, made certain. The last reference to a cached set dies on one thread while its
        # release is held up (here: its lock is taken, as a call on another thread would); a get() on another
        # thread meanwhile must not receive that object (before the fix: its __del__ ran while the weak dictionary
        # still returned it, so get() handed out a wrapper that was closed a moment later; 6 in 846,000 gets).
        cache = SetCache(ascii_vocab(), settings=Settings())
        spec = {"strings": ["red", "ab"]}
        for _ in range(3):
            a = cache.get(spec)
            guard = a._guard
            guard.acquire()
            box = [a]
            del a
            dropper = threading.Thread(target=box.clear)  # the last reference, dropped on another thread
            dropper.start()
            dropper.join(0.2)
            try:
                b = cache.get(spec)
            finally:
                guard.release()
            dropper.join()
            self.assertEqual(b.start(), 0, "a usable set")
            self.assertEqual(b.n_members, 2)
            del b

    def test_collected_handles_are_released(self):
        vocab = ascii_vocab()
        a = libtrie.Automaton(vocab, ["red"])
        owner = a._owner
        del a
        gc.collect()
        self.assertFalse(owner.h.value, "released when its object was collected")


class HandleGuardTest(unittest.TestCase):
    """B11: close() while another thread is inside a native call on the object (ctypes releases the GIL)."""

    def test_close_waits_for_calls_in_flight(self):
        vocab = ascii_vocab()
        members = [f"member_{i:06d}_{i * 7919 % 10007}" for i in range(150_000)]
        out = {}

        def compile_it():
            try:
                out["a"] = libtrie.Automaton(vocab, members)
            except BaseException as e:  # pragma: no cover - the failure reported below
                out["error"] = e

        t = threading.Thread(target=compile_it)
        t.start()
        deadline = time.monotonic() + 30
        while vocab._users == 0 and t.is_alive() and time.monotonic() < deadline:
            time.sleep(0.0005)
        self.assertEqual(vocab._users, 1, "the compile is inside its native call")
        vocab.close()  # another thread, during the call
        self.assertTrue(vocab._h.value, "not freed under the call in flight")
        with self.assertRaisesRegex(ValueError, "closed"):
            vocab.n_vocab  # noqa: B018 - closed for new calls at once
        t.join()
        self.assertNotIn("error", out)
        self.assertFalse(vocab._h.value, "freed by the last call when it returned")
        a = out["a"]
        self.assertEqual(a.n_members, 150_000)  # the automaton keeps its own reference to the vocabulary
        s = a.advance_many(a.start(), b"member_000001_7919")
        self.assertTrue(a.is_accepting(s))
        vocab.close()  # twice: nothing

    def test_close_is_immediate_when_idle_and_calls_after_it_fail(self):
        vocab = ascii_vocab()
        a = libtrie.Automaton(vocab, ["red"])
        a.close()
        self.assertFalse(a._h.value)
        for call in (lambda: a.start(), lambda: a.allowed(0), lambda: a.n_members,
                     lambda: libtrie.fill_bitmask_rows([(a, 0)], a.new_bitmask())):
            with self.assertRaisesRegex(ValueError, "closed"):
                call()
        vocab.close()

    def test_a_set_cache_closed_during_a_compile(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "tools.txt").write_text("".join(f"t{i:07d}\n" for i in range(150_000)))
            cache = SetCache(ascii_vocab(), settings=Settings(set_dir=d))
            native = cache._cache()
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("a", cache.get("tools")))
            t.start()
            deadline = time.monotonic() + 30
            while native._users == 0 and t.is_alive() and time.monotonic() < deadline:
                time.sleep(0.0005)
            self.assertEqual(native._users, 1)
            cache.close()
            self.assertTrue(native._h.value, "deferred")
            t.join()
            self.assertFalse(native._h.value)
            self.assertEqual(out["a"].n_members, 150_000)


class ImportTest(unittest.TestCase):
    def test_the_package_imports_without_vllm_or_torch(self):
        # A fresh interpreter in which importing vllm, torch, numpy or xgrammar fails.
        code = (
            "import sys\n"
            "for m in ('vllm', 'torch', 'numpy', 'xgrammar'): sys.modules[m] = None\n"
            "import libtrie, libtrie.sets, libtrie.masks, libtrie.vllm as lv\n"
            "assert lv.SetCache is libtrie.sets.SetCache and lv.FINISHED == libtrie.FINISHED\n"
            "assert lv.parse_spec(['a']).json == b'[\"a\"]'\n"
            "from libtrie.vllm._common import Row, shared_cache, uses_trie_scheduler\n"
            "try:\n"
            "    lv.TrieLogitsProcessor\n"
            "except ImportError:\n"
            "    print('lazy')\n"
        )
        import subprocess

        env = dict(os.environ)
        if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":  # else the installed package
            env["PYTHONPATH"] = str(REPO / "python")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "lazy", "the vLLM classes are imported on first use, and need vLLM")


if __name__ == "__main__":
    unittest.main()
