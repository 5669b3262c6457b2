"""TrieScheduler's speculative path against vLLM's real classes: forced runs proposed as speculative tokens, drafter
tokens cut to what the set accepts, mask rows per draft position (vLLM's own ``apply_grammar_bitmask`` and
``GrammarOutput``), and a simulated decode loop that verifies drafts the way vLLM's greedy rejection sampler does
(accept while the target's masked argmax equals the draft, then take the target's token): every output is a member,
no request desyncs, forced runs are always accepted.

Needs vLLM (``scripts/setup-vllm.sh`` makes a venv; run this file with its python). Without vLLM every test is
skipped with a message on stderr (not a silent pass). The engine's rejection sampler itself is not run here: its
Triton kernels do not run outside the CPU model runner; an engine run is the opt-in test under ``tests/vllm/``.

    .cache/vllm-venv/bin/python -m unittest tests/python/test_draft_vllm.py -v

``EngineSpecTest`` (opt-in: set ``LIBTRIE_TEST_MODEL`` to a Hugging Face model folder, e.g. the SmolLM2-135M folder
``scripts/test-vllm.sh`` converts) runs vLLM's engine with ngram speculative decoding, routing and ``TrieScheduler``
on ``LIBTRIE_TEST_SPEC_REQUESTS`` requests (default 1,000; the issue's exactness run): routed sets, templates and tool
calls and TrieScheduler's own sets; every output must be valid and forced runs must have been proposed. On a shared
2-core machine it decodes a few tokens/s: 40 requests take minutes, 1,000 take hours
(docs/bench/speculative-vllm.md).
"""

import os
import random
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

try:
    import numpy as np
    import torch
    from vllm.v1.core.sched.output import GrammarOutput
    from vllm.v1.structured_output.utils import apply_grammar_bitmask
except ImportError as e:  # pragma: no cover - depends on the environment
    MISSING = f"vLLM is not installed here ({e}); run with the python of scripts/setup-vllm.sh's venv"
    print(f"test_draft_vllm: SKIPPED: {MISSING}", file=sys.stderr)
else:
    MISSING = ""

from libtrie import FINISHED, Automaton, Vocab, compile  # noqa: E402

ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))
PREFIX, SUFFIX = '<tool_call>\n{"name": ', ', "arguments": '


def _tools(n: int) -> list:
    return [f"{svc}.{verb}_{obj}" for svc in ("github", "slack", "stripe", "weather", "maps")
            for verb in ("get", "list", "create", "delete") for obj in ("issue", "message", "payment", "forecast")][:n]


