"""SGLang grammar backends on an enum JSON schema of K names: libtrie (``--grammar-backend libtrie``) against SGLang's
XGrammar backend (what the same request gets without libtrie), through SGLang's own backend interface
(``get_cached_or_future_value`` on the backend's executor, ``fill_vocab_mask``, ``accept_token``), in one run.

Per K: time to the request's grammar (the compile a first request waits for), mean time to fill one mask row over
the decode of a member, and a check that every decoded output is a member (argmax of random logits under the mask).
Run with the environment of scripts/setup-sglang.sh (scripts/bench-sglang.sh does it); prints a Markdown table.

    python scripts/bench-sglang.py TOKENIZER_JSON [K ...]
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any, List, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import create_grammar_backend
from sglang.srt.plugins import load_plugins
from sglang.srt.runtime_context import get_context
from transformers import PreTrainedTokenizerFast

VOCAB_SIZE, EOS = 151936, "<|im_end|>"  # Qwen3's padded model vocabulary


def names(k: int) -> List[str]:
    rng = random.Random(k)
    words = ["calendar", "maps", "mail", "files", "notes", "weather", "search", "music", "photos", "billing", "crm",
             "tickets", "deploy", "metrics", "users", "orders"]
    verbs = ["get", "list", "create", "update", "delete", "find", "sync", "export"]
    out = set()
    while len(out) < k:
        out.add(f"{rng.choice(words)}_{rng.randrange(10 * k)}.{rng.choice(verbs)}_{rng.choice(words)}")
    return sorted(out)


def run(backend: Any, key: Tuple[str, str], tokenizer: Any, members: List[str]) -> Tuple[float, float, str]:
    t0 = time.perf_counter()
    fut, _ = backend.get_cached_or_future_value(key, False)
    grammar = fut.result()
    compile_s = time.perf_counter() - t0
    mask = grammar.allocate_vocab_mask(VOCAB_SIZE, 1, "cpu")
    gen = torch.Generator().manual_seed(0)
    fills, out = [], []
    for _ in range(200):
        t = time.perf_counter()
        grammar.fill_vocab_mask(mask, 0)
        fills.append(time.perf_counter() - t)
        logits = torch.randn(1, VOCAB_SIZE, generator=gen)
        grammar.apply_vocab_mask(logits, mask)
        token = int(torch.argmax(logits[0]))
        grammar.accept_token(token)
        if grammar.is_terminated():
            break
        out.append(token)
    text = tokenizer.decode(out)
    if not grammar.is_terminated() or json.loads(text) not in members:
        raise AssertionError(f"{type(grammar).__name__}: {text!r} is not a member")
    return compile_s, sum(fills) / len(fills), text


def main() -> None:
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=sys.argv[1])
    ks = [int(k) for k in sys.argv[2:]] or [100, 1000, 10000]
    eos = {tokenizer.convert_tokens_to_ids(EOS)}
    load_plugins()
    with get_context().override_server_args(grammar_backend="libtrie") as args:
        libtrie = create_grammar_backend(args, tokenizer, VOCAB_SIZE, eos)
        xgrammar = libtrie.default  # SGLang's XGrammar backend, built by create_grammar_backend
        print(f"load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} cores, qwen3 vocabulary\n")
        print("| K | libtrie compile | XGrammar compile | compile ratio | libtrie mask fill | XGrammar mask fill "
              "| outputs members |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        for k in ks:
            members = names(k)
            key = ("json", json.dumps({"type": "string", "enum": members}))
            lc, lm, _ = run(libtrie, key, tokenizer, members)
            if k <= 10000:
                xc, xm, _ = run(xgrammar, key, tokenizer, members)
                ratio, xcs, xms = f"{xc / lc:.0f}x", f"{xc * 1e3:.0f} ms", f"{xm * 1e6:.0f} us"
            else:
                ratio = xcs = xms = "not run"  # XGrammar: tens of seconds per 10,000 names here
            print(f"| {k:,} | {lc * 1e3:.1f} ms | {xcs} | {ratio} | {lm * 1e6:.0f} us | {xms} | yes |", flush=True)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
