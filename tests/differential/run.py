#!/usr/bin/env python3
"""The differential harness: libtrie's recognized set against the engines' own matchers (README.md beside this file).

    PYTHONPATH=python python3 tests/differential/run.py --cases 2000 --seed 1
    ... --oracles xgrammar,llama,re,jsonschema --require xgrammar,re,jsonschema --out disagreements.jsonl

Prints one line per family, then ``differential: N cases, D disagreements, S not-a-set, E errors``; exits 1 on any
disagreement or error. Each disagreement goes to the JSONL file with its case seed, text, shrunk text, expected and
got; the same disagreement (family, check, note) is shown once on stdout with its shortest text.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen_grammar as gg  # noqa: E402
import gen_other as go  # noqa: E402
import oracles as orc  # noqa: E402
from known import KNOWN  # noqa: E402

FAMILIES: Dict[str, Tuple[int, Callable[[random.Random], gg.Case]]] = {
    # name: (weight, generator)
    "grammar": (30, gg.portable),
    "grammar-dialect": (12, gg.twisted),
    "grammar-near": (5, gg.near),
    "grammar-hostile": (1, gg.hostile),
    "grammar-space": (4, gg.space_json),
    "regex": (14, go.regex_case),
    "regex-near": (5, go.regex_near),
    "schema": (14, lambda r: go.schema_case(r, False)),
    "schema-lookalike": (8, lambda r: go.schema_case(r, True)),
    "schema-near": (3, go.schema_near),
    "tools": (4, lambda r: go.tools_case(r, False)),
    "tools-lookalike": (4, lambda r: go.tools_case(r, True)),
}


# ---- libtrie --------------------------------------------------------------------------------------------------


class Libtrie:
    def __init__(self) -> None:
        import libtrie
        from libtrie import _recognize

        self.lt = libtrie
        self.kinds = dict(_recognize.KINDS)
        self.has_vllm_tools = "vllm_tools" in self.kinds
        self.native_vllm_tools = False
        if not self.has_vllm_tools:
            # The C ABI may have TRIE_RECOGNIZE_VLLM_TOOLS (5) before the Python binding names it.
            self.native_vllm_tools = self._native_tools('{"type": "array"}') is not None
            if self.native_vllm_tools:
                self.kinds["vllm_tools"] = 5
        self.path = getattr(libtrie._native.library(), "_name", "?")  # type: ignore[attr-defined]

    def recognize(self, kind: str, text: str) -> Tuple[str, Any]:
        """("set", Recognized-like) | ("not-a-set", reason) | ("limit", message) | ("error", message)."""
        lt = self.lt
        if kind == "vllm_tools" and self.native_vllm_tools:
            return self._native_tools(text) or ("error", "?")
        if kind == "vllm_tools" and not self.has_vllm_tools:
            from libtrie.vllm.tools import tool_schema  # main: the Python recognizer

            got = tool_schema(text)
            if got is None:
                return "not-a-set", "tool_schema: None"
            return "set", {"names": got[0]}
        try:
            r = lt.recognize(kind, text)
        except lt.TrieError as e:
            if e.status == lt.Status.LIMIT_EXCEEDED:
                return "limit", e.message
            return "error", e.message
        except (UnicodeEncodeError, ValueError) as e:
            return "error", f"{type(e).__name__}: {e}"
        if not r:
            return "not-a-set", r.reason
        if kind == "vllm_tools":
            return "set", {"names": [m.decode("utf-8") for m in r.members], "payloads": list(r.payloads or ())}
        return "set", r


def _native_tools_impl(self: Libtrie, text: str) -> Optional[Tuple[str, Any]]:
    """Kind 5 through the C ABI (``trie_recognize``); None when the library does not know the kind."""
    import ctypes

    from libtrie import _recognize

    lib = _recognize._lib()
    data = text.encode("utf-8", "surrogatepass")
    handle = ctypes.c_void_p()
    status = lib.trie_recognize(5, data, len(data), ctypes.byref(handle))
    if status != 0:
        msg = (self.lt.library().trie_last_error() or b"").decode("utf-8", "replace")
        if "kind" in msg and "5" in msg:
            return None
        return ("limit" if status == self.lt.Status.LIMIT_EXCEEDED else "error"), msg
    if not handle.value:
        return "not-a-set", lib.trie_recognize_reason().decode("utf-8", "replace")
    try:
        n = lib.trie_recognized_n_members(handle.value)
        names = [_recognize._view(lib.trie_recognized_member, handle.value, i).decode("utf-8") for i in range(n)]
        payloads = ([_recognize._view(lib.trie_recognized_payload, handle.value, i).decode("utf-8") for i in range(n)]
                    if lib.trie_recognized_has_payloads(handle.value) else [])
    finally:
        lib.trie_recognized_free(handle.value)
    return "set", {"names": names, "payloads": payloads}


Libtrie._native_tools = _native_tools_impl  # type: ignore[attr-defined]


def rendered(r: Any) -> List[str]:
    """The outputs a recognized set lets through: prefix + render(member) + suffix."""
    out = []
    for m in r.members:
        s = m.decode("utf-8")
        if r.render == "json_string":
            s = json.dumps(s, ensure_ascii=False)
        out.append(r.prefix.decode("utf-8") + s + r.suffix.decode("utf-8"))
    return out


# ---- near misses ------------------------------------------------------------------------------------------------

MUT = ["a", "b", " ", "\n", "  ", " \t", "\r", '"', "\\", "é", "0", "|", "#", "\t", "😀", "A", "x"]


def near_misses(rng: random.Random, strings: List[str], limit: int = 40) -> List[str]:
    out: Set[str] = set()
    pool = list(strings)[:50]
    for s in pool:
        if s:
            out.add(s[: rng.randrange(len(s))])  # a proper prefix
            i = rng.randrange(len(s))
            out.add(s[:i] + s[i + 1:])  # a deletion
            out.add(s[:i] + rng.choice(MUT) + s[i + 1:])  # a substitution
            out.add(s[1:])
        out.add(s + rng.choice(MUT))  # an extension
        out.add(rng.choice(MUT) + s)
        if pool:
            out.add(s + rng.choice(pool))  # two members
        if len(out) > limit:
            break
    out.add("")
    return sorted(out)


def json_near(values: List[Any]) -> List[str]:
    out: Set[str] = set()
    for v in values[:30]:
        t = json.dumps(v, ensure_ascii=False)
        out.add(t)
        out.add(json.dumps(v, ensure_ascii=True))
        if isinstance(v, str):
            out.add(json.dumps(v + "x", ensure_ascii=False))
            out.add(json.dumps(v[:-1], ensure_ascii=False))
            out.add(json.dumps(v.upper(), ensure_ascii=False))
        elif isinstance(v, bool) or v is None:
            out.add(json.dumps(not v))
            out.add("0")
            out.add("1")
        elif isinstance(v, (int, float)):
            out.add(json.dumps(v + 1))
            out.add(json.dumps(float(v)))
            out.add(json.dumps(-v))
            out.add(json.dumps(str(v)))
    return sorted(out)


def spellings(v: Any) -> List[str]:
    """Other JSON texts of the value ``v`` (how other writers spell it)."""
    out = [json.dumps(v, ensure_ascii=True), json.dumps(v, ensure_ascii=False)]
    if isinstance(v, str):
        out.append("".join(json.dumps(c, ensure_ascii=False)[1:-1] if ord(c) != 0x7F else "\\u007f" for c in v).join('""'))
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        f = float(v)
        out += [repr(f), "%.17g" % f, str(int(f)) if f.is_integer() else repr(f), json.dumps(f)]
        if f.is_integer() and abs(f) < 1e16:
            out.append("%d" % int(f) if f or str(f)[0] != "-" else "-0")
    return list(dict.fromkeys(out))


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def parse_json(s: str) -> Tuple[bool, Any]:
    try:
        return True, json.loads(s)
    except ValueError:
        return False, None


# ---- one case ---------------------------------------------------------------------------------------------------


class Finding:
    def __init__(self, check: str, expected: Any, got: Any, detail: str = "") -> None:
        self.check, self.expected, self.got, self.detail = check, expected, got, detail


# Each engine's grammar dialect (libtrie's kind) and the oracles that read it.
DIALECTS = (("grammar", ("llama",)), ("xgrammar_grammar", ("xgrammar",)))


class Runner:
    def __init__(self, lib: Libtrie, oracles: List[Any]) -> None:
        self.lib = lib
        self.oracles = oracles
        self.divergent = 0  # portable cases that one oracle reads otherwise than the reference
        self.engine_equal = 0  # tool calls jsonschema rejects and XGrammar (the engine) accepts
        self.last_reason = ""

    def applicable(self, kind: str) -> List[Any]:
        return [o for o in self.oracles if kind in orc.KINDS_OF[o.name]]

    def oracle_views(self, kind: str, text: str) -> Tuple[Dict[str, Any], Dict[str, str], List[str]]:
        """Per applicable oracle: its parsed handle, or why it refuses the text; and oracle crashes."""
        handles, refused, crashes = {}, {}, []
        for o in self.applicable(kind):
            try:
                if kind == "vllm_tools" and o.name == "xgrammar":
                    handles[o.name] = o.parse("json_schema", text)
                else:
                    handles[o.name] = o.parse(kind, text)
            except orc.Refused as e:
                refused[o.name] = str(e)
            except orc.OracleCrash as e:
                crashes.append(str(e))
        return handles, refused, crashes

    def ask(self, name: str, handle: Any, strings: List[str]) -> List[bool]:
        o = next(o for o in self.oracles if o.name == name)
        return o.accepts(handle, strings)

    def check(self, case: gg.Case, rng: random.Random) -> Tuple[str, List[Finding], List[str]]:
        """The libtrie outcome ("set", "not-a-set", "limit", "error") and the findings; crashes of oracles."""
        if case.kind == "grammar":
            return self.check_grammar(case, rng)
        outcome, got = self.lib.recognize(case.kind, case.text)
        self.last_reason = str(got) if outcome == "not-a-set" else ""
        if case.family == "grammar-hostile" and outcome in ("limit", "not-a-set"):
            return outcome, [], []  # allowed whatever the oracles say (and they are slow on these)
        handles, refused, crashes = self.oracle_views(case.kind, case.text)
        findings: List[Finding] = []
        if case.kind in ("json_schema",):
            self.check_schema(case, outcome, got, handles, refused, findings, rng)
        elif case.kind == "vllm_tools":
            self.check_tools(case, outcome, got, handles, refused, findings)
        else:
            self.check_text(case, outcome, got, handles, refused, findings, rng)
        return outcome, findings, crashes

    def check_grammar(self, case: gg.Case, rng: random.Random) -> Tuple[str, List[Finding], List[str]]:
        """A grammar is read in each engine's dialect (libtrie's kind "grammar" = llama.cpp's GBNF, kind
        "xgrammar_grammar" = XGrammar's EBNF) and checked against that engine's own matcher. The outcome counted is
        the GBNF one."""
        outcomes = [(kind, names) + self.lib.recognize(kind, case.text) for kind, names in DIALECTS]
        if case.family == "grammar-hostile" and all(o[2] in ("limit", "not-a-set") for o in outcomes):
            self.last_reason = str(outcomes[0][3]) if outcomes[0][2] == "not-a-set" else ""
            return outcomes[0][2], [], []  # allowed whatever the oracles say (and they are slow on these)
        handles, refused, crashes = self.oracle_views("grammar", case.text)
        findings: List[Finding] = []
        self.check_reference(case, handles, refused, findings)
        for kind, names, outcome, got in outcomes:
            mine = {n: h for n, h in handles.items() if n in names}
            theirs = {n: w for n, w in refused.items() if n in names}
            if mine or theirs:  # this dialect's engine is an oracle of this run
                before = len(findings)
                self.check_text(case, outcome, got, mine, theirs, findings, rng, reference=False)
                for f in findings[before:]:
                    f.check = f"{kind}: {f.check}"
        self.last_reason = str(outcomes[0][3]) if outcomes[0][2] == "not-a-set" else ""
        return outcomes[0][2], findings, crashes

    def check_refusals(self, refused: Dict[str, str], served: str, findings: List[Finding]) -> None:
        """A served text that an oracle refuses is a disagreement (grammars: the oracles of the dialect asked);
        ``served`` says what libtrie served."""
        for name, why in refused.items():
            findings.append(Finding(f"served a text {name} refuses", f"{name}: {why}", served))

    def check_reference(self, case: gg.Case, handles: Dict[str, Any], refused: Dict[str, str],
                        findings: List[Finding]) -> None:
        """The harness's own check: the oracles read a portable text and accept its reference language. One oracle
        alone reading it otherwise is a dialect difference (counted; libtrie must not serve it then, which the other
        checks see); all of them refusing it is a bug of the generator."""
        if case.ref is None or case.expect_size is not None or not (handles or refused):
            return
        ref = sorted(case.ref)[:200] if case.family != "grammar-hostile" else sorted(case.ref)[:5]
        readers = getattr(case, "readers", None)  # the oracles whose dialect the text is written in
        views = []
        for name, h in handles.items():
            if readers is None or name in readers:
                views.append(all(self.ask(name, h, ref)))
        views += [False] * len([n for n in refused if readers is None or n in readers])
        if views and not any(views):
            what = "; ".join(f"{n}: {w}" for n, w in refused.items()) or "every oracle rejects a member"
            findings.append(Finding("reference: no oracle reads the text as the generator does", "valid", what))
        elif not all(views):
            self.divergent += 1

    # Grammars and regexes: the language is a set of strings.
    def check_text(self, case: gg.Case, outcome: str, got: Any, handles: Dict[str, Any], refused: Dict[str, str],
                   findings: List[Finding], rng: random.Random, reference: bool = True) -> None:
        if reference:
            self.check_reference(case, handles, refused, findings)
        if outcome in ("error",):
            engines = sorted(n for n in handles if n != "re") or sorted(handles)
            if engines:
                findings.append(Finding("valid request refused", f"accepted by {', '.join(engines)}", got))
            return
        if outcome != "set":
            return
        served = rendered(got)
        served_set = set(served)
        self.check_refusals(refused, f"a set of {len(served)}", findings)
        if case.expect_size is not None:
            if len(served_set) != case.expect_size:
                findings.append(Finding("wrong set size", case.expect_size, len(served_set)))
            probe = case.sample + rng.sample(served, min(10, len(served)))
            for name, h in handles.items():
                for s, ok in zip(probe, self.ask(name, h, probe)):
                    if (s in served_set) != ok:
                        findings.append(Finding(f"{name} disagrees on a string", ok, s in served_set, repr(s)))
                        break
            return
        if case.ref is not None and served_set != case.ref:
            missing = sorted(case.ref - served_set)[:5]
            extra = sorted(served_set - case.ref)[:5]
            findings.append(Finding("set differs from the reference", sorted(case.ref)[:20], sorted(served_set)[:20],
                                    f"missing {missing!r}, extra {extra!r}"))
        cap = 300 if case.family != "grammar-hostile" else 5
        probe = sorted(served_set)[:cap] if len(served_set) <= cap else rng.sample(sorted(served_set), cap)
        pool = probe + sorted(case.ref or [])[:cap] + case.candidates
        probe += [s for s in near_misses(rng, pool, limit=40 if cap > 15 else 10) + case.candidates if s not in served_set]
        probe = list(dict.fromkeys(probe))
        for name, h in handles.items():
            answers = self.ask(name, h, probe)
            for s, ok in zip(probe, answers):
                if s in served_set and not ok:
                    findings.append(Finding(f"{name} rejects a served member", "accepted", "rejected", repr(s)))
                    break
            ws = bool(getattr(got, "trailing_whitespace", False))
            for s, ok in zip(probe, answers):
                if ws and s not in served_set and s.rstrip(" \t\n") in served_set:
                    continue  # the documented exception: whitespace after a member (llama.cpp's space rule)
                if s not in served_set and ok:
                    findings.append(Finding(f"{name} accepts a string libtrie does not serve", "not served", "accepted",
                                            repr(s)))
                    break

    # JSON schemas: the language is a set of JSON values (jsonschema's semantics); XGrammar accepts the texts.
    def check_schema(self, case: gg.Case, outcome: str, got: Any, handles: Dict[str, Any], refused: Dict[str, str],
                     findings: List[Finding], rng: random.Random) -> None:
        if outcome == "error":
            if handles and not refused:
                findings.append(Finding("valid request refused", f"accepted by {', '.join(sorted(handles))}", got))
            return
        if outcome != "set":
            return
        served = rendered(got)
        self.check_refusals(refused, f"a set of {len(served)}", findings)
        values = []
        for s in served:
            ok, v = parse_json(s)
            if not ok:
                findings.append(Finding("a served member is not one JSON text", "JSON", s))
                return
            values.append(v)
        if "xgrammar" in handles:
            h = handles["xgrammar"]
            for s, v, ok in zip(served, values, self.ask("xgrammar", h, served)):
                if not ok:
                    alts = [a for a in spellings(v) if a != s]
                    other = [a for a, yes in zip(alts, self.ask("xgrammar", h, alts)) if yes]
                    if other:
                        findings.append(Finding("xgrammar writes a served value as another text", other[0], s))
                    else:
                        findings.append(Finding("xgrammar rejects a served member", "accepted", "rejected", s))
                    break
        if "jsonschema" in handles:
            h = handles["jsonschema"]
            for s, ok in zip(served, self.ask("jsonschema", h, served)):
                if not ok:
                    findings.append(Finding("jsonschema rejects a served member", "valid", "invalid", s))
                    break
            probe = [c for c in json_near(values) + case.candidates]
            probe = [p for p in dict.fromkeys(probe) if parse_json(p)[0]]
            for s, ok in zip(probe, self.ask("jsonschema", h, probe)):
                v = json.loads(s)
                if ok and not any(json_equal(v, w) for w in values):
                    findings.append(Finding("jsonschema accepts a value libtrie does not serve", "not served", "valid", s))
                    break

    def check_tools(self, case: gg.Case, outcome: str, got: Any, handles: Dict[str, Any], refused: Dict[str, str],
                    findings: List[Finding]) -> None:
        witnesses: Dict[str, Any] = getattr(case, "witnesses", {})
        if outcome == "error":
            if handles and not refused:
                findings.append(Finding("valid request refused", f"accepted by {', '.join(sorted(handles))}", got))
            return
        if outcome != "set":
            return
        names = got["names"]
        self.check_refusals(refused, f"{len(names)} tools", findings)
        # Each name is paired with its own tool's schema (the hand-over of a call): libtrie's payload of member i is
        # the request's parameters of the tool named names[i], never another tool's.
        payloads = got.get("payloads") or []
        if len(payloads) != len(names):
            findings.append(Finding("a recognized tool list without one schema per name", f"{len(names)} schemas",
                                    f"{len(payloads)}", case.text[:2000]))
        else:
            asked = request_tool_schemas(case.text)
            for n, p in zip(names, payloads):
                want = asked.get(n)
                if want is None or not json_equal(json.loads(p), want):
                    findings.append(Finding("a tool name handed over to another schema", json.dumps(want)[:400],
                                            p[:400], n))
                    break

        def call(n: str) -> str:
            w = witnesses.get(n, {})
            return '[{"name": ' + json.dumps(n, ensure_ascii=False) + ', "parameters": ' + json.dumps(w) + "}]"

        served = [call(n) for n in names]
        xg = self.ask("xgrammar", handles["xgrammar"], served) if "xgrammar" in handles else [False] * len(served)
        for oname in ("jsonschema", "xgrammar"):
            if oname in handles:
                for s, ok, x in zip(served, self.ask(oname, handles[oname], served), xg):
                    if not ok:
                        if oname == "jsonschema" and x:
                            # XGrammar (the engine vLLM's tool_choice runs) accepts the call as well: libtrie serves
                            # what the engine serves (e.g. a `not` it ignores). Counted, not a disagreement.
                            self.engine_equal += 1
                            break
                        findings.append(Finding(f"{oname} rejects a served tool call", "accepted", "rejected", s))
                        break
        if "jsonschema" in handles:
            others = [c for c in case.candidates if c not in names]
            probe = [call(n) for n in others]
            for s, ok in zip(probe, self.ask("jsonschema", handles["jsonschema"], probe)):
                if ok:
                    findings.append(Finding("jsonschema accepts a tool call libtrie does not serve", "not served", "valid",
                                            s))
                    break


def request_tool_schemas(text: str) -> Dict[str, Any]:
    """The ``parameters`` schema of each tool name of vLLM's ``tool_choice="required"`` schema (the request)."""
    out: Dict[str, Any] = {}
    try:
        alts = json.loads(text)["items"]["anyOf"]
    except (ValueError, KeyError, TypeError):
        return out
    for alt in alts:
        try:
            props = alt["properties"]
            out.setdefault(props["name"]["enum"][0], props["parameters"])
        except (KeyError, TypeError, IndexError):
            continue
    return out


