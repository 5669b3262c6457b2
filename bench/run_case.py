"""One benchmark case in its own process: one engine, vocabulary, workload, form and K. Prints one JSON line.

    python bench/run_case.py ENGINE VOCAB WORKLOAD FORM K [--compile-budget S] [--mask-budget S]

ENGINE: libtrie-py | xgrammar | llguidance | outlines. The compile is timed once (first compile, cold) and then
repeated while the repeats stay within the compile budget (median reported); the mask is timed per step along the
shared token paths (bench/common.make_paths) until the mask budget is spent; each sampled token is checked against
the mask (outside the timing) so that an engine that disagrees with the set is reported, not silently timed.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Tuple

import common as C

Compiled = Any


class Engine:
    """compile(strings, members) -> object; session(obj) -> (reset(), mask(ptr) , advance(token) -> bool)."""

    name = ""
    version = ""

    def setup(self, pv: C.PeerVocab) -> None: ...

    def compile(self, members: List[str], form: str) -> Compiled: ...

    def matcher(self, compiled: Compiled) -> Tuple[Callable[[], None], Callable[[int], None], Callable[[int], bool]]:
        ...


class LibtriePy(Engine):
    name = "libtrie-py"

    def setup(self, pv: C.PeerVocab) -> None:
        import libtrie

        self.lt = libtrie
        self.version = libtrie.version()
        self.vocab = libtrie.Vocab.from_gguf(C.vocab_path(pv.name))

    def compile(self, members, form):
        return self.lt.Automaton(self.vocab, C.form_strings(members, form))

    def matcher(self, a):
        st = [a.start()]
        words = a.mask_words
        mask = a._mask
        h = a._h
        import ctypes

        u32p = ctypes.POINTER(ctypes.c_uint32)

        def reset():
            st[0] = a.start()

        def fill(ptr):
            if mask(h, st[0], ctypes.cast(ptr, u32p), words) != 0:
                raise RuntimeError("trie_mask failed")

        def advance(t):
            st[0] = a.advance(st[0], t)
            return True

        return reset, fill, advance


class XGrammar(Engine):
    name = "xgrammar"

    def setup(self, pv):
        import xgrammar as xgr

        self.xgr = xgr
        self.version = getattr(xgr, "__version__", None) or _dist_version("xgrammar")
        enc = [b"" if t in pv.special else b for t, b in enumerate(pv.tokens)]
        self.info = xgr.TokenizerInfo(enc, vocab_type=xgr.VocabType.RAW, vocab_size=pv.n_vocab,
                                      stop_token_ids=pv.eog)
        self.compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)

    def compile(self, members, form):
        if form == "json":
            return self.compiler.compile_json_schema(json.dumps({"enum": members}, ensure_ascii=False))
        return self.compiler.compile_grammar(C.grammar_texts(members)[0])

    def matcher(self, compiled):
        import torch

        m = self.xgr.GrammarMatcher(compiled)
        self._bm = self.xgr.allocate_token_bitmask(1, self.info.vocab_size)

        def fill(ptr):
            m.fill_next_token_bitmask(self._bm)

        return m.reset, fill, m.accept_token

    def mask_ptr(self):
        return self._bm.data_ptr()


class LLGuidance(Engine):
    name = "llguidance"

    def __init__(self, raised: bool = False, regex: bool = False) -> None:
        self.raised = raised
        self.regex = regex  # raw form as one regex alternation (a single lexeme) instead of a Lark alternation
        self.name = "llguidance" + ("-regex" if regex else "") + ("-raised" if raised else "")

    def setup(self, pv):
        import llguidance as llg

        self.llg = llg
        self.version = _dist_version("llguidance")

        # LLGuidance re-tokenizes bytes with the real tokenizer (a wrapper without one breaks its masks), so it gets
        # the Hugging Face tokenizer.json of the same family: the token ids of text tokens are the GGUF's.
        self.tok = llg.LLTokenizer(str(C.hf_tokenizer(pv.name)), n_vocab=pv.n_vocab, eos_token=pv.eog)
        self.limits = None
        if self.raised:
            big = 1 << 40
            self.limits = llg.LLParserLimits(max_items_in_row=big, initial_lexer_fuel=big, step_lexer_fuel=big,
                                             step_max_items=big, max_lexer_states=big, max_grammar_size=big)

    def compile(self, members, form):
        M = self.llg.LLMatcher
        if form == "json":
            g = M.grammar_from_json_schema({"enum": members})
        elif self.regex:
            g = M.grammar_from_regex(C.grammar_texts(members)[2])
        else:
            g = M.grammar_from_lark(C.grammar_texts(members)[1])
        m = M(self.tok, g, log_level=0, limits=self.limits) if self.limits else M(self.tok, g, log_level=0)
        if m.is_error():
            raise RuntimeError("llguidance: " + m.get_error()[:300])
        return m

    def matcher(self, m):
        nbytes = 4 * ((self.tok.vocab_size + 31) // 32)

        def fill(ptr):
            m.unsafe_compute_mask_ptr(ptr, nbytes)

        def advance(t):
            ok = m.consume_token(t)
            if m.is_error():
                raise RuntimeError("llguidance: " + m.get_error()[:300])
            return ok

        return m.reset, fill, advance


class Outlines(Engine):
    name = "outlines"

    def setup(self, pv):
        import outlines_core as oc

        self.oc = oc
        self.version = _dist_version("outlines-core")
        groups: Dict[bytes, List[int]] = {}
        for t, b in enumerate(pv.tokens):
            if b and t not in pv.special and t != pv.eos:
                groups.setdefault(b, []).append(t)
        self.vocab = oc.Vocabulary(pv.eos, groups)
        self.n_vocab = pv.n_vocab

    def compile(self, members, form):
        if form == "json":
            rx = self.oc.json_schema.build_regex_from_schema(json.dumps({"enum": members}, ensure_ascii=False))
        else:
            rx = C.grammar_texts(members)[2]
        return self.oc.Index(rx, self.vocab)

    def matcher(self, index):
        g = self.oc.Guide(index)
        numel = (self.n_vocab + 31) // 32

        def fill(ptr):
            g.write_mask_into(ptr, numel, 4)

        def advance(t):
            g.advance(t, return_tokens=False)
            return True

        return g.reset, fill, advance


ENGINES = {"libtrie-py": LibtriePy, "xgrammar": XGrammar, "llguidance": LLGuidance,
           "llguidance-raised": lambda: LLGuidance(True), "llguidance-regex": lambda: LLGuidance(regex=True),
           "llguidance-regex-raised": lambda: LLGuidance(True, True), "outlines": Outlines}


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def run(engine_name: str, vocab: str, workload: str, form: str, k: int, compile_budget: float,
        mask_budget: float) -> Dict[str, Any]:
    import numpy as np

    res: Dict[str, Any] = {"engine": engine_name, "vocab": vocab, "workload": workload, "form": form, "k": k}
    eng = ENGINES[engine_name]()
    t = time.perf_counter()
    pv = C.PeerVocab(vocab)
    eng.setup(pv)
    res["version"] = eng.version
    res["setup_ms"] = (time.perf_counter() - t) * 1e3
    members = C.load_set(workload, k)
    paths = C.load_paths(vocab, workload, form, k)
    gc.collect()
    base = C.reset_peak()

    t = time.perf_counter()
    compiled = eng.compile(members, form)
    res["first_compile_ms"] = (time.perf_counter() - t) * 1e3
    times: List[float] = []
    spent = res["first_compile_ms"] / 1e3
    while len(times) < 5 and spent + res["first_compile_ms"] / 1e3 < compile_budget:
        t = time.perf_counter()
        c2 = eng.compile(members, form)
        dt = time.perf_counter() - t
        del c2
        times.append(dt * 1e3)
        spent += dt
    res["compile_repeats"] = len(times)
    res["compile_ms"] = statistics.median(times) if times else res["first_compile_ms"]

    reset, fill, advance = eng.matcher(compiled)
    words = (pv.n_vocab + 31) // 32
    row = np.zeros(words, dtype=np.uint32)
    ptr = eng.mask_ptr() if isinstance(eng, XGrammar) else row.ctypes.data
    per_step: List[float] = []
    first: List[float] = []
    decodes = 0
    pc = time.perf_counter
    deadline = pc() + mask_budget
    mismatch = None
    mismatched = 0
    last_mismatch = None
    for path in paths:
        if pc() > deadline:
            break
        if mismatch:
            mismatched += 1
            mismatch = None
        reset()
        for i, tok in enumerate(path):
            t0 = pc()
            fill(ptr)
            dt = (pc() - t0) * 1e6
            per_step.append(dt)
            if i == 0:
                first.append(dt)
            if isinstance(eng, XGrammar):
                row[:] = eng._bm.numpy().view(np.uint32)[0, :words]
            if not (int(row[tok >> 5]) >> (tok & 31)) & 1:
                mismatch = last_mismatch = f"token {tok} not in mask at step {i} of decode {decodes}"
                break
            if i == len(path) - 1:
                break  # the end-of-generation token: checked in the mask, not advanced (outlines-core raises)
            if not advance(tok):
                mismatch = last_mismatch = f"token {tok} rejected at step {i} of decode {decodes}"
                break
        decodes += 1
    if mismatch:
        mismatched += 1
    res["decodes"] = decodes
    res["mismatched_decodes"] = mismatched
    res.update(C.stats(per_step, first))
    res["peak_rss_growth_bytes"] = max(0, C.peak_rss() - base)
    res["status"] = "mismatch" if mismatched else "ok"
    if last_mismatch:
        res["error"] = last_mismatch
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("engine", choices=list(ENGINES))
    ap.add_argument("vocab")
    ap.add_argument("workload")
    ap.add_argument("form", choices=["raw", "json"])
    ap.add_argument("k", type=int)
    ap.add_argument("--compile-budget", type=float, default=20.0)
    ap.add_argument("--mask-budget", type=float, default=10.0)
    a = ap.parse_args()
    try:
        res = run(a.engine, a.vocab, a.workload, a.form, a.k, a.compile_budget, a.mask_budget)
    except Exception as e:  # an engine failure is a result
        res = {"engine": a.engine, "vocab": a.vocab, "workload": a.workload, "form": a.form, "k": a.k,
               "status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
        traceback.print_exc(file=sys.stderr)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
