//! EBNF/GBNF grammars whose `root` is a finite alternation of string literals, read exactly as both engines
//! read them (llama.cpp's GBNF, `src/llama-grammar.cpp`; XGrammar's EBNF, `cpp/grammar_parser.cc`), or "not a
//! set" wherever the two dialects read a text differently or libtrie is not sure.
//!
//! Understood: rules `name ::= body`, `#` comments, string literals with the escapes both dialects share
//! (`\n \r \t \\ \"`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`: code points, written as UTF-8), alternation `|`, grouping
//! `( )` (`()` is the empty string), concatenation, and references to rules that are themselves such
//! alternations. A rule equal to one of llama.cpp's `space` rules (`" "?`, `| " " | "\n" [ \t]{0,20}`,
//! `| " " | "\n"{1,2} [ \t]{0,20}`) may end every alternative of `root`: the set is returned with
//! `trailing_whitespace`. A grammar that defines such a rule was written by llama.cpp's json-schema-to-grammar,
//! so its members are read as JSON values ([`super::json_view`]). Alternatives that give the same string are
//! served once (the first kept): `root ::= "a" | "a"` is `{"a"}`.
//!
//! Every rule is checked, reachable from `root` or not (an engine parses them all; one it refuses fails the
//! whole grammar): any rule but a `space` rule must be such a literal alternation. Anything else — a repetition
//! (`* + ? {m,n}`), a character class (even of one character), `.`, a token reference, a macro, recursion, an
//! empty alternative, a lexical point below — is "not a set". A grammar no dialect parses (an unterminated
//! literal, no `root`, a reference to an undefined rule, an unbalanced parenthesis) is an error.
//!
//! The members are charged against [`Limits`] before they are built: a concatenation's product count and
//! bytes are computed (saturating) before it is materialized, and so are alternation appends and copies of
//! memoized rules; all strings built, intermediate ones included, are charged to a work budget of
//! [`super::WORK_FACTOR`] × `max_member_bytes`.
//!
//! # The two dialects, point by point
//!
//! | point | llama.cpp GBNF | XGrammar EBNF | libtrie |
//! |---|---|---|---|
//! | `#` comment | to `\n` or `\r` | to `\n` or `\r` | the same |
//! | line end | `\n`, `\r`, `\r\n` end a rule outside `( )` | whitespace; a rule ends at the next `name ::=` | a rule going on over a line end outside `( )` (except after `::=` and `\|`) is not a set |
//! | `name ::=` position | after a line end | the name must start its line (else an error) | not a set |
//! | line end between name and `::=` | error | accepted | not a set |
//! | rule names | `[a-zA-Z0-9-]+` | `[a-zA-Z_.-][a-zA-Z0-9_.-]*` | `[a-zA-Z-][a-zA-Z0-9-]*` only; `_`, `.`, a leading digit: not a set |
//! | `true`, `false` | rule names | boolean tokens (error as a rule) | not a set |
//! | `TagDispatch`, `Token`, `ExcludeToken`, `TokenTagDispatch`, `Regex`, `Substring` | rule references | macros | not a set |
//! | `.` | any character | a name character | not a set |
//! | non-ASCII in names | error | error | not a set |
//! | `name[attrs] ::=` | error | rule attributes | not a set |
//! | `(= ...)` lookahead | error | lookahead assertion | not a set |
//! | `<[id]>`, `!<..>` tokens | token references | error | not a set |
//! | escapes `\n \r \t \\ \"` | yes | yes | understood |
//! | `\[ \] \-` | yes | error in a string | not a set |
//! | `\' \? \/ \a \b \f \v \0 \e` | error | yes | not a set |
//! | `\xHH` | exactly 2 digits (a third is a character) | every hex digit that follows | 2 digits then no hex digit; else not a set |
//! | `\uHHHH`, `\UHHHHHHHH` | 4 / 8 digits | 4 / 8 digits | understood when a Unicode scalar value, else not a set |
//! | raw line end inside `"..."` | a character | error | not a set |
//! | NUL byte | end of the text | end of the text | not a set |
//! | empty literal `""` | empty | empty | empty |
//! | `()` | empty | empty | empty |
//! | empty alternative (`"a" \|`, `( \| "a")`, `root ::=` with nothing) | empty | error | not a set (but in llama.cpp's `space` rules) |
//! | a rule defined twice | the last wins | error | not a set |
//! | whitespace around `::=` | optional, not a line end | optional | the same |
//! | whitespace inside `( )` | spaces, tabs, comments, line ends | the same | the same |
//! | text after `root`'s rule | more rules | more rules | every rule checked |
//! | `[a]` (one-character class) | that character | that character | not a set |