# ---- shrinking --------------------------------------------------------------------------------------------------


def shrink(text: str, still: Callable[[str], bool], budget: int = 300) -> str:
    """A shorter text on which the same disagreement holds (delta debugging over characters)."""
    n = 2
    calls = 0
    while len(text) >= 2 and calls < budget:
        chunk = max(1, len(text) // n)
        reduced = False
        for i in range(0, len(text), chunk):
            cand = text[:i] + text[i + chunk:]
            calls += 1
            if cand != text and still(cand):
                text = cand
                n = max(n - 1, 2)
                reduced = True
                break
            if calls >= budget:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(text), n * 2)
    return text


def shrink_json(text: str, still: Callable[[str], bool], budget: int = 200) -> str:
    """A smaller schema on which the same disagreement holds: drop keys and list items, one at a time."""
    try:
        doc = json.loads(text)
    except ValueError:
        return shrink(text, still, budget)
    calls = 0

    def variants(x: Any) -> Any:
        if isinstance(x, dict):
            for k in list(x):
                yield {kk: vv for kk, vv in x.items() if kk != k}
            for k in list(x):
                for v in variants(x[k]):
                    yield {**x, k: v}
        elif isinstance(x, list):
            for i in range(len(x)):
                yield x[:i] + x[i + 1:]
            for i in range(len(x)):
                for v in variants(x[i]):
                    yield x[:i] + [v] + x[i + 1:]

    progress = True
    while progress and calls < budget:
        progress = False
        for v in variants(doc):
            calls += 1
            if calls > budget:
                break
            if still(json.dumps(v, ensure_ascii=False)):
                doc, progress = v, True
                break
    return json.dumps(doc, ensure_ascii=False)


