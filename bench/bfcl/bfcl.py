"""BFCL v4 data, tools and scoring for bench/bfcl/run.py, from the pinned bfcl-eval wheel (bench/bfcl/setup.sh).

- cases(category): the questions, functions and possible answers of `bfcl_eval/data/BFCL_v4_<category>.json`;
- tools_of(functions): OpenAI tools, with bfcl-eval's own `convert_to_tool` (GORILLA_TO_OPENAPI, OPENAI_COMPLETIONS),
  as its OpenAI function-calling handler sends them ("." in names becomes "_");
- score(...): bfcl-eval's own `ast_checker` on a list of `{name: arguments}` calls;
- catalog(): every distinct function of every BFCL v4 data file pooled into one tool registry (same-named functions
  with different parameter schemas disambiguated as NAME__v2, NAME__v3, ...), and a BM25 index over the tools'
  names and descriptions to pick the prompt's candidates.

Importing bfcl-eval's checker pulls every API client SDK through `bfcl_eval.constants.model_config`, and its
function-call utilities import tree-sitter parsers for Java and JavaScript: those modules are stubbed here (the
runner uses only the Python categories, and the checker only reads `underscore_to_dot` from the model config).
"""
import copy
import glob
import json
import math
import os
import random
import re
import sys
import types
from collections import Counter, defaultdict

CATEGORIES = ["simple_python", "multiple", "live_simple", "parallel", "parallel_multiple"]
MODEL_NAME = "libtrie-bench"  # the model config the checker looks up: OpenAI-style names ("." -> "_")


class _ModelConfig:
    underscore_to_dot = True  # the checker compares "math.factorial" as "math_factorial", as for OpenAI models


def _stub_imports():
    mc = types.ModuleType("bfcl_eval.constants.model_config")
    mc.MODEL_CONFIG_MAPPING = defaultdict(_ModelConfig)
    sys.modules.setdefault("bfcl_eval.constants.model_config", mc)
    for name, fn in [("java_parser", "parse_java_function_call"), ("js_parser", "parse_javascript_function_call")]:
        m = types.ModuleType("bfcl_eval.model_handler.parser." + name)

        def unsupported(*_a, _n=name, **_k):
            raise NotImplementedError(f"{_n} is stubbed by bench/bfcl/bfcl.py (Python categories only)")
        setattr(m, fn, unsupported)
        sys.modules.setdefault(m.__name__, m)


_stub_imports()
import bfcl_eval  # noqa: E402
from bfcl_eval.constants.enums import Language, ModelStyle  # noqa: E402
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402
from bfcl_eval.model_handler.utils import convert_to_tool  # noqa: E402

DATA = os.path.join(os.path.dirname(bfcl_eval.__file__), "data")


def _rows(path):
    text = open(path, encoding="utf-8").read()
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        d = json.loads(text)
        return d if isinstance(d, list) else [d]


def cases(category):
    """The cases of a category, in file order: dicts with id, messages (the first turn), functions, answer."""
    answers = {r["id"]: r["ground_truth"] for r in _rows(os.path.join(DATA, "possible_answer", f"BFCL_v4_{category}.json"))}
    out = []
    for r in _rows(os.path.join(DATA, f"BFCL_v4_{category}.json")):
        out.append({"id": r["id"], "messages": r["question"][0], "functions": r["function"], "answer": answers[r["id"]]})
    return out


def drawn(category, limit, seed=None):
    """The cases a run takes: all (limit 0), the first `limit`, or with `seed` a sample of `limit` drawn with
    random.Random("SEED:CATEGORY"), in file order."""
    every = cases(category)
    if limit and seed is not None:
        keep = set(random.Random(f"{seed}:{category}").sample(range(len(every)), min(limit, len(every))))
        return [c for i, c in enumerate(every) if i in keep]
    return every[:limit] if limit else every


def tools_of(functions):
    """bfcl-eval's conversion to OpenAI chat-completions tools."""
    return convert_to_tool(copy.deepcopy(functions), GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)


def score(category, functions, calls, answer):
    """bfcl-eval's AST check of `calls` (a list of {name: arguments dict}): (valid, error text)."""
    try:
        r = ast_checker(functions, calls, answer, Language.PYTHON, category, MODEL_NAME)
    except Exception as e:  # the checker on a malformed output
        return False, f"checker: {e!r}"
    return bool(r["valid"]), "" if r["valid"] else "; ".join(map(str, r.get("error", [])))[:300]


# ---- the catalog -------------------------------------------------------------------------------------------------

def catalog():
    """Every distinct function of every BFCL v4 data file, converted to OpenAI tools; one entry per distinct
    (name, parameters) pair. Returns (tools, base): `tools` the registry's OpenAI tools (names made distinct:
    NAME, NAME__v2, ...), `base[catalog name]` the converted BFCL name it stands for."""
    seen = {}  # (converted name, parameters json) -> catalog name
    count = Counter()
    tools, base = [], {}
    for path in sorted(glob.glob(os.path.join(DATA, "BFCL_v4_*.json"))):
        for r in _rows(path):
            for fn in (r.get("function") or []) if isinstance(r, dict) else []:
                t = tools_of([fn])[0]
                name = t["function"]["name"]
                key = (name, json.dumps(t["function"].get("parameters"), sort_keys=True))
                if key in seen:
                    continue
                count[name] += 1
                cname = name if count[name] == 1 else f"{name}__v{count[name]}"
                seen[key] = cname
                t["function"]["name"] = cname
                tools.append(t)
                base[cname] = name
    return tools, base


def catalog_by_key(tools, base):
    """{(converted BFCL name, parameters JSON): catalog name} of catalog()'s tools, for catalog_name_of."""
    return {(base[t["function"]["name"]], json.dumps(t["function"].get("parameters"), sort_keys=True)):
            t["function"]["name"] for t in tools}


def catalog_name_of(tool, catalog_tools_by_key):
    """The catalog name of a case's (converted) tool: the entry with the same name and parameters."""
    key = (tool["function"]["name"], json.dumps(tool["function"].get("parameters"), sort_keys=True))
    return catalog_tools_by_key.get(key)


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(text):
    """Lower-case words: names split at '_', '.', '-' and camelCase humps."""
    return [w.lower() for w in _WORD.findall(text or "")]


class BM25:
    """Okapi BM25 (k1 = 1.5, b = 0.75) over each tool's name and description; written here, no dependency."""

    def __init__(self, tools, k1=1.5, b=0.75):
        self.tools, self.k1, self.b = tools, k1, b
        self.docs = []
        df = Counter()
        for t in tools:
            f = t["function"]
            tf = Counter(words(f["name"].split("__v")[0]) + words(f.get("description", "")))
            self.docs.append((tf, sum(tf.values())))
            df.update(tf.keys())
        n = len(tools)
        self.avgdl = sum(dl for _, dl in self.docs) / max(n, 1)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def top(self, query, k=5):
        q = set(words(query))
        scored = []
        for i, (tf, dl) in enumerate(self.docs):
            s = 0.0
            for w in q:
                f = tf.get(w, 0)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * dl / self.avgdl))
            if s > 0:
                scored.append((-s, i))
        scored.sort()
        return [self.tools[i] for _, i in scored[:k]]
