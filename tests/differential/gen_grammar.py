"""Random finite grammars (GBNF and XGrammar EBNF) with their reference language, computed from the generator's AST.

A grammar is an AST (rules of alternatives of sequences of literals, references and groups), rendered as text with
random but *portable* spelling: what llama.cpp's GBNF parser (src/llama-grammar.cpp) and XGrammar's EBNF lexer
(cpp/grammar_parser.cc) read the same way:

- rule names ``[a-zA-Z][a-zA-Z0-9-]*`` (GBNF has no ``_`` or ``.``; XGrammar no leading digit);
- a rule starts on its own line; line breaks are ``\\n``, ``\\r\\n`` or ``\\r`` (both read all three); outside
  parentheses a line break may only follow ``::=`` or ``|`` (GBNF ends the rule at a line break), inside parentheses
  anywhere;
- ``#`` comments end at ``\\n``, ``\\r`` or the end of the text (both);
- escapes both read the same: ``\\n \\r \\t \\\\ \\"``, ``\\xHH`` not followed by a hex digit, ``\\uHHHH``,
  ``\\UHHHHHHHH``; any other character raw except ``"``, ``\\``, line breaks and NUL;
- the empty string as ``""`` or ``()`` (XGrammar refuses an empty alternative).

``twisted`` cases then apply one *dialect-specific* change (an escape, a line break, a name, an empty alternative
that only one dialect reads, or reads differently): they have no reference language, the oracles decide. ``near``
cases add a non-finite or non-literal construct (repetition, class, recursion). ``hostile`` cases are expansion bombs
and deep nesting.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple, Union

# ---- the AST ------------------------------------------------------------------------------------------------------


@dataclass
class Lit:
    value: str


@dataclass
class Ref:
    name: str


@dataclass
class Group:
    alts: List[List["Node"]]


@dataclass
class Empty:
    """``()``: the empty string."""


Node = Union[Lit, Ref, Group, Empty]


@dataclass
class Grammar:
    rules: Dict[str, List[List[Node]]]  # in definition order; "root" among them
    order: List[str] = field(default_factory=list)


CAP = 3000  # the largest reference language the generator builds


def lang_seq(g: Grammar, seq: List[Node], memo: Dict[str, Set[str]]) -> Set[str]:
    out = {""}
    for n in seq:
        part = lang_node(g, n, memo)
        out = {a + b for a in out for b in part}
    return out


def lang_alts(g: Grammar, alts: List[List[Node]], memo: Dict[str, Set[str]]) -> Set[str]:
    out: Set[str] = set()
    for seq in alts:
        out |= lang_seq(g, seq, memo)
    return out


def lang_node(g: Grammar, n: Node, memo: Dict[str, Set[str]]) -> Set[str]:
    if isinstance(n, Lit):
        return {n.value}
    if isinstance(n, Empty):
        return {""}
    if isinstance(n, Group):
        return lang_alts(g, n.alts, memo)
    if n.name not in memo:
        memo[n.name] = lang_alts(g, g.rules[n.name], memo)
    return memo[n.name]


def language(g: Grammar) -> Set[str]:
    return lang_node(g, Ref("root"), {})


def size_seq(g: Grammar, seq: List[Node], memo: Dict[str, int]) -> int:
    n = 1
    for x in seq:
        n *= size_node(g, x, memo)
    return n


def size_node(g: Grammar, n: Node, memo: Dict[str, int]) -> int:
    """An upper bound of the language size (duplicates counted)."""
    if isinstance(n, (Lit, Empty)):
        return 1
    if isinstance(n, Group):
        return sum(size_seq(g, s, memo) for s in n.alts)
    if n.name not in memo:
        memo[n.name] = sum(size_seq(g, s, memo) for s in g.rules[n.name])
    return memo[n.name]


# ---- random content ---------------------------------------------------------------------------------------------

ALPHABET = (
    list("abcxyzAZ019")
    + list(" \t\n\r")
    + list("\"\\|()#[]{}*+?.-_:=;,'/!<>^$~`@%&")
    + ["é", "ß", "中", "文", "😀", "ｱ", "\u2028", "\u0301", "\u00a0", "\x01", "\x1b", "\x7f", "\u0085", "\U0010ffff"]
)
HEX = "0123456789abcdefABCDEF"
HEX_SET = set(HEX)


def rand_string(rng: random.Random, max_len: int = 4) -> str:
    n = rng.choice([0, 1, 1, 2, 2, 3, 3, max_len])
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def rand_name(rng: random.Random, taken: Set[str]) -> str:
    while True:
        first = rng.choice("abcdefghijklmnopqrstuvwxyzABCXYZ")
        rest = "".join(rng.choice("abcxyz0129-") for _ in range(rng.randint(0, 6)))
        name = first + rest
        # XGrammar reads `true`/`false` and its macro names specially; avoid every known keyword.
        if name not in taken and name.lower() not in {"true", "false", "root"} and not name[0].isupper():
            return name
        if name not in taken and name[0].isupper() and name not in {"TagDispatch", "TokenTagDispatch"}:
            return name


def gen_ast(rng: random.Random, n_rules: Optional[int] = None, max_depth: int = 3) -> Grammar:
    n = n_rules if n_rules is not None else rng.choice([1, 1, 2, 2, 3, 4, 5])
    names = ["root"]
    taken = {"root"}
    for _ in range(n - 1):
        names.append(rand_name(rng, taken))
        taken.add(names[-1])
    rules: Dict[str, List[List[Node]]] = {}
    # Rule i refers only to rules after it: no recursion. Build from the last rule to keep the size bounded.
    g = Grammar(rules={}, order=[])
    for i in range(n - 1, -1, -1):
        later = names[i + 1:]
        for _attempt in range(6):
            body = gen_alts(rng, later, max_depth)
            g.rules[names[i]] = body
            if size_node(g, Ref(names[i]), {}) <= CAP:
                break
            g.rules[names[i]] = [[Lit(rand_string(rng))]]
        rules[names[i]] = g.rules[names[i]]
    order = names[:]
    rng.shuffle(order) if rng.random() < 0.3 else None
    if rng.random() < 0.5 and "root" in order:
        order.remove("root")
        order.insert(0, "root")
    g.order = order
    return g


def gen_alts(rng: random.Random, refs: List[str], depth: int) -> List[List[Node]]:
    n = rng.choice([1, 1, 2, 2, 3, 4, 6])
    alts = [gen_seq(rng, refs, depth) for _ in range(n)]
    r = rng.random()
    if r < 0.15 and alts:
        alts.append(list(rng.choice(alts)))  # a duplicate alternative
    elif r < 0.22 and alts and alts[0] and all(isinstance(x, Lit) for x in alts[0]):
        # The same string spelled another way: "a" "b" | "ab"
        alts.append([Lit("".join(x.value for x in alts[0] if isinstance(x, Lit)))])
    return alts


def gen_seq(rng: random.Random, refs: List[str], depth: int) -> List[Node]:
    n = rng.choice([1, 1, 1, 2, 2, 3])
    seq: List[Node] = []
    for _ in range(n):
        r = rng.random()
        if refs and r < 0.25:
            seq.append(Ref(rng.choice(refs)))
        elif depth > 0 and r < 0.4:
            seq.append(Group(gen_alts(rng, refs, depth - 1)))
        elif r < 0.45:
            seq.append(Empty())
        else:
            seq.append(Lit(rand_string(rng)))
    return seq


# ---- portable rendering -----------------------------------------------------------------------------------------


class Render:
    """Renders an AST as text; every random choice is portable (see the module docs)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.eol_forms = rng.choice([["\n"], ["\r\n"], ["\r"], ["\n", "\r\n", "\r"]])

    def eol(self) -> str:
        return self.rng.choice(self.eol_forms)

    def comment_text(self) -> str:
        chars = "abc \t\"|()#:=;é中😀\\[]*"
        return "#" + "".join(self.rng.choice(chars) for _ in range(self.rng.randint(0, 8)))

    def inline(self, allow_empty: bool = True) -> str:
        r = self.rng.random()
        if allow_empty and r < 0.2:
            return ""
        return self.rng.choice([" ", " ", " ", "\t", "  ", " \t "])

    def breaking(self) -> str:
        """Whitespace where a line break is allowed in both dialects: maybe comments and line breaks."""
        out = self.inline()
        for _ in range(self.rng.choice([0, 0, 1, 1, 2])):
            if self.rng.random() < 0.5:
                out += self.comment_text()
            out += self.eol() + self.inline()
        return out

    def literal(self, s: str) -> str:
        # Spell each char from the last to the first, so that a \xHH knows whether a hex digit follows it.
        chars = list(s)
        spelled: List[str] = [""] * len(chars)
        for i in range(len(chars) - 1, -1, -1):
            follow = spelled[i + 1] if i + 1 < len(chars) else '"'
            spelled[i] = self.spell(chars[i], follow[:1] in HEX_SET)
        return '"' + "".join(spelled) + '"'

    def spell(self, c: str, follow_hex: bool) -> str:
        o = ord(c)
        forms = []
        special = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", '"': '\\"'}
        if c in special:
            forms.append(special[c])
        if c not in '"\\\n\r\x00':
            forms += [c, c, c]
        if o < 0x100 and not follow_hex:
            forms.append("\\x" + self.hex(o, 2))
        if o < 0x10000:
            forms.append("\\u" + self.hex(o, 4))
        forms.append("\\U" + self.hex(o, 8))
        return self.rng.choice(forms)

    def hex(self, v: int, width: int) -> str:
        h = format(v, "0%dx" % width)
        return h.upper() if self.rng.random() < 0.3 else h

    def node(self, n: Node) -> str:
        if isinstance(n, Lit):
            return self.literal(n.value)
        if isinstance(n, Ref):
            return n.name
        if isinstance(n, Empty):
            return "(" + self.breaking() + ")"
        return "(" + self.breaking() + self.alts(n.alts, nested=True) + self.breaking() + ")"

    def seq(self, seq: List[Node], nested: bool) -> str:
        out = ""
        prev: Optional[Node] = None
        for n in seq:
            if prev is not None:
                need = isinstance(prev, Ref) and isinstance(n, Ref)
                out += self.breaking() if nested else self.inline(allow_empty=not need)
                if need and out[-1:] not in (" ", "\t", "\n", "\r"):
                    out += " "
            out += self.node(n)
            prev = n
        return out

    def alts(self, alts: List[List[Node]], nested: bool) -> str:
        parts = []
        for i, s in enumerate(alts):
            text = self.seq(s, nested)
            if i > 0:
                parts.append((self.breaking() if nested else self.inline()) + "|" + self.breaking())
            parts.append(text)
        return "".join(parts)

    def grammar(self, g: Grammar) -> str:
        out = ""
        if self.rng.random() < 0.2:
            out += self.breaking() + self.eol()
        for k, name in enumerate(g.order):
            if k > 0:
                # End the previous rule: an optional trailing comment, one or more line breaks (blank lines and
                # comment lines between rules).
                out += self.inline()
                if self.rng.random() < 0.3:
                    out += self.comment_text()
                out += self.eol()
                for _ in range(self.rng.choice([0, 0, 1, 2])):
                    out += self.inline() + (self.comment_text() if self.rng.random() < 0.5 else "") + self.eol()
                out += self.inline() if self.rng.random() < 0.2 else ""
            out += name + self.inline() + "::=" + self.breaking_after_assign() + self.alts(g.rules[name], False)
        r = self.rng.random()
        if r < 0.3:
            out += self.inline() + self.eol()
        elif r < 0.4:
            out += self.inline() + self.comment_text()  # a comment that ends at the end of the text
        elif r < 0.5:
            out += self.inline() + self.comment_text() + self.eol()
        return out

    def breaking_after_assign(self) -> str:
        return self.breaking() if self.rng.random() < 0.3 else self.inline()


