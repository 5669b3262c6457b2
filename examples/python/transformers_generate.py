"""The README's transformers example, whole: `model.generate` forced to answer with one member of a set. Needs torch
and transformers (the opt-in scripts/test-transformers.sh environment); CI compiles this file and checks the
README's copy of its region (scripts/check-docs.py) but does not run it (no torch or model in CI).

    python3 examples/python/transformers_generate.py [MODEL]
"""
import sys

model_name = sys.argv[1] if len(sys.argv) > 1 else "HuggingFaceTB/SmolLM2-135M-Instruct"

# docs:begin generate
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList
import libtrie
from libtrie.transformers import TrieLogitsProcessor, model_vocab
tokenizer, model = AutoTokenizer.from_pretrained(model_name), AutoModelForCausalLM.from_pretrained(model_name)
cities = libtrie.compile(model_vocab(model, tokenizer), ["Tokyo", "Osaka", "Kyoto"])  # EOG ids, logits width
inputs = tokenizer("The capital of Japan is", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens=8, logits_processor=LogitsProcessorList([TrieLogitsProcessor(cities)]))
print(tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))  # one of the three
# docs:end generate
