"""The vLLM scheduler that compiles sets off the engine loop (see :mod:`libtrie.vllm`). Imports vLLM."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .. import FINISHED, Automaton, bitmask_words, fill_bitmask_rows, front
from ..draft import draft, validate
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

__all__ = ["TrieScheduler", "SpecRows", "propose", "spec_rows"]


# ---- speculative tokens: forced runs as drafts, drafts checked against the set -------------------------------------

class Proposal(NamedTuple):
    """The speculative tokens of one constrained request for the next step."""

    tokens: List[int]
    #: The tokens are the set's forced run (the only text it allows there), not the drafter's guess.
    forced: bool


def propose(row: Row, drafted: Sequence[int], k: int) -> Proposal:
    """A request's speculative tokens: its forced run from the current state (at most ``k`` tokens) when one
    exists, decoded and checked in one forward pass (jump-forward through the speculative path); else the drafter's
    own tokens cut to the prefix the set accepts (a draft the set rejects can never be accepted: scheduling it only
    wastes the forward pass)."""
    if k <= 0 or row.broken or row.state == FINISHED:
        return Proposal([], False)
    run = draft(row.automaton, row.state, k)
    if run.tokens:
        return Proposal(list(run.tokens), True)
    drafted = [int(t) for t in drafted[:k]]
    return Proposal(drafted[: len(validate(row.automaton, row.state, drafted))], False)


class SpecRows(NamedTuple):
    """A request's bitmask rows for a step with draft tokens: ``1 + len(drafts)`` rows (the logits at its last token,
    then after each draft), and how many drafts the set accepts."""

    rows: Any  # numpy int32 [1 + n, words]
    n_acceptable: int


def _stop_extra(row: Row, state: int) -> Sequence[int]:
    if row.stops and (state == FINISHED or row.automaton.is_accepting(state)):
        return tuple(row.stops)
    return ()


def spec_rows(row: Row, drafts: Sequence[int], forced: bool, words: int) -> SpecRows:
    """The rows of one request (``row`` caught up) for ``drafts`` scheduled after its last token. Row ``i`` is the
    mask of the logits that verify draft ``i`` (the last row: the token after every draft):

    - forced drafts (the set's forced run): row ``i`` allows exactly draft ``i``, so the target model's
      verification always accepts it (greedy or sampled) and the step decodes the whole run; the last row is the
      mask of the state after the run;
    - a drafter's tokens: row ``i`` is the mask of the state after the drafts before it, so a draft the set rejects
      is rejected by the verification and the token sampled in its place is allowed (every output stays a member).
      Rows past the first rejected draft are never used; they repeat the last valid state's mask."""
    states = [row.state] + validate(row.automaton, row.state, list(drafts)) if not row.broken else [row.state]
    n_ok = len(states) - 1
    rows = np.zeros((1 + len(drafts), words), dtype=np.int32)
    pairs: List[Tuple[Optional[Automaton], int]] = [
        (row.automaton, states[min(i, n_ok)]) for i in range(1 + len(drafts))]
    fill_bitmask_rows(pairs, rows)
    for i, (_, st) in enumerate(pairs):
        for t in _stop_extra(row, st):
            rows[i, t >> 5] |= bit(t & 31)
    if forced:
        for i in range(n_ok):
            rows[i] = 0
            t = int(drafts[i])
            rows[i, t >> 5] = bit(t & 31)
    return SpecRows(rows, n_ok)


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
      runner applies with xgrammar's kernel;
    - with a speculative configuration (``speculative_config``, e.g. ``{"method": "ngram", "num_speculative_tokens":
      8, "prompt_lookup_max": 4}``), ``schedule`` gives each constrained request its set's forced run as its
      speculative tokens (jump-forward through vLLM's own verification: one forward pass for the run, every draft
      accepted since its mask row allows exactly it), or else the drafter's tokens cut to what the set accepts; the
      mask rows of the draft positions follow the states along the drafts, so no accepted or resampled token can
      leave the set (:func:`spec_rows`).

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
        #: Requests whose speculative tokens this step are their set's forced run (see :meth:`schedule`).
        self._forced: Dict[str, List[int]] = {}
        #: Forced tokens proposed as speculative tokens (a counter for benchmarks and tests).
        self.trie_forced_proposed = 0
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
        self._forced.pop(request.request_id, None)
        return super()._free_request(request, *args, **kwargs)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        """vLLM's scheduling, after setting the speculative tokens of the running constrained requests (only with a
        speculative configuration: without one the model runner verifies no draft): a request's forced run replaces
        the drafter's tokens (jump-forward through the speculative path: the run costs one forward pass), else the
        drafter's tokens are cut to the prefix its set accepts."""
        self._forced.clear()
        k = int(getattr(self, "num_spec_tokens", 0) or 0)
        if k > 0 and self._trie:
            self._propose_forced(k)
        return super().schedule(*args, **kwargs)

    def _propose_forced(self, k: int) -> None:
        for req_id, pending in self._trie.items():
            row = pending.row
            request = self.requests.get(req_id)
            if row is None or request is None or request.is_finished() or request.is_prefill_chunk:
                continue
            if not request.output_token_ids:
                continue  # its first token comes from the prompt's step, which takes no drafts
            row.catch_up(req_id)
            proposal = propose(row, list(request.spec_token_ids or ()), k)
            request.spec_token_ids = proposal.tokens
            if proposal.forced:
                self._forced[req_id] = proposal.tokens
                self.trie_forced_proposed += len(proposal.tokens)

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
        acceptable = [0] * len(ids)
        if not any(n_spec):
            bitmask = np.zeros((len(ids), self.trie_words), dtype=np.int32)  # ids past a narrower vocabulary: 0
            fill_bitmask_rows([(r.automaton, r.state) for r in rows], bitmask)
            for i, r in enumerate(rows):
                for t in r.extra():
                    bitmask[i, t >> 5] |= bit(t & 31)
        else:  # 1 + n rows per request: its own, then after each draft (see spec_rows)
            parts = []
            for i, (req_id, r) in enumerate(zip(ids, rows)):
                drafts = list(spec_tokens.get(req_id, ()))
                forced = self._forced.get(req_id, [])
                sr = spec_rows(r, drafts, bool(drafts) and forced[: len(drafts)] == drafts, self.trie_words)
                parts.append(sr.rows)
                acceptable[i] = sr.n_acceptable
            bitmask = np.concatenate(parts)
        if out is None:
            return GrammarOutput(ids, bitmask, acceptable)
        drafts_ok = out.num_acceptable_drafts
        return GrammarOutput(list(out.structured_output_request_ids) + ids,
                             np.concatenate([out.grammar_bitmask, bitmask]),
                             None if drafts_ok is None else list(drafts_ok) + acceptable)
