"""Random regexes, JSON schemas and vLLM tool-choice schemas with their reference languages (see gen_grammar.py).

- regex: an alternation of literals, each character raw or escaped (``\\.``, ``\\xHH``, ``\\uHHHH``, ``\\n``...),
  optionally wrapped in ``(...)``, ``(?:...)``, ``^(?:...)$``; the reference language is the list of literals.
  Near misses add a quantifier, a class, a group in a concatenation, an anchor that binds to one alternative.
- json_schema: ``enum``/``const``/``anyOf``/``oneOf`` trees of scalar values, with annotations, ``type`` and
  duplicates; the reference language is the set of listed values that satisfy the schema (checked value by value with
  JSON-schema semantics by the jsonschema oracle: ``oneOf`` with two equal values, a ``not``, a ``type`` that excludes
  a value). Look-alike cases add one keyword that may change the language.
- vllm_tools: the schema vLLM writes for ``tool_choice="required"`` (``get_json_schema_from_tools``), and look-alikes
  of it (``minItems: 2``, ``maxItems: 0``, ``not``, an extra ``required``, an integer ``name``...).
"""

from __future__ import annotations

import json
import random
from typing import Any, Dict, List, Optional, Tuple

from gen_grammar import Case

# ---- regex --------------------------------------------------------------------------------------------------------

REGEX_META = set("\\.^$|?*+()[]{}")
REGEX_CHARS = list("abcxyz019 ,:;'\"#/-_=<>!@%&~`é中😀\t\n") + list("\\.^$|?*+()[]{}") + ["\u2028", "\x01"]


def regex_char(rng: random.Random, c: str) -> Optional[str]:
    forms: List[str] = []
    if c in REGEX_META:
        forms.append("\\" + c)
    elif c.isascii() and not c.isalnum() and c not in "\t\n\x01" and c != "_":
        forms += [c, c, "\\" + c]  # an escaped ASCII punctuation (re.escape writes several)
    elif c not in "\t\n\x01":
        forms += [c, c]
    special = {"\t": "\\t", "\n": "\\n"}
    if c in special:
        forms.append(special[c])
    o = ord(c)
    if o < 0x100:
        forms.append("\\x%02x" % o if rng.random() < 0.7 else "\\x%02X" % o)
    if o < 0x10000:
        forms.append("\\u%04x" % o)
    return rng.choice(forms)


def regex_case(rng: random.Random) -> Case:
    n = rng.choice([1, 1, 2, 3, 4, 6])
    members = ["".join(rng.choice(REGEX_CHARS) for _ in range(rng.choice([0, 1, 2, 3, 5]))) for _ in range(n)]
    if rng.random() < 0.2:
        members.append(rng.choice(members))
    body = "|".join("".join(regex_char(rng, c) or "" for c in m) for m in members)
    wrap = rng.choice(["%s", "%s", "(%s)", "(?:%s)", "^(?:%s)$", "^(%s)$"])
    if len(members) == 1 and rng.random() < 0.3:
        wrap = "^%s$"
    text = wrap % body
    return Case("regex", "regex", text, set(members))


REGEX_NEAR = [
    ("a*", False), ("a+", False), ("a?", True), ("a{2}", True), ("[ab]", True), (".", False), ("\\d", True),
    ("(a)(b)", True), ("a(b|c)", True), ("^a|b$", True), ("(a|b)c", True), ("a|b*", False), ("\\w", True),
    ("(?i)a", True), ("a(?=b)", True), ("(a)\\1", True), ("\\bab", True), ("a]", True), ("a}", True),
    ("\\U0001F600", True), ("\\0", True), ("\\a", True), ("\\-", True), ("\\ ", True), ("a|", True), ("|", True),
    ("", True), ("()", True), ("(?:)", True), ("a||b", True), ("\\x4", True), ("\\x41B", True), ("\\u00e", True),
    ("\\N{LATIN SMALL LETTER A}", True), ("a{,2}", True), ("a{1", True), ("\\/", True), ("\\#", True),
]


def regex_near(rng: random.Random) -> Case:
    text, finite = rng.choice(REGEX_NEAR)
    base = regex_case(rng)
    if rng.random() < 0.5:
        text = text + "|" + base.text if rng.random() < 0.5 else base.text + "|" + text
    cands = sorted(base.ref or []) + ["", "a", "aa", "b", "ab", "ac", "c", "bc", "1", "\\", "-", " ", "/", "#", "\x07",
                                      "\x00", "Л", "AB", "\x04", "😀", "a]", "a}", "{", "ab|"]
    return Case("regex-near", "regex", text, None, finite=finite, candidates=cands)