# ---- the run ----------------------------------------------------------------------------------------------------


def case_for(seed: int, i: int, families: List[str]) -> gg.Case:
    rng = random.Random(f"{seed}:{i}")
    names = [f for f in families if f in FAMILIES]
    weights = [FAMILIES[f][0] for f in names]
    fam = rng.choices(names, weights)[0]
    c = FAMILIES[fam][1](rng)
    return c


def parallel(args: argparse.Namespace) -> int:
    """Splits cases first..first+cases-1 over ``args.jobs`` processes; sums their summary lines, joins their files."""
    import re
    import subprocess

    argv = [a for a in sys.argv[1:]]
    strip = {"--jobs", "--first", "--cases", "--out", "--stderr-log"}
    base: List[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in strip:
            skip = True
            continue
        if a.split("=", 1)[0] in strip:
            continue
        base.append(a)
    out = args.out.replace("{seed}", str(args.seed))
    per = -(-args.cases // args.jobs)
    procs = []
    for j in range(args.jobs):
        first = args.first + j * per
        n = max(0, min(per, args.first + args.cases - first))
        cmd = [sys.executable, os.path.abspath(__file__)] + base + ["--first", str(first), "--cases", str(n),
                                                                       "--out", f"{out}.part{j}"]
        if j > 0:
            cmd.append("--no-known")
        if args.stderr_log:
            cmd += ["--stderr-log", f"{args.stderr_log}.part{j}"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    totals = [0, 0, 0, 0]
    for j, p in enumerate(procs):
        text, _ = p.communicate()
        last = [ln for ln in text.splitlines() if ln.startswith("differential: ") and " cases, " in ln]
        print(f"  job {j}: {last[-1] if last else 'no summary (exit %s)' % p.returncode}")
        m = re.match(r"differential: (\d+) cases, (\d+) disagreements, (\d+) not-a-set, (\d+) errors", last[-1]) \
            if last else None
        if not m:
            totals[3] += 1
            continue
        for k in range(4):
            totals[k] += int(m.group(k + 1))
    with open(out, "w", encoding="utf-8") as f:
        for j in range(args.jobs):
            part = f"{out}.part{j}"
            if os.path.exists(part):
                with open(part, encoding="utf-8") as g:
                    f.write(g.read())
                os.remove(part)
    n, d, sn, e = totals
    print(f"differential: {n} cases, {d} disagreements, {sn} not-a-set, {e} errors")
    return 1 if d or e else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="the first case index (cases first..first+cases-1)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--oracles", default="xgrammar,llama,re,jsonschema")
    ap.add_argument("--require", default="", help="oracles that must load (else exit 2)")
    ap.add_argument("--llama-oracle", default=os.environ.get("TRIE_LLAMA_ORACLE", ""))
    ap.add_argument("--out", default="differential-disagreements.jsonl")
    ap.add_argument("--no-known", action="store_true", help="skip the fixed corpus of known cases")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--progress", type=int, default=0, help="print a progress line every N cases")
    ap.add_argument("--stderr-log", default="", help="send the oracles' C++ log lines (fd 2) to this file")
    ap.add_argument("--show", type=int, default=30, help="distinct disagreements shown on stdout")
    ap.add_argument("--reasons", action="store_true", help="print the most frequent not-a-set reasons per family")
    ap.add_argument("--jobs", type=int, default=1, help="run the cases in N processes (a campaign on a larger machine)")
    args = ap.parse_args()

    if args.jobs > 1:
        return parallel(args)
    if args.stderr_log:
        keep = os.dup(2)
        fd = os.open(args.stderr_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 2)
        sys.stderr = os.fdopen(keep, "w", buffering=1)

    lib = Libtrie()
    wanted = [o for o in args.oracles.split(",") if o]
    oracles, failed = orc.load(wanted, args.llama_oracle)
    print(f"differential: libtrie {lib.path} (kinds: {', '.join(lib.kinds)})")
    for o in oracles:
        print(f"  oracle {o.name}: {o.version}")
    for f in failed:
        print(f"  oracle NOT RUN: {f}")
    required = [r for r in args.require.split(",") if r]
    missing = [r for r in required if r not in {o.name for o in oracles}]
    if missing:
        print(f"differential: required oracles did not load: {', '.join(missing)}")
        return 2
    runner = Runner(lib, oracles)
    families = [f for f in args.families.split(",") if f]

    cases: List[Tuple[str, gg.Case]] = []
    if not args.no_known:
        cases += [(f"known:{k}", c) for k, c in enumerate(KNOWN)]
    t0 = time.time()
    stats: Dict[str, Counter] = defaultdict(Counter)
    reasons: Dict[str, Counter] = defaultdict(Counter)
    n_cases = 0
    disagreements = 0
    errors = 0
    shown: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    shrunk: Set[Tuple[str, str, str]] = set()
    args.out = args.out.replace("{seed}", str(args.seed))
    out = open(args.out, "w", encoding="utf-8")

    def gen() -> Any:
        yield from cases
        for i in range(args.first, args.first + args.cases):
            yield f"{args.seed}:{i}", case_for(args.seed, i, families)

    for cid, case in gen():
        n_cases += 1
        if args.progress and n_cases % args.progress == 0:
            print(f"  progress: {n_cases} cases, {disagreements} disagreements, {errors} errors, "
                  f"{time.time() - t0:.0f} s", flush=True)
        rng = random.Random(f"near:{cid}")
        tc = time.time()
        try:
            outcome, findings, crashes = runner.check(case, rng)
            stats[case.family]["ms"] += int(1000 * (time.time() - tc))
        except Exception as e:  # a bug of the harness or an oracle: an error, never silent
            errors += 1
            stats[case.family]["errors"] += 1
            print(f"  ERROR case {cid} ({case.family}): {type(e).__name__}: {e}", file=sys.stdout)
            continue
        st = stats[case.family]
        st["cases"] += 1
        st[outcome] += 1
        if outcome == "not-a-set" and args.reasons:
            reasons[case.family][runner.last_reason[:70]] += 1
        if crashes:
            st["oracle-crash"] += 1
            if case.family != "grammar-hostile":
                errors += 1
                print(f"  ERROR case {cid}: {crashes[0]}")
        harness = [f for f in findings if f.check.startswith("reference:")]
        real = [f for f in findings if not f.check.startswith("reference:")]
        if harness:
            errors += 1
            st["errors"] += 1
            key = (case.family, harness[0].check, case.note)
            if key not in shown:
                print(f"  HARNESS case {cid} {case.family}: {harness[0].check}: {harness[0].expected!r} / "
                      f"{harness[0].got!r}  text={case.text[:300]!r}")
                shown[key] = {}
        if not real:
            continue
        disagreements += 1
        st["disagreements"] += 1
        f = real[0]
        minimal, mfind = case.text, f
        key = (case.family, f.check, case.note)
        if not args.no_shrink and key not in shrunk and len(case.text) < 20000 and case.kind != "vllm_tools":
            shrunk.add(key)

            def still(t: str, kind: str = case.kind, check: str = f.check) -> Optional[Finding]:
                c2 = gg.Case(case.family, kind, t, None, finite=case.finite, candidates=case.candidates
                             + sorted(case.ref or [])[:50])
                try:
                    _, fs, _ = runner.check(c2, random.Random(0))
                except Exception:
                    return None
                return next((x for x in fs if x.check == check), None)

            if case.kind == "json_schema":
                minimal = shrink_json(case.text, lambda t: still(t) is not None)
            else:
                minimal = shrink(case.text, lambda t: still(t) is not None)
            mfind = still(minimal) or f
        rec = {"case": cid, "family": case.family, "kind": case.kind, "note": case.note, "check": f.check,
               "text": case.text, "minimal": minimal, "expected": mfind.expected, "got": mfind.got, "detail": mfind.detail,
               "libtrie": outcome, "all_checks": [x.check for x in real]}
        out.write(json.dumps(rec, ensure_ascii=False, default=sorted) + "\n")
        out.flush()
        if key not in shown or len(minimal) < len(shown[key].get("minimal", "x" * 10**6)):
            shown[key] = rec
    out.close()
    dt = time.time() - t0
    not_a_set = sum(s["not-a-set"] for s in stats.values())
    for fam in sorted(stats):
        s = stats[fam]
        rate = 100.0 * s["not-a-set"] / max(1, s["cases"])
        print(f"  {fam:18s} {s['cases']:8d} cases  set {s['set']:7d}  not-a-set {s['not-a-set']:7d} ({rate:5.1f} %)  "
              f"limit {s['limit']:5d}  error {s['error']:6d}  disagreements {s['disagreements']:6d}  {s['ms'] / 1000:6.1f} s"
              + (f"  oracle-crash {s['oracle-crash']}" if s["oracle-crash"] else ""))
    for fam in sorted(reasons):
        top = ", ".join(f"{n} x {r!r}" for r, n in reasons[fam].most_common(3))
        print(f"  not-a-set reasons, {fam}: {top}")
    real_shown = [r for r in shown.values() if r]
    if real_shown:
        print(f"  distinct disagreements (family, check, note): {len(real_shown)}; the shortest text of each:")
        for r in sorted(real_shown, key=lambda r: (r["family"], r["check"]))[: args.show]:
            print(f"    [{r['family']}] {r['check']}{' (' + r['note'] + ')' if r['note'] else ''}: "
                  f"{r['minimal'][:200]!r}  expected {str(r['expected'])[:120]} got {str(r['got'])[:120]} {r['detail'][:120]}")
    print(f"  {n_cases / dt if dt else 0:.0f} cases/s, {dt:.1f} s; disagreements in {args.out}")
    print(f"  portable cases one oracle reads otherwise than the reference (dialect differences): {runner.divergent}")
    print(f"  tool calls jsonschema rejects and XGrammar accepts (served as vLLM does): {runner.engine_equal}")
    print(f"differential: {n_cases} cases, {disagreements} disagreements, {not_a_set} not-a-set, {errors} errors")
    return 1 if disagreements or errors else 0


if __name__ == "__main__":
    sys.exit(main())
