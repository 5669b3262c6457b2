"""libtrie.transformers with a real model: SmolLM2-135M-Instruct loaded by transformers, ``model.generate`` with
greedy search, sampling, beam search and a left-padded batch; every output must be a member. Opt-in (needs torch and
transformers):

    scripts/test-transformers.sh      # sets up .cache/vllm-venv and the model (scripts/setup-vllm.sh), then runs this

Environment (set by the script): LIBTRIE_TEST_MODEL (the Hugging Face folder converted from the project's GGUF),
LIBTRIE_TEST_SETS (the folder of tools-K.txt from examples/dump_sets.rs).
"""

import json
import os
import unittest
from pathlib import Path

import jsonschema
import torch
import xgrammar as xgr
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

import libtrie
from libtrie.transformers import TrieLogitsProcessor, eos_ids, model_vocab, prefix_allowed_tokens_fn

MODEL = Path(os.environ["LIBTRIE_TEST_MODEL"])
SETS = Path(os.environ["LIBTRIE_TEST_SETS"])

COLORS = ["red", "green", "blue", "dark olive green", "light goldenrod yellow", "navy", "teal", "crimson"]
QUESTIONS = ["What colour is the sky on a clear day? Answer with one colour name.",
             "Name a colour that is often used for danger signs."]


def read_set(name):
    return (SETS / f"{name}.txt").read_text(encoding="utf-8").split("\n")[:-1]


class GenerateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tok = AutoTokenizer.from_pretrained(MODEL)
        cls.tok.padding_side = "left"
        if cls.tok.pad_token is None:
            cls.tok.pad_token = cls.tok.eos_token
        cls.model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
        cls.model.eval()
        cls.vocab = model_vocab(cls.model, cls.tok)
        cls.colors = libtrie.compile(cls.vocab, COLORS)
        cls.tools = read_set("tools-1000")
        cls.tool_set = libtrie.compile(cls.vocab, cls.tools)

    def prompts(self, questions):
        texts = [self.tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                              add_generation_prompt=True) for q in questions]
        return self.tok(texts, return_tensors="pt", padding=True)

    def outputs(self, inputs, out, members):
        """The generated texts; each must be a member followed by an end-of-generation id (not cut off)."""
        eog = set(eos_ids(self.model))
        texts = []
        for row in out[:, inputs["input_ids"].shape[1]:].tolist():
            ends = [i for i, t in enumerate(row) if t in eog]
            self.assertTrue(ends, f"the output {row} never ended")
            text = self.tok.decode(row[:ends[0]])
            self.assertIn(text, members)
            texts.append(text)
        return texts

    def generate(self, inputs, automaton, **kw):
        proc = TrieLogitsProcessor(automaton)
        return self.model.generate(**inputs, logits_processor=LogitsProcessorList([proc]), max_new_tokens=32,
                                   pad_token_id=self.tok.pad_token_id, **kw)

    def test_the_vocabulary_is_the_models(self):
        self.assertEqual(self.vocab.n_vocab, self.model.get_output_embeddings().weight.shape[0])
        self.assertEqual(list(self.vocab.eog_ids), sorted(eos_ids(self.model)))
        self.assertTrue(eos_ids(self.model), "SmolLM2's generation config names its EOS")

    def test_unconstrained_output_is_not_a_member(self):
        # What the constraint changes: the same greedy run without it answers in free text.
        inputs = self.prompts(QUESTIONS[:1])
        out = self.model.generate(**inputs, do_sample=False, max_new_tokens=16, pad_token_id=self.tok.pad_token_id)
        text = self.tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        self.assertNotIn(text, COLORS)

    def test_greedy_batch_with_left_padding(self):
        inputs = self.prompts(QUESTIONS)
        self.assertTrue((inputs["attention_mask"][:, 0] == 0).any(), "the prompts have different lengths")
        out = self.generate(inputs, self.colors, do_sample=False)
        texts = self.outputs(inputs, out, COLORS)
        # Each row equals its own run alone: the padding of the batch does not shift a row's state.
        for q, text in zip(QUESTIONS, texts):
            alone = self.prompts([q])
            self.assertEqual(self.outputs(alone, self.generate(alone, self.colors, do_sample=False), COLORS), [text])

    def test_sampling(self):
        inputs = self.prompts(QUESTIONS[:1])
        out = self.generate(inputs, self.tool_set, do_sample=True, temperature=1.5, top_k=0, top_p=1.0,
                            num_return_sequences=6)
        texts = self.outputs(inputs, out, set(self.tools))
        self.assertGreater(len(set(texts)), 1, "sampling at temperature 1.5 picks different members")

    def test_beam_search(self):
        inputs = self.prompts(["Which tool sends an email? Answer with the tool name only."])
        out = self.generate(inputs, self.tool_set, do_sample=False, num_beams=3, num_return_sequences=3)
        texts = self.outputs(inputs, out, set(self.tools))
        self.assertEqual(len(texts), 3)

    def test_beam_search_batch_of_two_with_padding(self):
        inputs = self.prompts(QUESTIONS)
        out = self.generate(inputs, self.colors, do_sample=False, num_beams=3, num_return_sequences=2)
        self.assertEqual(len(self.outputs(inputs, out, COLORS)), 4)

    def test_prefix_allowed_tokens_fn(self):
        inputs = self.prompts(QUESTIONS)
        fn = prefix_allowed_tokens_fn(self.colors, inputs["input_ids"].shape[1])
        out = self.model.generate(**inputs, prefix_allowed_tokens_fn=fn, do_sample=False, num_beams=3,
                                  max_new_tokens=32, pad_token_id=self.tok.pad_token_id)
        self.outputs(inputs, out, COLORS)

    def test_mask_width_is_the_logits_width(self):
        # Logits wider than the vocabulary (a padded embedding): the extra ids are never allowed.
        proc = TrieLogitsProcessor(self.colors)
        ids = torch.zeros((2, 5), dtype=torch.long)
        scores = torch.zeros((2, self.vocab.n_vocab + 40))
        masked = proc(ids, scores)
        allowed = sorted(self.colors.allowed(self.colors.start()).tolist())
        for row in masked:
            self.assertEqual(torch.nonzero(torch.isfinite(row)).flatten().tolist(), allowed)
        with self.assertRaisesRegex(ValueError, "fewer than the vocabulary"):
            TrieLogitsProcessor(self.colors)(ids, torch.zeros((2, self.vocab.n_vocab - 64)))

    def test_a_processor_serves_a_second_generate_call(self):
        proc = TrieLogitsProcessor(self.colors)
        for q in QUESTIONS:
            inputs = self.prompts([q])
            out = self.model.generate(**inputs, logits_processor=LogitsProcessorList([proc]), max_new_tokens=32,
                                      do_sample=False, pad_token_id=self.tok.pad_token_id)
            self.outputs(inputs, out, COLORS)


