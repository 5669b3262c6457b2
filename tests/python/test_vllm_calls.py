"""The hand-over logic of libtrie's vLLM tool calls without an engine (libtrie.vllm.calls, .frontend, .route's one
switch, libtrie.registry): free text until the marker, the name from a trie, the arguments by a matcher, parallel
calls, ``parallel_tool_calls=false`` enforced, rollback, registries. The argument matcher is a stand-in with
xgrammar's interface over one fixed text per tool (the real one is exercised by tests/vllm).

    python3 -m unittest discover -s tests/python -v     # after cargo build --release
"""

import json
from array import array
import os
import sys
import tempfile
import time
import unittest
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[2]
if os.environ.get("LIBTRIE_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "python"))

import libtrie  # noqa: E402
from libtrie.registry import RegistryCache  # noqa: E402
from libtrie.sets import SetError, Settings  # noqa: E402
from libtrie.vllm import calls, frontend, route  # noqa: E402

EXTRA = [b"<tool_call>", b">\n{", b"ab", b"</s>", b"<stop>", b"[TOOL_CALLS]", b"<|python_tag|>", b'{"']
TOKENS = [bytes([b]) for b in range(128)] + EXTRA
CALL, STRADDLE, EOS, STOP, MISTRAL_CALLS, PYTHON_TAG, BRACE_QUOTE = 128, 129, 131, 132, 133, 134, 135


def vocab():
    kinds = [libtrie.TOKEN_NORMAL] * len(TOKENS)
    kinds[EOS] = kinds[STOP] = libtrie.TOKEN_CONTROL
    return libtrie.Vocab.from_tokens(TOKENS, eog_ids=[EOS], kinds=kinds)


class Row(array):
    """A bitmask row (32-bit words) with the interface the grammar uses (``fill``, ``shape``)."""

    @property
    def shape(self):
        return (len(self),)

    def fill(self, v):
        self[:] = array("i", [v] * len(self))

    def allowed(self):
        return [i * 32 + b for i, w in enumerate(self) for b in range(32) if (w >> b) & 1]


class Matcher:
    """xgrammar's GrammarMatcher interface over one text (the tool's arguments and the format's close; ``alts``: the
    texts it may end with), ending on a stop token."""

    def __init__(self, texts, stops):
        self.texts, self.stops, self.done, self.stack = [t.encode() for t in texts], set(stops), [], [b""]

    def _ok(self, b):
        return any(t.startswith(b) for t in self.texts)

    def accept_token(self, t):
        if self.done:
            return False
        cur = self.stack[-1]
        if t in self.stops:
            if cur in self.texts:
                self.done.append(True)
                self.stack.append(cur)
                return True
            return False
        if t >= 128 and t != STRADDLE:
            return False
        b = cur + TOKENS[t]
        if not self._ok(b):
            return False
        self.stack.append(b)
        return True

    def rollback(self, n):
        for _ in range(n):
            self.stack.pop()
            if self.done:
                self.done.pop()

    def is_terminated(self):
        return bool(self.done)

    def fill_next_token_bitmask(self, bitmask, idx):
        row = bitmask[idx]
        row.fill(0)
        cur = self.stack[-1]
        for t in range(len(TOKENS)):
            if (t in self.stops and cur in self.texts) or (t < 128 or t == STRADDLE) and self._ok(cur + TOKENS[t]):
                calls._set(row, t)


TOOLS = [("get_weather", {"type": "object"}), ("get_time", {"type": "object"})]
ARGS = {0: '{"city": "Paris"}', 1: '{"tz": "UTC"}'}


def make_grammar(v, fmt, auto, parallel, names=("get_weather", "get_time")):
    f = calls.FORMATS[fmt]
    spec = calls.CallSpec(fmt, auto, parallel, tuple(names), tuple("{}" for _ in names))

    def compile_names(prefix):
        return libtrie.Automaton.compile_template(v, list(names), prefix=prefix, suffix=f.suffix,
                                                  render=f.render, end="open")

    first = compile_names(f.prefix)
    following = compile_names(f.next_prefix) if f.more and parallel else None

    def arguments(member, last):
        ends = [f.close + f.last] if (last or not f.more) else [f.close + f.last, f.close + f.more]
        return Matcher([ARGS[member] + e for e in ends], [EOS, STOP])

    opener = compile_names(f.trigger + f.prefix) if f.trigger and not auto else None
    return calls.TrieCallsGrammar(spec, first, following, arguments, [EOS, STOP], opener)


def text_tokens(s):
    return list(s.encode())


class CallsGrammarTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.v = vocab()

    def mask(self, g):
        row = Row("i", [0] * ((len(TOKENS) + 31) // 32))
        g.fill_bitmask([row], 0)
        return set(row.allowed())

    def feed(self, g, tokens):
        for t in tokens:
            self.assertIn(t, self.mask(g), f"token {t} ({TOKENS[t]!r}) masked in phase {g.phase}")
            self.assertTrue(g.accept_tokens("r", [t]))

    def hermes_call(self, name, member):
        return [CALL] + text_tokens('\n{"name": "%s", "arguments": ' % name) + text_tokens(ARGS[member] +
                                                                                         "}\n</tool_call>")

    def test_auto_without_a_call_is_free_text(self):
        g = make_grammar(self.v, "hermes", True, True)
        self.assertEqual(g.phase, "free")
        free = self.mask(g)
        self.assertIn(ord("H"), free)
        self.assertIn(STRADDLE, free, "'>\\n{' alone does not open a call")
        self.feed(g, text_tokens("Hello there") + [EOS])
        self.assertTrue(g.is_terminated())
        self.assertEqual(g.calls, 0)

    def test_auto_then_a_call_by_text_marker_and_its_arguments(self):
        g = make_grammar(self.v, "hermes", True, False)
        self.feed(g, text_tokens("Sure. <tool_call"))
        self.assertEqual(g.phase, "free")
        self.assertNotIn(STRADDLE, self.mask(g), "'>\\n{' would finish the marker and go on past it")
        self.feed(g, [ord(">")])
        self.assertEqual(g.phase, "name")
        self.assertEqual(self.mask(g), {ord("\n")})
        self.feed(g, text_tokens('\n{"name": "get_'))
        self.assertEqual(self.mask(g), {ord("w"), ord("t")}, "only names of the set")
        self.feed(g, text_tokens('time", "arguments": '))
        self.assertEqual(g.phase, "args")
        self.feed(g, text_tokens(ARGS[1] + "}\n</tool_call>"))
        self.assertEqual((g.phase, g.calls), ("end", 1), "parallel_tool_calls=false: one call, then the end")
        self.assertEqual(self.mask(g), {EOS, STOP})
        self.assertFalse(g.accept_tokens("r", [CALL]), "a second call is refused, not filtered afterwards")
        self.feed(g, [STOP])
        self.assertTrue(g.is_terminated())

    def test_parallel_calls_each_by_its_own_tool(self):
        g = make_grammar(self.v, "hermes", True, True)
        self.feed(g, self.hermes_call("get_weather", 0) + text_tokens("\n") + self.hermes_call("get_time", 1))
        self.assertEqual((g.phase, g.calls), ("free", 2))
        self.feed(g, self.hermes_call("get_weather", 0) + [EOS])
        self.assertEqual(g.calls, 3)
        self.assertTrue(g.is_terminated())
        # A name outside the set, or the wrong tool's arguments, are refused.
        g = make_grammar(self.v, "hermes", True, True)
        self.feed(g, [CALL] + text_tokens('\n{"name": "get_'))
        self.assertFalse(g.accept_tokens("r", [ord("x")]))
        g = make_grammar(self.v, "hermes", True, True)
        self.feed(g, [CALL] + text_tokens('\n{"name": "get_time", "arguments": '))
        self.assertFalse(g.accept_tokens("r", text_tokens(ARGS[0])))

    def test_required_with_a_marker_opens_a_call_at_once(self):
        for opening in ([CALL], text_tokens("<tool_call>")):
            g = make_grammar(self.v, "hermes", False, False)
            self.assertEqual(self.mask(g), {CALL, ord("<")}, "the marker's token or its text; nothing else")
            self.feed(g, opening + text_tokens('\n{"name": "get_weather", "arguments": ' + ARGS[0] +
                                               "}\n</tool_call>") + [EOS])
            self.assertEqual((g.calls, g.is_terminated()), (1, True))
        g = make_grammar(self.v, "hermes", False, True)
        self.feed(g, self.hermes_call("get_time", 1))
        self.assertEqual(g.phase, "free", "parallel: more calls or the end")
        self.feed(g, [EOS])

    def test_required_json_list_one_and_several_calls(self):
        g = make_grammar(self.v, "json", False, False)
        self.assertEqual(g.phase, "name")
        self.feed(g, text_tokens('[{"name": "get_time", "parameters": ' + ARGS[1] + "}]") + [EOS])
        self.assertTrue(g.is_terminated())
        g = make_grammar(self.v, "json", False, True)
        self.feed(g, text_tokens('[{"name": "get_time", "parameters": ' + ARGS[1] + "}, "))
        self.assertEqual((g.phase, g.calls), ("name", 1))
        self.feed(g, text_tokens('{"name": "get_weather", "parameters": ' + ARGS[0] + "}, "))
        self.feed(g, text_tokens('{"name": "get_time", "parameters": ' + ARGS[1] + "}]"))
        self.assertEqual((g.phase, g.calls), ("end", 3))
        self.feed(g, [EOS])
        out = json.loads(('[{"name": "get_time", "parameters": %s}, {"name": "get_weather", "parameters": %s}, '
                          '{"name": "get_time", "parameters": %s}]') % (ARGS[1], ARGS[0], ARGS[1]))
        self.assertEqual(len(out), 3)

    def test_rollback_across_hand_overs(self):
        seq = text_tokens("Hi ") + self.hermes_call("get_weather", 0) + text_tokens(" ")
        for n in range(1, len(seq) + 1):
            g = make_grammar(self.v, "hermes", True, True)
            self.feed(g, seq)
            g.rollback(n)
            self.assertEqual(len(g.history), len(seq) - n + 1, n)
            self.feed(g, seq[len(seq) - n:])  # replayed after a rollback of any depth: the same end
            self.assertEqual((g.phase, g.calls), ("free", 1), n)
        g.rollback(len(seq) + 5)
        self.assertEqual((g.phase, g.calls, len(g.history)), ("free", 0, 1))
        self.assertEqual(g.validate_tokens(seq), seq)
        self.assertEqual(len(g.history), 1, "validate_tokens does not advance")

    def test_validating_a_rejected_draft_logs_nothing(self):
        # issue 36, defect 5: validate_tokens of the calls grammar logged an ERROR line (with an empty request id)
        # for every rejected draft token; a rejected draft is normal speculative decoding, not an error.
        g = make_grammar(self.v, "hermes", False, True)  # required: the call opens at once, "x" is not allowed
        bad = text_tokens("x")
        with self.assertNoLogs("vllm.libtrie", "WARNING"):
            self.assertEqual(g.validate_tokens(bad), [])
            good = self.hermes_call("get_weather", 0)
            self.assertEqual(g.validate_tokens(good[:3] + bad), good[:3])
        self.assertEqual(len(g.history), 1, "validate_tokens does not advance")
        with self.assertLogs("vllm.libtrie", "ERROR"):  # accepting a token that is not allowed is still an error
            self.assertFalse(g.accept_tokens("r1", bad))

    def test_a_slow_model_never_opening_a_call_is_not_a_hang(self):
        g = make_grammar(self.v, "hermes", True, True)
        t0 = time.monotonic()
        self.feed(g, text_tokens("no call " * 200))
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual((g.phase, g.calls), ("free", 0))


class ParserFormatsTest(unittest.TestCase):
    """The formats of vLLM 0.32's ``llama3_json`` and ``mistral`` tool parsers (read in its source: the llama parser
    decodes every ``{`` of the output as a call with ``name`` and ``parameters``/``arguments``; the mistral parser
    splits on ``[TOOL_CALLS]`` and decodes the JSON list after it (tokenizers without ``[ARGS]``), or reads
    ``[TOOL_CALLS]NAME[ARGS]{...}``)."""

    @classmethod
    def setUpClass(cls):
        cls.v = vocab()

    mask, feed = CallsGrammarTest.mask, CallsGrammarTest.feed

    def text(self, tokens):
        return b"".join(TOKENS[t] for t in tokens if t not in (EOS, STOP)).decode()

    def llama_calls(self, out):
        """What vLLM's llama3_json parser reads (its loop: raw_decode at each '{' past the last object)."""
        dec, end, found = json.JSONDecoder(), -1, []
        for i, c in enumerate(out):
            if c == "{" and i > end:
                obj, n = dec.raw_decode(out[i:])
                end = i + n
                found.append((obj["name"], obj["arguments"] if "arguments" in obj else obj["parameters"]))
        return found

    def test_llama_auto_free_text_then_calls_opened_by_their_brace(self):
        g = make_grammar(self.v, "llama", True, True)
        self.assertEqual(g.phase, "free")
        self.assertNotIn(BRACE_QUOTE, self.mask(g), "'{\"' would open a call and go on past the marker")
        seq = text_tokens('Checking. {"name": "get_time", "parameters": ' + ARGS[1] + "}; ")
        seq += text_tokens('{"name": "get_weather", "parameters": ' + ARGS[0] + "}") + [EOS]
        self.feed(g, seq[:len("Checking. {")])
        self.assertEqual((g.phase, self.mask(g)), ("name", {ord('"')}))
        self.feed(g, seq[len("Checking. {"):])
        self.assertEqual((g.calls, g.is_terminated()), (2, True))
        self.assertEqual(self.llama_calls(self.text(seq)), [("get_time", {"tz": "UTC"}), ("get_weather",
                                                                                         {"city": "Paris"})])
        # Prose with a brace is a call (the parser would give up on the output otherwise); a wrong name is refused.
        g = make_grammar(self.v, "llama", True, True)
        self.feed(g, text_tokens("a {"))
        self.assertFalse(g.accept_tokens("r", [ord("x")]))
        g = make_grammar(self.v, "llama", True, False)
        self.feed(g, text_tokens('{"name": "get_time", "parameters": ' + ARGS[1] + "}"))
        self.assertEqual((g.phase, self.mask(g)), ("end", {EOS, STOP}), "parallel_tool_calls=false: one call")
        g = make_grammar(self.v, "llama", True, True)
        self.feed(g, [PYTHON_TAG] + text_tokens('{"name": "get_weather", "parameters": ' + ARGS[0] + "}") + [EOS])
        self.assertEqual(g.calls, 1, "<|python_tag|> before the call is free text the parser skips")

    def test_mistral_pre_v11_list_after_the_marker(self):
        g = make_grammar(self.v, "mistral", True, True)
        body = ('[{"name": "get_weather", "arguments": ' + ARGS[0] + '}, {"name": "get_time", "arguments": ' +
                ARGS[1] + "}]")
        self.feed(g, text_tokens("Sure.") + [MISTRAL_CALLS])
        self.assertEqual(self.mask(g), {ord("[")})
        self.feed(g, text_tokens(body))
        self.assertEqual((g.phase, g.calls), ("end", 2))
        self.feed(g, [EOS])
        content, after = self.text(text_tokens("Sure.") + [MISTRAL_CALLS] + text_tokens(body)).split("[TOOL_CALLS]")
        self.assertEqual([c["name"] for c in json.loads(after)], ["get_weather", "get_time"])
        # required: the output opens with the marker (its token or its text); one call when not parallel.
        g = make_grammar(self.v, "mistral", False, False)
        self.assertEqual(self.mask(g), {MISTRAL_CALLS, ord("[")})
        self.feed(g, [MISTRAL_CALLS] + text_tokens('[{"name": "get_time", "arguments": ' + ARGS[1] + "}]"))
        self.assertEqual((g.phase, self.mask(g)), ("end", {EOS, STOP}))
        g = make_grammar(self.v, "mistral", False, True)
        self.feed(g, text_tokens('[TOOL_CALLS][{"name": "get_'))
        self.assertEqual(self.mask(g), {ord("w"), ord("t")})

    def test_mistral_v11_raw_name_then_args_token(self):
        g = make_grammar(self.v, "mistral_v11", True, True)
        seq = ([MISTRAL_CALLS] + text_tokens("get_time[ARGS]" + ARGS[1]) + [MISTRAL_CALLS] +
               text_tokens("get_weather[ARGS]" + ARGS[0]))
        self.feed(g, seq[:1])
        self.assertEqual(self.mask(g), {ord("g")}, "the name is raw: no quote")
        self.feed(g, seq[1:])
        self.assertEqual((g.phase, g.calls), ("free", 2))
        self.feed(g, [EOS])
        g = make_grammar(self.v, "mistral_v11", True, False)
        self.feed(g, [MISTRAL_CALLS] + text_tokens("get_weather[ARGS]" + ARGS[0]))
        self.assertEqual((g.phase, self.mask(g)), ("end", {EOS, STOP}))
        g = make_grammar(self.v, "mistral_v11", True, True)
        self.feed(g, [MISTRAL_CALLS] + text_tokens("get_time["))
        self.assertFalse(g.accept_tokens("r", [ord("X")]))
        tag = json.loads(calls.build_tag("mistral_v11", True, True, TOOLS))
        self.assertEqual(tag["structures"][1]["begin"], "[TOOL_CALLS]get_time[ARGS]")
        self.assertEqual(tag["triggers"], ["[TOOL_CALLS]"])

    def test_parsers_choose_their_format(self):
        llama = SimpleNamespace(bot_token="<|python_tag|>")
        mistral_old = SimpleNamespace(bot_token="[TOOL_CALLS]", supports_required_and_named=False,
                                      _parser_engine=SimpleNamespace(_is_pre_v11=True))
        mistral_new = SimpleNamespace(bot_token="[TOOL_CALLS]", supports_required_and_named=False,
                                      _parser_engine=SimpleNamespace(_is_pre_v11=False))
        hermes = SimpleNamespace(tool_call_start_token="<tool_call>")
        cases = [(llama, "auto", "llama"), (llama, None, "llama"), (llama, "required", "json"),
                 (mistral_old, "auto", "mistral"), (mistral_old, "required", "mistral"),
                 (mistral_new, "auto", "mistral_v11"), (hermes, "auto", "hermes"), (llama, "none", None),
                 (object(), "auto", None)]
        for parser, choice, want in cases:
            self.assertEqual(frontend._mode(parser, SimpleNamespace(tool_choice=choice)), want, (parser, choice))


class VllmParsersReadTheFormatsTest(unittest.TestCase):
    """The outputs the grammars above accept, read back by vLLM 0.32's own ``llama3_json`` and ``mistral`` parsers
    (with a stand-in tokenizer that has their marker tokens). Needs vLLM: run with the python of
    scripts/setup-vllm.sh's venv; without vLLM it is skipped with a message on stderr."""

    def setUp(self):
        try:
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        except ImportError as e:
            print(f"test_vllm_calls: vLLM's parsers not run (vLLM is not installed here: {e})", file=sys.stderr)
            self.skipTest("vLLM is not installed")
        tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n, _ in TOOLS]
        self.req = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=tools,
                                         tool_choice="auto")

    @staticmethod
    def tokenizer(*special):
        vocab = {"a": 0, **{t: i + 1 for i, t in enumerate(special)}}
        return SimpleNamespace(get_vocab=lambda: vocab, vocab=vocab)

    def read(self, parser, text):
        r = parser.extract_tool_calls(text, self.req)
        self.assertTrue(r.tools_called, text)
        return [(c.function.name, json.loads(c.function.arguments)) for c in r.tool_calls]

    def test_llama3_json_and_mistral(self):
        from vllm.tool_parsers.llama_tool_parser import Llama3JsonToolParser
        from vllm.tool_parsers.mistral_tool_parser import MistralToolParser

        want = [("get_time", {"tz": "UTC"}), ("get_weather", {"city": "Paris"})]
        llama = Llama3JsonToolParser(self.tokenizer("<|python_tag|>"))
        self.assertEqual(frontend._mode(llama, self.req), "llama")
        self.assertEqual(self.read(llama, 'Checking. {"name": "get_time", "parameters": ' + ARGS[1] + "}; "
                                   '{"name": "get_weather", "parameters": ' + ARGS[0] + "}"), want)
        old = MistralToolParser(self.tokenizer("[TOOL_CALLS]"))
        self.assertEqual(frontend._mode(old, self.req), "mistral")
        self.assertEqual(self.read(old, 'Sure.[TOOL_CALLS][{"name": "get_time", "arguments": ' + ARGS[1] +
                                   '}, {"name": "get_weather", "arguments": ' + ARGS[0] + "}]"), want)
        new = MistralToolParser(self.tokenizer("[TOOL_CALLS]", "[ARGS]"))
        self.assertEqual(frontend._mode(new, self.req), "mistral_v11")
        self.assertEqual(self.read(new, "[TOOL_CALLS]get_time[ARGS]" + ARGS[1] + "[TOOL_CALLS]get_weather[ARGS]" +
                                   ARGS[0]), want)


class TagTest(unittest.TestCase):
    def test_build_and_parse(self):
        tag = calls.build_tag("hermes", True, False, TOOLS)
        spec = calls.parse_spec(tag)
        self.assertEqual(spec.names, ("get_weather", "get_time"))
        self.assertEqual((spec.format, spec.auto, spec.parallel, spec.registry), ("hermes", True, False, None))
        self.assertIsNone(calls.parse_spec(json.dumps({"type": "structural_tag", "structures": [], "triggers": []})))
        # xgrammar's own format is kept: without libtrie vLLM serves the same request.
        t = json.loads(tag)
        self.assertEqual(t["triggers"], ["<tool_call>"])
        self.assertEqual(t["structures"][0]["begin"], '<tool_call>\n{"name": "get_weather", "arguments": ')

    def test_the_property_order_is_the_clients(self):
        # xgrammar writes properties in the schema's order: the tag keeps the client's, not an alphabetical one.
        params = {"type": "object", "properties": {"repos": {"type": "string"}, "aligned": {"type": "boolean"}},
                  "required": ["repos"]}
        spec = calls.parse_spec(calls.build_tag("hermes", False, True, [("github_star", params)]))
        self.assertEqual(list(json.loads(spec.schemas[0])["properties"]), ["repos", "aligned"])
        self.assertEqual(list(json.loads(spec.schemas[0])), ["type", "properties", "required"])

    def test_bad_tools_are_refused_with_the_field(self):
        with self.assertRaisesRegex(ValueError, "tools: the tool name 'a' is listed twice"):
            calls.build_tag("hermes", True, True, [("a", {}), ("a", {})])
        with self.assertRaisesRegex(ValueError, "tools: a tool name must be a non-empty string"):
            calls.build_tag("json", False, True, [("", {})])
        with self.assertRaisesRegex(ValueError, "parameters must be a JSON object"):
            calls.build_tag("json", False, True, [("a", [1])])
        tag = calls.build_tag("hermes", True, True, TOOLS)
        with self.assertRaisesRegex(ValueError, "over this server's bound"):
            calls.parse_spec(tag, max_bytes=100)

    def test_frontend_adjust(self):
        class Hermes:
            tool_call_start_token = "<tool_call>"

        def req(**kw):
            tools = [SimpleNamespace(function=SimpleNamespace(name=n, parameters=p)) for n, p in TOOLS]
            base = dict(tools=tools, tool_choice="auto", parallel_tool_calls=True, structured_outputs=None,
                        response_format=None, vllm_xargs=None)
            base.update(kw)
            return SimpleNamespace(**base)

        try:
            import vllm  # noqa: F401
        except ImportError:
            fake = SimpleNamespace(StructuredOutputsParams=lambda **kw: SimpleNamespace(**kw))
            sys.modules.setdefault("vllm", SimpleNamespace())
            sys.modules["vllm.sampling_params"] = fake  # type: ignore[assignment]
            self.addCleanup(sys.modules.pop, "vllm.sampling_params")
        r = req()
        self.assertTrue(frontend.adjust(Hermes(), r, Settings()))
        self.assertEqual(calls.parse_spec(r.structured_outputs.structural_tag).format, "hermes")
        r = req(tool_choice="required", parallel_tool_calls=False)
        self.assertTrue(frontend.adjust(object(), r, Settings()))
        spec = calls.parse_spec(r.structured_outputs.structural_tag)
        self.assertEqual((spec.format, spec.parallel, spec.auto), ("json", False, False))
        self.assertFalse(frontend.adjust(object(), req(), Settings()), "auto with a parser of another format")
        self.assertFalse(frontend.adjust(Hermes(), req(tool_choice="none"), Settings()))
        # Over the operator's inline bounds: vLLM's own path, untouched, as without libtrie (no 400 for its size).
        r = req()
        self.assertFalse(frontend.adjust(Hermes(), r, Settings(max_inline_strings=1)))
        self.assertIsNone(r.structured_outputs)
        big = {"type": "object", "description": "d" * 70_000}  # a tag over 8 x 16 B + 64 KiB
        r = req(tools=[SimpleNamespace(function=SimpleNamespace(name="big", parameters=big))])
        self.assertFalse(frontend.adjust(Hermes(), r, Settings(max_inline_bytes=16)), "a tag over the text bound")
        self.assertIsNone(r.structured_outputs)
        # "auto" with the client's content schema (response_format or structured_outputs): plain vLLM enforces it
        # on the whole output; libtrie leaves the request as it came, the schema kept.
        schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"enum": ["x", "y"]}}}
        for so, fmt in ((None, schema), (None, {"type": "json_object"}),
                        (SimpleNamespace(json={"enum": ["x"]}, regex=None, choice=None, grammar=None,
                                         json_object=None, structural_tag=None), None),
                        (SimpleNamespace(json=None, regex=None, choice=["x", "y"], grammar=None, json_object=None,
                                         structural_tag=None), None)):
            r = req(structured_outputs=so, response_format=fmt)
            self.assertFalse(frontend.adjust(Hermes(), r, Settings()), (so, fmt))
            self.assertIs(r.response_format, fmt, "the content schema is kept")
            self.assertIs(r.structured_outputs, so)
        r = req(response_format={"type": "text"})
        self.assertTrue(frontend.adjust(Hermes(), r, Settings()), "a text response_format constrains nothing")
        r = req(tool_choice="required", response_format=schema)  # required: the call is the output (vLLM's rule)
        self.assertTrue(frontend.adjust(object(), r, Settings()))
        with self.assertRaisesRegex(ValueError, "vllm_xargs.libtrie_registry: .*no set directory"):
            frontend.adjust(Hermes(), req(vllm_xargs={"libtrie_registry": "tools"}), Settings())


