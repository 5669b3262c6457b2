"""The fixed corpus every run starts with: the defects of issue 28 the harness must catch, as cases."""

from __future__ import annotations

import json
from typing import List

from gen_grammar import Case
from gen_other import vllm_schema


def _tools(lookalike: str) -> Case:
    second = "get_weather" if lookalike == "duplicate" else "search"
    s = vllm_schema([("get_weather", {"type": "object", "properties": {}}), (second, {"type": "object", "properties": {}})])
    if lookalike == "minItems":
        s["minItems"] = 2
    elif lookalike == "maxItems":
        s["maxItems"] = 0
    elif lookalike == "not":
        s["items"]["not"] = {"properties": {"name": {"const": "search"}}}
    elif lookalike == "required":
        s["items"]["anyOf"][0]["required"] = ["name", "parameters", "id"]
    elif lookalike == "name-integer":
        s["items"]["anyOf"][0]["properties"]["name"] = {"type": "integer", "enum": [1]}
    c = Case("tools-lookalike" if lookalike else "tools", "vllm_tools", json.dumps(s), None,
             candidates=["get", "searchx", ""], note="known " + (lookalike or "vllm form"))
    c.witnesses = {"get_weather": {}, "search": {}}  # type: ignore[attr-defined]
    return c


KNOWN: List[Case] = [
    # A comment ends at \r in XGrammar and llama.cpp.
    Case("grammar", "grammar", 'root ::= ("a" # c\r "b" # )\n)', {"ab"}, note="known comment \\r"),
    Case("grammar", "grammar", 'root ::= "a" | x # c\rx ::= "b"', {"a", "b"}, note="known comment \\r ends a rule"),
    # Valid duplicates.
    Case("regex", "regex", "a|a", {"a"}, note="known duplicate"),
    Case("grammar", "grammar", 'root ::= "a" | "a"', {"a"}, note="known duplicate"),
    Case("grammar", "grammar", 'root ::= "a" ("b" | "") | "ab"', {"a", "ab"}, note="known duplicate"),
    Case("schema", "json_schema", '{"enum": ["a","a"]}', None, candidates=['"a"', '"b"'], note="known duplicate"),
    Case("schema", "json_schema", '{"anyOf": [{"const": "a"}, {"enum": ["a", "b"]}]}', None, note="known duplicate"),
    # oneOf with equal values: the empty language.
    Case("schema", "json_schema", '{"oneOf": [{"const": 1}, {"const": 1.0}]}', None, candidates=["1", "1.0"],
         note="known oneOf 1 == 1.0"),
    Case("schema", "json_schema", '{"oneOf": [{"enum": ["a", "b"]}, {"const": "a"}]}', None, note="known oneOf overlap"),
    # Look-alike schemas.
    Case("schema-lookalike", "json_schema", '{"enum": ["a", "b"], "not": {"const": "a"}}', None, note="known not"),
    _tools(""),
    _tools("minItems"),
    _tools("maxItems"),
    _tools("not"),
    _tools("required"),
    _tools("name-integer"),
    # Found by the harness on the recognize branch (issue 28 follow-ups).
    Case("regex", "regex", "\\x41B", {"AB"}, note="known \\x41B: Python reads AB, XGrammar U+041B"),
    Case("grammar", "grammar", 'root ::= "\\x00"', {"\x00"}, note="known NUL: llama.cpp never matches it"),
    Case("grammar", "grammar", 'root ::= "a\\u0000" | "b"', {"a\x00", "b"}, note="known NUL: llama.cpp never matches it"),
    _tools("duplicate"),
]
