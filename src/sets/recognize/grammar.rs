//! EBNF/GBNF grammars whose `root` is a finite alternation of string literals.
//!
//! Understood: rules `name ::= body`, `#` comments, string literals with the escapes of llama.cpp's GBNF and
//! XGrammar's EBNF (`\n \r \t \\ \" \' \? \[ \] \a \b \f \v \0 \e`, `\xHH`, `\uHHHH`, `\UHHHHHHHH`: code points,
//! written as UTF-8), alternation `|`, grouping `( )`, concatenation, and references to rules that are
//! themselves such alternations. A rule equal to one of llama.cpp's `space` rules (`" "?`,
//! `| " " | "\n" [ \t]{0,20}`, `| " " | "\n"{1,2} [ \t]{0,20}`) may end every alternative of `root`: the set is
//! returned with `trailing_whitespace`. A grammar that defines such a rule was written by llama.cpp's
//! json-schema-to-grammar, so its members are read as JSON values ([`super::json_view`]).
//!
//! Anything else reachable from `root` — a repetition (`* + ? {m,n}`), a character class, `.`, a token
//! reference, recursion, an escape the two dialects read differently (`\x` followed by a third hex digit), a code
//! point that is not a Unicode scalar value, a rule continued on a new line outside parentheses (GBNF ends the
//! rule there) — is "not a set". A grammar that does not parse (an unterminated literal, no `root`, a reference
//! to an undefined rule) is an error.

use super::{check_count, check_members, json_view, not_a_set, Limits, Recognition, Recognized};
use crate::error::{show_bytes, Error, Result};
use crate::template::{Render, Template};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Assign,
    /// A literal's decoded bytes: a range of the lexer's arena.
    Lit(usize, usize),
    Pipe,
    Open,
    Close,
    /// A construct that is never part of a finite literal alternation (its description).
    Other(&'static str),
    /// A literal whose meaning is not certain (the reason).
    BadLit(String),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    /// A line break (or a comment) came between this token and the previous one.
    newline_before: bool,
    start: usize,
    end: usize,
}

/// Splits a grammar into tokens. An unterminated literal is an error unless a construct this lexer does not
/// know came earlier (then the lexer may be out of step with the real syntax: not a set).
fn lex(src: &str, arena: &mut Vec<u8>) -> std::result::Result<Vec<Token>, Result<Recognition>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut newline = false;
    let mut unknown_seen = false;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let tok = match c {
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'\n' => {
                newline = true;
                i += 1;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b':' if b[i..].starts_with(b"::=") => {
                i += 3;
                Tok::Assign
            }
            b'"' => match literal(src, i + 1, arena) {
                Ok((tok, next)) => {
                    i = next;
                    tok
                }
                Err(msg) if unknown_seen => return Err(not_a_set(format!("the grammar does not lex here: {msg}"))),
                Err(msg) => return Err(Err(Error::invalid(format!("malformed grammar: {msg}")))),
            },
            b'|' => {
                i += 1;
                Tok::Pipe
            }
            b'(' => {
                i += 1;
                Tok::Open
            }
            b')' => {
                i += 1;
                Tok::Close
            }
            b'[' => {
                // A character class: skip to its unescaped `]`.
                i += 1;
                while i < b.len() && b[i] != b']' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                Tok::Other("a character class")
            }
            b'{' => {
                while i < b.len() && b[i] != b'}' {
                    i += 1;
                }
                i = (i + 1).min(b.len());
                Tok::Other("a repetition {m,n}")
            }
            b'*' | b'+' | b'?' => {
                i += 1;
                Tok::Other("a repetition (*, + or ?)")
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
                    i += 1;
                }
                Tok::Name(src[start..i].to_string())
            }
            _ => {
                unknown_seen = true;
                i += src[i..].chars().next().map_or(1, char::len_utf8);
                Tok::Other("a construct other than literals, alternation, grouping and rule references")
            }
        };
        out.push(Token { tok, newline_before: newline, start, end: i });
        newline = false;
    }
    Ok(out)
}

