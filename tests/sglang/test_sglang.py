"""The SGLang grammar backend against the real SGLang 0.5.23 package (opt-in: scripts/test-sglang.sh).

An SGLang server does not run on this CPU machine (its model runner needs the CUDA kernels of sglang-kernel and
flashinfer), so the test drives SGLang's own grammar machinery in-process, the way its scheduler does: the plugin
loader (``sglang.srt.plugins.load_plugins``, which finds the installed package's entry point), the argument parser,
``create_grammar_backend`` under a published config, the backend's cache and compile executor
(``get_cached_or_future_value`` / ``set_cache``), SGLang's ``GrammarManager`` itself (queue, polling, cache hits,
the HTTP 400 abort of a bad request; on a stand-in scheduler and request), the draft-tree walk of speculative
decoding (``spec_utils.traverse_tree``: accept, fill, roll back), the batch mask of
``SamplingBatchInfo.update_regex_vocab_mask`` and ``GrammarMask.apply``, and XGrammar for delegated requests.
Decode loop: mask -> pick an allowed token (argmax of random logits) -> accept, until the grammar terminates; every
output must be a member. Tokenizers: SmolLM2-135M-Instruct (transformers reading the GGUF, as SGLang does for GGUF
models) and Qwen3's tokenizer.json with Qwen's padded model vocabulary (151,936 ids, 151,669 real).

    LIBTRIE_TEST_GGUF=... TRIE_ASSETS=... python -m unittest discover -s tests/sglang -p 'test_sglang.py' -v
"""

from __future__ import annotations

import json
import os
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))


def _need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run scripts/test-sglang.sh (it sets up the SGLang environment)")
    return value


try:
    import torch
    from sglang.srt.constrained.base_grammar_backend import (
        GRAMMAR_BACKEND_REGISTRY,
        GrammarMask,
        InvalidGrammarObject,
        create_grammar_backend,
    )
    from sglang.srt.constrained.grammar_manager import GrammarManager
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammar, XGrammarGrammarBackend
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, Req
    from sglang.srt.plugins import load_plugins
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, prepare_server_args
    from sglang.srt.speculative.spec_utils import traverse_tree
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
except ImportError as e:  # an opt-in suite fails loudly, never skips
    raise RuntimeError(f"the SGLang test needs the environment of scripts/setup-sglang.sh: {e}") from e

import libtrie  # noqa: E402
from libtrie.sglang import LibtrieGrammar, LibtrieGrammarBackend  # noqa: E402
from libtrie.sglang.backend import create_backend  # noqa: E402

TOOLS = [f"{ns}.{verb}_{obj}" for ns in ("calendar", "maps", "mail", "files", "notes")
         for verb in ("get", "list", "create", "delete") for obj in ("event", "route", "item", "draft", "folder")]
TOOLS += ["météo.prévision", "天气.查询", "emoji 😀 tool", 'quote " and \\ backslash']


class Model:
    """A tokenizer as SGLang's scheduler holds it, with the model's vocabulary size and EOS ids."""

    def __init__(self, name: str, tokenizer: Any, vocab_size: int, eos: set) -> None:
        self.name, self.tokenizer, self.vocab_size, self.eos = name, tokenizer, vocab_size, eos


_MODELS: List[Model] = []
_CONFIG: Any = None
_SERVER_ARGS: Any = None


def setUpModule() -> None:
    global _CONFIG, _SERVER_ARGS
    gguf = Path(_need("LIBTRIE_TEST_GGUF"))
    assets = Path(_need("TRIE_ASSETS"))
    smol = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    qwen = PreTrainedTokenizerFast(tokenizer_file=str(assets / "tokenizers" / "qwen3.tokenizer.json"))
    _MODELS[:] = [Model("smollm2", smol, 49152, {int(smol.eos_token_id)}),
                  Model("qwen3", qwen, 151936, {qwen.convert_tokens_to_ids("<|im_end|>")})]
    load_plugins()  # SGLang's own loader: finds the installed package's sglang.srt.plugins entry point
    _CONFIG = get_context().override_server_args(grammar_backend="libtrie")
    _SERVER_ARGS = _CONFIG.install()  # a published config, as in a scheduler process


def tearDownModule() -> None:
    if _CONFIG is not None:
        _CONFIG.restore()


def backend_for(model: Model) -> Any:
    """What SGLang's scheduler builds for ``--grammar-backend libtrie``."""
    return create_grammar_backend(_SERVER_ARGS, model.tokenizer, model.vocab_size, model.eos)


