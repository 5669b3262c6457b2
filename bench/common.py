"""Shared pieces of the side-by-side benchmark: paths, the sets, the token paths, the vocabulary read from GGUF,
memory probes and the grammar forms of a set for each engine."""

from __future__ import annotations

import json
import os
import random
import struct
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRIE_CACHE", REPO / ".cache"))
SETS = CACHE / "bench-sets"
PATHS = CACHE / "bench-paths"
ASSETS = Path(os.environ.get("TRIE_ASSETS", REPO.parent / "shared" / "assets"))
sys.path.insert(0, str(REPO / "python"))


def vocab_path(name: str) -> Path:
    return ASSETS / "vocab" / f"ggml-vocab-{name}.gguf"


def hf_tokenizer(name: str) -> Path:
    """The Hugging Face tokenizer.json of the same family as a GGUF vocabulary (same ids for text tokens)."""
    return ASSETS / "tokenizers" / (
        {"qwen2": "qwen3", "llama-bpe": "llama3"}[name] + ".tokenizer.json")


def load_set(workload: str, k: int) -> List[str]:
    with open(SETS / f"{workload}-{k}.txt", encoding="utf-8") as f:
        return [line[:-1] for line in f]


def form_strings(members: Sequence[str], form: str) -> List[str]:
    """The strings an engine must accept for a form: `raw` = the members, `json` = JSON string literals."""
    if form == "json":
        return [json.dumps(m, ensure_ascii=False) for m in members]
    return list(members)


def paths_file(vocab: str, workload: str, form: str, k: int) -> Path:
    return PATHS / f"{vocab}-{workload}-{form}-{k}.txt"


def load_paths(vocab: str, workload: str, form: str, k: int) -> List[List[int]]:
    with open(paths_file(vocab, workload, form, k)) as f:
        return [[int(t) for t in line.split()] for line in f if line.strip()]


def make_paths(vocab: str, workload: str, form: str, k: int, n_decodes: int, seed: int = 1) -> Path:
    """Token paths of full decodes of random members: each member (in its form) tokenized canonically by the Hugging
    Face tokenizer of the same family (through llguidance's Rust binding of `tokenizers`), then the end-of-sequence
    id; every path is checked against the libtrie automaton. Every engine replays these same paths, so all see the
    same steps, as a model that writes the usual tokenization would. One decode per line, ids separated by spaces."""
    import libtrie
    import llguidance

    out = paths_file(vocab, workload, form, k)
    if out.exists():
        return out
    v = libtrie.Vocab.from_gguf(vocab_path(vocab))
    eos = int(read_gguf_vocab(vocab_path(vocab))["tokenizer.ggml.eos_token_id"])  # type: ignore[arg-type]
    tok = llguidance.LLTokenizer(str(hf_tokenizer(vocab)))
    strings = form_strings(load_set(workload, k), form)
    a = libtrie.Automaton(v, strings)
    rng = random.Random(seed)
    lines = []
    for _ in range(n_decodes):
        path = list(tok.tokenize_str(strings[rng.randrange(len(strings))])) + [eos]
        s = a.start()
        for t in path:
            s = a.advance(s, t)  # raises if libtrie disagrees with the tokenizer
        assert s == libtrie.FINISHED
        lines.append(" ".join(map(str, path)))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(out)
    return out


# ---- GGUF vocabulary (only the metadata the peers need) -----------------------------------------------------------

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_vocab(path: Path) -> Dict[str, object]:
    """tokenizer.ggml.{tokens, token_type, eos_token_id, model} from a GGUF file (metadata only)."""
    want = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.model"}
    out: Dict[str, object] = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string() -> bytes:
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n]
        pos += n
        return s

    def value(t: int):
        if t == 8:
            return string()
        if t == 9:
            it, n = take("<I"), take("<Q")
            return [value(it) for _ in range(n)]
        return take(_SCALARS[t])

    assert data[:4] == b"GGUF"
    pos = 8
    _n_tensors, n_kv = take("<Q"), take("<Q")
    for _ in range(n_kv):
        key = string().decode()
        t = take("<I")
        v = value(t)
        if key in want:
            out[key] = v
    return out


class PeerVocab:
    """The token bytes of a vocabulary as libtrie decodes them, with GGUF's token kinds: the one vocabulary every
    Python peer is built from. `special` = control, user-defined marker-like, unknown and unused ids."""

    def __init__(self, name: str) -> None:
        import libtrie

        self.name = name
        v = libtrie.Vocab.from_gguf(vocab_path(name))
        meta = read_gguf_vocab(vocab_path(name))
        kinds = list(meta["tokenizer.ggml.token_type"])  # type: ignore[arg-type]
        self.n_vocab = len(v)
        self.eog = list(v.eog_ids)
        self.eos = int(meta.get("tokenizer.ggml.eos_token_id", self.eog[0]))  # type: ignore[arg-type]
        self.tokens: List[bytes] = []
        self.special: List[int] = []
        for t in range(self.n_vocab):
            kind = kinds[t] if t < len(kinds) else 5
            b = v.token_bytes(t)
            self.tokens.append(b)
            if kind in (2, 3, 5) or t in self.eog:
                self.special.append(t)


# ---- memory -------------------------------------------------------------------------------------------------------

def reset_peak() -> int:
    """Reset the peak RSS (Linux clear_refs 5) and return the current RSS in bytes."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return _status("VmRSS")


def peak_rss() -> int:
    return _status("VmHWM")


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def stats(per_step: List[float], first: List[float]) -> Dict[str, float]:
    s = sorted(per_step)
    n = len(s)
    return {
        "steps": n,
        "mask_mean_us": sum(s) / n if n else float("nan"),
        "mask_p50_us": s[n // 2] if n else float("nan"),
        "mask_p99_us": s[min(n - 1, n * 99 // 100)] if n else float("nan"),
        "mask_first_step_us": sum(first) / len(first) if first else float("nan"),
    }


def escape_dq(s: str) -> str:
    """A double-quoted literal body for GBNF / XGrammar EBNF / Lark."""
    return s.replace("\\", "\\\\").replace('"', '\\"')


def regex_escape(s: str) -> str:
    """A regex literal safe for Rust's regex syntax (outlines-core, llguidance)."""
    out = []
    for ch in s:
        out.append("\\" + ch if ch in r"\.+*?()|[]{}^$#&-~/ " and ch != " " else ch)
    return "".join(out)


def grammar_texts(strings: Sequence[str]) -> Tuple[str, str, str]:
    """(GBNF/XGrammar EBNF, Lark, regex) alternations of literal strings."""
    alts = " | ".join('"' + escape_dq(s) + '"' for s in strings)
    return f"root ::= {alts}\n", f"start: {alts}\n", "(" + "|".join(regex_escape(s) for s in strings) + ")"