class NativeEngineTest(unittest.TestCase):
    """The engine is the native one (libtrie.toolcalls): the frontend's table of formats is the native table, and
    the engine compiles a tool list itself (no template built by the caller), a named tool keeping its index."""

    def test_the_frontend_formats_are_the_native_ones(self):
        from libtrie import toolcalls

        for name, f in calls.FORMATS.items():
            n = toolcalls.native_format(name)
            mine = {"trigger": f.trigger.encode() if f.trigger else None, "prefix": f.prefix.encode(),
                    "suffix": f.suffix.encode(), "close": f.close.encode(), "more": f.more.encode(),
                    "last": f.last.encode(), "next_prefix": f.next_prefix.encode(), "render": f.render}
            self.assertEqual(n, mine, name)
        with self.assertRaisesRegex(libtrie.TrieError, "hermes"):
            toolcalls.native_format("qwen")

    def test_compiled_by_the_engine_and_a_named_tool(self):
        from libtrie import toolcalls

        v = vocab()
        made = []

        def make(tool, last):
            made.append((tool, last))
            return Matcher([ARGS[tool] + "}\n</tool_call>"], [EOS, STOP])

        engine = toolcalls.ToolCalls.compile(v, ["get_weather", "get_time"], "hermes", False, False, [EOS, STOP],
                                             named_tool=1)
        seq = toolcalls.Sequence(engine, make)
        row = Row("i", [0] * ((len(TOKENS) + 31) // 32))
        seq.fill_bitmask([row], 0)
        self.assertEqual(set(row.allowed()), {CALL, ord("<")})
        for t in [CALL] + text_tokens('\n{"name": "get_'):
            self.assertIsNone(seq.accept(t))
        seq.fill_bitmask([row], 0)
        self.assertEqual(set(row.allowed()), {ord("t")}, "the named tool only")
        self.assertIn("not allowed in phase name", seq.accept(ord("w")))
        for t in text_tokens('time", "arguments": ' + ARGS[1] + "}\n</tool_call>") + [EOS]:
            self.assertIsNone(seq.accept(t))
        self.assertEqual((made, seq.calls, seq.tool, seq.is_terminated()), ([(1, True)], 1, 1, True))
        self.assertEqual(calls.straddlers(v, b"<tool_call>")[10], [STRADDLE])


class RegistryTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        (self.root / "outside.json").write_text("[]")
        self.dir = self.root / "sets"
        self.dir.mkdir()
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {
            "type": "object", "properties": {"x": {"type": "integer"}}}}} for i in range(1000)]
        (self.dir / "big.json").write_text(json.dumps(tools))
        (self.dir / "link.json").symlink_to(self.root / "outside.json")

    def test_read_once_confined_and_updated(self):
        cache = RegistryCache(str(self.dir), max_file_bytes=1 << 20)
        reg = cache.get("big")
        self.assertEqual((len(reg), reg.names[7], json.loads(reg.parameters[7])["properties"]["x"]["type"]),
                         (1000, "tool_7", "integer"))
        self.assertIs(cache.get("big"), reg, "the same file: not read again")
        self.assertEqual(cache.reads, 1)
        for bad, why in (("../outside", "registry name"), ("link", "link"), ("nope", "does not exist"),
                         ("/etc/passwd", "registry name")):
            with self.assertRaisesRegex(SetError, why):
                cache.get(bad)
        with self.assertRaisesRegex(SetError, "registry"):
            RegistryCache(str(self.dir), max_file_bytes=1000).get("big")
        time.sleep(0.01)
        tools = json.loads((self.dir / "big.json").read_text())
        tools[3]["function"]["name"] = "renamed"
        (self.dir / "big.json").write_text(json.dumps(tools))
        new = cache.get("big")
        self.assertNotEqual(new.identity, reg.identity)
        self.assertEqual(new.names[3], "renamed")
        self.assertEqual(reg.names[3], "tool_3", "a request holding the old registry keeps it")

    def test_admission_checks_without_reading(self):
        # issue 36, defect 6: the API server's admission read and recognized a named registry on its event loop
        # (919 ms at 100,000 tools after each change); it now checks what needs no read, and the engine reads.
        cache = RegistryCache(str(self.dir), max_file_bytes=1 << 20)
        self.assertFalse(cache.check("big"), "not cached yet")
        self.assertEqual(cache.reads, 0, "checked, not read")
        for bad, why in (("../outside", "registry name"), ("link", "link"), ("nope", "does not exist"),
                         ("/etc/passwd", "registry name")):
            with self.assertRaisesRegex(SetError, why):
                cache.check(bad)
        with self.assertRaisesRegex(SetError, "registry"):
            RegistryCache(str(self.dir), max_file_bytes=1000).check("big")
        with self.assertRaisesRegex(SetError, "no set directory"):
            RegistryCache(None).check("big")
        cache.get("big")
        self.assertTrue(cache.check("big"), "cached")
        self.assertEqual(cache.reads, 1)
        time.sleep(0.01)
        (self.dir / "big.json").write_text((self.dir / "big.json").read_text() + " ")
        self.assertFalse(cache.check("big"), "a changed file is a new identity")
        self.assertEqual(cache.reads, 1)
        # The frontend's admission of a request naming the registry reads nothing either.
        frontend._REG.clear()
        self.addCleanup(frontend._REG.clear)

        class Hermes:
            tool_call_start_token = "<tool_call>"

        try:
            import vllm.sampling_params  # noqa: F401
        except ImportError:
            saved = {k: sys.modules.get(k) for k in ("vllm", "vllm.sampling_params")}

            def restore():
                for k, v in saved.items():
                    if v is None:
                        sys.modules.pop(k, None)
                    else:
                        sys.modules[k] = v

            self.addCleanup(restore)
            fake = SimpleNamespace(StructuredOutputsParams=lambda **kw: SimpleNamespace(**kw))
            sys.modules.setdefault("vllm", SimpleNamespace())
            sys.modules["vllm.sampling_params"] = fake  # type: ignore[assignment]
        tools = [SimpleNamespace(function=SimpleNamespace(name="tool_1", parameters={"type": "object"}))]
        req = SimpleNamespace(tools=tools, tool_choice="auto", parallel_tool_calls=True, structured_outputs=None,
                              response_format=None, vllm_xargs={"libtrie_registry": "big"})
        self.assertTrue(frontend.adjust(Hermes(), req, Settings(set_dir=str(self.dir))))
        self.assertEqual(frontend._REG[0].reads, 0, "admission read nothing")