/// Reads a string literal whose body starts at `i`; returns the token and the index after the closing quote.
fn literal(src: &str, mut i: usize, out: &mut Vec<u8>) -> std::result::Result<(Tok, usize), String> {
    let b = src.as_bytes();
    let open = i - 1;
    let start = out.len();
    // Reserve the literal's text length (its decoded bytes are never more): one allocation per literal.
    let mut end = i;
    while let Some(k) = b.get(end..).and_then(|rest| rest.iter().position(|&c| c == b'"' || c == b'\\')) {
        end += k;
        if b[end] == b'"' {
            break;
        }
        end += 2;
    }
    out.reserve(end.min(b.len()).saturating_sub(i));
    let mut bad: Option<String> = None;
    loop {
        // Copy the run of plain bytes up to the next quote or backslash at once.
        let run = b[i..].iter().position(|&c| c == b'"' || c == b'\\').unwrap_or(b.len() - i);
        out.extend_from_slice(&b[i..i + run]);
        i += run;
        let Some(&c) = b.get(i) else {
            return Err(format!("unterminated string literal at offset {open}: {}", show_bytes(&b[open..], 40)));
        };
        match c {
            b'"' => break,
            b'\\' => {
                let (cp, len) = match escape(&b[i..]) {
                    Ok(v) => v,
                    Err(why) => {
                        bad.get_or_insert(why);
                        // Skip the backslash and the next character, and keep looking for the closing quote.
                        (0, 1 + src[i + 1..].chars().next().map_or(0, char::len_utf8))
                    }
                };
                match char::from_u32(cp) {
                    Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                    None => {
                        bad.get_or_insert(format!("the escape {} is not a Unicode scalar value", &src[i..i + len]));
                    }
                }
                i += len;
            }
            _ => unreachable!("the run stops at a quote or a backslash"),
        }
    }
    let tok = match bad {
        Some(why) => Tok::BadLit(why),
        None => Tok::Lit(start, out.len()),
    };
    Ok((tok, i + 1))
}

/// One escape at the start of `b` (which begins with `\`): its code point and its length.
fn escape(b: &[u8]) -> std::result::Result<(u32, usize), String> {
    let Some(&c) = b.get(1) else { return Err("a backslash ends the grammar".into()) };
    let simple = match c {
        b'n' => Some(0x0a),
        b'r' => Some(0x0d),
        b't' => Some(0x09),
        b'\\' | b'"' | b'\'' | b'?' | b'[' | b']' => Some(c as u32),
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'v' => Some(0x0b),
        b'0' => Some(0),
        b'e' => Some(0x1b),
        _ => None,
    };
    if let Some(cp) = simple {
        if c == b'0' && b.get(2).is_some_and(u8::is_ascii_digit) {
            return Err("an escape \\0 followed by a digit".into());
        }
        return Ok((cp, 2));
    }
    let digits = match c {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        _ => return Err(format!("the escape \\{} is not understood", String::from_utf8_lossy(&b[1..2]))),
    };
    let hex = b.get(2..2 + digits).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
    let Some(hex) = hex else { return Err(format!("\\{} needs {digits} hex digits", c as char)) };
    if c == b'x' && b.get(4).is_some_and(u8::is_ascii_hexdigit) {
        // GBNF reads two digits, XGrammar all of them: the two disagree.
        return Err("a \\x escape followed by a third hex digit (GBNF and XGrammar read it differently)".into());
    }
    let cp = hex.iter().fold(0u32, |acc, &h| (acc << 4) | (h as char).to_digit(16).unwrap_or(0));
    Ok((cp, 2 + digits))
}

/// A rule body: alternatives of sequences of items.
#[derive(Debug)]
enum Node {
    Lit(usize, usize),
    Ref(usize),
    Alt(Vec<Vec<Node>>),
}

/// A set of strings, each followed by optional whitespace when `space`.
#[derive(Clone, Debug)]
struct Exp {
    strings: Vec<Vec<u8>>,
    space: bool,
}

