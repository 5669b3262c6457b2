"""vLLM integration: force a request's output to be exactly one string of a set.

Two parts (the request front end itself, shared with llama-server, is libtrie's native one: :mod:`libtrie.sets`):

- :class:`TrieLogitsProcessor`, a vLLM V1 logits processor. Installing the package registers it in the
  ``vllm.logits_processors`` entry-point group, which vLLM loads for every engine (or pass
  ``LLM(model, logits_processors=[TrieLogitsProcessor])`` / ``--logits-processors libtrie.vllm:TrieLogitsProcessor``).
  Its ``validate_params`` checks every request at admission (a bad set is an HTTP 400 on the OpenAI-compatible
  server), and on its own it masks the constrained rows in the model runner.
- :class:`TrieScheduler`, a vLLM scheduler (``--scheduler-cls libtrie.vllm.TrieScheduler``, or
  ``LLM(..., scheduler_cls=TrieScheduler)``). Recommended for servers. It does what vLLM does for its own structured
  outputs: a set is compiled on a worker thread of the engine core while its request waits in the queue (the other
  requests go on), and the masks are filled in the engine core during the forward pass and applied by the model
  runner with xgrammar's kernel. The logits processor then only validates. Needs synchronous scheduling (vLLM's
  default on CPU; pass ``--no-async-scheduling`` on GPU).

  Why a scheduler: without it a set is compiled when the model runner first sees the request, and a logits
  processor cannot hold one request back (every scheduled request samples a token each step; no token is
  harmless), so the whole batch waits for the compile (1.5 s to 3 s for 1,000,000 strings here). Compiling at
  admission does not help either: ``validate_params`` runs in the API server process, on its event loop, and the
  masks are needed in the model runner, a third process on CPU (``mp`` executor).

No client change, one switch: with ``LIBTRIE_VLLM_ROUTE=1`` (the scheduler is optional), the structured outputs
users already send (``choice``, a string ``enum`` schema, a literal-alternation grammar or regex) and tool calls
(``required``, ``auto`` with a ``<tool_call>`` parser, parallel calls, registries named by
``vllm_xargs={"libtrie_registry": NAME}``) are served by libtrie and every other structured output by vLLM's
backend: see :mod:`libtrie.vllm.route`, :mod:`libtrie.vllm.frontend` and :mod:`libtrie.vllm.calls`.

Name the set per request in ``SamplingParams.extra_args["libtrie"]`` (serializable values only, so it works across
vLLM's process boundaries and through the OpenAI-compatible server's ``vllm_xargs``):

- ``{"set": "tools"}`` or just ``"tools"``: the file ``tools.txt`` of the set directory ``$LIBTRIE_SET_DIR``, one
  member per line (UTF-8, ``\\n`` separated, a final newline ignored).
- ``{"file": "sub/tools.txt"}`` (or a string with a ``/``): a file by its path relative to the set directory.
- ``{"strings": ["yes", "no", ...]}`` (or a list of strings): the members inline.
- optional ``"drop_unreachable": true``: drop members the vocabulary cannot spell instead of failing the request.
- optional ``"add": [...]`` and ``"remove": [...]`` (lists of strings, with any of the three forms): the set with
  these strings added and removed, e.g. a registry's tool set plus the tools of this session. It is built from the
  compiled base set (compiled once, cached) by ``Automaton.with_changes``, which copies the rows the changes do not
  touch, and cached under its own key; the result is the set ``(base - remove) + add``.

Requests are untrusted input. Operator settings (environment of the vLLM server):

- ``LIBTRIE_SET_DIR``: the folder sets are read from. Without it, sets from files are refused. A path must stay
  inside it: absolute paths and ``..`` are refused, no symbolic link under it is followed (a link is refused, in
  any component of the path), and files that are not regular files or are larger than ``LIBTRIE_MAX_FILE_BYTES``
  (default 256 MiB) are refused. A file is opened once: a set is identified by the opened file (device, inode,
  size, modification time), and its members are read from that same open file. The folder's contents must be
  trusted (whoever can write there chooses what the model may print).
- ``LIBTRIE_ALLOW_ANY_PATH=1``: trusted callers only (an offline ``LLM`` script): any readable regular file, by an
  absolute path or one relative to the set directory.
- ``LIBTRIE_MAX_INLINE_STRINGS`` (default 10,000) and ``LIBTRIE_MAX_INLINE_BYTES`` (default 1 MiB, counting a byte
  per member for its separator): the largest inline set (``strings``, ``add`` and ``remove`` together). Larger sets belong in the set directory, where they are
  compiled once and shared.
- ``LIBTRIE_MAX_STATES`` / ``LIBTRIE_MAX_BYTES``: memory bounds of one compile (0 or unset: the library's own);
  a set beyond them fails with ``LIMIT_EXCEEDED``.
- ``LIBTRIE_DEFERRED_REGISTRY``: a registry of the set directory offered as deferred tools (``defer_loading``) of
  every chat request with tools: callable, found by the tool-search tool, never in the prompt unless found or
  referenced (:mod:`libtrie.vllm.deferred`).
- ``LIBTRIE_COMPILE_THREADS`` (default 1): concurrent compiles of the scheduler; ``LIBTRIE_CACHE_SIZE`` (default 64):
  compiled sets kept (least recently used go first; a set still in use by a request is never compiled twice).
- ``LIBTRIE_CACHE_DIR``: a folder (the operator's, writable) where the vocabulary and the compiled sets of set files
  are saved in libtrie's file format: a restarted server, or another worker process, maps them instead of
  compiling (the pages are shared). Set files are named by a digest of the vocabulary's fingerprint, the file's
  identity (device, inode, size, modification time) and the compile options; inline sets (a client's content) are
  not saved. A damaged or stale file is compiled again and replaced. libtrie never deletes files there: size the
  folder yourself.

Strings must be valid Unicode: a lone surrogate (``"\\ud800"``) is refused at admission. A request whose set
passes admission but then fails to compile (not UTF-8, empty, a string the vocabulary cannot spell, beyond the
memory bounds) ends with finish reason ``error`` under the scheduler, or with an empty output
under the logits processor alone; the engine goes on.

Decoding: each constrained request keeps one integer state, advanced from its output token ids before each step.
At a state where a member is complete, the request's stop tokens (``SamplingParams.all_stop_token_ids``, which
include the model's EOS ids) are allowed too. The logits processor masks rows in one of two ways
(``$LIBTRIE_VLLM_APPLY``: ``auto``, the default, picks per step): *sparse* (keep the allowed logits, fill the rows
with -inf, put them back; O(allowed) plus a memset) or *bitmask* (all rows filled in one native call, then xgrammar's
``apply_token_bitmask_inplace``, or plain torch with ``torch``).

The vocabulary is read from the model's ``tokenizer.json`` (the tokenizer folder, or the Hugging Face cache when the
tokenizer is a hub id), or from ``$LIBTRIE_VOCAB`` (a ``tokenizer.json`` or a GGUF file); the mask width is the
model's logits width.

Caveats: ``min_tokens`` larger than the longest member conflicts with the constraint (vLLM then masks the only
allowed tokens); speculative decoding rejects custom logits processors (a vLLM rule); a set cannot be combined with
vLLM's own structured outputs in one request.
"""

from __future__ import annotations

from typing import Any

from .. import FINISHED
from ..masks import apply_bitmask
from ..sets import SetCache, SetError, SetSpec, Settings, parse_spec, read_set_file
from ._common import EXTRA_KEY, load_model_vocab, shared_cache

__all__ = ["TrieLogitsProcessor", "TrieScheduler", "Settings", "SetSpec", "SetError", "parse_spec", "read_set_file",
           "SetCache", "apply_bitmask", "FINISHED", "EXTRA_KEY", "load_model_vocab", "shared_cache"]


def __getattr__(name: str) -> Any:
    """The vLLM classes, imported on first use (the rest of this package imports without vLLM or torch)."""
    if name == "TrieLogitsProcessor":
        from .processor import TrieLogitsProcessor

        return TrieLogitsProcessor
    if name == "TrieScheduler":
        from .scheduler import TrieScheduler

        return TrieScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
