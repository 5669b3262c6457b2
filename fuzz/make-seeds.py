#!/usr/bin/env python3
"""Writes the small seed corpora of the fuzz targets into fuzz/seeds/ (committed; rerun to regenerate).

gguf: tiny valid GGUF vocabularies (gpt2, llama/SentencePiece with byte tokens, rwkv, bert (refused)) and
their truncations; tokenizer_json: tiny synthetic tokenizer.json files and the first KB of the real ones when
the assets folder is there. compile and ffi take structured (arbitrary) input: a few random byte strings.
"""
import json, os, random, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
ASSETS = os.environ.get("TRIE_ASSETS", os.path.join(HERE, "..", "..", "shared", "assets"))

T_U32, T_I32, T_STRING, T_ARRAY = 4, 5, 8, 9


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv(key, ty, payload):
    return s(key) + struct.pack("<I", ty) + payload


def arr(item_ty, items):
    out = struct.pack("<IQ", item_ty, len(items))
    for it in items:
        out += s(it) if item_ty == T_STRING else struct.pack("<i", it)
    return out


def gguf(model, tokens, types=None, eos=None, version=3):
    kvs = [kv("tokenizer.ggml.model", T_STRING, s(model)), kv("tokenizer.ggml.tokens", T_ARRAY, arr(T_STRING, tokens))]
    if types is not None:
        kvs.append(kv("tokenizer.ggml.token_type", T_ARRAY, arr(T_I32, types)))
    if eos is not None:
        kvs.append(kv("tokenizer.ggml.eos_token_id", T_U32, struct.pack("<I", eos)))
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs)) + b"".join(kvs)


def write(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    gpt2 = gguf("gpt2", ["a", "b", "Ġ", "Ċ", "ab", "Ġa", "<|endoftext|>"], [1, 1, 1, 1, 1, 1, 3], eos=6)
    llama = gguf("llama", ["<unk>", "<s>", "</s>", "<0x0A>", "<0xFF>", "▁a", "b", "▁ab"], [2, 3, 3, 6, 6, 1, 1, 1], eos=2)
    rwkv = gguf("rwkv", ["a", "\\n", "\\x41", "bc"], None, version=2)
    bert = gguf("bert", ["[UNK]", "a", "##b"], [2, 1, 1])
    pad = gguf("gpt2", ["a", "[PAD1]", "<unused2>", "b"], [1, 4, 1, 1])
    for name, data in [("gpt2", gpt2), ("llama", llama), ("rwkv", rwkv), ("bert", bert), ("padding", pad)]:
        write("gguf", name + ".gguf", data)
    write("gguf", "gpt2-truncated.gguf", gpt2[: len(gpt2) // 2])
    write("gguf", "header-only.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    real = os.path.join(ASSETS, "vocab", "ggml-vocab-gpt-2.gguf")
    if os.path.exists(real):
        with open(real, "rb") as f:
            write("gguf", "real-gpt2-first-1k.gguf", f.read(1024))

    def tok(model, decoder, pre, added=()):
        return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
                           "normalizer": None, "pre_tokenizer": pre, "post_processor": None,
                           "decoder": decoder, "model": model}).encode()

    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    eot = {"id": 4, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
           "normalized": False, "special": True}
    write("tokenizer_json", "bytelevel-bpe.json",
          tok({"type": "BPE", "vocab": {"a": 0, "Ġ": 1, "Ċ": 2, "Ġa": 3}, "merges": [["Ġ", "a"]]}, bl, None, [eot]))
    ms = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    eos = dict(eot, content="</s>")
    write("tokenizer_json", "metaspace-unigram.json",
          tok({"type": "Unigram", "unk_id": 0, "byte_fallback": True,
               "vocab": [["<unk>", 0.0], ["▁a", -1.0], ["b", -2.0], ["<0x0A>", -3.0], ["</s>", -4.0]]}, ms, ms, [eos]))
    seq = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                            {"type": "ByteFallback"}, {"type": "Fuse"},
                                            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    write("tokenizer_json", "sentencepiece-bpe.json",
          tok({"type": "BPE", "byte_fallback": True, "unk_token": "<unk>",
               "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "▁a": 4, "b": 5}, "merges": []}, seq, None,
              [dict(eos, id=2), dict(eos, id=1, content="<s>")]))
    write("tokenizer_json", "wordpiece.json",
          tok({"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
               "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}},
              {"type": "WordPiece", "prefix": "##", "cleanup": True}, {"type": "Whitespace"}))
    # The direct reader's own rules: a Unigram piece listed twice (the crate's map keeps the last id, its size the
    # list's length), texts longer than the 16 bytes its index keeps inline, escapes and a surrogate pair.
    write("tokenizer_json", "unigram-piece-twice.json",
          tok({"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -1.5], ["a", -2.0]]},
              ms, None, [dict(eos, id=9, content="<new>"), dict(eos, id=9, content="a", special=False)]))
    write("tokenizer_json", "bytelevel-bpe-long-escaped.json",
          tok({"type": "BPE", "vocab": {"abcdefghijklmnop": 0, "qrst": 1, "abcdefghijklmnopqrst": 2, "\"": 3,
                                        "\\": 4, "\"\\": 5, "\U0001F600": 6, "x": 7, "x\U0001F600": 8},
               "merges": [["abcdefghijklmnop", "qrst"], ["\"", "\\"], ["x", "\U0001F600"]]}, bl, None, [eot]))
    d = os.path.join(ASSETS, "tokenizers")
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                write("tokenizer_json", "real-" + name.split(".")[0] + "-first-1k.json", f.read(1024))

    rng = random.Random(7)
    for target in ("compile", "ffi"):
        for i in range(8):
            write(target, "random-%d" % i, bytes(rng.randrange(256) for _ in range(rng.choice([16, 64, 256, 1024]))))


if __name__ == "__main__":
    sys.exit(main())
