"""The vLLM scheduler that compiles sets off the engine loop (see :mod:`libtrie.vllm`). Imports vLLM."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Dict, Optional

import numpy as np

from .. import Automaton, bitmask_words, fill_bitmask_rows, front
from ..masks import bit
from ..sets import Settings
from . import route
from .grammar import TrieGrammar
from .tools import MAX_SCHEMAS, ToolCompiler, TrieToolGrammar, matcher
from ._common import EXTRA_KEY, Row, fits, log, shared_cache, stop_ids

try:  # the V1 engine core's scheduler (vLLM 0.32)
    from vllm.v1.core.sched.output import GrammarOutput
    from vllm.v1.core.sched.scheduler import Scheduler as _VllmScheduler
except ImportError:  # pragma: no cover - depends on the vLLM version
    _VllmScheduler = object  # type: ignore[misc,assignment,unused-ignore]
    GrammarOutput = None  # type: ignore[misc,assignment,unused-ignore]

__all__ = ["TrieScheduler"]


# ---- the scheduler --------------------------------------------------------------------------------------------------

class _Pending:
    """A constrained request known to the scheduler: its set's future, then its decoding row."""

    __slots__ = ("future", "row")

    def __init__(self, future: "Future[Automaton]") -> None:
        self.future = future
        self.row: Optional[Row] = None