use super::lex::{lex, literal, Kind, Lexed, Token};
use super::{check_members, dedup, json_view, not_a_set, Charge, Limits, Recognition, Recognized, WORK_FACTOR};
use crate::error::{show_bytes, Error, Result};
use crate::template::{Render, Template};
use std::collections::HashMap;
use std::rc::Rc;

/// A rule body: alternatives of sequences of items.
#[derive(Debug)]
enum Node {
    Lit(usize, usize),
    Ref(usize),
    Alt(Vec<Vec<Node>>),
}

/// A set of strings (`bytes`: their total length), each followed by optional whitespace when `space`.
#[derive(Clone, Debug)]
struct Exp {
    strings: Vec<Vec<u8>>,
    bytes: usize,
    space: bool,
}

impl Exp {
    fn one(s: Vec<u8>) -> Exp {
        Exp { bytes: s.len(), strings: vec![s], space: false }
    }
}

struct Rules<'a> {
    src: &'a str,
    lexed: Lexed,
    names: Vec<&'a str>,
    bodies: Vec<(usize, usize)>,
    index: HashMap<&'a str, usize>,
    space: Vec<bool>,
    nodes: Vec<Option<Node>>,
}

/// The llama.cpp `space` rule bodies (whitespace runs collapsed to one space).
const SPACE_RULES: [&str; 3] = ["\" \"?", "| \" \" | \"\\n\" [ \\t]{0,20}", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"];

/// Which engine reads the grammar: they differ in one form libtrie serves, llama.cpp's `space` rules that open
/// with an empty alternative (`space ::= | " " | ...`), which GBNF reads and XGrammar refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dialect {
    /// llama.cpp's GBNF (llama-server, the llama.cpp sampler): every `space` rule form.
    Gbnf,
    /// XGrammar's EBNF (vLLM's `grammar`, SGLang's `ebnf`): only the `space ::= " "?` form.
    Xgrammar,
}

impl Dialect {
    /// The `space` rule bodies this dialect reads.
    fn space_rules(self) -> &'static [&'static str] {
        match self {
            Dialect::Gbnf => &SPACE_RULES,
            Dialect::Xgrammar => &SPACE_RULES[..1],
        }
    }
}

/// Recognizes a grammar (see the module docs) as `dialect` reads it.
pub(super) fn grammar(src: &str, limits: &Limits, dialect: Dialect) -> Result<Recognition> {
    if src.as_bytes().contains(&0) {
        return not_a_set("the grammar has a NUL byte (both engines stop reading there)");
    }
    match fast(src, limits, dialect) {
        Some((members, json)) => finish(members, json, false, limits),
        None => general(src, limits, dialect),
    }
}

/// The members as a recognized set (JSON view when the grammar defines a llama.cpp `space` rule).
fn finish(mut members: Vec<Vec<u8>>, json: bool, space: bool, limits: &Limits) -> Result<Recognition> {
    dedup(&mut members);
    check_members(&members, "grammar", limits)?;
    let (members, render) = if json { json_view(members) } else { (members, Render::Raw) };
    Ok(Recognition::Set(Recognized {
        members,
        template: Template::bare().render(render),
        payloads: None,
        trailing_whitespace: space,
    }))
}

