"""Tool calls beyond one required call, under routing (``LIBTRIE_VLLM_ROUTE=1``): ``tool_choice="auto"`` (free text
until the model opens a call with its tool parser's marker), ``parallel_tool_calls`` (several calls, each by its own
tool's schema; ``false`` enforced: one call, then only the end), and registries (the names of an operator's catalog,
:mod:`libtrie.registry`, instead of the request's tools). Importable without vLLM.

The frontend (:func:`libtrie.vllm.frontend.adjust`) writes such a request as a vLLM structural tag: xgrammar's own
format (``structures`` with ``begin``/``schema``/``end`` and ``triggers``: what vLLM's xgrammar backend would serve
without libtrie), plus a ``"libtrie"`` member saying what libtrie serves (:class:`CallSpec`). The engine core reads
it back (:func:`parse_spec`) and serves it with :class:`TrieCallsGrammar`:

- ``free`` (``auto`` only): every token, except those that would finish the marker and go on past it (so the call
  starts at a token boundary); the marker (text, or its own token) opens a call;
- ``name``: the tool's name from a trie (:class:`~libtrie.Automaton` with the format's template, names rendered as
  JSON strings, left open);
- ``args``: the chosen tool's arguments by an xgrammar matcher over a grammar compiled beforehand (the schema, then
  the format's close: ``}\\n</tool_call>``; for the JSON list ``}`` then ``]`` or ``,`` when parallel);
- ``end``: only the request's stop tokens.

Formats (each read back by the vLLM 0.32 tool parser named):

- ``hermes`` (Hermes, Qwen 2.5/3; parser ``hermes``): ``<tool_call>\\n{"name": NAME, "arguments": ARGS}\\n</tool_call>``;
- ``llama`` (Llama 3.x JSON; parser ``llama3_json``): ``{"name": NAME, "parameters": ARGS}``, the call opened by its
  ``{`` (the parser reads every ``{`` of the output as the start of a call and gives up on the whole output when one
  is not a call, so under ``auto`` a ``{`` opens a call); parallel calls are separated by free text (``; ``);
- ``mistral`` (Mistral tokenizers before v11, no ``[ARGS]`` token; parser ``mistral``):
  ``[TOOL_CALLS][{"name": NAME, "arguments": ARGS}, ...]``, parallel calls in the one list;
- ``mistral_v11`` (tokenizers with ``[ARGS]``; parser ``mistral``): ``[TOOL_CALLS]NAME[ARGS]ARGS``, the name raw,
  each further call opened by its own ``[TOOL_CALLS]``;
- ``json`` (vLLM's ``tool_choice="required"`` list ``[{"name": NAME, "parameters": ARGS}, ...]``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .. import Automaton, TrieError, Vocab
from ..draft import draft
from .grammar import Grammar, log

__all__ = ["FORMATS", "Format", "CallSpec", "parse_spec", "build_tag", "TrieCallsGrammar", "straddlers", "KEY"]

#: The member of the structural tag that says what libtrie serves.
KEY = "libtrie"


class Format(NamedTuple):
    """How a tool call is written: ``trigger`` opens a call in free text (``auto``; None: the output starts with a
    call), ``prefix``/``suffix`` surround the JSON-string name, ``close`` ends the arguments; ``next_prefix``: the
    prefix of a further call right after ``close`` (None: a further call starts from free text)."""

    trigger: Optional[str]
    prefix: str
    suffix: str
    close: str
    more: str  # between calls (json: ", "), or "" when calls are separated by free text
    last: str  # after the last call (json: "]")
    next_prefix: str
    parser: str  # the vLLM tool parser that reads this format back
    render: str = "json_string"  # how a name is written (compile_template's render: "json_string" or "raw")


FORMATS: Dict[str, Format] = {
    "hermes": Format("<tool_call>", '\n{"name": ', ', "arguments": ', "}\n</tool_call>", "", "", '\n{"name": ',
                     "hermes"),
    "llama": Format("{", '"name": ', ', "parameters": ', "}", "", "", '"name": ', "llama3_json"),
    "mistral": Format("[TOOL_CALLS]", '[{"name": ', ', "arguments": ', "}", ", ", "]", '{"name": ', "mistral"),
    "mistral_v11": Format("[TOOL_CALLS]", "", "[ARGS]", "", "", "", "", "mistral", "raw"),
    "json": Format(None, '[{"name": ', ', "parameters": ', "}", ", ", "]", '{"name": ', "(required)"),
}


@dataclass(frozen=True)
class CallSpec:
    """What libtrie serves of a request's tool calls: the format, whether the model may answer without a call
    (``auto``), several calls (``parallel``), and the tools (names and ``parameters`` schemas as JSON text) or the
    registry that has them."""

    format: str
    auto: bool
    parallel: bool
    names: Tuple[str, ...]
    schemas: Tuple[str, ...]
    registry: Optional[str] = None


def _schema_text(schema: Any) -> str:
    if schema is None:
        return "{}"
    if not isinstance(schema, dict):
        raise ValueError("a tool's parameters must be a JSON object")
    # The client's property order, not sorted: xgrammar's JSON-schema grammar writes the properties in the order the
    # schema lists them (an optional one may be skipped, none may come back), so sorting them would make the model
    # write its arguments alphabetically (BFCL live_simple on vLLM: an optional key dropped, a string run away).
    return json.dumps(schema)


def build_tag(fmt: str, auto: bool, parallel: bool, tools: Sequence[Tuple[str, Any]],
              registry: Optional[str] = None) -> str:
    """The structural tag of a request (the frontend's side): ``tools`` is ``(name, parameters)`` pairs (the
    request's tools; with a registry, those listed in the prompt). Raises ``ValueError`` (an HTTP 400) for a
    duplicate or empty name, or parameters that are not an object."""
    f = FORMATS[fmt]
    names = [n for n, _ in tools]
    seen = set()
    for n in names:
        if not isinstance(n, str) or not n:
            raise ValueError("tools: a tool name must be a non-empty string")
        if n in seen:
            raise ValueError(f"tools: the tool name {n!r} is listed twice")
        seen.add(n)
    schemas = [_schema_text(p) for _, p in tools]
    trigger = f.trigger or f.prefix
    shown = [json.dumps(n) if f.render == "json_string" else n for n in names]
    structures = [{"begin": (f.trigger or "") + f.prefix + n + f.suffix, "schema": json.loads(s),
                   "end": f.close + f.last} for n, s in zip(shown, schemas)]
    tag = {"type": "structural_tag", "structures": structures, "triggers": [trigger],
           KEY: {"format": fmt, "auto": auto, "parallel": parallel, "names": names, "registry": registry}}
    return json.dumps(tag)


def parse_spec(spec: str, max_bytes: Optional[int] = None) -> Optional[CallSpec]:
    """The :class:`CallSpec` of a structural tag written by :func:`build_tag`, None for any other structural tag
    (vLLM's backend serves it). ``max_bytes`` bounds the text before it is parsed. Raises ``ValueError`` for a
    libtrie tag that is malformed (the request fails, not the engine)."""
    if f'"{KEY}"' not in spec:
        return None
    if max_bytes is not None and len(spec.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValueError(f"structured_outputs.structural_tag: {len(spec)} characters, over this server's bound of "
                         f"{max_bytes} bytes")
    tag = json.loads(spec)
    meta = tag.get(KEY) if isinstance(tag, dict) else None
    if not isinstance(meta, dict):
        return None
    fmt = meta.get("format")
    if fmt not in FORMATS:
        raise ValueError(f"structural_tag.{KEY}.format: {fmt!r} is not one of {sorted(FORMATS)}")
    names = meta.get("names") or []
    structures = tag.get("structures") or []
    if not isinstance(names, list) or len(names) != len(structures):
        raise ValueError(f"structural_tag.{KEY}.names: one name per structure")
    registry = meta.get("registry")
    if registry is not None and not isinstance(registry, str):
        raise ValueError(f"structural_tag.{KEY}.registry: a registry name")
    if not names and registry is None:
        raise ValueError("tools: no tool to call")
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError("tools: tool names must be distinct non-empty strings")
    schemas = tuple(_schema_text(s.get("schema") if isinstance(s, dict) else None) for s in structures)
    return CallSpec(fmt, bool(meta.get("auto")), bool(meta.get("parallel")), tuple(names), schemas, registry)


# ---- the marker: tokens that open a call ---------------------------------------------------------------------------

_STRADDLE: Dict[Tuple[Any, bytes], List[List[int]]] = {}


def straddlers(vocab: Vocab, trigger: bytes) -> List[List[int]]:
    """For each ``k`` in ``0..len(trigger)`` (bytes of the marker already written at the end of the output), the
    tokens that would finish the marker and go on past it in one token (masked in ``free``, so that a call starts at
    a token boundary). Computed once per vocabulary and marker."""
    key = (vocab.fingerprint, trigger)
    hit = _STRADDLE.get(key)
    if hit is not None:
        return hit
    last = trigger[-1:]
    out: List[List[int]] = [[] for _ in range(len(trigger))]
    for t in range(vocab.n_vocab):
        b = vocab.token_bytes(t)
        if last not in b:
            continue
        for k in range(len(trigger)):
            text = trigger[:k] + b
            i = text.find(trigger)
            if i >= 0 and i + len(trigger) < len(text):
                out[k].append(t)
    _STRADDLE[key] = out
    return out


def _tail(trigger: bytes, text: bytes) -> int:
    """The length of the longest suffix of ``text`` that is a proper prefix of ``trigger``."""
    for k in range(min(len(trigger) - 1, len(text)), 0, -1):
        if text.endswith(trigger[:k]):
            return k
    return 0


# ---- the grammar -----------------------------------------------------------------------------------------------------

FREE, NAME, ARGS, END, DONE = "free", "name", "args", "end", "done"
#: ``_Pos.pending`` of the start of a call that must open (the marker's own token is allowed there too).
OPENING = -1


class _Pos(NamedTuple):
    """The grammar's position after a token: the phase, the name automaton and its state, the arguments matcher
    (``took``: it accepted this token), the marker bytes pending (``free``), the calls so far."""

    phase: str
    automaton: Optional[Automaton]
    state: int
    matcher: Any
    took: bool
    pending: int
    calls: int


def tool_at(a: Automaton, state: int) -> Optional[int]:
    """The tool whose name is complete in ``state``: the member's value where the names carry their tools' indices
    (``EngineContext.names``; a registry's updates keep them), else the member (its index in the list compiled)."""
    return a.member_value(state) if a.has_values else a.member(state)


class TrieCallsGrammar(Grammar):  # type: ignore[misc,valid-type,unused-ignore]
    """vLLM's ``StructuredOutputGrammar`` for tool calls (see the module doc). ``first``: the name automaton of the
    first call (its template's prefix is the format's ``prefix``); ``following``: of a further call in the JSON list
    (prefix ``next_prefix``); ``arguments(member, last)``: a matcher over the compiled arguments of tool ``member``
    and the format's close (``last``: no further call may follow); ``token_bytes``/``trigger_ids``/``straddle``: the
    marker's detection (``auto``)."""

    def __init__(self, spec: CallSpec, first: Automaton, following: Optional[Automaton],
                 arguments: Callable[[int, bool], Any], stops: Sequence[int], token_bytes: Callable[[int], bytes],
                 trigger_ids: Sequence[int] = (), straddle: Optional[List[List[int]]] = None,
                 opener: Optional[Automaton] = None, prefetch: Optional[Callable[[int, bool], None]] = None
                 ) -> None:
        self.spec = spec
        #: Told ``(member, last)`` as soon as the name so far leaves one tool (a registry's arguments are compiled
        #: then, off the engine loop, while the rest of the name is decoded).
        self.prefetch = prefetch
        #: Not ``auto`` with a marker: the names with the marker's text before them (the first call opens).
        self.opener = opener
        self.fmt = FORMATS[spec.format]
        self.first, self.following = first, following
        self.make = arguments
        self.stops = sorted(set(stops))
        self.token_bytes = token_bytes
        self.trigger = (self.fmt.trigger or "").encode()
        self.trigger_ids = set(trigger_ids)
        self.straddle = straddle or [[] for _ in range(len(self.trigger))]
        #: The last byte of a token that may end a call's arguments (a token without text may too).
        self.end_bytes = {e[-1:].encode() for e in (self.fmt.close + self.fmt.last, self.fmt.more) if e} or {b"}"}
        self.reset()

    def reset(self) -> None:
        if self.spec.auto:
            start = _Pos(FREE, None, 0, None, False, 0, 0)
        elif self.opener is not None:  # a call must open: the marker's own token, or its text then the name
            start = self._name(self.opener, 0)._replace(pending=OPENING)
        else:
            start = self._name(self.first, 0)
        self.history: List[_Pos] = [start]

    @staticmethod
    def _name(a: Automaton, calls: int) -> _Pos:
        return _Pos(NAME, a, a.start(), None, False, 0, calls)

    # -- one token --

    def _next(self, cur: _Pos, t: int) -> Optional[_Pos]:
        if cur.phase == FREE:
            if t in self.stops:
                return cur._replace(phase=DONE, took=False)
            if t in self.trigger_ids:
                return self._name(self.first, cur.calls)
            b = self.token_bytes(t)
            text = self.trigger[: cur.pending] + b
            i = text.find(self.trigger) if self.trigger else -1
            if i >= 0:
                if i + len(self.trigger) < len(text):
                    return None  # the marker and more in one token: masked
                return self._name(self.first, cur.calls)
            return cur._replace(pending=_tail(self.trigger, text), took=False)
        if cur.phase == NAME:
            assert cur.automaton is not None
            if cur.pending == OPENING and t in self.trigger_ids:
                return self._name(self.first, cur.calls)
            try:
                nxt = cur.automaton.advance(cur.state, t)
            except TrieError:
                return None
            member = tool_at(cur.automaton, nxt)
            if member is None:
                if self.prefetch is not None:
                    self._prefetch(cur.automaton, nxt)
                return cur._replace(state=nxt, pending=0, took=False)
            last = not self.spec.parallel
            try:
                m = self.make(member, last)
            except Exception as e:  # a matcher over a compiled grammar; a registry schema compiled here
                log.error("libtrie: the arguments of tool %d cannot be matched: %s", member, e)
                return None
            return _Pos(ARGS, None, 0, m, False, 0, cur.calls)
        if cur.phase == ARGS:
            if not cur.matcher.accept_token(t):
                return None
            pos = cur._replace(took=True)
            b = self.token_bytes(t)
            if (not b or b[-1:] in self.end_bytes) and self._at_end(cur.matcher):
                return self._after_call(pos, t)
            return pos
        if cur.phase == END:
            return cur._replace(phase=DONE, took=False) if t in self.stops else None
        return None

    def _prefetch(self, a: Automaton, state: int) -> None:
        """When the rest of the name is forced (one tool left), tell :attr:`prefetch` which tool it is."""
        assert self.prefetch is not None
        run = draft(a, state, 256)
        member = tool_at(a, run.end_state) if run.tokens else None
        if member is not None:
            self.prefetch(member, not self.spec.parallel)

    def _at_end(self, matcher: Any) -> bool:
        """Whether the matcher has read its whole grammar (only a stop token can follow): xgrammar's
        ``is_completed``, else a stop token accepted and rolled back."""
        completed = getattr(matcher, "is_completed", None)
        if completed is not None:
            return bool(completed())
        if not self.stops:
            return False
        if not matcher.accept_token(self.stops[0]):
            return False
        matcher.rollback(1)
        return True

    def _after_call(self, pos: _Pos, t: int) -> _Pos:
        calls = pos.calls + 1
        if not self.spec.parallel:
            return _Pos(END, None, 0, pos.matcher, True, 0, calls)
        if self.fmt.more:  # the JSON list: "]" ends it, "," opens the next call
            if self.token_bytes(t).rstrip().endswith(self.fmt.last.encode()):
                return _Pos(END, None, 0, pos.matcher, True, 0, calls)
            assert self.following is not None
            return self._name(self.following, calls)._replace(matcher=pos.matcher, took=True)
        return _Pos(FREE, None, 0, pos.matcher, True, 0, calls)

    # -- vLLM's interface --

    def accept_tokens(self, request_id: str, tokens: Sequence[int]) -> bool:
        for t in tokens:
            cur = self.history[-1]
            if cur.phase == DONE:
                return True
            nxt = self._next(cur, t)
            if nxt is None:
                log.error("libtrie: request %s produced token %d, which its tool calls do not allow", request_id, t)
                return False
            self.history.append(nxt)
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> List[int]:
        ok: List[int] = []
        for t in tokens:
            if self.history[-1].phase == DONE or not self.accept_tokens("", [t]):
                break
            ok.append(t)
        self.rollback(len(ok))
        return ok

    def rollback(self, num_tokens: int) -> None:
        for _ in range(min(num_tokens, len(self.history) - 1)):
            pos = self.history.pop()
            if pos.took:
                pos.matcher.rollback(1)

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        cur = self.history[-1]
        row = bitmask[idx]
        if cur.phase == NAME:
            assert cur.automaton is not None
            cur.automaton.fill_bitmask(cur.state, row)
            if cur.pending == OPENING:
                for t in self.trigger_ids:
                    _set(row, t)
        elif cur.phase == ARGS:
            cur.matcher.fill_next_token_bitmask(bitmask, idx)
        elif cur.phase == FREE:
            row.fill_(-1) if hasattr(row, "fill_") else row.fill(-1)
            for t in self.straddle[cur.pending] if cur.pending < len(self.straddle) else ():
                _clear(row, t)
        else:
            row.fill_(0) if hasattr(row, "fill_") else row.fill(0)
            if cur.phase == END:
                for t in self.stops:
                    _set(row, t)

    def is_terminated(self) -> bool:
        return self.history[-1].phase == DONE

    @property
    def calls(self) -> int:
        """Calls completed so far."""
        return self.history[-1].calls

    @property
    def phase(self) -> str:
        return self.history[-1].phase


def _word(t: int) -> int:
    return -(1 << 31) if t & 31 == 31 else 1 << (t & 31)


def _set(row: Any, t: int) -> None:
    if 0 <= t < row.shape[0] * 32:
        row[t >> 5] |= _word(t)


def _clear(row: Any, t: int) -> None:
    if 0 <= t < row.shape[0] * 32:
        row[t >> 5] &= ~_word(t)