class TrieScheduler(_VllmScheduler):  # type: ignore[misc,valid-type,unused-ignore]  # vLLM ships no type stubs
    """vLLM's scheduler, plus libtrie's sets the way vLLM runs its own structured outputs (the engine core process):

    - ``add_request``: a request that names a set gets its compile started on a worker thread
      (:meth:`SetCache.submit`; a set already compiled is ready at once);
    - while the compile runs the request waits in the queue (skipped like a request whose grammar is compiling;
      the others are scheduled and stream); a set that fails ends its request with finish reason ``error``;
    - ``get_grammar_bitmask``, which the engine calls while the model runs: the rows of the constrained requests
      that sample this step, filled in one native call and appended to the structured-output bitmask that the model
      runner applies with xgrammar's kernel.

    Use it with ``--scheduler-cls libtrie.vllm.TrieScheduler`` (or ``LLM(..., scheduler_cls=TrieScheduler)``);
    the package's logits processor stays registered for admission checks. Needs synchronous scheduling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if getattr(self.scheduler_config, "async_scheduling", False):
            raise ValueError("libtrie.vllm.TrieScheduler needs synchronous scheduling: pass --no-async-scheduling "
                             "(async_scheduling=False)")
        self.trie_settings = Settings.from_env()
        self.trie_n_vocab = int(self.vllm_config.model_config.get_vocab_size())
        self.trie_words = bitmask_words(self.trie_n_vocab)
        self.trie_cache = shared_cache(self.vllm_config, self.trie_settings)
        self.trie_cache.vocab  # load the vocabulary now, at engine start, not while serving  # noqa: B018
        self._trie: Dict[str, _Pending] = {}
        #: Structured-output requests served by libtrie (LIBTRIE_VLLM_ROUTE=1; see libtrie.vllm.route).
        self.trie_routed = 0
        if route.enabled():
            self._route_structured_outputs()

    def _route_structured_outputs(self) -> None:
        """Wrap the structured-output manager's grammar factory (run on its compile threads): a request whose key
        libtrie serves (:func:`~libtrie.vllm.route.recognize_key`) gets a libtrie grammar, compiled there with the
        recognition's template; any other goes to vLLM's backend as before."""
        manager = self.structured_output_manager
        original = manager._create_grammar
        compiler = ToolCompiler(lambda: manager.backend)
        vocab, settings, n_vocab = self.trie_cache.vocab, self.trie_settings, self.trie_n_vocab

        def create_grammar(request: Any) -> Any:
            request_type, spec = request.structured_output_request.structured_output_key
            routed = route.recognize_key(request_type.name, spec, settings)
            if routed is None:
                return original(request)
            found, params = routed.found, request.sampling_params
            if routed.kind == "tools":  # tool_choice="required": the name from a trie, then its arguments
                contexts = compiler.compile(found)  # every argument grammar, here: off the engine loop
                if contexts is None:
                    route.log.info("libtrie: request %s (tools) has more than %d argument schemas: vLLM's backend "
                                   "serves it", request.request_id, MAX_SCHEMAS)
                    return original(request)
                template = fits(front.compile_recognized(vocab, found, settings), n_vocab)
                stops = sorted(params.all_stop_token_ids or ())
                self.trie_routed += 1
                route.log.info("libtrie: request %s (tools, %d names) is served by libtrie", request.request_id,
                               len(found.members))
                return TrieToolGrammar(template, lambda m: matcher(contexts[m], stops))
            automaton = fits(front.compile_recognized(vocab, found, settings, end="eog"), n_vocab)
            self.trie_routed += 1
            route.log.info("libtrie: request %s (%s, %d members) is served by libtrie", request.request_id,
                           request_type.name.lower(), len(found.members))
            return TrieGrammar(automaton, stop_ids(params, automaton, n_vocab))

        def create_grammar_logged(request: Any) -> Any:
            try:
                return create_grammar(request)
            except Exception:  # the request ends with an error (vLLM's own factory logs its failures the same way)
                route.log.exception("libtrie: the structured output of request %s cannot be served",
                                    request.request_id)
                raise

        manager._create_grammar = create_grammar_logged
        route.log.info("libtrie: structured outputs that are finite sets are served by libtrie (LIBTRIE_VLLM_ROUTE=1)")

    def add_request(self, request: Any) -> None:
        params = request.sampling_params
        extra = (params.extra_args or {}) if params is not None else {}
        if EXTRA_KEY in extra and request.request_id not in self._trie:
            try:
                if request.use_structured_output:
                    raise ValueError(f'extra_args["{EXTRA_KEY}"] cannot be combined with structured outputs')
                future = self.trie_cache.submit(extra[EXTRA_KEY])
            except ValueError as e:  # admission checked it already, unless the request came another way
                future = Future()
                future.set_exception(e)
            self._trie[request.request_id] = _Pending(future)
        super().add_request(request)

    def _handle_blocked_waiting_request(self, request: Any) -> bool:
        pending = self._trie.get(request.request_id)
        if pending is not None and pending.row is None:
            if not pending.future.done():
                return False  # compiling: skip it this step, schedule the others
            try:
                automaton = fits(pending.future.result(), self.trie_n_vocab)
            except Exception as e:
                log.error("libtrie: the set of request %s cannot be compiled (%s); the request ends with an error",
                          request.request_id, e)
                self.grammar_compile_error_reqs.add(request.request_id)
                return False
            pending.row = Row(automaton, request.output_token_ids,
                               stop_ids(request.sampling_params, automaton, self.trie_n_vocab))
        ok: bool = super()._handle_blocked_waiting_request(request)
        return ok

    def _free_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._trie.pop(request.request_id, None)
        return super()._free_request(request, *args, **kwargs)

    def get_grammar_bitmask(self, scheduler_output: Any) -> Any:
        out = super().get_grammar_bitmask(scheduler_output)
        if not self._trie:
            return out
        ids, rows = [], []
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens or {}
        for req_id in scheduler_output.num_scheduled_tokens:
            pending = self._trie.get(req_id)
            if pending is None or pending.row is None:
                continue
            request = self.requests.get(req_id)
            if request is None or request.is_prefill_chunk:
                continue  # no token is sampled for a chunk of a prompt
            pending.row.catch_up(req_id)
            ids.append(req_id)
            rows.append(pending.row)
        if not ids:
            return out
        n_spec = [len(spec_tokens.get(i, ())) for i in ids]
        bitmask = np.zeros((len(ids), self.trie_words), dtype=np.int32)  # ids past a narrower vocabulary: 0
        fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
        for i, r in enumerate(rows):
            for t in r.extra():
                bitmask[i, t >> 5] |= bit(t & 31)
        if any(n_spec):  # draft tokens: all-ones rows after each request's own, and none of its drafts accepted
            at = np.cumsum([0] + [1 + n for n in n_spec[:-1]])
            full = np.full((len(ids) + sum(n_spec), self.trie_words), -1, dtype=np.int32)
            full[at] = bitmask
            bitmask = full
        if out is None:
            return GrammarOutput(ids, bitmask, [0] * len(ids))
        drafts = out.num_acceptable_drafts
        return GrammarOutput(list(out.structured_output_request_ids) + ids,
                             np.concatenate([out.grammar_bitmask, bitmask]),
                             None if drafts is None else list(drafts) + [0] * len(ids))