def grammar_for(backend: Any, key: Tuple[str, str]) -> Tuple[Any, bool]:
    """A request's grammar, the way GrammarManager gets it: the cache, else the executor's future; a compiled
    grammar's copy goes into the cache."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if hit:
        return value, True
    grammar = value.result(timeout=300)
    backend.set_cache(key, grammar.copy())
    return grammar, False


def decode(model: Model, grammars: Sequence[Optional[Any]], seed: int, max_steps: int = 80) -> List[List[int]]:
    """One batch decoded to the end: SGLang's batch mask (the first grammar allocates, moves and applies it), the
    argmax of random logits per row, ``accept_token``; rows without a grammar are not decoded."""
    gen = torch.Generator().manual_seed(seed)
    outputs: List[List[int]] = [[] for _ in grammars]
    for _ in range(max_steps):
        live = [g is not None and not g.is_terminated() for g in grammars]
        if not any(live):
            return outputs
        info = SimpleNamespace(grammars=list(grammars), vocab_size=model.vocab_size,
                               temperatures=torch.ones(len(grammars), 1), device="cpu")
        SamplingBatchInfo.update_regex_vocab_mask(info)  # SGLang's code, on a stand-in batch
        mask: GrammarMask = info.grammar_mask
        logits = torch.randn(len(grammars), model.vocab_size, generator=gen)
        mask.apply(logits)
        for row, g in enumerate(grammars):
            if not live[row]:
                continue
            token = int(torch.argmax(logits[row]))
            assert logits[row, token] > float("-inf"), f"row {row}: no token allowed"
            g.accept_token(token)
            g.finished = g.is_terminated()
            if not g.is_terminated():
                outputs[row].append(token)
    raise AssertionError(f"not terminated after {max_steps} steps: {grammars}")


class PluginTest(unittest.TestCase):
    def test_the_entry_point_registers_the_backend(self) -> None:
        self.assertIn("libtrie", GRAMMAR_BACKEND_CHOICES)
        self.assertIs(GRAMMAR_BACKEND_REGISTRY["libtrie"], create_backend)
        args = prepare_server_args(["--model-path", "dummy", "--grammar-backend", "libtrie"])
        self.assertEqual(args.grammar_backend, "libtrie")

    def test_create_grammar_backend_builds_libtrie_over_xgrammar(self) -> None:
        backend = backend_for(_MODELS[0])
        self.assertIsInstance(backend, LibtrieGrammarBackend)
        self.assertIsInstance(backend.default, XGrammarGrammarBackend)
        self.assertEqual(backend.vocab.n_vocab, 49152)
        self.assertEqual(backend.vocab.eog_ids, (2,))
        self.assertTrue(backend.is_support_token_filter)  # XGrammar's, forwarded


class DecodeTest(unittest.TestCase):
    backends: List[Any] = []

    @classmethod
    def setUpClass(cls) -> None:
        cls.backends = [backend_for(m) for m in _MODELS]

    def each(self) -> List[Tuple[Model, Any]]:
        return list(zip(_MODELS, self.backends))

    def text(self, model: Model, ids: List[int]) -> str:
        return str(model.tokenizer.decode(ids, skip_special_tokens=False))

    def test_enum_schema_outputs_are_members(self) -> None:
        key = ("json", json.dumps({"type": "string", "enum": TOOLS}, ensure_ascii=False))
        for model, backend in self.each():
            with self.subTest(model.name):
                grammars = [grammar_for(backend, key)[0] for _ in range(6)]
                self.assertIsInstance(grammars[0], LibtrieGrammar)
                seen = set()
                for seed in range(3):
                    fresh = [g.copy() for g in grammars]
                    for ids in decode(model, fresh, seed):
                        value = json.loads(self.text(model, ids))
                        self.assertIn(value, TOOLS)
                        seen.add(value)
                self.assertGreater(len(seen), 3, "random logits reach several members")

    def test_regex_and_ebnf_alternations(self) -> None:
        cases = [("regex", "yes|no|maybe", {"yes", "no", "maybe"}),
                 ("regex", r"^(?:a\.b|c\+d)$", {"a.b", "c+d"}),
                 ("ebnf", 'root ::= "alpha" | "beta" | "γάμμα"', {"alpha", "beta", "γάμμα"}),
                 ("json", '{"anyOf": [{"const": 42}, {"enum": [null, "x", true]}]}', {"42", "null", '"x"', "true"})]
        for model, backend in self.each():
            for kind, text, members in cases:
                with self.subTest(model=model.name, key=text):
                    g, _ = grammar_for(backend, (kind, text))
                    self.assertIsInstance(g, LibtrieGrammar)
                    for seed in range(3):
                        out = decode(model, [g.copy()], seed)[0]
                        self.assertIn(self.text(model, out), members)

    def test_padding_ids_are_never_allowed(self) -> None:
        model, backend = self.each()[1]
        g, _ = grammar_for(backend, ("regex", "yes|no"))
        mask = g.allocate_vocab_mask(model.vocab_size, 1, "cpu")
        self.assertEqual(tuple(mask.shape), (1, (151936 + 31) // 32))
        real = len(model.tokenizer)  # 151,669: the rest are the model's padding
        for token in model.tokenizer.encode("yes") + [next(iter(model.eos))]:
            g.fill_vocab_mask(mask, 0)
            bits = (mask[0].unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
            allowed = bits.reshape(-1).nonzero().flatten().tolist()
            self.assertTrue(allowed and max(allowed) < real, allowed[-5:])
            self.assertIn(token, allowed)
            g.accept_token(token)
        self.assertTrue(g.is_terminated())

    def test_a_batch_mixes_libtrie_and_xgrammar_rows(self) -> None:
        model, backend = self.each()[0]
        boolean, _ = grammar_for(backend, ("json", '{"type": "boolean"}'))
        self.assertIsInstance(boolean, XGrammarGrammar)
        tools, _ = grammar_for(backend, ("json", json.dumps({"enum": TOOLS})))
        regex, _ = grammar_for(backend, ("regex", "left|right"))
        for order in ([boolean, tools, None, regex], [tools, None, boolean, regex]):  # each kind leads once
            with self.subTest(first=type(order[0]).__name__):
                batch = [g.copy() if g is not None else None for g in order]
                outs = decode(model, batch, seed=7)
                for g, ids in zip(batch, outs):
                    if g is None:
                        continue
                    text = self.text(model, ids)
                    if isinstance(g, XGrammarGrammar):
                        self.assertIn(json.loads(text), (True, False))
                    elif g.key_type == "json":
                        self.assertIn(json.loads(text), TOOLS)
                    else:
                        self.assertIn(text, ("left", "right"))

    def test_other_requests_go_to_xgrammar(self) -> None:
        model, backend = self.each()[0]
        for key in [("json", '{"type": "object", "properties": {"a": {"type": "integer"}}}'), ("json", "$$ANY$$"),
                    ("regex", "[a-z]+"), ("ebnf", 'root ::= [a-z]+'),
                    ("json", '{"type": "string", "enum": ["a", "b"], "maxLength": 1}')]:
            with self.subTest(key=key):
                g, _ = grammar_for(backend, key)
                self.assertIsInstance(g, XGrammarGrammar)
                self.assertEqual(g.key_string, key[1])
        tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}
        g, _ = grammar_for(backend, ("structural_tag", json.dumps(tag)))
        self.assertIsInstance(g, XGrammarGrammar)
        out = decode(model, [g], seed=1)[0]
        self.assertEqual(self.text(model, out), "hi")

    def test_the_cache_hands_out_fresh_copies(self) -> None:
        model, backend = self.each()[0]
        key = ("regex", "cache|cached|caches")
        first, hit = grammar_for(backend, key)
        self.assertFalse(hit)
        first.accept_token(model.tokenizer.encode("cache")[0])
        second, hit = grammar_for(backend, key)
        self.assertTrue(hit)
        self.assertIsNot(second, first)
        self.assertIs(second.automaton, first.automaton)
        self.assertEqual(second.state, second.automaton.start())
        self.assertTrue(second.grammar_stats.is_cache_hit)

    def test_rollback_copy_and_jump_forward(self) -> None:
        model, backend = self.each()[0]
        g, _ = grammar_for(backend, ("json", json.dumps({"enum": TOOLS})))
        member = '"calendar.create_event"'
        ids = model.tokenizer.encode(member)
        eos = next(iter(model.eos))
        mask = g.allocate_vocab_mask(model.vocab_size, 2, "cpu")
        states, masks = [], []
        for t in ids:
            g.fill_vocab_mask(mask, 0)
            states.append(g.state)
            masks.append(mask[0].clone())
            g.accept_token(t)
        g.accept_token(eos)
        self.assertTrue(g.is_terminated())
        g.accept_token(eos)  # after the end: nothing happens (as XGrammar)
        g.rollback(1)
        self.assertFalse(g.is_terminated())
        g.rollback(3)
        g.fill_vocab_mask(mask, 1)
        self.assertTrue(torch.equal(mask[1], masks[len(ids) - 3]))
        self.assertEqual(g.state, states[len(ids) - 3])
        with self.assertRaises(ValueError):
            g.rollback(len(ids))  # more than were accepted
        # speculative decoding's pattern: accept a draft token, read the mask, roll it back
        g.accept_token(ids[len(ids) - 3])
        g.rollback(1)
        self.assertEqual(g.state, states[len(ids) - 3])
        fresh = g.copy()
        self.assertEqual(fresh.state, fresh.automaton.start())
        # jump-forward: the bytes every member left shares (here the JSON string's opening quote at the start, then
        # "delete_" once "files." and "de" are in), and once one member is left its rest, with a token path
        h = g.copy()
        helper = h.try_jump_forward(model.tokenizer)
        self.assertIsNotNone(helper)
        assert helper is not None
        self.assertEqual(h.jump_forward_str_state(helper)[0], '"')
        self.assertEqual(model.tokenizer.decode(helper[0]), '"')
        s = h.copy()
        for t in model.tokenizer.encode('"files.de'):
            s.accept_token(t)
        helper = s.try_jump_forward(model.tokenizer)
        assert helper is not None
        self.assertEqual(s.jump_forward_str_state(helper)[0], "lete_")
        for t in helper[0]:
            s.accept_token(t)
        self.assertIsNone(s.try_jump_forward(model.tokenizer), "event, route, item, draft, folder: nothing forced")
        prefix = model.tokenizer.encode('"calendar.create_ev')
        for t in prefix:
            h.accept_token(t)
        helper = h.try_jump_forward(model.tokenizer)
        self.assertIsNotNone(helper)
        assert helper is not None
        text, _ = h.jump_forward_str_state(helper)
        self.assertEqual(text, 'ent"')
        self.assertEqual(model.tokenizer.decode(helper[0]), 'ent"')
        new_ids = model.tokenizer.encode('"calendar.create_event"')
        h.jump_and_retokenize(prefix, new_ids, -1)
        h.accept_token(eos)
        self.assertTrue(h.is_terminated())

    def test_speculative_draft_tree(self) -> None:
        """SGLang's own draft-tree walk (speculative decoding): accept each draft token the parent's mask allows, fill
        its row, roll it back."""
        model, backend = self.each()[0]
        g, _ = grammar_for(backend, ("regex", r"calendar\.create_event|calendar\.list_items|maps\.get_route"))
        enc = model.tokenizer.encode
        path = enc("calendar.create")  # a valid draft path
        bad = enc("maybe")[0]
        self.assertGreaterEqual(len(path), 3)
        # node 0: the verified token (the current state); 1..3: the path, each a child of the one before;
        # node 4: a sibling of node 1 that the set does not allow
        draft = torch.tensor([0, path[0], path[1], path[2], bad])
        nxt = torch.tensor([1, 2, 3, -1, -1])
        sibling = torch.tensor([-1, 4, -1, -1, -1])
        mask = g.allocate_vocab_mask(model.vocab_size, 5, "cpu")
        traverse_tree(nxt, sibling, draft, g, mask, vocab_size=model.vocab_size)
        self.assertEqual(g.state, g.automaton.start())  # every draft token rolled back
        expected = g.allocate_vocab_mask(model.vocab_size, 5, "cpu")
        probe = g.copy()
        for row, token in ((0, None), (1, path[0]), (2, path[1]), (3, path[2])):
            if token is not None:
                probe.accept_token(token)
            probe.fill_vocab_mask(expected, row)
        self.assertTrue(torch.equal(mask[:4], expected[:4]))
        self.assertTrue(bool((mask[4] == -1).all()), "the refused draft token's row is not filled")
        self.assertEqual(int(mask[0, bad // 32] >> (bad % 32)) & 1, 0)

    def test_a_token_outside_the_set_is_refused(self) -> None:
        model, backend = self.each()[0]
        g, _ = grammar_for(backend, ("regex", "yes|no"))
        with self.assertRaises(ValueError) as cm:  # SGLang aborts the request on this ValueError
            g.accept_token(model.tokenizer.encode("maybe")[0])
        self.assertIn("not allowed", str(cm.exception))
        self.assertEqual(g.state, g.automaton.start())


class Request:
    """The parts of SGLang's ``Req`` that ``GrammarManager`` reads, with ``Req``'s own ``set_finish_with_abort``."""

    set_finish_with_abort = Req.set_finish_with_abort

    def __init__(self, rid: str, params: Any) -> None:
        self.rid, self.sampling_params = rid, params
        self.origin_input_ids, self.require_reasoning = [1, 2, 3], False
        self.grammar: Any = None
        self.grammar_key: Any = None
        self.grammar_wait_ct = 0
        self.to_finish: Any = None
        self.finished_reason: Any = None

    def finished(self) -> bool:
        return self.finished_reason is not None

    def release_mm_inputs_on_abort(self) -> None:
        pass


class GrammarManagerTest(unittest.TestCase):
    """SGLang's scheduler-side GrammarManager (queue, polling, cache, aborts) with the libtrie backend."""

    def setUp(self) -> None:
        # a single-rank scheduler's place in its groups (a real one publishes it when it builds them)
        self.enterContext(get_parallel().override(pp_rank=0, pp_size=1, tp_rank=0))

    def manager(self, model: Model) -> Any:
        group = SimpleNamespace(world_size=1, first_rank=0, is_first_rank=True)
        scheduler = SimpleNamespace(server_args=_SERVER_ARGS, tokenizer=model.tokenizer, dp_tp_cpu_group=None,
                                    dp_tp_group=group, pp_group=None,
                                    model_config=SimpleNamespace(vocab_size=model.vocab_size,
                                                                 hf_eos_token_id=model.eos, think_end_ids=None))
        return GrammarManager(scheduler)

    def ready(self, manager: Any, req: Request) -> None:
        for _ in range(2000):
            if req in manager.get_ready_grammar_requests():
                return
        raise AssertionError(f"{req.rid}: grammar not ready")

    def test_requests_through_the_grammar_manager(self) -> None:
        model = _MODELS[0]
        manager = self.manager(model)
        self.assertIsInstance(manager.grammar_backend, LibtrieGrammarBackend)
        schema = json.dumps({"enum": TOOLS})
        first = Request("a", SamplingParams(json_schema=schema))
        self.assertTrue(manager.process_req_with_grammar(first))  # queued while it compiles
        self.ready(manager, first)
        self.assertIsInstance(first.grammar, LibtrieGrammar)
        self.assertIsNone(first.to_finish)
        second = Request("b", SamplingParams(json_schema=schema))
        self.assertFalse(manager.process_req_with_grammar(second))  # a cache hit: no wait
        self.assertIsInstance(second.grammar, LibtrieGrammar)
        for out in decode(model, [first.grammar, second.grammar], seed=5):
            self.assertIn(json.loads(model.tokenizer.decode(out)), TOOLS)
        other = Request("c", SamplingParams(regex="[0-9]+"))
        self.assertTrue(manager.process_req_with_grammar(other))
        self.ready(manager, other)
        self.assertIsInstance(other.grammar, XGrammarGrammar)
        dup = Request("d0", SamplingParams(json_schema='{"enum": ["x", "x", "y"]}'))  # one language: served
        manager.process_req_with_grammar(dup)
        self.ready(manager, dup)
        self.assertIsInstance(dup.grammar, LibtrieGrammar)
        self.assertEqual(dup.grammar.automaton.n_members, 2, "deduplicated")
        too_many = json.dumps({"enum": [f"m{i}" for i in range(10_001)]})  # past LIBTRIE_MAX_INLINE_STRINGS
        bad = Request("d", SamplingParams(json_schema=too_many))
        manager.process_req_with_grammar(bad)
        self.ready(manager, bad)
        self.assertIsInstance(bad.to_finish, FINISH_ABORT)  # the client's HTTP 400, naming the problem
        self.assertEqual(bad.to_finish.status_code, 400)
        self.assertIn("Failed to compile json grammar: libtrie: json_schema: ", bad.to_finish.message)
        self.assertIn("LIBTRIE_MAX_INLINE_STRINGS=10000", bad.to_finish.message)
        again = Request("e", SamplingParams(json_schema=too_many))
        self.assertFalse(manager.process_req_with_grammar(again))  # the cached failure aborts at once
        self.assertIsInstance(again.to_finish, FINISH_ABORT)