TOOLS = {
    "weather.get_forecast": {"type": "object", "properties": {"city": {"type": "string"},
                                                               "days": {"type": "integer"}},
                             "required": ["city", "days"], "additionalProperties": False},
    "mail.send": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                  "required": ["to", "subject"], "additionalProperties": False},
    "calendar.create_event": {"type": "object", "properties": {"title": {"type": "string"},
                                                                "day": {"enum": ["mon", "tue", "wed"]}},
                              "required": ["title", "day"], "additionalProperties": False},
}


class ToolCallTest(unittest.TestCase):
    """A tool call: the name from the set (a template with a hand-over), then that tool's arguments, constrained by
    an XGrammar matcher compiled for that tool only (when it is chosen)."""

    PREFIX, SUFFIX = '{"name": ', ', "arguments": '

    @classmethod
    def setUpClass(cls):
        cls.tok = AutoTokenizer.from_pretrained(MODEL)
        cls.model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
        cls.vocab = model_vocab(cls.model, cls.tok)
        names = list(TOOLS) + [t for t in read_set("tools-1000") if t not in TOOLS]
        cls.names = names
        cls.template = libtrie.Automaton.compile_template(cls.vocab, names, prefix=cls.PREFIX, suffix=cls.SUFFIX,
                                                          render="json_string", end="open")
        info = xgr.TokenizerInfo.from_huggingface(cls.tok, vocab_size=cls.vocab.n_vocab)
        cls.compiler = xgr.GrammarCompiler(info)
        cls.compiled = {}

    def arguments(self, member):
        """An XGrammar matcher for the arguments of tool ``member`` and the closing brace (compiled once)."""
        name = self.names[member]
        if name not in self.compiled:
            schema = TOOLS.get(name, {"type": "object", "properties": {}, "additionalProperties": False})
            grammar = xgr.Grammar.concat(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False),
                                         xgr.Grammar.from_ebnf('root ::= "}"'))
            self.compiled[name] = self.compiler.compile_grammar(grammar)
        return xgr.GrammarMatcher(self.compiled[name])

    def call(self, request, **kw):
        tools = "\n".join(f"- {n}: arguments {json.dumps(s)}" for n, s in TOOLS.items())
        text = self.tok.apply_chat_template(
            [{"role": "system", "content": f"You call tools. Answer with JSON only. Tools:\n{tools}"},
             {"role": "user", "content": request}], tokenize=False, add_generation_prompt=True)
        inputs = self.tok([text], return_tensors="pt")
        proc = TrieLogitsProcessor(self.template, then=self.arguments)
        out = self.model.generate(**inputs, logits_processor=LogitsProcessorList([proc]), max_new_tokens=80,
                                  pad_token_id=self.tok.eos_token_id, **kw)
        calls = []
        eog = set(eos_ids(self.model))
        for row in out[:, inputs["input_ids"].shape[1]:].tolist():
            ends = [i for i, t in enumerate(row) if t in eog]
            self.assertTrue(ends, f"the call {self.tok.decode(row)!r} never ended")
            call = json.loads(self.tok.decode(row[:ends[0]]))
            self.assertEqual(set(call), {"name", "arguments"})
            self.assertIn(call["name"], self.names)
            jsonschema.validate(call["arguments"], TOOLS.get(call["name"], {"type": "object", "maxProperties": 0}))
            calls.append(call)
        return calls

    def test_greedy_tool_call(self):
        calls = self.call("What will the weather be in Paris for the next 3 days?", do_sample=False)
        self.assertEqual(len(calls), 1)

    def test_beam_search_tool_calls(self):
        # Beams that share a prefix past the hand-over each get their own matcher (replayed from the hand-over).
        self.assertEqual(len(self.call("Send an email to bob@example.com about lunch.", do_sample=False,
                                       num_beams=3, num_return_sequences=3)), 3)


if __name__ == "__main__":
    unittest.main()