struct Rules<'a> {
    arena: Vec<u8>,
    names: Vec<&'a str>,
    bodies: Vec<&'a [Token]>,
    index: HashMap<&'a str, usize>,
    space: Vec<bool>,
}

/// The llama.cpp `space` rule bodies (whitespace runs collapsed to one space).
const SPACE_RULES: [&str; 3] = ["\" \"?", "| \" \" | \"\\n\" [ \\t]{0,20}", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"];

/// Recognizes a grammar (see the module docs).
pub(super) fn grammar(src: &str, limits: &Limits) -> Result<Recognition> {
    match fast(src, limits) {
        Some((members, json)) => finish(members, json, false, limits),
        None => general(src, limits),
    }
}

/// The members as a recognized set (JSON view when the grammar defines a llama.cpp `space` rule).
fn finish(members: Vec<Vec<u8>>, json: bool, space: bool, limits: &Limits) -> Result<Recognition> {
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
fn fast(src: &str, limits: &Limits) -> Option<(Vec<Vec<u8>>, bool)> {
    let b = src.as_bytes();
    let mut i = "root ::= ".len();
    if !src.starts_with("root ::= ") {
        return None;
    }
    let paren = b.get(i) == Some(&b'(');
    i += usize::from(paren);
    let mut members = Vec::new();
    loop {
        if b.get(i) != Some(&b'"') || members.len() >= limits.max_members {
            return None;
        }
        let mut m = Vec::new();
        match literal(src, i + 1, &mut m) {
            Ok((Tok::Lit(..), next)) => i = next,
            _ => return None,
        }
        members.push(m);
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
        let normal = body.split_whitespace().collect::<Vec<_>>().join(" ");
        if !SPACE_RULES.contains(&normal.as_str()) || json {
            return None;
        }
        json = true;
    }
    Some((members, json))
}

/// The general path: tokens, rules, expansion.
fn general(src: &str, limits: &Limits) -> Result<Recognition> {
    let mut arena = Vec::new();
    let tokens = match lex(src, &mut arena) {
        Ok(t) => t,
        Err(answer) => return answer,
    };
    let rules = match split_rules(src, &tokens, arena) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let Some(&root) = rules.index.get("root") else {
        return Err(Error::invalid("malformed grammar: there is no rule named `root`"));
    };
    let mut memo: Vec<Option<Exp>> = vec![None; rules.names.len()];
    let mut active = vec![false; rules.names.len()];
    let exp = match expand_rule(&rules, root, 0, limits, &mut memo, &mut active)? {
        Ok(e) => e,
        Err(reason) => return not_a_set(reason),
    };
    finish(exp.strings, rules.space.iter().any(|&s| s), exp.space, limits)
}

/// Splits the tokens into rules at each `name ::=`; checks rule names and references.
fn split_rules<'a>(
    src: &'a str,
    tokens: &'a [Token],
    arena: Vec<u8>,
) -> std::result::Result<Rules<'a>, Result<Recognition>> {
    let mut starts = Vec::new();
    for i in 0..tokens.len() {
        if matches!(tokens[i].tok, Tok::Name(_)) && tokens.get(i + 1).is_some_and(|t| t.tok == Tok::Assign) {
            starts.push(i);
        }
    }
    if starts.first() != Some(&0) {
        let what = tokens.first().map_or("nothing".to_string(), |t| show_bytes(&src.as_bytes()[t.start..t.end], 40));
        return Err(Err(Error::invalid(format!("malformed grammar: expected a rule `name ::= ...`, found {what}"))));
    }
    let mut rules = Rules { arena, names: Vec::new(), bodies: Vec::new(), index: HashMap::new(), space: Vec::new() };
    for (k, &s) in starts.iter().enumerate() {
        let Tok::Name(name) = &tokens[s].tok else { unreachable!("starts are names") };
        let end = starts.get(k + 1).copied().unwrap_or(tokens.len());
        let body = &tokens[s + 2..end];
        if rules.index.insert(name.as_str(), rules.names.len()).is_some() {
            return Err(not_a_set(format!("the rule `{name}` is defined twice")));
        }
        let text = body.first().map_or("", |f| &src[f.start..body[body.len() - 1].end]);
        // The space rules are short: normalize only short bodies.
        let space = text.len() <= 64 && {
            let normal = text.split_whitespace().collect::<Vec<_>>().join(" ");
            SPACE_RULES.contains(&normal.as_str())
        };
        rules.space.push(space);
        rules.names.push(name);
        rules.bodies.push(body);
    }
    for body in &rules.bodies {
        for t in body.iter() {
            if let Tok::Name(n) = &t.tok {
                if !rules.index.contains_key(n.as_str()) {
                    return Err(Err(Error::invalid(format!("malformed grammar: the rule `{n}` is not defined"))));
                }
            }
        }
    }
    Ok(rules)
}

