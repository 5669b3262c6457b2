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

from .. import Automaton, Vocab, toolcalls
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
    #: With a registry: the request's tools that the registry lacks are callable too (deferred tools offered by the
    #: operator's registry, with the request's own tools and its search tool).
    extend: bool = False


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
              registry: Optional[str] = None, extend: bool = False) -> str:
    """The structural tag of a request (the frontend's side): ``tools`` is ``(name, parameters)`` pairs (the
    request's tools; with a registry, those listed in the prompt, and with ``extend`` callable too where the registry
    lacks them). Raises ``ValueError`` (an HTTP 400) for a
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
    tag: Dict[str, Any] = {"type": "structural_tag", "structures": structures, "triggers": [trigger],
           KEY: {"format": fmt, "auto": auto, "parallel": parallel, "names": names, "registry": registry}}
    if extend and registry is not None:
        tag[KEY]["extend"] = True
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
    return CallSpec(fmt, bool(meta.get("auto")), bool(meta.get("parallel")), tuple(names), schemas, registry,
                    bool(meta.get("extend")))


# ---- the grammar: the native engine ---------------------------------------------------------------------------------


def straddlers(vocab: Vocab, trigger: bytes) -> List[List[int]]:
    """For each ``k`` in ``0..len(trigger)`` (marker bytes already at the end of the output), the tokens that would
    finish the marker and go on past it in one token (the native engine masks them in ``free``)."""
    return toolcalls.straddlers(vocab, trigger)



class TrieCallsGrammar(Grammar):  # type: ignore[misc,valid-type,unused-ignore]
    """vLLM's ``StructuredOutputGrammar`` for tool calls (see the module doc): an adapter over the native engine
    (:mod:`libtrie.toolcalls`; phases, the marker, the hand-over, the close, further calls and rollback are decided
    there). ``first``: the name automaton of the first call (its template's prefix is the format's ``prefix``);
    ``following``: of a further call in the JSON list (prefix ``next_prefix``); ``opener``: required with a marker
    (the marker's text, then ``prefix``); ``arguments(tool, last)``: an xgrammar matcher over the compiled
    arguments of a tool and the format's close (``last``: no further call may follow); ``prefetch(tool, last)``:
    told when the name so far leaves one tool. The tool of a name is the member's value where the names carry their
    tools' indices (a registry's, kept by its updates), else its index in the list compiled; ``tools`` (per
    automaton: first, following, opener) is a member → tool map only for name automata without values. The engine
    computes the marker's own tokens and the straddling ones from the automata's vocabulary."""

    def __init__(self, spec: CallSpec, first: Automaton, following: Optional[Automaton],
                 arguments: Callable[[int, bool], Any], stops: Sequence[int], opener: Optional[Automaton] = None,
                 prefetch: Optional[Callable[[int, bool], None]] = None,
                 tools: Sequence[Optional[Sequence[int]]] = ()) -> None:
        self.spec = spec
        self.engine = toolcalls.ToolCalls.from_automata(spec.format, spec.auto, spec.parallel, sorted(set(stops)),
                                                        first, following, opener, tools)
        self.make, self.prefetch = arguments, prefetch
        self.reset()

    def reset(self) -> None:
        self.seq = toolcalls.Sequence(self.engine, self.make, self.prefetch, _log_make_error)

    # -- vLLM's interface --

    def accept_tokens(self, request_id: str, tokens: Sequence[int]) -> bool:
        for t in tokens:
            why = self.seq.accept(t)
            if why is not None:
                log.error("libtrie: request %s produced token %d, which its tool calls do not allow (%s)",
                          request_id, t, why)
                return False
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> List[int]:
        return list(tokens[: self.seq.validate(tokens)])

    def rollback(self, num_tokens: int) -> None:
        self.seq.rollback(num_tokens)

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        self.seq.fill_bitmask(bitmask, idx)

    def is_terminated(self) -> bool:
        return self.seq.is_terminated()

    @property
    def calls(self) -> int:
        """Calls completed so far."""
        return self.seq.calls

    @property
    def phase(self) -> str:
        return self.seq.phase

    @property
    def tool(self) -> Optional[int]:
        """The tool of the current call once its name is complete."""
        return self.seq.tool

    @property
    def history(self) -> range:
        """The sequence's positions (the start, then one per accepted token not rolled back), as indices."""
        return range(self.seq.n_accepted + 1)


def _log_make_error(tool: int, e: Exception) -> None:
    log.error("libtrie: the arguments of tool %d cannot be matched: %s", tool, e)


def _set(row: Any, t: int) -> None:
    """Sets token ``t``'s bit in a bitmask row of 32-bit words (signed words: bit 31 is the sign)."""
    if 0 <= t < row.shape[0] * 32:
        row[t >> 5] |= -(1 << 31) if t & 31 == 31 else 1 << (t & 31)
