"""Tool calls with ``tool_choice="required"`` under routing (``LIBTRIE_VLLM_ROUTE=1`` with TrieScheduler): the tool's
name from a trie, then that tool's arguments through vLLM's xgrammar backend, compiled for that one tool when it is
chosen (and cached).

vLLM turns ``tools=[...]`` with ``tool_choice="required"`` (no tool parser structural tag) into the JSON schema
``{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [{"properties": {"name": {"type": "string",
"enum": [NAME]}, "parameters": PARAMS}, "required": ["name", "parameters"]}, ...]}}`` (``get_json_schema_from_tools``)
and parses the output as a JSON list of ``{"name", "parameters"}``. :func:`tool_schema` reads that key back;
:class:`TrieToolGrammar` produces exactly one call, ``[{"name": "NAME", "parameters": ARGS}]`` with ``ARGS`` valid
for NAME's schema (a subset of the schema's language: one call, this spacing). A named ``tool_choice`` needs nothing:
its key is that one tool's parameters, which vLLM's backend compiles alone.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .. import Automaton, TrieError, Vocab
from .route import Grammar, log

__all__ = ["tool_schema", "TrieToolGrammar", "ToolCompiler", "PREFIX", "SUFFIX", "CLOSE"]

PREFIX, SUFFIX, CLOSE = '[{"name": ', ', "parameters": ', "}]"


def tool_schema(spec: str) -> Optional[Tuple[List[str], List[Any], Dict[str, Any]]]:
    """``(names, parameter schemas, $defs)`` when ``spec`` is vLLM's schema of ``tool_choice="required"``, else None."""
    try:
        s = json.loads(spec)
    except ValueError:
        return None
    if not isinstance(s, dict) or s.get("type") != "array" or not isinstance(s.get("items"), dict):
        return None
    alts = s["items"].get("anyOf")
    if s["items"].get("type") != "object" or not isinstance(alts, list) or not alts:
        return None
    names, params = [], []
    for alt in alts:
        props = alt.get("properties") if isinstance(alt, dict) else None
        if not isinstance(props, dict) or set(props) != {"name", "parameters"}:
            return None
        enum = props["name"].get("enum") if isinstance(props["name"], dict) else None
        if not (isinstance(enum, list) and len(enum) == 1 and isinstance(enum[0], str)):
            return None
        names.append(enum[0])
        params.append(props["parameters"])
    if len(set(names)) != len(names) or any(not n for n in names):
        return None  # vLLM's own backend decides (a registry with a duplicate or empty name is not a set)
    defs: Dict[str, Any] = s["$defs"] if isinstance(s.get("$defs"), dict) else {}
    return names, params, defs


class ToolCompiler:
    """The engine core's compiled tool names (one template per list of names) and argument grammars (one per tool
    schema, compiled by vLLM's xgrammar compiler when the tool is first chosen). Thread-safe; bounded LRUs."""

    def __init__(self, vocab: Vocab, xgrammar_backend: Callable[[], Any], capacity: int = 64) -> None:
        self.vocab = vocab
        self.backend = xgrammar_backend
        self.capacity = capacity
        self._names: "OrderedDict[Tuple[str, ...], Automaton]" = OrderedDict()
        self._args: "OrderedDict[str, Any]" = OrderedDict()
        self._lock = threading.Lock()
        #: Argument grammars compiled (a tool chosen again is not compiled again).
        self.arg_compiles = 0

    def names(self, names: Sequence[str]) -> Automaton:
        key = tuple(names)
        with self._lock:
            a = self._names.get(key)
            if a is not None:
                self._names.move_to_end(key)
                return a
        a = Automaton.compile_template(self.vocab, list(names), prefix=PREFIX, suffix=SUFFIX, render="json_string",
                                       end="open")
        with self._lock:
            self._names[key] = a
            while len(self._names) > self.capacity:
                self._names.popitem(last=False)
        return a

    def arguments(self, params: Any, defs: Dict[str, Any], stops: Sequence[int]) -> Any:
        """An xgrammar matcher for ``params`` (the tool's parameter schema) followed by ``}]``."""
        import xgrammar as xgr

        schema = dict(params) if isinstance(params, dict) else params
        if defs and isinstance(schema, dict):
            schema = {**schema, "$defs": defs}
        key = json.dumps(schema, sort_keys=True)
        with self._lock:
            ctx = self._args.get(key)
            if ctx is not None:
                self._args.move_to_end(key)
        if ctx is None:
            backend = self.backend()
            grammar = xgr.Grammar.concat(
                xgr.Grammar.from_json_schema(key, any_whitespace=not getattr(backend, "disable_any_whitespace", False)),
                xgr.Grammar.from_ebnf(f"root ::= {json.dumps(CLOSE)}"))
            ctx = backend.compiler.compile_grammar(grammar)
            with self._lock:
                self.arg_compiles += 1
                self._args[key] = ctx
                while len(self._args) > self.capacity:
                    self._args.popitem(last=False)
        return xgr.GrammarMatcher(ctx, override_stop_tokens=list(stops) if stops else None)