# ---- JSON schema ----------------------------------------------------------------------------------------------

STRINGS = ["a", "b", "", "é", "中文", "😀", 'q"uote', "back\\slash", "tab\tnl\n", "\x01", "\u2028", "/", "1", "true",
           "null", " a ", "A", "\x7f", "\ud7ff"]
NUMBERS: List[Any] = [0, 1, -1, 1.0, 1.5, -0.0, 0.0, 2, 10, 100000, -2.25, 3.0, 12345678901234567890, 0.1]
OTHERS: List[Any] = [True, False, None]
ANNOTATIONS = ["title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly", "$id",
               "$schema"]
LOOKALIKE = [("not", {"const": "a"}), ("not", {}), ("minLength", 2), ("maxLength", 0), ("pattern", "^b"),
             ("format", "email"), ("minimum", 1), ("maximum", 0), ("exclusiveMinimum", 0), ("multipleOf", 2),
             ("allOf", [{"type": "string"}]), ("if", {"const": "a"}), ("then", False), ("nullable", True),
             ("minItems", 2), ("maxItems", 0), ("properties", {"x": {}}), ("required", ["x"]), ("$ref", "#"),
             ("type", "integer"), ("type", "number"), ("type", ["string", "null"]), ("type", "object"),
             ("contains", {}), ("uniqueItems", True), ("enum", ["a"]), ("const", "b"), ("$defs", {}),
             ("additionalProperties", False), ("items", False), ("dependentRequired", {}), ("unknownKeyword", 1)]


def value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.55:
        return rng.choice(STRINGS)
    if r < 0.85:
        return rng.choice(NUMBERS)
    return rng.choice(OTHERS)


def schema_node(rng: random.Random, depth: int, strings_only: bool) -> Dict[str, Any]:
    pick = (lambda: rng.choice(STRINGS)) if strings_only else (lambda: value(rng))
    r = rng.random()
    node: Dict[str, Any]
    if depth > 0 and r < 0.3:
        key = rng.choice(["anyOf", "anyOf", "oneOf"])
        node = {key: [schema_node(rng, depth - 1, strings_only) for _ in range(rng.choice([1, 2, 2, 3]))]}
        if rng.random() < 0.15:
            node[key].append(node[key][0])
    elif r < 0.55:
        node = {"const": pick()}
    else:
        vals = [pick() for _ in range(rng.choice([1, 1, 2, 3, 5]))]
        if rng.random() < 0.2:
            vals.append(rng.choice(vals))  # a duplicate
        node = {"enum": vals}
    if rng.random() < 0.3:
        for _ in range(rng.choice([1, 2])):
            k = rng.choice(ANNOTATIONS)
            node[k] = {"examples": ["x"], "default": "a", "deprecated": False, "readOnly": True,
                       "writeOnly": False}.get(k, "some text")
    if rng.random() < 0.2:
        node["type"] = rng.choice(["string", "number", "integer", "boolean", "null", ["string", "number"],
                                   ["string", "integer", "boolean", "null", "number"]])
    return node


def schema_case(rng: random.Random, lookalike: bool = False) -> Case:
    root = schema_node(rng, rng.choice([0, 1, 2, 3]), strings_only=rng.random() < 0.5)
    note = ""
    if lookalike:
        k, v = rng.choice(LOOKALIKE)
        target = root
        # Put it at the root or in a branch.
        while rng.random() < 0.4 and any(key in target for key in ("anyOf", "oneOf")):
            target = rng.choice(target.get("anyOf") or target.get("oneOf"))
        target[k] = v
        note = "look-alike %s" % k
    listed = listed_values(root)
    cands = listed + [1, 1.0, "a", "b", "A", "", True, 0, None, "1", 2.0, [], {}, "x", "aa"]
    return Case("schema-lookalike" if lookalike else "schema", "json_schema", json.dumps(root, ensure_ascii=rng.random() < 0.3),
                None, candidates=[json.dumps(c, ensure_ascii=False) for c in cands], note=note)


def listed_values(node: Any) -> List[Any]:
    out: List[Any] = []
    if isinstance(node, dict):
        if "enum" in node and isinstance(node["enum"], list):
            out += node["enum"]
        if "const" in node:
            out.append(node["const"])
        for k in ("anyOf", "oneOf"):
            for b in node.get(k, []) if isinstance(node.get(k), list) else []:
                out += listed_values(b)
    return out


