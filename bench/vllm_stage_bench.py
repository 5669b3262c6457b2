"""The constraint stage alone, as vLLM runs it per decoding step, without a model: libtrie's TrieLogitsProcessor
(update_state + apply on a [B, V] float32 logits tensor) against XGrammar the way vLLM's xgrammar backend drives it
(one GrammarMatcher per request over one compiled `choice` grammar; per step fill_next_token_bitmask for every row,
apply_token_bitmask_inplace, accept_token). Same vocabulary (Qwen3's tokenizer.json, 151,936 logits), same sets,
same token paths (every row decodes a random member, tokenized greedily longest-first).

    <vllm-venv>/bin/python bench/vllm_stage_bench.py --tokenizer qwen3.tokenizer.json --sets DIR [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import torch

N_VOCAB = 151936


def token_paths(automaton, members, n, rng):
    """Greedy longest-token paths of n random members, ending with the first EOG id."""
    vocab = automaton.vocab
    eog = vocab.eog_ids[0]
    paths = []
    for _ in range(n):
        want = rng.choice(members).encode()
        state, done, path = automaton.start(), 0, []
        while done < len(want):
            best = max((t for t in automaton.allowed(state).tolist() if want.startswith(vocab.token_bytes(t), done)
                        and vocab.token_bytes(t)), key=lambda t: len(vocab.token_bytes(t)))
            path.append(best)
            done += len(vocab.token_bytes(best))
            state = automaton.advance(state, best)
        paths.append(path + [eog])
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--sets", required=True)
    ap.add_argument("--ks", default="1000,10000")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--repeats", type=int, default=4, help="decodes per case; the first is a warm-up")
    ap.add_argument("--out", help="JSON lines, appended")
    ap.add_argument("--md", help="append a Markdown section with this run's table to this file")
    a = ap.parse_args()

    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    import libtrie
    from libtrie.vllm import TrieLogitsProcessor

    os.environ["LIBTRIE_VOCAB"] = a.tokenizer
    os.environ["LIBTRIE_SET_DIR"] = a.sets
    eos = [151643, 151645]
    hf = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=N_VOCAB, stop_token_ids=eos)
    compiler = xgr.GrammarCompiler(info)
    vocab = libtrie.Vocab.from_tokenizer_json(a.tokenizer, eog_ids=eos, n_vocab=N_VOCAB)
    rows_out = []
    for k in [int(x) for x in a.ks.split(",")]:
        path = Path(a.sets) / f"tools-{k}.txt"
        members = path.read_text(encoding="utf-8").split("\n")[:-1]
        automaton = libtrie.compile(vocab, members)
        t = time.perf_counter()
        grammar = compiler.compile_grammar(xgr.Grammar.from_ebnf(
            "root ::= " + " | ".join(json.dumps(m, ensure_ascii=False) for m in members)))
        xgr_compile = time.perf_counter() - t
        for b in [int(x) for x in a.batches.split(",")]:
            rng = random.Random(b * 7 + k)
            paths = token_paths(automaton, members, b, rng)
            steps = max(map(len, paths))
            logits = torch.zeros(b, N_VOCAB)

            # libtrie: the processor as vLLM calls it (update_state before each step, then apply).
            cfg = SimpleNamespace(
                model_config=SimpleNamespace(tokenizer=a.tokenizer, model=a.tokenizer, tokenizer_revision=None,
                                             get_vocab_size=lambda: N_VOCAB, hf_config=SimpleNamespace(eos_token_id=eos),
                                             try_get_generation_config=lambda: {}),
                scheduler_config=SimpleNamespace(max_num_seqs=b))
            proc = TrieLogitsProcessor(cfg, torch.device("cpu"), False)
            sp = SamplingParams(extra_args={"libtrie": {"set": f"tools-{k}"}})
            matchers = [xgr.GrammarMatcher(grammar) for _ in range(b)]
            bitmask = xgr.allocate_token_bitmask(b, N_VOCAB)
            trie_runs, xgr_runs = [], []
            for _ in range(a.repeats):  # the first repeat also warms up the kernels
                outs = [[] for _ in range(b)]
                proc.update_state(BatchUpdate(batch_size=b, removed=[], moved=[],
                                              added=[(i, sp, None, outs[i]) for i in range(b)]))
                t = time.perf_counter()
                for s in range(steps):
                    proc.update_state(None)
                    proc.apply(logits)
                    for i, p in enumerate(paths):
                        if s < len(p) and proc.rows[i].state != libtrie.FINISHED:
                            outs[i].append(p[s])
                trie_runs.append((time.perf_counter() - t) / steps)

                # XGrammar: one matcher per request, as vLLM's xgrammar backend.
                for m in matchers:
                    m.reset()
                t = time.perf_counter()
                for s in range(steps):
                    live = [i for i, p in enumerate(paths) if s < len(p)]
                    for i in live:
                        matchers[i].fill_next_token_bitmask(bitmask, i)
                    xgr.apply_token_bitmask_inplace(logits, bitmask, indices=live)
                    for i in live:
                        if not matchers[i].accept_token(paths[i][s]):
                            raise SystemExit(f"xgrammar rejected token {paths[i][s]} of row {i} at step {s}")
                xgr_runs.append((time.perf_counter() - t) / steps)
            trie_steps, xgr_steps = trie_runs[1:] or trie_runs, xgr_runs[1:] or xgr_runs
            row = {"k": k, "batch": b, "steps": steps, "libtrie_step_ms": 1e3 * statistics.median(trie_steps),
                   "xgrammar_step_ms": 1e3 * statistics.median(xgr_steps), "xgrammar_compile_ms": 1e3 * xgr_compile,
                   "loadavg": os.getloadavg()[0]}
            row["ratio"] = row["xgrammar_step_ms"] / row["libtrie_step_ms"]
            rows_out.append(row)
            print(f"K={k:<6} B={b:<4} steps={steps:<3} libtrie {row['libtrie_step_ms']:8.3f} ms/step   "
                  f"xgrammar {row['xgrammar_step_ms']:8.3f} ms/step   ({row['ratio']:.1f}×)", flush=True)
    if a.out:
        with open(a.out, "a") as f:
            for r in rows_out:
                f.write(json.dumps(r) + "\n")
    if a.md:
        with open(a.md, "a") as f:
            f.write(report(rows_out))


def report(rows) -> str:
    lines = ["", "## The constraint stage alone (bench/vllm_stage_bench.py)", "",
             "Per decoding step, no model: libtrie's processor (`update_state` + `apply`) against XGrammar driven as "
             "vLLM's xgrammar backend drives it (a matcher per request over one compiled `choice` grammar; "
             "`fill_next_token_bitmask` per row, `apply_token_bitmask_inplace`, `accept_token`). Qwen3 tokenizer "
             "(151,936 logits, float32 on the CPU), tool-name sets, each row decoding a random member (greedy "
             "longest tokens), median over 3 decodes after a warm-up. Finished rows stay in libtrie's batch (its rows "
             "are not removed) but leave XGrammar's, which favours XGrammar.", "",
             "| K | batch | libtrie ms/step | XGrammar ms/step | XGrammar ÷ libtrie | XGrammar compile |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['k']:,} | {r['batch']} | {r['libtrie_step_ms']:.3f} | {r['xgrammar_step_ms']:.2f} | "
                     f"{r['ratio']:.1f}× | {r['xgrammar_compile_ms']:,.0f} ms |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
