"""Tool calls with ``tool_choice="required"`` under routing (``LIBTRIE_VLLM_ROUTE=1`` with TrieScheduler): the tool's
name from a trie, then that tool's arguments through vLLM's xgrammar compiler.

vLLM turns ``tools=[...]`` with ``tool_choice="required"`` (no tool parser structural tag) into the JSON schema
``{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [{"properties": {"name": {"type": "string",
"enum": [NAME]}, "parameters": PARAMS}, "required": ["name", "parameters"]}, ...]}}`` (``get_json_schema_from_tools``)
and parses the output as a JSON list of ``{"name", "parameters"}``. libtrie's native recognizer (kind
``"vllm_tools"``, exactly that form and nothing that merely looks like it) reads it back: the names as the set, each
tool's ``parameters`` as its payload, and the template of the call. :class:`TrieToolGrammar` produces exactly one
call, ``[{"name": "NAME", "parameters": ARGS}]`` with ``ARGS`` valid for NAME's schema (a subset of the schema's
language: one call, this spacing).

The argument grammars (client schemas) are compiled when the request's grammar is made, on vLLM's grammar threads,
never on the engine core's loop (:meth:`ToolCompiler.compile`): one per distinct schema, cached, at most
:data:`MAX_SCHEMAS` per request (a request with more distinct schemas is left to vLLM's own backend, which compiles
the whole ``anyOf`` on the same threads). Handing over to the chosen tool's arguments is then a matcher over an
already compiled grammar. A named ``tool_choice`` needs nothing: its key is that one tool's parameters, which vLLM's
backend compiles alone.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Sequence

from .. import Automaton, Recognized, TrieError
from .grammar import Grammar, log, roll_back

__all__ = ["TrieToolGrammar", "ToolCompiler", "CLOSE", "MAX_SCHEMAS"]

#: What follows the arguments of the one call (vLLM's form: a list of one object).
CLOSE = "}]"
# The EBNF root that closes a call after its arguments (the default ``close`` of :class:`ToolCompiler`).
CLOSE_ROOT = f"root ::= {json.dumps(CLOSE)}"
#: The most distinct argument schemas one request may have for libtrie to serve it.
MAX_SCHEMAS = 256


class ToolCompiler:
    """The engine core's compiled argument grammars (one per tool schema, by vLLM's xgrammar compiler), in a
    bounded LRU. Thread-safe.

    :meth:`prefetch` compiles a registry tool's schema on a worker thread of its own (``executor``, by default one
    thread made on first use: not vLLM's grammar threads, where it could queue behind a large set's compile) as
    soon as the model's name is down to that one tool (the rest of the name and the format's suffix are still to
    be decoded), so the hand-over to its arguments (:meth:`at_hand_over`, on the engine loop) finds it compiled or
    waits only for the rest of a compile already under way."""

    def __init__(self, xgrammar_backend: Callable[[], Any], capacity: int = 4 * MAX_SCHEMAS,
                 executor: Optional[Any] = None) -> None:
        self.backend = xgrammar_backend
        self.capacity = capacity
        self.executor = executor
        self._args: "OrderedDict[str, Any]" = OrderedDict()
        self._inflight: Dict[str, "Future[Any]"] = {}
        self._lock = threading.Lock()
        #: Argument grammars compiled (a schema seen again is not compiled again).
        self.arg_compiles = 0
        #: Compiles started by :meth:`prefetch`; hand-overs that waited for one still running; hand-overs that
        #: compiled on the calling thread (nothing prefetched: the name was not unique before its last token).
        self.prefetched = 0
        self.waited = 0
        self.compiled_at_hand_over = 0

    @staticmethod
    def _key(schema: str, close: str) -> str:
        return schema if close == CLOSE_ROOT else schema + "\0" + close

    def _cached(self, key: str) -> Any:
        """The compiled grammar under ``key``, marked recently used, or ``None`` (call with the lock held)."""
        ctx = self._args.get(key)
        if ctx is not None:
            self._args.move_to_end(key)
        return ctx

    def ready(self, schema: str, close: str = CLOSE_ROOT) -> bool:
        """Whether the grammar of ``schema`` and ``close`` is compiled (cached)."""
        with self._lock:
            return self._key(schema, close) in self._args

    def prefetch(self, schema: str, close: str = CLOSE_ROOT) -> None:
        """Start compiling ``schema`` followed by ``close`` on the worker thread, unless it is compiled or under
        way."""
        key = self._key(schema, close)
        with self._lock:
            if key in self._args or key in self._inflight:
                return
            future: "Future[Any]" = Future()
            self._inflight[key] = future
            self.prefetched += 1

        def run() -> None:
            try:
                future.set_result(self._compile_one(schema, close, inflight=False))
            except BaseException as e:  # the hand-over sees it (the request fails, not the engine)
                future.set_exception(e)
            finally:
                with self._lock:
                    self._inflight.pop(key, None)

        try:
            self._pool().submit(run)
        except RuntimeError:  # the executor is shut down (the engine stops): the hand-over compiles
            with self._lock:
                self._inflight.pop(key, None)

    def _pool(self) -> Any:
        with self._lock:
            if self.executor is None:
                from concurrent.futures import ThreadPoolExecutor

                self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="libtrie-args")
            return self.executor

    def at_hand_over(self, schema: str, close: str = CLOSE_ROOT) -> Any:
        """The compiled grammar at a hand-over to a tool's arguments (on the engine loop): cached, or the rest of a
        prefetched compile, or compiled here (counted)."""
        key = self._key(schema, close)
        with self._lock:
            ctx = self._cached(key)
            if ctx is not None:
                return ctx
            future = self._inflight.get(key)
            if future is None:
                self.compiled_at_hand_over += 1
            else:
                self.waited += 1
        return future.result() if future is not None else self._compile_one(schema, close)

    def _compile_one(self, schema: str, close: str = CLOSE_ROOT, inflight: bool = True) -> Any:
        """The compiled grammar of ``schema`` (JSON text) followed by ``close`` (an EBNF ``root``), cached; a compile
        of the same grammar under way on the executor is waited for (``inflight``), not repeated."""
        import xgrammar as xgr

        key = self._key(schema, close)
        with self._lock:
            ctx = self._cached(key)
            if ctx is not None:
                return ctx
            future = self._inflight.get(key) if inflight else None
        if future is not None:
            return future.result()
        backend = self.backend()
        grammar = xgr.Grammar.concat(
            xgr.Grammar.from_json_schema(schema, any_whitespace=not getattr(backend, "disable_any_whitespace", False)),
            xgr.Grammar.from_ebnf(close))
        ctx = backend.compiler.compile_grammar(grammar)
        with self._lock:
            self.arg_compiles += 1
            self._args[key] = ctx
            while len(self._args) > self.capacity:
                self._args.popitem(last=False)
        return ctx

    def compile(self, found: Recognized) -> Optional[List[Any]]:
        """The compiled argument grammar of every tool of ``found`` (a ``"vllm_tools"`` recognition: each payload is
        the tool's parameters schema, with the request's ``$defs``), each followed by ``}]``; ``None`` when the
        request has more than :data:`MAX_SCHEMAS` distinct schemas. Runs on the calling thread (vLLM's grammar
        threads). Raises what xgrammar raises for a schema it cannot compile (the request then fails, not the
        engine)."""
        payloads = found.payloads or tuple("{}" for _ in found.members)
        distinct = dict.fromkeys(payloads)
        if len(distinct) > MAX_SCHEMAS:
            return None
        compiled = {p: self._compile_one(p) for p in distinct}
        return [compiled[p] for p in payloads]


def matcher(ctx: Any, stops: Sequence[int]) -> Any:
    """An xgrammar matcher over a compiled argument grammar, ending on the request's stop ids."""
    import xgrammar as xgr

    return xgr.GrammarMatcher(ctx, override_stop_tokens=list(stops) if stops else None)


class TrieToolGrammar(Grammar):  # type: ignore[misc,valid-type,unused-ignore]
    """vLLM's ``StructuredOutputGrammar`` for one required tool call: the name from ``template`` (an open template:
    ``[{"name": "NAME", "parameters": ``), then, from the token that completes it, the arguments of that tool by
    the matcher ``arguments(member)`` (over a grammar compiled beforehand). Rollback across the hand-over drops the
    matcher."""

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
            except Exception as e:  # pragma: no cover - a matcher over a compiled grammar
                log.error("libtrie: the arguments of tool %d cannot be matched: %s", member, e)
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
        roll_back(self.states, num_tokens)

    def fill_bitmask(self, bitmask: Any, idx: int) -> None:
        if self.matcher is not None:
            self.matcher.fill_next_token_bitmask(bitmask, idx)
        else:
            self.a.fill_bitmask(self.states[-1], bitmask[idx])

    def is_terminated(self) -> bool:
        return self.matcher is not None and bool(self.matcher.is_terminated())