class TrieToolGrammar(Grammar):  # type: ignore[misc,valid-type,unused-ignore]
    """vLLM's ``StructuredOutputGrammar`` for one required tool call: the name from ``template`` (an open template:
    ``[{"name": "NAME", "parameters": ``), then, from the token that completes it, the arguments of that tool by
    an xgrammar matcher made by ``arguments(member)``. Rollback across the hand-over drops the matcher."""

    def __init__(self, template: Automaton, arguments: Callable[[int], Any]) -> None:
        self.a = template
        self.make = arguments
        self.reset()

    def reset(self) -> None:
        self.states = [self.a.start()]  # one per token accepted before the hand-over
        self.matcher: Optional[Any] = None
        self.after = 0  # tokens accepted by the matcher

    def _accept(self, t: int) -> bool:
        if self.matcher is not None:
            if not self.matcher.accept_token(t):
                return False
            self.after += 1
            return True
        try:
            nxt = self.a.advance(self.states[-1], t)
        except TrieError:
            return False
        self.states.append(nxt)
        member = self.a.member(nxt)
        if member is not None:  # the name is complete: hand over to that tool's arguments
            try:
                self.matcher, self.after = self.make(member), 0
            except Exception as e:  # a schema xgrammar cannot compile: this request fails, not the engine
                log.error("libtrie: the arguments of tool %d cannot be compiled: %s", member, e)
                self.states.pop()
                return False
        return True

    def accept_tokens(self, request_id: str, tokens: Sequence[int]) -> bool:
        for t in tokens:
            if self.is_terminated():
                return True
            if not self._accept(t):
                log.error("libtrie: request %s produced token %d, which its tool call does not allow", request_id, t)
                return False
        return True

    def validate_tokens(self, tokens: Sequence[int]) -> List[int]:
        ok: List[int] = []
        for t in tokens:
            if self.is_terminated() or not self._accept(t):
                break
            ok.append(t)
        self.rollback(len(ok))
        return ok

    def rollback(self, num_tokens: int) -> None:
        if self.matcher is not None:
            n = min(num_tokens, self.after)
            if n:
                self.matcher.rollback(n)
                self.after -= n
                num_tokens -= n
            if num_tokens > 0:  # back into the name: the hand-over is undone
                self.matcher, self.after = None, 0
        if num_tokens > 0:
            del self.states[-min(num_tokens, len(self.states) - 1):]

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        if self.matcher is not None:
            self.matcher.fill_next_token_bitmask(bitmask, idx)
        else:
            self.a.fill_bitmask(self.states[-1], bitmask[idx])

    def is_terminated(self) -> bool:
        return self.matcher is not None and bool(self.matcher.is_terminated())
