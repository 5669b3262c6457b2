"""The README's vLLM client (and its tool-call example), whole. It talks to a server started as the README's vLLM
section says; every request is an ordinary OpenAI request. CI has no vLLM: scripts/check-docs.py compiles it and checks
the README's copies of its docs: regions; the opt-in scripts/test-vllm.sh runs it against a real server
(tests/vllm/test_vllm_tools.py, which serves data/registry/tools.json as the registry "tools").

    python3 examples/vllm/client.py [BASE_URL] [MODEL]
"""
import sys

from openai import OpenAI

base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/v1"
model = sys.argv[2] if len(sys.argv) > 2 else "HuggingFaceTB/SmolLM2-135M-Instruct"

# docs:begin sets
client = OpenAI(base_url=base_url, api_key="none")
# What clients already send: a choice is served by libtrie (LIBTRIE_VLLM_ROUTE=1), nothing else changes.
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Capital of Japan?"}],
                                   extra_body={"structured_outputs": {"choice": ["Tokyo", "Osaka", "Kyoto"]}})
print(r.choices[0].message.content)  # one of the three
# A set named by the request: inline, or a file of the operator's set directory ({"libtrie": "cities"}).
r = client.completions.create(model=model, prompt="The capital of Japan is ", max_tokens=16,
                              extra_body={"vllm_xargs": {"libtrie": ["Tokyo", "Osaka"]}})
# docs:end sets
print(r.choices[0].text)  # one of the two

# docs:begin tools
weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
r = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Weather in Paris?"}],
    tools=[weather], tool_choice="required", parallel_tool_calls=False)  # or "auto", or a named tool
# r.choices[0].message.tool_calls[0]: a tool of the list, its arguments fit its schema
# docs:end tools
# docs:begin registry
# The operator's registry (LIBTRIE_SET_DIR/tools.json, any size): the name may be any tool of it.
r = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Open a ticket"}], tools=[weather], tool_choice="required",
    extra_body={"vllm_xargs": {"libtrie_registry": "tools"}})  # llama-server: {"trie": {"registry": "tools"}}
# docs:end registry
print(r.choices[0].message.tool_calls[0].function)