/// The two forms engines write, read in one pass with no tokens: `root ::= "a" | "b" | ...` (vLLM's
/// `choice_as_grammar`) and `root ::= ("a" | ...)` followed only by llama.cpp `space` rule lines
/// (`json_schema_to_grammar`). `None` (anything else, a literal the general path must explain, a limit): the
/// general path decides. When it answers, the general path gives the same set.
fn fast(src: &str, limits: &Limits, dialect: Dialect) -> Option<(Vec<Vec<u8>>, bool)> {
    let b = src.as_bytes();
    let mut i = "root ::= ".len();
    if !src.starts_with("root ::= ") {
        return None;
    }
    let paren = b.get(i) == Some(&b'(');
    i += usize::from(paren);
    let mut members = Vec::new();
    let mut bytes = 0usize;
    let charge = Charge::new(limits, "grammar");
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let mut m = Vec::new();
        match literal(src, i + 1, &mut m) {
            Ok((Ok(_), next)) => i = next,
            _ => return None,
        }
        bytes += m.len();
        members.push(m);
        charge.check(members.len(), bytes).ok()?;
        if b[i..].starts_with(b" | ") {
            i += 3;
        } else {
            break;
        }
    }
    if paren {
        if b.get(i) != Some(&b')') {
            return None;
        }
        i += 1;
    }
    let mut json = false;
    for (k, line) in src[i..].split('\n').enumerate() {
        if k == 0 || line.is_empty() {
            if !line.is_empty() {
                return None;
            }
            continue;
        }
        let body = line.strip_prefix("space ::=")?;
        if body.contains(['\r', '#']) {
            return None;
        }
        let normal = body.split_whitespace().collect::<Vec<_>>().join(" ");
        if !dialect.space_rules().contains(&normal.as_str()) || json {
            return None;
        }
        json = true;
    }
    Some((members, json))
}

/// The general path: tokens, rules, a check of every rule, expansion of `root`.
fn general(src: &str, limits: &Limits, dialect: Dialect) -> Result<Recognition> {
    let lexed = match lex(src) {
        Ok(t) => t,
        Err((msg, true)) => return not_a_set(format!("the grammar does not lex here: {}", msg.0)),
        Err((msg, false)) => return Err(Error::invalid(format!("malformed grammar: {}", msg.0))),
    };
    let mut rules = match split_rules(src, lexed, dialect) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let Some(&root) = rules.index.get("root") else {
        return Err(Error::invalid("malformed grammar: there is no rule named `root`"));
    };
    for r in 0..rules.names.len() {
        if rules.space[r] {
            continue;
        }
        match parse_body(&rules, r, limits)? {
            Ok(node) => rules.nodes[r] = Some(node),
            Err(reason) => return not_a_set(reason),
        }
    }
    let n = rules.names.len();
    let mut x = Expander { rules: &rules, limits, memo: vec![None; n], active: vec![false; n], work: 0 };
    let exp = match x.rule(root, 0)? {
        Ok(e) => e,
        Err(reason) => return not_a_set(reason),
    };
    drop(x);
    let exp = Rc::try_unwrap(exp).unwrap_or_else(|e| (*e).clone());
    finish(exp.strings, rules.space.iter().any(|&s| s), exp.space, limits)
}