class BadInputTest(unittest.TestCase):
    def test_bad_requests_fail_with_a_reason_and_the_backend_goes_on(self) -> None:
        model = _MODELS[0]
        os.environ["LIBTRIE_MAX_INLINE_STRINGS"] = "50"
        try:
            backend = backend_for(model)
        finally:
            del os.environ["LIBTRIE_MAX_INLINE_STRINGS"]
        digits = "d ::= " + " | ".join(f'"{i}"' for i in range(10))
        refused = [
            (("regex", "a|\ud800"), "not valid Unicode"),  # XGrammar itself raises UnicodeEncodeError on it
        ]
        # Over the operator's bounds: not a set, so the default backend (XGrammar) serves them, as without libtrie.
        over = [("json", json.dumps({"enum": [f"m{i}" for i in range(51)]})),
                ("ebnf", 'root ::= d d d d d d d d ""\n' + digits),
                ("regex", "|".join(f"m{i}" for i in range(51))),
                ("json", '{"anyOf": [' * 60 + '{"enum": ["a", "b"]}' + "]}" * 60)]
        for key in over:
            with self.subTest(key=key[1][:40]):
                value, _ = backend.get_cached_or_future_value(key, False)
                g = value.result(timeout=60)
                self.assertNotIsInstance(g, LibtrieGrammar)
                self.assertNotIsInstance(g, InvalidGrammarObject)
        # (A schema nested 50,000 deep never reaches a backend: SGLang's own NUL check json.loads it first and
        # raises RecursionError, with or without libtrie.)
        for key, words in refused:
            with self.subTest(key=key[1][:40]):
                value, hit = backend.get_cached_or_future_value(key, False)
                g = value.result(timeout=60)
                self.assertIsInstance(g, InvalidGrammarObject)
                self.assertIn(words, g.error_message)
                backend.set_cache(key, g.copy())
                again, hit = backend.get_cached_or_future_value(key, False)
                self.assertTrue(hit)  # GrammarManager aborts a cached invalid grammar at once
                self.assertIsInstance(again, InvalidGrammarObject)
        # What libtrie cannot read is the default backend's to judge (XGrammar), never refused by libtrie.
        for key in [("json", '{"enum": ["a", "b",'), ("json", '{"enum": []}'), ("ebnf", 'root ::= "a'),
                    ("ebnf", 'root ::= TagDispatch(("<a>", b))\nb ::= "x"'),
                    ("regex", "(0|1|2|3|4|5|6|7|8|9)" * 8)]:  # not a set for libtrie (a product): XGrammar's
            with self.subTest(key=key[1][:40]):
                value, _ = backend.get_cached_or_future_value(key, False)
                g = value.result(timeout=60)
                self.assertNotIsInstance(g, LibtrieGrammar)
                self.assertNotIn("libtrie", getattr(g, "error_message", "") or "")
        g, _ = grammar_for(backend, ("json", '{"enum": ["a", "a"]}'))  # valid duplicates: served deduplicated
        self.assertIsInstance(g, LibtrieGrammar)
        self.assertEqual(g.automaton.n_members, 1)
        g, _ = grammar_for(backend, ("regex", "still|serving"))
        self.assertIn(model.tokenizer.decode(decode(model, [g], seed=3)[0]), ("still", "serving"))

    def test_without_a_default_backend_other_requests_are_refused(self) -> None:
        model = _MODELS[0]
        os.environ["LIBTRIE_SGLANG_DEFAULT"] = "none"
        try:
            backend = backend_for(model)
        finally:
            del os.environ["LIBTRIE_SGLANG_DEFAULT"]
        self.assertIsNone(backend.default)
        g, _ = grammar_for(backend, ("json", '{"type": "object"}'))
        self.assertIsInstance(g, InvalidGrammarObject)
        self.assertIn("finite sets only", g.error_message)
        g, _ = grammar_for(backend, ("json", '{"enum": ["x", "y"]}'))
        self.assertIsInstance(g, LibtrieGrammar)

    def test_a_tokenizer_without_tokenizer_json_needs_libtrie_vocab(self) -> None:
        with self.assertRaises(ValueError) as cm:
            create_backend(None, object(), 100, {1})
        self.assertIn("LIBTRIE_VOCAB", str(cm.exception))
        self.assertIsInstance(libtrie.version(), str)


if __name__ == "__main__":
    unittest.main()