# ---- cases --------------------------------------------------------------------------------------------------------


@dataclass
class Case:
    family: str
    kind: str  # the libtrie kind
    text: str
    ref: Optional[Set[str]]  # the reference language (None: the oracles decide)
    finite: bool = True
    candidates: List[str] = field(default_factory=list)  # more strings to probe (other readings)
    note: str = ""
    expect_size: Optional[int] = None  # hostile cases: the language's size, when it is too large to list
    sample: List[str] = field(default_factory=list)  # hostile cases: some members


def portable(rng: random.Random) -> Case:
    g = gen_ast(rng)
    text = Render(rng).grammar(g)
    return Case("grammar", "grammar", text, language(g))


# Dialect-specific escapes: (spelling, what XGrammar reads or None when it refuses, what GBNF reads or None).
TWIST_ESCAPES: List[Tuple[str, Optional[str], Optional[str]]] = [
    ("\\'", "'", None), ("\\?", "?", None), ("\\/", "/", None), ("\\a", "\x07", None), ("\\b", "\x08", None),
    ("\\f", "\x0c", None), ("\\v", "\x0b", None), ("\\e", "\x1b", None), ("\\0", "\x00", None),
    ("\\[", None, "["), ("\\]", None, "]"), ("\\-", None, "-"),
    ("\\x41B", "\u041b", "AB"), ("\\x4", "\x04", None), ("\\x0041", "A", "\x00" + "41"),
    ("\\x00", "\x00", "\x00"), ("\\u0000", "\x00", "\x00"), ("\\ud800", None, None), ("\\U00110000", None, None), ("\\q", None, None),
]


