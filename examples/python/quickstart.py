"""The README's Python example, whole: compile three tool names against a model's vocabulary and decode one member
with a stand-in for the model (it takes the last allowed token). scripts/test-docs.sh runs it in CI on a real
vocabulary; scripts/check-docs.py checks the README's copy of the docs: region.

    python3 examples/python/quickstart.py model.gguf
"""
import sys

# docs:begin decode
import libtrie
vocab = libtrie.Vocab.from_gguf(sys.argv[1])  # or Vocab.from_tokenizer_json("tokenizer.json")
tools = libtrie.compile(vocab, ["calendar.create_event", "calendar.list_events", "weather.get_forecast"])
state, text = tools.start(), b""  # the state is a plain int, one per sequence
mask = tools.new_bitmask()  # or a torch/numpy int32 row: XGrammar's layout
while state != libtrie.FINISHED:
    tools.fill_bitmask(state, mask)  # apply to the logits
    token = tools.allowed(state)[-1]  # your sampler; here the last allowed id
    state = tools.advance(state, token)
    text += vocab.token_bytes(token) if state != libtrie.FINISHED else b""
print(text.decode())  # always one of the set
# docs:end decode
assert text.decode() in ("calendar.create_event", "calendar.list_events", "weather.get_forecast"), text