class EngineNamesTest(unittest.TestCase):
    """The engine core's name automata of a registry: compiled once per file identity, rebuilt when it changes
    (compiled again: the arguments are looked up by a member's index in the list)."""

    def test_a_changed_registry_is_rebuilt_and_a_warm_one_reused(self):
        import threading

        v = vocab()
        ctx = engine_context(v)
        f = calls.FORMATS["json"]
        a = ctx.names(["get_a", "get_b"], f.prefix, f.suffix, b"1")
        self.assertIs(ctx.names(["get_a", "get_b"], f.prefix, f.suffix, b"1"), a, "warm: the same automaton")
        b = ctx.names(["get_a", "get_c"], f.prefix, f.suffix, b"2")
        self.assertIsNot(a, b)
        s = b.start()
        for t in text_tokens('[{"name": "get_'):
            s = b.advance(s, t)
        self.assertEqual(sorted(b.allowed(s).tolist()), [ord("a"), ord("c")], "the new registry's names")
        # A complete name is the index of its tool in the new list (the arguments are looked up by it).
        for i, name in enumerate(["get_a", "get_c"]):
            s = b.start()
            for t in text_tokens('[{"name": "' + name + '", "parameters": '):
                s = b.advance(s, t)
            self.assertEqual(b.member(s), i, name)