def twisted(rng: random.Random) -> Case:
    """A portable grammar with one dialect-specific change; the candidates hold each reading's members."""
    g = gen_ast(rng, n_rules=rng.choice([1, 2, 3]))
    r = Render(rng)
    base = language(g)
    kind = rng.randrange(17)
    cands: List[str] = sorted(base)
    text = r.grammar(g)
    if kind == 0:
        spelling, xg, ll = rng.choice(TWIST_ESCAPES)
        pre, post = rand_string(rng, 2), rand_string(rng, 2)
        lit = r.literal(pre)[:-1] + spelling + r.literal(post)[1:]
        text = text_with_root_alt(r, g, lit)
        cands += [pre + x + post for x in (xg, ll) if x is not None] + [pre + post]
        note = "escape " + spelling
    elif kind == 1:
        c = rng.choice(["\n", "\r"])
        lit = '"a' + c + 'b"'
        text = text_with_root_alt(r, g, lit)
        cands += ["a" + c + "b", "ab"]
        note = "raw line break inside a literal"
    elif kind == 2:
        form = rng.choice([' | ', ' |', '| ', ' | | ', ' ( "x" | ) '])
        text = text.replace("::=", "::=" + form, 1) if rng.random() < 0.5 else add_after_root_body(g, r, form)
        cands += [""] + [m + "x" for m in list(base)[:3]] + ["x"]
        note = "empty alternative " + repr(form)
    elif kind in (3, 4) and len(g.order) > 1:
        old = [n for n in g.order if n != "root"][0]
        new = old[:1] + ("_" if kind == 3 else ".") + old[1:] if kind == 3 or rng.random() < 0.5 else "1" + old
        text = rename(text, old, new)
        note = "rule name " + new
    elif kind == 5 and len(g.order) > 1:
        name = [n for n in g.order if n != "root"][0]
        alt = rand_string(rng)
        text = text + r.eol() + name + ' ::= "' + alt.replace("\\", "").replace('"', "") + '"'
        cands += [alt]
        note = "rule defined twice"
    elif kind == 6:
        text = 'root ::= "a"' + rng.choice(["\n", "\r\n", "\r"]) + rng.choice([' | "b"', '| "b"', ' "b"', '"b"'])
        cands += ["a", "b", "ab"]
        note = "line break outside parentheses before | or an element"
    elif kind == 7:
        text = "root" + rng.choice([" # c\n", "\n", " # c\r"]) + '::= "a" | "b"'
        cands += ["a", "b"]
        note = "line break between a rule name and ::="
    elif kind == 8:
        text = "root ::=" + rng.choice(["", " ", " # c", "\n"]) + (rng.choice(["", '\nx ::= "a"']))
        cands += ["", "a"]
        note = "empty rule body"
    elif kind == 9:
        text = 'root ::= "a" "b"' + rng.choice(["\r", "\r\n"]) + ' "c"'
        cands += ["ab", "abc", "c"]
        note = "a line break between elements outside parentheses"
    elif kind == 10:
        text = 'root ::= x\nx ::= "a" | "b"\nroot ::= "c"'
        cands += ["a", "b", "c"]
        note = "root defined twice"
    elif kind == 11:
        text = 'root ::= "a" ' + rng.choice(["\"b\" ::= \"c\"", "x ::= \"c\"\nx ::= \"d\"", "( \"b\" ) x ::= \"c\""])
        cands += ["a", "ab", "abc", "c"]
        note = "a rule name not at the start of a line"
    elif kind == 12:
        # A comment that ends at \r where the next token sits right after it (the case, in variants).
        body = rng.choice(['("a" # c\r "b" # )\n)', '"a" | # x\r"b"', '("a"\r# c\r"b")', '"a" # c\r\nx ::= "q"'])
        text = "root ::= " + body
        cands += ["a", "ab", "b", ""]
        note = "a comment ending at \\r"
    elif kind == 14:
        name = rng.choice(["true", "false", "Token", "Regex", "Substring", "TagDispatch", "ExcludeToken", "namé"])
        text = 'root ::= "a" | ' + name + "\n" + name + ' ::= "b"'
        cands += ["a", "b"]
        note = "rule named " + name
    elif kind == 15:
        text = rng.choice(['root ::= "a" (= "b")', 'root ::= x\nx ::= "a" (= "b")', 'root[max_tokens=3] ::= "a"',
                           'root ::= "a" | "b" (="c")'])
        cands += ["a", "ab", "b", "bc"]
        note = "XGrammar-only syntax"
    elif kind == 16:
        text = 'root ::= "a"' + rng.choice(["\x0b", "\x0c", "\u00a0", "\u2028", "\u0085"]) + '| "b"'
        cands += ["a", "b"]
        note = "unusual whitespace before |"
    else:
        text = "root ::= " + rng.choice(['"a" "b"\t', '"a"\u00a0"b"', '"a"\x0b"b"', '"a"\x0c"b"', "\ufeff\"a\""])
        cands += ["ab", "a"]
        note = "unusual whitespace"
    return Case("grammar-dialect", "grammar", text, None, candidates=cands, note=note)