/// Splits the tokens into rules at each `name ::=`; checks rule names and references.
fn split_rules(src: &str, lexed: Lexed, dialect: Dialect) -> std::result::Result<Rules<'_>, Result<Recognition>> {
    let tokens = &lexed.tokens;
    let mut starts = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Assign {
            continue;
        }
        if i == 0 || tokens[i - 1].kind != Kind::Name {
            // XGrammar's `name[attributes] ::=`, a name only one dialect reads, or no name at all.
            let why = if i > 0 && tokens[i - 1].kind == Kind::Other { lexed.why(&tokens[i - 1]) } else { "" };
            return Err(not_a_set(format!("a `::=` that does not follow a rule name {why}")));
        }
        if t.newline_before {
            return Err(not_a_set(
                "a line break between a rule name and its `::=` (GBNF refuses it, XGrammar does not)",
            ));
        }
        if i >= 2 && !tokens[i - 1].newline_before {
            return Err(not_a_set("a rule that does not start a line"));
        }
        starts.push(i - 1);
    }
    if starts.first() != Some(&0) {
        let what = tokens.first().map_or("nothing".to_string(), |t| show_bytes(lexed.text(src, t).as_bytes(), 40));
        if tokens.iter().any(|t| matches!(t.kind, Kind::Other | Kind::BadLit)) {
            return Err(not_a_set(format!("the grammar starts with {what}, not a rule")));
        }
        return Err(Err(Error::invalid(format!("malformed grammar: expected a rule `name ::= ...`, found {what}"))));
    }
    let n = starts.len();
    let mut rules = Rules {
        names: Vec::with_capacity(n),
        bodies: Vec::with_capacity(n),
        index: HashMap::with_capacity(n),
        space: Vec::with_capacity(n),
        nodes: Vec::new(),
        src,
        lexed,
    };
    for (k, &s) in starts.iter().enumerate() {
        let name = &src[rules.lexed.tokens[s].start as usize..rules.lexed.tokens[s].end as usize];
        let end = starts.get(k + 1).copied().unwrap_or(rules.lexed.tokens.len());
        if rules.index.insert(name, rules.names.len()).is_some() {
            return Err(not_a_set(format!(
                "the rule `{name}` is defined twice (GBNF keeps the last, XGrammar refuses it)"
            )));
        }
        let body = &rules.lexed.tokens[s + 2..end];
        let text = body.first().map_or("", |f| &src[f.start as usize..body[body.len() - 1].end as usize]);
        // The space rules are short: normalize only short bodies.
        let space = text.len() <= 64 && !text.contains(['#', '\r']) && {
            let normal = text.split_whitespace().collect::<Vec<_>>().join(" ");
            dialect.space_rules().contains(&normal.as_str())
        };
        rules.space.push(space);
        rules.names.push(name);
        rules.bodies.push((s + 2, end));
    }
    rules.nodes = (0..n).map(|_| None).collect();
    for t in rules.lexed.tokens.iter() {
        if t.kind == Kind::Name {
            let n = &src[t.start as usize..t.end as usize];
            if !rules.index.contains_key(n) {
                let msg = format!("the rule `{n}` is not defined");
                if rules.lexed.tokens.iter().any(|t| matches!(t.kind, Kind::Other | Kind::BadLit)) {
                    // A construct this lexer does not read may explain the name: not sure, not a set.
                    return Err(not_a_set(msg));
                }
                return Err(Err(Error::invalid(format!("malformed grammar: {msg}"))));
            }
        }
    }
    Ok(rules)
}