class StubXgrammar:
    """xgrammar's calls that ToolCompiler makes, over the test's Matcher: a "compiled grammar" is (schema, close)
    and its matcher accepts the tool's fixed arguments (``{"a<i>": 1}``, the schema's one property) then the close.
    ``hold``: an Event the compile waits on (a compile still running at the hand-over)."""

    def __init__(self):
        import threading

        self.threads, self.hold = [], threading.Event()
        self.hold.set()
        self.Grammar = SimpleNamespace(concat=lambda a, b: (a, b), from_ebnf=self.ebnf,
                                       from_json_schema=lambda s, any_whitespace=True: s)
        self.compiler = SimpleNamespace(compile_grammar=self.compile)

    @staticmethod
    def ebnf(text):
        """route._close_ebnf's forms: ``root ::= "C"`` or ``root ::= "C" ("L" | "M")`` → the texts it allows."""
        import re

        head, *alts = [json.loads(m) for m in re.findall(r'"(?:[^"\\]|\\.)*"', text)]
        return tuple(head + a for a in alts) or (head,)

    def compile(self, grammar):
        import threading

        self.threads.append(threading.current_thread().name)
        self.hold.wait(10)
        schema, close = grammar
        if "bad" in schema:
            raise RuntimeError("a schema xgrammar refuses")
        return schema, close

    def GrammarMatcher(self, ctx, override_stop_tokens=None):
        schema, closes = ctx
        prop = next(iter(json.loads(schema)["properties"]))
        return Matcher(['{"%s": 1}%s' % (prop, c) for c in closes], override_stop_tokens or [])