def text_with_root_alt(r: Render, g: Grammar, lit: str) -> str:
    """The grammar rendered with one more alternative of root: the literal text ``lit`` as it is."""
    g2 = Grammar(rules=dict(g.rules), order=list(g.order))
    g2.rules["root"] = g.rules["root"] + [[Ref("zzmarkzz")]]
    return rename(r.grammar(g2), "zzmarkzz", "\x00LIT\x00").replace("\x00LIT\x00", lit)


def add_after_root_body(g: Grammar, r: Render, form: str) -> str:
    g2 = Grammar(rules=dict(g.rules), order=["root"] + [n for n in g.order if n != "root"])
    text = r.grammar(g2)
    for sep in ("\r\n", "\n", "\r"):
        if sep in text:
            i = text.index(sep)
            return text[:i] + form + text[i:]
    return text + form


def rename(text: str, old: str, new: str) -> str:
    import re

    # Only outside literals: split on literals and comments conservatively (names are ASCII words).
    out, i = [], 0
    pat = re.compile(r'"(?:[^"\\]|\\.)*"|#[^\r\n]*|(?<![A-Za-z0-9_.-])' + re.escape(old) + r"(?![A-Za-z0-9_.-])", re.S)
    for m in pat.finditer(text):
        out.append(text[i:m.start()])
        out.append(new if m.group(0) == old else m.group(0))
        i = m.end()
    out.append(text[i:])
    return "".join(out)