SCHEMA_NEAR = ['{"type": "string"}', '{"enum": []}', '{"anyOf": []}', '{"enum": [[1], {"a": 1}]}', '{"const": 1e3}',
               '{"enum": [1E2, 2]}', 'true', '{}', '{"enum": "a"}', '{"oneOf": [{"const": 1}, {"const": 1.0}]}',
               '{"enum": [1, 1.0]}', '{"enum": ["a", "a"]}', '{"anyOf": [{"const": "a"}, {"const": "a"}]}',
               '{"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}', '{"enum": [true, 1]}', '{"enum": [0, -0.0]}',
               '{"enum": [1e400]}', '{"enum": [123456789012345678901234567890]}', '{"const": "\\ud800"}',
               '{"enum": ["a"], "type": "integer"}', '{"anyOf": [{"enum": ["a"]}, {"type": "string"}]}']


def schema_near(rng: random.Random) -> Case:
    text = rng.choice(SCHEMA_NEAR)
    cands = ['"a"', '"b"', '"c"', "1", "1.0", "true", "0", "-0.0", "1000", "100", "2", "[1]", '{"a": 1}', '""']
    return Case("schema-near", "json_schema", text, None, finite=True, candidates=cands)


# ---- vLLM tool-choice schemas ---------------------------------------------------------------------------------

TOOL_NAMES = ["get_weather", "search", "a", "b-c", "é", "x.y", "lookup_user", "send", "f1", "q\"t"]
PARAMS: List[Tuple[Dict[str, Any], Any]] = [
    ({"type": "object", "properties": {}}, {}),
    ({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, {"city": "Paris"}),
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 3}),
]


def vllm_schema(tools: List[Tuple[str, Dict[str, Any]]]) -> Dict[str, Any]:
    """What vLLM's ``get_json_schema_from_tools`` writes for ``tool_choice="required"``."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "anyOf": [
                {"properties": {"name": {"type": "string", "enum": [name]}, "parameters": params},
                 "required": ["name", "parameters"]}
                for name, params in tools
            ],
        },
    }


TOOL_LOOKALIKE = ["minItems2", "maxItems0", "not", "required", "name-integer", "extra-prop", "prefixItems", "minItems0",
                  "uniqueItems", "additionalItems", "items-not", "name-pattern", "params-not", "contains", "enum2"]


def tools_case(rng: random.Random, lookalike: bool = False) -> Case:
    n = rng.choice([1, 1, 2, 3, 4])
    chosen = [rng.choice(TOOL_NAMES) for _ in range(n)]
    if rng.random() < 0.8:
        chosen = list(dict.fromkeys(chosen))
    tools = []
    witnesses = {}
    for name in chosen:
        params, witness = rng.choice(PARAMS)
        if rng.random() < 0.7:  # a schema of this tool's own, so a name handed over to another tool's shows
            params = dict(params, description=f"the tool {name}")
        tools.append((name, params))
        witnesses.setdefault(name, witness)
    s = vllm_schema(tools)
    note = ""
    if lookalike:
        k = rng.choice(TOOL_LOOKALIKE)
        note = "look-alike " + k
        alt = rng.choice(s["items"]["anyOf"])
        if k == "minItems2":
            s["minItems"] = 2
        elif k == "maxItems0":
            s["maxItems"] = 0
        elif k == "minItems0":
            s["minItems"] = 0
        elif k == "not":
            s["items"]["not"] = {"properties": {"name": {"const": chosen[0]}}}
        elif k == "required":
            alt["required"] = ["name", "parameters", "id"]
        elif k == "name-integer":
            alt["properties"]["name"] = {"type": "integer", "enum": [1]}
        elif k == "extra-prop":
            alt["properties"]["id"] = {"type": "string"}
            alt["required"] = ["name", "parameters", "id"]
        elif k == "prefixItems":
            s["prefixItems"] = [{"const": 1}]
        elif k == "uniqueItems":
            s["uniqueItems"] = True
        elif k == "additionalItems":
            s["additionalItems"] = False
        elif k == "items-not":
            s["items"] = {"not": s["items"]}
        elif k == "name-pattern":
            alt["properties"]["name"]["pattern"] = "^zz"
        elif k == "params-not":
            alt["properties"]["parameters"] = {"not": {}}
        elif k == "contains":
            s["contains"] = {"const": 0}
        elif k == "enum2":
            alt["properties"]["name"]["enum"] = alt["properties"]["name"]["enum"] * 2
    case = Case("tools-lookalike" if lookalike else "tools", "vllm_tools", json.dumps(s, ensure_ascii=False), None,
                candidates=[m + "x" for m in chosen] + ["", "get", "a", "b"], note=note)
    case.witnesses = witnesses  # type: ignore[attr-defined]
    return case