class ArgumentPrefetchTest(unittest.TestCase):
    """A registry tool's argument schema is compiled on a worker thread once the model's name leaves only that tool
    (while the rest of the name and the format's suffix are decoded), not on the engine loop at the hand-over."""

    def setUp(self):
        from libtrie.vllm import tools

        self.xgr = StubXgrammar()
        saved = sys.modules.get("xgrammar")
        sys.modules["xgrammar"] = self.xgr  # type: ignore[assignment]
        self.addCleanup(lambda: sys.modules.pop("xgrammar") if saved is None else
                        sys.modules.__setitem__("xgrammar", saved))
        self.compiler = tools.ToolCompiler(lambda: SimpleNamespace(compiler=self.xgr.compiler))

    def schema(self, i):
        return json.dumps({"type": "object", "properties": {f"a{i}": {"type": "integer"}}}, sort_keys=True)

    def test_prefetch_then_hand_over(self):
        c = self.compiler
        c.prefetch(self.schema(1), 'root ::= "}]"')
        got = c.at_hand_over(self.schema(1), 'root ::= "}]"')
        self.assertEqual(got, (self.schema(1), ("}]",)))
        self.assertEqual((c.prefetched, c.compiled_at_hand_over, c.arg_compiles), (1, 0, 1))
        self.assertEqual(self.xgr.threads, ["libtrie-args_0"], "compiled on the worker thread")
        c.prefetch(self.schema(1), 'root ::= "}]"')
        self.assertEqual(c.prefetched, 1, "compiled already: not again")
        # Still compiling at the hand-over: the hand-over waits for it and does not compile again.
        self.xgr.hold.clear()
        c.prefetch(self.schema(2), 'root ::= "}]"')
        import threading

        threading.Timer(0.05, self.xgr.hold.set).start()
        self.assertEqual(c.at_hand_over(self.schema(2), 'root ::= "}]"')[0], self.schema(2))
        self.assertEqual((c.waited, c.arg_compiles, c.compiled_at_hand_over), (1, 2, 0))
        # Nothing prefetched: compiled at the hand-over (counted); a schema that fails fails its request.
        c.at_hand_over(self.schema(3), 'root ::= "}]"')
        self.assertEqual(c.compiled_at_hand_over, 1)
        c.prefetch('{"bad": 1}', 'root ::= "}]"')
        with self.assertRaisesRegex(RuntimeError, "refuses"):
            c.at_hand_over('{"bad": 1}', 'root ::= "}]"')

    def test_a_large_registry_is_prefetched_while_the_name_is_decoded(self):
        import threading

        v = vocab()
        n = tools_mod().MAX_SCHEMAS + 44
        reg = SimpleNamespace(names=tuple(f"tool_{i:03d}" for i in range(n)),
                              parameters=tuple(self.schema(i) for i in range(n)), identity=b"r1")
        ctx = engine_context(v)
        ctx.compiler, ctx.registry = self.compiler, lambda name: reg
        tag = calls.build_tag("json", False, False, [("tool_000", {})], registry="big")
        request = SimpleNamespace(request_id="r", sampling_params=SimpleNamespace(all_stop_token_ids=[EOS]))
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(self.compiler.arg_compiles, 0, "a large registry: nothing compiled up front")
        feed = CallsGrammarTest.feed.__get__(self)
        self.mask = CallsGrammarTest.mask.__get__(self)
        feed(g, text_tokens('[{"name": "tool_12'))
        self.assertEqual(self.compiler.prefetched, 0, "tool_12x: ten tools left")
        feed(g, text_tokens("3"))
        self.assertEqual(self.compiler.prefetched, 1, "tool_123 alone: its schema is compiled now")
        feed(g, text_tokens('", "parameters": '))
        self.assertEqual(g.phase, "args")
        self.assertEqual((self.compiler.compiled_at_hand_over, self.compiler.arg_compiles), (0, 1))
        self.assertEqual(self.xgr.threads, ["libtrie-args_0"])
        feed(g, text_tokens('{"a123": 1}}]') + [EOS])
        self.assertTrue(g.is_terminated())
        # A small registry (or the request's own tools): every schema compiled when the grammar is made.
        small = SimpleNamespace(names=reg.names[:3], parameters=reg.parameters[:3], identity=b"r2")
        ctx.registry = lambda name: small
        route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(self.compiler.arg_compiles, 4)


    def test_a_registry_extended_by_the_request_tools(self):
        """Deferred tools offered by a registry (``extend``): the request's own tools the registry lacks (its search
        tool, a session's tools) are callable next to the registry's, each by its own schema; without ``extend``
        only the registry's names are."""
        v = vocab()
        reg = SimpleNamespace(names=("tool_000", "tool_001", "tool_002"),
                              parameters=tuple(self.schema(i) for i in range(3)), identity=b"r1")
        ctx = engine_context(v)
        ctx.compiler, ctx.registry = self.compiler, lambda name: reg
        request = SimpleNamespace(request_id="r", sampling_params=SimpleNamespace(all_stop_token_ids=[EOS]))
        own = [("tool_001", {}), ("extra_9", json.loads(self.schema(9)))]
        feed = CallsGrammarTest.feed.__get__(self)
        self.mask = CallsGrammarTest.mask.__get__(self)
        tag = calls.build_tag("json", False, False, own, registry="reg", extend=True)
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        feed(g, text_tokens('[{"name": "extra_9", "parameters": {"a9": 1}}]') + [EOS])
        self.assertTrue(g.is_terminated())
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        feed(g, text_tokens('[{"name": "tool_001", "parameters": {"a1": 1}}]') + [EOS])
        self.assertTrue(g.is_terminated(), "a tool of both: the registry's schema")
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", calls.build_tag("json", False, False, own, "reg"))
        feed(g, text_tokens('[{"name": "'))
        self.assertFalse(g.accept_tokens("r", text_tokens("e")), "without extend: the registry's names only")

    def test_a_changed_registry_is_updated_and_each_name_keeps_its_tool(self):
        v = vocab()
        ctx = engine_context(v)
        ctx.compiler = self.compiler
        request = SimpleNamespace(request_id="r", sampling_params=SimpleNamespace(all_stop_token_ids=[EOS]))
        tag = calls.build_tag("json", False, True, [("x", {})], registry="reg")

        def registry(names, identity):
            i = {n: int(n[-3:]) for n in names}
            return SimpleNamespace(names=tuple(names), parameters=tuple(self.schema(i[n]) for n in names),
                                   identity=identity)

        old = [f"tool_{i:03d}" for i in range(40)]
        ctx.registry = lambda name: registry(old, b"v1")
        route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(ctx.updates, 0)
        # Two tools removed, one added at the front, one at the end: the names are updated, not compiled again.
        new = ["tool_900"] + [n for n in old if n not in ("tool_003", "tool_017")] + ["tool_901"]
        ctx.registry = lambda name: registry(new, b"v2")
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(ctx.updates, 2, "both templates of the parallel JSON list (first call, further calls)")
        feed = CallsGrammarTest.feed.__get__(self)
        self.mask = CallsGrammarTest.mask.__get__(self)
        # Each name hands over to its own tool's schema (the stub matcher accepts only {"a<i>": 1}).
        feed(g, text_tokens('[{"name": "tool_901", "parameters": {"a901": 1}}, '))
        feed(g, text_tokens('{"name": "tool_020", "parameters": {"a20": 1}}, '))
        feed(g, text_tokens('{"name": "tool_900", "parameters": {"a900": 1}}]') + [EOS])
        self.assertTrue(g.is_terminated())
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.feed = feed
        feed(g, text_tokens('[{"name": "tool_0'))
        self.assertFalse(g.accept_tokens("r", text_tokens('03"')), "a removed tool is refused")
        # Many changes: compiled again (each name carries its index in the new list).
        ctx.registry = lambda name: registry([f"tool_{i:03d}" for i in range(100, 140)], b"v3")
        g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(ctx.updates, 2)
        feed(g, text_tokens('[{"name": "tool_120", "parameters": {"a120": 1}}]') + [EOS])