NEAR = [
    ('root ::= "a"*', False), ('root ::= "a"+', False), ('root ::= "a"?', True), ('root ::= "a"{2}', True),
    ('root ::= "a"{1,3}', True), ('root ::= [a-c]', True), ('root ::= [^"]', False), ('root ::= .', False),
    ('root ::= x\nx ::= "a" x | "b"', False), ('root ::= x\nx ::= x "a" | "b"', False), ('root ::= "a" root | ""', False),
    ('root ::= ("a" | "b")*', False), ('root ::= "a" [0-9]', True), ('root ::= "a" <[1]>', True),
    ('root ::= "a" | "b"{0,}', False), ('root ::= "a" (x)?\nx ::= "b"', True),
]


def near(rng: random.Random) -> Case:
    """A finite grammar with one non-literal construct: libtrie says "not a set" or, when it serves, oracles check."""
    text, finite = rng.choice(NEAR)
    g = gen_ast(rng, n_rules=1)
    extra = Render(rng).alts(g.rules["root"], False)
    if rng.random() < 0.5:
        text = text.replace("root ::= ", "root ::= " + extra + " | ", 1)
    cands = sorted(language(g)) + ["", "a", "aa", "aaa", "b", "ab", "aab", "c", "0", "a0", "x", '"']
    return Case("grammar-near", "grammar", text, None, finite=finite, candidates=cands)