/// Parses the body of rule `r` into alternatives, or a reason it is not a literal alternation.
fn parse_body(rules: &Rules, r: usize, limits: &Limits) -> Result<std::result::Result<Node, String>> {
    let body = rules.bodies[r];
    // A stack of open groups: each holds its finished alternatives and the current sequence.
    let mut stack: Vec<(Vec<Vec<Node>>, Vec<Node>)> = vec![(Vec::new(), Vec::new())];
    for (k, t) in body.iter().enumerate() {
        if t.newline_before && stack.len() == 1 && k > 0 && body[k - 1].tok != Tok::Pipe {
            return Ok(Err(format!(
                "the rule `{}` goes on over a line break outside parentheses (GBNF ends a rule at its line's end)",
                rules.names[r]
            )));
        }
        let top = stack.last_mut().expect("the stack holds the rule's own level");
        match &t.tok {
            Tok::Lit(s, e) => top.1.push(Node::Lit(*s, *e)),
            Tok::Name(n) => top.1.push(Node::Ref(rules.index[n.as_str()])),
            Tok::Pipe => {
                let seq = std::mem::take(&mut top.1);
                top.0.push(seq);
            }
            Tok::Open => {
                if stack.len() > limits.max_depth {
                    return Err(Error::limit(format!(
                        "the grammar nests parentheses deeper than the limit max_depth = {}",
                        limits.max_depth
                    )));
                }
                stack.push((Vec::new(), Vec::new()));
            }
            Tok::Close => {
                if stack.len() == 1 {
                    return Err(Error::invalid(format!(
                        "malformed grammar: unbalanced `)` in rule `{}`",
                        rules.names[r]
                    )));
                }
                let (mut alts, seq) = stack.pop().expect("checked above");
                alts.push(seq);
                stack.last_mut().expect("not the last level").1.push(Node::Alt(alts));
            }
            Tok::Other(what) => return Ok(Err(format!("the rule `{}` has {what}", rules.names[r]))),
            Tok::BadLit(why) => return Ok(Err(format!("a literal of the rule `{}` has {why}", rules.names[r]))),
            Tok::Assign => {
                let msg =
                    format!("malformed grammar: a `::=` with no rule name before it in rule `{}`", rules.names[r]);
                return Err(Error::invalid(msg));
            }
        }
    }
    if stack.len() != 1 {
        return Err(Error::invalid(format!("malformed grammar: unbalanced `(` in rule `{}`", rules.names[r])));
    }
    let (mut alts, seq) = stack.pop().expect("one level");
    alts.push(seq);
    Ok(Ok(Node::Alt(alts)))
}

type Expanded = Result<std::result::Result<Exp, String>>;