#: A vocabulary for names beyond ASCII: ids 0..135 as ``TOKENS`` (the stand-in matcher reads those), then the
#: bytes 128..255 (ids 136..263), so that non-ASCII names can be spelled byte by byte.
WIDE = TOKENS + [bytes([b]) for b in range(128, 256)]


def wide_vocab():
    kinds = [libtrie.TOKEN_NORMAL] * len(WIDE)
    kinds[EOS] = kinds[STOP] = libtrie.TOKEN_CONTROL
    return libtrie.Vocab.from_tokens(WIDE, eog_ids=[EOS], kinds=kinds)


def wide_tokens(s):
    return [b if b < 128 else 136 + b - 128 for b in s.encode()]


class RegistryUpdatesKeepEachToolsSchemaTest(unittest.TestCase):
    """Defect 1 of the vLLM registries: after an update of a registry's names (``with_changes``), every name must
    hand over to ITS OWN argument schema. The registry is not in byte order and holds near-duplicates, prefixes of
    one another and non-ASCII names; three successive small updates (a tool appended, one removed in the middle,
    one tool's schema changed and two tools swapped), and after each EVERY name is driven through the grammar to
    its hand-over and its arguments checked against its own schema (the stub matcher accepts only the schema's
    one property). Defect 2: no map keyed by ``id()`` of an automaton can attach to another one."""

    setUp = ArgumentPrefetchTest.setUp

    NAMES = ["zz_tool", "get_weather", "get_weathe", "get_weather_2", "Get_weather", "get", "météo", "météo_ville",
             "東京", "東京_search", "a", "ab", "abc", "b", "tool_b", "tool_a", "ñandú", "x-y", "x_y", "x.y"]

    def wide_mask(self, g):
        row = Row("i", [0] * ((len(WIDE) + 31) // 32))
        g.fill_bitmask([row], 0)
        return set(row.allowed())

    def drive(self, g, tokens, what):
        for t in tokens:
            self.assertIn(t, self.wide_mask(g), f"{what}: token {t} ({WIDE[t]!r}) masked in phase {g.phase}")
            self.assertTrue(g.accept_tokens("r", [t]), what)

    def registry(self, tools, identity):
        """``tools``: (name, schema key) pairs; a tool's schema has the one property ``p<key>``."""
        return SimpleNamespace(names=tuple(n for n, _ in tools), parameters=tuple(self.prop(k) for _, k in tools),
                               identity=identity)

    @staticmethod
    def prop(key):
        return json.dumps({"type": "object", "properties": {f"p{key}": {"type": "integer"}}}, sort_keys=True)

    def check_every_name(self, ctx, tools, version):
        request = SimpleNamespace(request_id="r", sampling_params=SimpleNamespace(all_stop_token_ids=[EOS]))
        tag = calls.build_tag("json", False, False, [("x", {})], registry="reg")
        for name, key in tools:
            what = f"{version}: {name!r}"
            g = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
            self.drive(g, wide_tokens('[{"name": ' + json.dumps(name, ensure_ascii=False) + ', "parameters": '), what)
            self.assertEqual(g.phase, "args", what)
            # Its own schema's property, and no other tool's: the matcher of the wrong schema refuses the text.
            self.drive(g, wide_tokens('{"p%s": 1}}]' % key) + [EOS], what)
            self.assertTrue(g.is_terminated(), what)

    def test_every_name_keeps_its_own_schema_across_updates(self):
        v = wide_vocab()
        ctx = engine_context(v)
        ctx.compiler = self.compiler
        self.assertNotEqual(self.NAMES, sorted(self.NAMES), "a registry not in byte order")
        tools = [(n, i) for i, n in enumerate(self.NAMES)] + [(f"tool_{i:02d}", 100 + i) for i in (7, 3, 11, 5)]
        versions = [tools]
        # 1. a tool appended; 2. one removed in the middle; 3. one tool's schema changed and two tools swapped.
        versions.append(versions[-1] + [("tool_00", 200)])
        mid = len(versions[-1]) // 2
        versions.append(versions[-1][:mid] + versions[-1][mid + 1:])
        third = list(versions[-1])
        third[4] = (third[4][0], 300)
        third[1], third[9] = third[9], third[1]
        versions.append(third)
        for k, tools in enumerate(versions):
            ctx.registry = lambda name, tools=tools, k=k: self.registry(tools, b"v%d" % k)
            self.check_every_name(ctx, tools, f"version {k}")
            self.assertEqual(ctx.updates, k, "each small change is an update of the previous names (with_changes)")
        # Defect 2: nothing of the context is keyed by an automaton's id(): each automaton answers for itself.
        for field, value in vars(ctx).items():
            if isinstance(value, dict):
                self.assertFalse([key for key in value if isinstance(key, int)], f"EngineContext.{field}")

    def test_concurrent_versions_each_keep_their_tools(self):
        """Two requests on two versions of a registry at once (the first still decoding after the update):
        each name hands over by the automaton it is decoded on, and an automaton freed and replaced cannot lend
        its map to another."""
        import gc

        v = wide_vocab()
        ctx = engine_context(v)
        ctx.compiler = self.compiler
        request = SimpleNamespace(request_id="r", sampling_params=SimpleNamespace(all_stop_token_ids=[EOS]))
        tag = calls.build_tag("json", False, False, [("x", {})], registry="reg")
        old = [(n, i) for i, n in enumerate(self.NAMES)]
        new = [("inserted", 500)] + old  # every tool's index moves
        ctx.registry = lambda name: self.registry(old, b"old")
        g_old = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.drive(g_old, wide_tokens('[{"name": "東京_sea'), "old, before the update")
        ctx.registry = lambda name: self.registry(new, b"new")
        g_new = route._calls_grammar(ctx, request, "STRUCTURAL_TAG", tag)
        self.assertEqual(ctx.updates, 1)
        key = dict(old)["東京_search"]
        self.drive(g_new, wide_tokens('[{"name": "東京_search", "parameters": {"p%d": 1}}]' % key) + [EOS], "new")
        self.drive(g_old, wide_tokens('rch", "parameters": {"p%d": 1}}]' % key) + [EOS], "old, after the update")
        # Many registries and updates, automata freed and allocated again (CPython reuses their addresses).
        for round_ in range(6):
            tools = [(f"t{round_}_{i}", 1000 * round_ + i) for i in range(8)][::-1]
            ctx.registry = lambda name, tools=tools, r=round_: self.registry(tools, b"r%d" % r)
            self.check_every_name(ctx, tools, f"round {round_}")
            moved = tools[1:] + tools[:1]
            ctx.registry = lambda name, tools=moved, r=round_: self.registry(tools, b"r%d-moved" % r)
            self.check_every_name(ctx, moved, f"round {round_}, rotated")
            gc.collect()


def engine_context(v):
    """An EngineContext over the test vocabulary, without vLLM's manager."""
    import threading

    ctx = route.EngineContext.__new__(route.EngineContext)
    ctx.settings, ctx.n_vocab, ctx.cache = Settings(), v.n_vocab, SimpleNamespace(vocab=v)
    ctx._lock, ctx._by_identity, ctx.routed = threading.Lock(), {}, 0
    ctx._latest, ctx.updates = {}, 0
    return ctx


def tools_mod():
    from libtrie.vllm import tools

    return tools


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
                os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class OneSwitchTest(unittest.TestCase):
    def test_the_switch_alone_routes_and_half_configurations_are_loud(self):
        self.assertEqual(route.check_configuration(False, routing=True, installed=True), "routing")
        self.assertEqual(route.check_configuration(True, routing=True, installed=True), "routing")
        with self.assertRaisesRegex(RuntimeError, "VLLM_PLUGINS='lora_filesystem_resolver' leaves out libtrie"):
            route.check_configuration(False, routing=True, installed=True, plugins="lora_filesystem_resolver")
        self.assertEqual(route.check_configuration(False, routing=True, installed=True, plugins="x,libtrie"),
                         "routing")
        with self.assertRaisesRegex(RuntimeError, "routing could not be installed"):
            route.check_configuration(False, routing=True, installed=False)
        with self.assertLogs("vllm.libtrie", "ERROR") as logs:
            self.assertEqual(route.check_configuration(True, routing=False), "scheduler only")
        self.assertIn("Set LIBTRIE_VLLM_ROUTE=1", logs.output[0])
        self.assertEqual(route.check_configuration(False, routing=False), "off")

    def test_the_engine_core_factory_is_wrapped_without_a_scheduler(self):
        # A stand-in for vLLM's StructuredOutputManager: register() wraps it class-wide with the switch on.
        import types

        class Manager:
            def _create_grammar(self, request):
                return "vllm"

        mods = {"vllm.v1.structured_output": types.SimpleNamespace(StructuredOutputManager=Manager)}
        saved = {k: sys.modules.get(k) for k in mods}
        sys.modules.update(mods)  # type: ignore[arg-type]
        try:
            route._route_engine_core()
            self.assertTrue(route.is_routing_installed())
            grammar = object()
            original = route.engine_grammar
            route.engine_grammar = lambda m, r: grammar if r == "set" else None  # type: ignore[assignment]
            try:
                with Env(LIBTRIE_VLLM_ROUTE="1"):
                    self.assertIs(Manager()._create_grammar("set"), grammar)
                    self.assertEqual(Manager()._create_grammar("other"), "vllm")
                with Env(LIBTRIE_VLLM_ROUTE=None):
                    self.assertEqual(Manager()._create_grammar("set"), "vllm", "the switch is read per request")
            finally:
                route.engine_grammar = original  # type: ignore[assignment]
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


if __name__ == "__main__":
    unittest.main()