def hostile(rng: random.Random) -> Case:
    k = rng.randrange(5)
    if k == 0:
        n = rng.choice([3, 4, 5])
        digits = " | ".join('"%d"' % i for i in range(10))
        text = "root ::= " + " ".join(["d"] * n) + ' ""\nd ::= ' + digits
        sample = ["".join(rng.choice("0123456789") for _ in range(n)) for _ in range(10)]
        return Case("grammar-hostile", "grammar", text, None, expect_size=10 ** n, sample=sample, note="bomb 10^%d" % n)
    if k == 1:
        depth = rng.choice([10, 40, 63, 64, 65, 100, 500, 2000])
        s = rand_string(rng, 2)
        text = "root ::= " + "(" * depth + Render(rng).literal(s) + ")" * depth
        return Case("grammar-hostile", "grammar", text, {s}, note="nesting %d" % depth)
    if k == 2:
        n = rng.choice([50, 70, 200])
        rules = ['r%d ::= r%d | "%d"' % (i, i + 1, i) for i in range(n)]
        text = "root ::= r0\n" + "\n".join(rules) + '\nr%d ::= "end"' % n
        return Case("grammar-hostile", "grammar", text, {str(i) for i in range(n)} | {"end"}, note="chain %d" % n)
    if k == 3:
        n = rng.choice([300, 1000, 10001])
        members = ["m%d" % i for i in range(n)]
        text = "root ::= " + " | ".join('"%s"' % m for m in members)
        return Case("grammar-hostile", "grammar", text, set(members), note="%d alternatives" % n)
    s = "".join(rng.choice("abc\u00e9") for _ in range(rng.choice([1000, 30000])))
    return Case("grammar-hostile", "grammar", 'root ::= "' + s + '"', {s}, note="long literal")


SPACE_RULES = ['" "?', '| " " | "\\n" [ \\t]{0,20}', '| " " | "\\n"{1,2} [ \\t]{0,20}']


def space_json(rng: random.Random) -> Case:
    """The grammars llama.cpp's json-schema-to-grammar writes for an enum: JSON texts as literals and a `space` rule
    (libtrie serves the members and reports ``trailing_whitespace``: optional whitespace after them is allowed)."""
    import json

    vals = [rng.choice(["a", "b", "é", 'q"t', "back\\s", "tab\t", "\x01", "", "中", 1, -2, 3.5, True, None])
            for _ in range(rng.choice([1, 2, 3, 4]))]
    texts = list(dict.fromkeys(json.dumps(v, ensure_ascii=False) for v in vals))
    lits = [Render(rng).literal(t) if rng.random() < 0.5 else '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for t in texts]
    space = rng.choice(SPACE_RULES)
    form = rng.randrange(3)
    if form == 0:
        root = "root ::= (" + " | ".join(lits) + ") space"
    elif form == 1:
        root = "root ::= " + " | ".join(lit + " space" for lit in lits)
    else:
        root = "root ::= (" + " | ".join(lits) + ")"
    text = root + "\nspace ::= " + space + rng.choice(["", "\n"])
    c = Case("grammar-space", "grammar", text, set(texts), note="space rule form %d" % form)
    c.readers = ["llama"]  # type: ignore[attr-defined]  (XGrammar refuses the space rules that start with `|`)
    return c