/// Parses the body of rule `r` into alternatives, or a reason it is not a literal alternation.
fn parse_body(rules: &Rules, r: usize, limits: &Limits) -> Result<std::result::Result<Node, String>> {
    let (from, to) = rules.bodies[r];
    let body: &[Token] = &rules.lexed.tokens[from..to];
    let name = rules.names[r];
    let empty = || Ok(Err(format!("the rule `{name}` has an empty alternative (GBNF reads it, XGrammar refuses it)")));
    // A stack of open groups: each holds its finished alternatives and the current sequence.
    let mut stack: Vec<(Vec<Vec<Node>>, Vec<Node>)> = vec![(Vec::new(), Vec::new())];
    for (k, t) in body.iter().enumerate() {
        if t.newline_before && stack.len() == 1 && k > 0 && body[k - 1].kind != Kind::Pipe {
            return Ok(Err(format!(
                "the rule `{name}` goes on over a line break outside parentheses (GBNF ends a rule at its line's end)"
            )));
        }
        let top = stack.last_mut().expect("the stack holds the rule's own level");
        match t.kind {
            Kind::Lit => top.1.push(Node::Lit(t.a as usize, t.b as usize)),
            Kind::Name => top.1.push(Node::Ref(rules.index[rules.lexed.text(rules.src, t)])),
            Kind::Pipe => {
                if top.1.is_empty() {
                    return empty();
                }
                let seq = std::mem::take(&mut top.1);
                top.0.push(seq);
                // Each alternative gives at least one string, counted as listed: more than the limit is refused
                // here, before a million alternatives become nodes.
                super::check_count(top.0.len() + 1, "grammar", limits)?;
            }
            Kind::Open => {
                if stack.len() > limits.max_depth {
                    return Err(Error::limit(format!(
                        "the grammar nests parentheses deeper than the limit max_depth = {}",
                        limits.max_depth
                    )));
                }
                stack.push((Vec::new(), Vec::new()));
            }
            Kind::Close => {
                if stack.len() == 1 {
                    return Err(Error::invalid(format!("malformed grammar: unbalanced `)` in rule `{name}`")));
                }
                let (mut alts, seq) = stack.pop().expect("checked above");
                if seq.is_empty() && !(alts.is_empty() && body[k - 1].kind == Kind::Open) {
                    return empty();
                }
                alts.push(seq);
                stack.last_mut().expect("not the last level").1.push(Node::Alt(alts));
            }
            Kind::Other | Kind::BadLit => {
                let why = rules.lexed.why(t);
                return Ok(Err(if t.kind == Kind::BadLit {
                    format!("a literal of the rule `{name}` has {why}")
                } else {
                    format!("the rule `{name}` has {why}")
                }));
            }
            Kind::Assign => unreachable!("split_rules ends a body before a `name ::=`"),
        }
    }
    if stack.len() != 1 {
        return Err(Error::invalid(format!("malformed grammar: unbalanced `(` in rule `{name}`")));
    }
    let (mut alts, seq) = stack.pop().expect("one level");
    if seq.is_empty() {
        return empty();
    }
    alts.push(seq);
    Ok(Ok(Node::Alt(alts)))
}

type Expanded = Result<std::result::Result<Rc<Exp>, String>>;

/// The expansion of `root`: memoized rules, the rules on the current path (recursion), the work done.
struct Expander<'r, 'a> {
    rules: &'r Rules<'a>,
    limits: &'r Limits,
    memo: Vec<Option<Rc<Exp>>>,
    active: Vec<bool>,
    /// Bytes (+ 1 per string) of all strings built so far.
    work: usize,
}

impl Expander<'_, '_> {
    /// Charges `n` strings of `bytes` bytes in all to the result's limits and the work budget.
    fn charge(&mut self, n: usize, bytes: usize, result: (usize, usize)) -> Result<()> {
        Charge::new(self.limits, "grammar").check(result.0, result.1)?;
        self.work = self.work.saturating_add(bytes).saturating_add(n);
        let budget = self.limits.max_member_bytes.saturating_mul(WORK_FACTOR);
        if self.work > budget {
            return Err(Error::limit(format!(
                "the grammar's expansion builds more than {budget} bytes ({WORK_FACTOR} × the limit \
                 max_member_bytes = {})",
                self.limits.max_member_bytes
            )));
        }
        Ok(())
    }

    /// The strings of rule `r` (memoized); a rule on the current path again is recursion: not a set.
    fn rule(&mut self, r: usize, depth: usize) -> Expanded {
        if let Some(e) = &self.memo[r] {
            return Ok(Ok(e.clone()));
        }
        if self.rules.space[r] {
            return Ok(Ok(Rc::new(Exp { strings: vec![Vec::new()], bytes: 0, space: true })));
        }
        if self.active[r] {
            return Ok(Err(format!("the rule `{}` is recursive", self.rules.names[r])));
        }
        if depth > self.limits.max_depth {
            return Err(Error::limit(format!(
                "the grammar's rule references nest deeper than the limit max_depth = {}",
                self.limits.max_depth
            )));
        }
        let rules = self.rules;
        let node = rules.nodes[r].as_ref().expect("every rule but the space rules is parsed");
        self.active[r] = true;
        let e = self.node(node, depth + 1);
        self.active[r] = false;
        let e = e?;
        if let Ok(e) = &e {
            self.memo[r] = Some(e.clone());
        }
        Ok(e)
    }

