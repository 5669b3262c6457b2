"""The README's SGLang example, whole: requests an SGLang server with `--grammar-backend libtrie` serves with libtrie
(a JSON-schema enum, a literal-alternation EBNF or regex; everything else goes to XGrammar). An SGLang server needs
CUDA, so CI never runs this file: scripts/check-docs.py compiles it and checks the README's copy of its region.

    python3 examples/sglang/client.py [BASE_URL] [MODEL]
"""
import sys

from openai import OpenAI

base_url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:30000/v1"
model = sys.argv[2] if len(sys.argv) > 2 else "Qwen/Qwen2.5-0.5B-Instruct"

# docs:begin enum
client = OpenAI(base_url=base_url, api_key="none")
r = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Which tool opens a GitHub issue?"}], max_tokens=32,
    response_format={"type": "json_schema", "json_schema": {"name": "tool", "schema": {
        "type": "string", "enum": ["github.create_issue", "github.close_issue", "slack.send_message"]}}})
print(r.choices[0].message.content)  # "github.create_issue", as JSON: one of the enum
# docs:end enum
