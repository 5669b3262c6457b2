"""SGLang integration: a grammar backend that serves finite-set requests with libtrie and hands every other request
to SGLang's own default backend (XGrammar).

Switch it on with ``--grammar-backend libtrie`` (``sglang serve`` / ``python -m sglang.launch_server``, or
``sgl.Engine(..., grammar_backend="libtrie")``). Installing the package registers the name: the
``sglang.srt.plugins`` entry point ``libtrie = libtrie.sglang:register``, which SGLang runs in every process before it
parses its arguments (the CLI, the engine, each scheduler). Without entry points (``SGLANG_PLUGINS`` excluding it, a
vendored copy), call :func:`register` yourself before SGLang parses its arguments and in each scheduler process.

Which requests libtrie serves (``libtrie.recognize``; clients change nothing, SGLang has no server-side ``choice``):

- ``json_schema`` whose language is a finite list of JSON values: ``enum`` / ``const`` / ``anyOf`` / ``oneOf`` of
  them (``{"enum": ["calendar.create_event", ...]}``);
- ``ebnf`` that is an alternation of string literals (``root ::= "yes" | "no"``);
- ``regex`` that is an alternation of literals (``yes|no``, ``^(?:a|b\\.c)$``).

Everything else (objects, ``$$ANY$$`` JSON mode, character classes, repetitions, structural tags) goes to the
default backend, created by SGLang's own ``create_grammar_backend`` with the same arguments, as if libtrie were not
installed: ``$LIBTRIE_SGLANG_DEFAULT`` names it (``xgrammar``, the default; ``llguidance``, ``outlines``, or
``none`` to refuse every other structured request).

Requests are untrusted. The operator's bounds travel into the recognition (:mod:`libtrie.front`: the text's size
before anything parses it, members and their bytes as the set is expanded, nesting): a request past them fails with
SGLang's "Failed to compile ... grammar: libtrie: ..." abort naming the bound, and the server goes on. A text
libtrie's recognizers cannot read (XGrammar's ``TagDispatch``, another dialect) goes to the default backend, which
judges it; valid duplicates are served deduplicated. Bounds (environment of the server, as for :mod:`libtrie.vllm`):
``LIBTRIE_MAX_INLINE_STRINGS`` (default 10,000 members), ``LIBTRIE_MAX_INLINE_BYTES`` (default 1 MiB, a byte per
member for its separator; the text may be 8 times that plus 64 KiB), ``LIBTRIE_MAX_STATES`` / ``LIBTRIE_MAX_BYTES``
(memory bounds of one compile).

The vocabulary is the served tokenizer's own ``tokenizer.json`` (a fast tokenizer's backend, serialized), or
``$LIBTRIE_VOCAB`` (a ``tokenizer.json`` or GGUF file) for tokenizers without one; its mask width is the model's
vocabulary size (padding ids are never allowed) and its end-of-generation ids are the model's EOS ids. The masks are
SGLang's (XGrammar's) layout: ``int32`` rows of ``ceil(vocab_size / 32)`` words, so one batch may mix libtrie and
XGrammar rows.

Limits: with ``--reasoning-parser`` SGLang does not wrap a registered backend in its reasoning backend (it returns
it before that step), so the set constrains the output from its first token; use it with models that do not
think first. Jump-forward is offered when one member is left (its rest and its token path), but SGLang 0.5.23's
scheduler no longer calls jump-forward.
"""

from __future__ import annotations

from typing import Any

#: The ``--grammar-backend`` name this package registers.
BACKEND_NAME = "libtrie"

__all__ = ["BACKEND_NAME", "register", "LibtrieGrammarBackend", "LibtrieGrammar", "create_backend"]


def register() -> None:
    """Register the ``libtrie`` grammar backend with SGLang (idempotent): ``register_grammar_backend`` and the
    ``--grammar-backend`` choices. The ``sglang.srt.plugins`` entry point of the package."""
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY, register_grammar_backend
    from sglang.srt.server_args import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices

    from .backend import create_backend

    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    if GRAMMAR_BACKEND_REGISTRY.get(BACKEND_NAME) is not create_backend:
        register_grammar_backend(BACKEND_NAME, create_backend)


def __getattr__(name: str) -> Any:
    """The SGLang classes, imported on first use (``import libtrie.sglang`` needs neither SGLang nor torch)."""
    if name in ("LibtrieGrammarBackend", "LibtrieGrammar", "create_backend"):
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