@unittest.skipIf(MISSING, MISSING)
class TrieSchedulerSpecTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        from libtrie.vllm.scheduler import TrieScheduler  # imports vLLM

        path = ASSETS / "vocab" / "ggml-vocab-qwen2.gguf"
        if not path.exists():
            raise AssertionError(f"{path} is missing: run scripts/fetch-assets.sh or set TRIE_ASSETS")
        cls.v = Vocab.from_gguf(path)
        cls.Sched = TrieScheduler

    def scheduler(self, k: int):
        """A TrieScheduler with vLLM's real methods, its engine state replaced by the fields these paths read."""
        from libtrie import bitmask_words

        s = self.Sched.__new__(self.Sched)
        s._trie, s._forced, s.requests = {}, {}, {}
        s.num_spec_tokens = k
        s.trie_words = bitmask_words(self.v.n_vocab)
        s.trie_forced_proposed = 0
        return s

    def add(self, s, req_id: str, a: Automaton, stops=()):
        from libtrie.vllm._common import Row
        from libtrie.vllm.scheduler import _Pending

        req = SimpleNamespace(request_id=req_id, output_token_ids=[], spec_token_ids=[], is_prefill_chunk=False,
                              sampling_params=SimpleNamespace(temperature=0.0),
                              is_finished=lambda: False)
        p = _Pending(None)
        p.row = Row(a, req.output_token_ids, set(stops))
        s._trie[req_id] = p
        s.requests[req_id] = req
        return req

    def step(self, s, rng, drafter):
        """One engine step: drafts (the drafter's, then TrieScheduler's proposal), vLLM's bitmask application to
        random target logits, greedy verification; returns the forward passes (1) and tokens appended per request."""
        for req_id, req in s.requests.items():
            req.spec_token_ids = drafter(req) if req.output_token_ids else []
        s._forced.clear()
        s._propose_forced(s.num_spec_tokens)
        spec = {i: list(r.spec_token_ids) for i, r in s.requests.items() if r.spec_token_ids}
        out = SimpleNamespace(num_scheduled_tokens={i: 1 + len(spec.get(i, ())) for i in s.requests},
                              scheduled_spec_decode_tokens=spec, has_structured_output_requests=False)
        g = s.get_grammar_bitmask(out)
        self.assertIsInstance(g, GrammarOutput)
        ids = list(s.requests)
        n_rows = sum(1 + len(spec.get(i, ())) for i in ids)
        self.assertEqual(g.grammar_bitmask.shape, (n_rows, s.trie_words))
        logits = torch.randn(n_rows, self.v.n_vocab, generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
        apply_grammar_bitmask(out, g, SimpleNamespace(req_ids=ids), logits)
        at = 0
        for i, req_id in enumerate(ids):
            req, drafts = s.requests[req_id], spec.get(req_id, [])
            rows = logits[at:at + 1 + len(drafts)]
            at += 1 + len(drafts)
            accepted = []
            for j in range(1 + len(drafts)):
                t = int(torch.argmax(rows[j]))
                self.assertGreater(float(rows[j, t]), float("-inf"), "a row allowed no token")
                if j < len(drafts) and t == drafts[j]:
                    accepted.append(t)
                    continue
                accepted.append(t)  # the target's token in place of the rejected draft (or the bonus token)
                break
            if req_id in s._forced:
                self.assertEqual(accepted[:len(drafts)], drafts, "a forced run must always be accepted")
            self.assertLessEqual(g.num_acceptable_drafts[i], len(drafts))
            req.output_token_ids.extend(accepted)

    def run_requests(self, a: Automaton, n_req: int, k: int, drafter, seed: int):
        s = self.scheduler(k)
        eog = set(self.v.eog_ids)
        reqs = {f"r{i}": self.add(s, f"r{i}", a) for i in range(n_req)}
        rng = random.Random(seed)
        steps = {i: 0 for i in reqs}
        for _ in range(200):
            live = {i: r for i, r in reqs.items() if not (r.output_token_ids and r.output_token_ids[-1] in eog)}
            if not live:
                break
            s.requests = live
            self.step(s, rng, drafter)
            for i in live:
                steps[i] += 1
        outs = {}
        for i, r in reqs.items():
            self.assertIn(r.output_token_ids[-1], eog, f"{i} did not finish")
            body = r.output_token_ids[:-1]
            row = s._trie[i].row
            row.catch_up(i)
            self.assertFalse(row.broken, f"{i} desynced")
            self.assertEqual(row.state, FINISHED)
            outs[i] = b"".join(self.v.token_bytes(t) for t in body)
        return outs, steps

    def test_forced_runs_cost_one_step_and_outputs_are_members(self) -> None:
        names = _tools(60)
        a = Automaton.compile_template(self.v, names, prefix=PREFIX, suffix=SUFFIX, render="json_string")
        members = {f'{PREFIX}"{n}"{SUFFIX}'.encode() for n in names}
        no_drafts = lambda req: []  # noqa: E731
        outs, steps = self.run_requests(a, 8, 16, no_drafts, 1)
        for o in outs.values():
            self.assertIn(o, members)
        outs0, steps0 = self.run_requests(a, 8, 0, no_drafts, 1)  # no speculative configuration: one token a step
        for o in outs0.values():
            self.assertIn(o, members)
        self.assertLess(sum(steps.values()) * 1.5, sum(steps0.values()),
                        f"forced runs as drafts: {sum(steps.values())} steps, without: {sum(steps0.values())}")

    def text(self, tokens) -> bytes:
        return b"".join(self.v.token_bytes(t) for t in tokens)

    def test_drafter_tokens_are_cut_and_verified_against_the_set(self) -> None:
        names = _tools(80)
        a = compile(self.v, names)
        members = {n.encode() for n in names}
        rng = random.Random(7)

        def drafter(req):  # an n-gram-like drafter that is often wrong: random ids, sometimes allowed ones
            return [rng.randrange(self.v.n_vocab) for _ in range(rng.randint(0, 5))]

        for seed in range(4):
            outs, _ = self.run_requests(a, 6, 4, drafter, seed)
            for o in outs.values():
                self.assertIn(o, members)

    def test_propose_and_rows(self) -> None:
        from libtrie.vllm._common import Row
        from libtrie.vllm.scheduler import propose, spec_rows

        a = compile(self.v, ["weather.get_forecast", "weather.get_alerts", "mail.send"])
        out: list = []
        row = Row(a, out, set())
        w = next(t for t in a.allowed(a.start()).tolist() if self.v.token_bytes(t) == b"weather")
        out.append(w)
        row.catch_up("r")
        p = propose(row, [1, 2, 3], 8)
        self.assertTrue(p.forced)
        self.assertEqual(b"".join(self.v.token_bytes(t) for t in p.tokens), b".get_")
        sr = spec_rows(row, p.tokens, True, a.mask_words)
        self.assertEqual(sr.n_acceptable, len(p.tokens))
        for i, t in enumerate(p.tokens):  # each forced row allows exactly its draft
            bits = np.unpackbits(sr.rows[i].view(np.uint8), bitorder="little")
            self.assertEqual(np.flatnonzero(bits).tolist(), [t])
        # The drafter's tokens where nothing is forced: cut to the accepted prefix; rows follow the states.
        out.extend(p.tokens)
        row.catch_up("r")
        f = next(t for t in a.allowed(row.state).tolist() if self.v.token_bytes(t).startswith(b"fore"))
        bad = next(t for t in range(5000) if t not in a.allowed(row.state).tolist())
        p = propose(row, [f, bad, f], 8)
        self.assertFalse(p.forced)
        self.assertEqual(p.tokens, [f])
        sr = spec_rows(row, [f, bad], False, a.mask_words)
        self.assertEqual(sr.n_acceptable, 1)
        self.assertEqual(sr.rows.shape[0], 3)
        # No speculative configuration or a finished request: nothing proposed.
        self.assertEqual(propose(row, [f], 0).tokens, [])


@unittest.skipIf(MISSING or not os.environ.get("LIBTRIE_TEST_MODEL"),
                 MISSING or "opt-in: set LIBTRIE_TEST_MODEL to a Hugging Face model folder to run vLLM's engine")
class EngineSpecTest(unittest.TestCase):
    def test_ngram_speculative_decoding_with_routed_sets_templates_and_tool_calls_stays_exact(self) -> None:
        """vLLM's engine with ngram speculative decoding, LIBTRIE_VLLM_ROUTE=1 and TrieScheduler on
        LIBTRIE_TEST_SPEC_REQUESTS requests (default 1,000), four kinds in turn (bench/vllm_spec_bench.py): a
        ``choice`` of 1,000 tool names, a string ``enum`` of 1,000 cities (a JSON template), vLLM's schema of
        ``tool_choice="required"`` for 20 tools with argument schemas, and 1,000 JSON tool calls as
        ``extra_args`` (forced runs proposed as speculative tokens). Greedy: see docs/bench/speculative-vllm.md for
        sampled requests on vLLM's CPU build."""
        sys.path.insert(0, str(REPO / "bench"))
        import vllm_spec_bench as bench

        from libtrie.vllm import route

        n = int(os.environ.get("LIBTRIE_TEST_SPEC_REQUESTS", "1000"))
        saved = os.environ.get("LIBTRIE_VLLM_ROUTE")
        llm, sched, schema = bench.engine("libtrie", os.environ["LIBTRIE_TEST_MODEL"], k=4, max_num_seqs=16,
                                          log_stats=False)
        try:
            cat = bench.catalog()
            sets = {"tools": set(cat["tools"]), "calls": set(cat["calls"]), "cities": set(cat["cities"])}
            reqs = bench.requests(n, cat)
            params = [bench.params_for(kind, cat, "libtrie", schema, 96, 0.0, i) for i, (kind, _) in enumerate(reqs)]
            outs = llm.generate([p for _, p in reqs], params, use_tqdm=False)
            bad = [(kind, o.outputs[0].text, why) for (kind, _), o in zip(reqs, outs)
                   for why in (bench.check(kind, o.outputs[0].text, cat, schema, sets),) if why]
            self.assertEqual(bad, [], f"{len(bad)} of {n} outputs are not valid")
            self.assertEqual(len(outs), n)
            self.assertEqual(sched.trie_routed, sum(kind != "strings" for kind, _ in reqs),
                             "every set, template and tool call was served by libtrie")
            self.assertGreater(sched.trie_forced_proposed, 0, "no forced run was proposed as speculative tokens")
        finally:
            llm.llm_engine.engine_core.shutdown()
            if saved is None:
                os.environ.pop("LIBTRIE_VLLM_ROUTE", None)
            else:
                os.environ["LIBTRIE_VLLM_ROUTE"] = saved
            route.log.info("libtrie: EngineSpecTest done")


if __name__ == "__main__":
    unittest.main()