    /// The strings of a node: literals, rule references, alternations of concatenations (deduplicated).
    fn node(&mut self, node: &Node, depth: usize) -> Expanded {
        let alts = match node {
            Node::Lit(s, e) => {
                self.charge(1, e - s, (1, e - s))?;
                return Ok(Ok(Rc::new(Exp::one(self.rules.lexed.arena[*s..*e].to_vec()))));
            }
            Node::Ref(r) => return self.rule(*r, depth),
            Node::Alt(alts) => alts,
        };
        if depth > self.limits.max_depth {
            return Err(Error::limit(format!(
                "the grammar nests deeper than the limit max_depth = {}",
                self.limits.max_depth
            )));
        }
        let mut out: Option<Exp> = None;
        for seq in alts {
            // The common case, one literal: no intermediate vectors.
            if let ([Node::Lit(s, e)], Some(o)) = (seq.as_slice(), &mut out) {
                if !o.space {
                    let len = e - s;
                    self.charge(1, len, (o.strings.len() + 1, o.bytes.saturating_add(len)))?;
                    o.strings.push(self.rules.lexed.arena[*s..*e].to_vec());
                    o.bytes += len;
                    continue;
                }
            }
            let acc = match self.sequence(seq, depth)? {
                Ok(acc) => acc,
                Err(reason) => return Ok(Err(reason)),
            };
            match &mut out {
                None => {
                    out = Some(match Rc::try_unwrap(acc) {
                        Ok(acc) => acc,
                        Err(rc) => {
                            // A memoized rule's strings: copied, so charged as built.
                            self.charge(rc.strings.len(), rc.bytes, (rc.strings.len(), rc.bytes))?;
                            (*rc).clone()
                        }
                    })
                }
                Some(o) => {
                    if o.space != acc.space {
                        return Ok(Err("only some alternatives allow trailing whitespace".into()));
                    }
                    let (n, bytes) =
                        (o.strings.len().saturating_add(acc.strings.len()), o.bytes.saturating_add(acc.bytes));
                    Charge::new(self.limits, "grammar").check(n, bytes)?;
                    match Rc::try_unwrap(acc) {
                        Ok(mut acc) => o.strings.append(&mut acc.strings),
                        Err(rc) => {
                            // A memoized rule's strings: copied, so charged as built.
                            self.charge(rc.strings.len(), rc.bytes, (n, bytes))?;
                            o.strings.extend(rc.strings.iter().cloned());
                        }
                    }
                    o.bytes = bytes;
                }
            }
        }
        let mut out = out.expect("a body has at least one alternative");
        if alts.len() > 1 || alts[0].len() > 1 {
            dedup(&mut out.strings);
            out.bytes = out.strings.iter().map(Vec::len).sum();
        }
        Ok(Ok(Rc::new(out)))
    }