/// The strings of rule `r` (memoized); a rule on the current path again is recursion: not a set.
fn expand_rule(
    rules: &Rules,
    r: usize,
    depth: usize,
    limits: &Limits,
    memo: &mut Vec<Option<Exp>>,
    active: &mut Vec<bool>,
) -> Expanded {
    if let Some(e) = &memo[r] {
        return Ok(Ok(e.clone()));
    }
    if rules.space[r] {
        return Ok(Ok(Exp { strings: vec![Vec::new()], space: true }));
    }
    if active[r] {
        return Ok(Err(format!("the rule `{}` is recursive", rules.names[r])));
    }
    if depth > limits.max_depth {
        return Err(Error::limit(format!(
            "the grammar's rule references nest deeper than the limit max_depth = {}",
            limits.max_depth
        )));
    }
    let node = match parse_body(rules, r, limits)? {
        Ok(n) => n,
        Err(reason) => return Ok(Err(reason)),
    };
    active[r] = true;
    let e = expand(rules, &node, depth + 1, limits, memo, active);
    active[r] = false;
    let e = e?;
    if let Ok(e) = &e {
        memo[r] = Some(e.clone());
    }
    Ok(e)
}

/// The strings of a node: literals, rule references, alternations of concatenations.
fn expand(
    rules: &Rules,
    node: &Node,
    depth: usize,
    limits: &Limits,
    memo: &mut Vec<Option<Exp>>,
    active: &mut Vec<bool>,
) -> Expanded {
    let alts = match node {
        Node::Lit(s, e) => return Ok(Ok(Exp { strings: vec![rules.arena[*s..*e].to_vec()], space: false })),
        Node::Ref(r) => return expand_rule(rules, *r, depth, limits, memo, active),
        Node::Alt(alts) => alts,
    };
    if depth > limits.max_depth {
        return Err(Error::limit(format!("the grammar nests deeper than the limit max_depth = {}", limits.max_depth)));
    }
    let mut out: Option<Exp> = None;
    for seq in alts {
        // The common case, one literal: no intermediate vectors.
        if let ([Node::Lit(s, e)], Some(o)) = (seq.as_slice(), &mut out) {
            if !o.space {
                check_count(o.strings.len() + 1, limits)?;
                o.strings.push(rules.arena[*s..*e].to_vec());
                continue;
            }
        }
        let mut acc = Exp { strings: vec![Vec::new()], space: false };
        for item in seq {
            let e = match expand(rules, item, depth + 1, limits, memo, active)? {
                Ok(e) => e,
                Err(reason) => return Ok(Err(reason)),
            };
            if acc.space {
                return Ok(Err("optional whitespace (llama.cpp's `space` rule) is followed by more text".into()));
            }
            check_count(acc.strings.len().saturating_mul(e.strings.len()), limits)?;
            acc.strings = if let [tail] = e.strings.as_slice() {
                for s in &mut acc.strings {
                    s.extend_from_slice(tail);
                }
                acc.strings
            } else {
                let mut next = Vec::with_capacity(acc.strings.len() * e.strings.len());
                for head in &acc.strings {
                    for tail in &e.strings {
                        next.push([head.as_slice(), tail.as_slice()].concat());
                    }
                }
                next
            };
            acc.space = e.space;
        }
        match &mut out {
            None => out = Some(acc),
            Some(o) => {
                if o.space != acc.space {
                    return Ok(Err("only some alternatives allow trailing whitespace".into()));
                }
                check_count(o.strings.len() + acc.strings.len(), limits)?;
                o.strings.append(&mut acc.strings);
            }
        }
    }
    Ok(Ok(out.expect("a body has at least one alternative")))
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
            assert!(fast(c, &limits).is_some(), "{c:?} takes the fast path");
            assert_eq!(grammar(c, &limits).unwrap(), general(c, &limits).unwrap(), "{c:?}");
        }
        for c in [
            "root ::= \"a\" | \"a\"",
            "root ::= \"a\" | \"\\q\"",
            "root ::= \"a\" | \"b\"*",
            "root ::= (\"a\" | \"b\")\nspace ::= \" \"*",
            "root ::= \"a\" | \"b\"\nx ::= \"c\"",
            "root ::= (\"a\"",
        ] {
            assert!(fast(c, &limits).is_none() || c.contains("\"a\" | \"a\""), "{c:?}");
            assert_eq!(format!("{:?}", grammar(c, &limits)), format!("{:?}", general(c, &limits)), "{c:?}");
        }
    }
}
