"""What vLLM's frontend (the API server process) spends on a `choice` request before the engine core, or libtrie,
sees it: the request body parsed by the OpenAI server's pydantic model, vLLM's structured-output validation with the
xgrammar / auto backend (`choice_as_grammar`, then `xgr.Grammar.from_ebnf` of the whole alternation), the same with
libtrie's routing switch (LIBTRIE_VLLM_ROUTE=1: the recognizer reads it, xgrammar's parse is skipped), and the
engine-side key (`get_structured_output_key`). Prints one JSON line per K. Part of scripts/bench-vllm-routing.sh.

    python bench/vllm_frontend_cost.py --sets .cache/bench-sets --ks 1000,10000,100000
"""

import argparse
import json
import os
import time


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", required=True)
    ap.add_argument("--ks", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import xgrammar as xgr
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.structured_output import backend_xgrammar as bx
    from vllm.v1.structured_output.request import get_structured_output_key
    from vllm.v1.structured_output.utils import choice_as_grammar

    import libtrie
    from libtrie.vllm import route

    original = bx.validate_xgrammar_grammar
    for k in [int(x) for x in args.ks.split(",")]:
        members = open(os.path.join(args.sets, f"tools-{k}.txt"), encoding="utf-8").read().split("\n")[:-1]
        body = json.dumps({"model": "m", "prompt": "Tool:", "max_tokens": 16,
                           "structured_outputs": {"choice": members}})
        row = {"k": k, "body_bytes": len(body)}
        row["parse_request_s"] = best(lambda: CompletionRequest.model_validate_json(body), args.repeat)
        row["choice_as_grammar_s"] = best(lambda: choice_as_grammar(members), args.repeat)
        grammar = choice_as_grammar(members)
        row["xgrammar_parse_s"] = best(lambda: xgr.Grammar.from_ebnf(grammar), args.repeat)

        def vllm_validate():
            p = SamplingParams(structured_outputs=StructuredOutputsParams(choice=list(members)))
            original(p)
            return p

        row["vllm_validate_s"] = best(vllm_validate, args.repeat)
        os.environ["LIBTRIE_VLLM_ROUTE"] = "1"
        route.register()
        routed = bx.validate_xgrammar_grammar

        def routed_validate():
            p = SamplingParams(structured_outputs=StructuredOutputsParams(choice=list(members)))
            routed(p)
            return p

        row["routed_validate_s"] = best(routed_validate, args.repeat)
        bx.validate_xgrammar_grammar = original
        p = routed_validate()
        row["engine_key_s"] = best(lambda: get_structured_output_key(p.structured_outputs), args.repeat)
        row["recognize_grammar_s"] = best(lambda: libtrie.recognize("grammar", grammar), args.repeat)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