    /// The concatenation of a sequence's items, counted and charged before each product is built.
    fn sequence(&mut self, seq: &[Node], depth: usize) -> Expanded {
        if seq.is_empty() {
            // `()`: the empty string.
            self.charge(1, 0, (1, 0))?;
            return Ok(Ok(Rc::new(Exp::one(Vec::new()))));
        }
        let mut acc: Option<Rc<Exp>> = None;
        for item in seq {
            // A group is one level deeper; a literal or a rule reference is not (the rule counts its own).
            let d = if matches!(item, Node::Alt(_)) { depth + 1 } else { depth };
            let e = match self.node(item, d)? {
                Ok(e) => e,
                Err(reason) => return Ok(Err(reason)),
            };
            let Some(a) = acc.take() else {
                acc = Some(e);
                continue;
            };
            if a.space {
                return Ok(Err("optional whitespace (llama.cpp's `space` rule) is followed by more text".into()));
            }
            let (an, en) = (a.strings.len(), e.strings.len());
            let n = an.saturating_mul(en);
            let bytes = a.bytes.saturating_mul(en).saturating_add(e.bytes.saturating_mul(an));
            let next = if en == 1 {
                // Extended in place: the work is the bytes added (and a copy when `a` is memoized).
                let added = e.bytes.saturating_mul(an);
                let mut a = match Rc::try_unwrap(a) {
                    Ok(a) => a,
                    Err(rc) => {
                        self.charge(an, rc.bytes, (n, bytes))?;
                        (*rc).clone()
                    }
                };
                self.charge(0, added, (n, bytes))?;
                let tail = &e.strings[0];
                for s in &mut a.strings {
                    s.extend_from_slice(tail);
                }
                a.bytes = bytes;
                a.space = e.space;
                a
            } else {
                self.charge(n, bytes, (n, bytes))?;
                let mut strings = Vec::with_capacity(n);
                for head in &a.strings {
                    for tail in &e.strings {
                        strings.push([head.as_slice(), tail.as_slice()].concat());
                    }
                }
                Exp { strings, bytes, space: e.space }
            };
            acc = Some(Rc::new(next));
        }
        Ok(Ok(acc.expect("a sequence has at least one item")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        let limits = Limits::default();
        let space = "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}";
        let cases = [
            "root ::= \"a\" | \"b\\\"c\" | \"\\n\" | \"\"".to_string(),
            "root ::= \"x\"".to_string(),
            format!("root ::= (\"\\\"a\\\"\" | \"1\")\n{space}\n"),
            format!("root ::= (\"\\\"a\\\"\" | \"\\\"b\\\"\")\n{space}"),
            "root ::= \"é😀\" | \"\\u00e9\" | \"\\x41\" | \"|\" | \"(\"\n".to_string(),
        ];
        for c in &cases {
            assert!(fast(c, &limits, Dialect::Gbnf).is_some(), "{c:?} takes the fast path");
            assert_eq!(
                grammar(c, &limits, Dialect::Gbnf).unwrap(),
                general(c, &limits, Dialect::Gbnf).unwrap(),
                "{c:?}"
            );
        }
        for c in [
            "root ::= \"a\" | \"a\"",
            "root ::= \"a\" | \"\\q\"",
            "root ::= \"a\" | \"b\"*",
            "root ::= (\"a\" | \"b\")\nspace ::= \" \"*",
            "root ::= \"a\" | \"b\"\nx ::= \"c\"",
            "root ::= (\"a\"",
        ] {
            assert!(fast(c, &limits, Dialect::Gbnf).is_none() || c.contains("\"a\" | \"a\""), "{c:?}");
            assert_eq!(
                format!("{:?}", grammar(c, &limits, Dialect::Gbnf)),
                format!("{:?}", general(c, &limits, Dialect::Gbnf)),
                "{c:?}"
            );
        }
    }

    #[test]
    fn xgrammar_refuses_the_space_rules_with_an_empty_alternative() {
        let limits = Limits::default();
        for space in ["space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}", "space ::= | \" \" | \"\\n\" [ \\t]{0,20}"] {
            for c in [
                format!("root ::= (\"\\\"a\\\"\" | \"1\")\n{space}\n"),
                format!("root ::= x\nx ::= \"1\" space\n{space}\n"),
            ] {
                assert!(grammar(&c, &limits, Dialect::Gbnf).unwrap().set().is_some(), "{c:?}");
                for answer in [grammar(&c, &limits, Dialect::Xgrammar), general(&c, &limits, Dialect::Xgrammar)] {
                    match answer {
                        Ok(Recognition::NotASet(why)) => assert!(why.contains("empty alternative"), "{c:?}: {why}"),
                        other => panic!("{c:?}: {other:?}"),
                    }
                }
            }
        }
        // The form both read is a set in both.
        let c = "root ::= (\"1\" | \"2\")\nspace ::= \" \"?\n";
        assert_eq!(grammar(c, &limits, Dialect::Xgrammar).unwrap(), grammar(c, &limits, Dialect::Gbnf).unwrap());
        assert!(grammar(c, &limits, Dialect::Xgrammar).unwrap().set().is_some());
    }
}
