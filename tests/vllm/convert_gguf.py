"""Convert a GGUF model into a Hugging Face folder (config, safetensors weights, tokenizer) that vLLM can load
(vLLM 0.32 has no GGUF loader). transformers dequantizes the GGUF tensors to float32; the folder is written
atomically (a temporary sibling renamed at the end).

    python tests/vllm/convert_gguf.py MODEL.gguf OUT_DIR
"""

import shutil
import sys
from pathlib import Path


def main() -> None:
    gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        print(out)
        return
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # transformers refuses save_pretrained on a model loaded from GGUF (it is marked quantized): write the
    # dequantized weights and the config without the quantization entry ourselves.
    from safetensors.torch import save_file

    tmp.mkdir(parents=True)
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to the input embeddings
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    tok.save_pretrained(tmp)
    if not (tmp / "tokenizer.json").exists():
        raise SystemExit(f"{gguf}: transformers wrote no tokenizer.json (a slow tokenizer?)")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(out)


if __name__ == "__main__":
    main()
