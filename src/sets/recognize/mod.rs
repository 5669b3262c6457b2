//! Recognizers: turn a request shape an engine already receives into a finite set, or say it is not one.
//!
//! [`recognize`] reads one of the [`Shape`]s (a list of choices, a JSON schema, an EBNF/GBNF grammar, a regex,
//! an OpenAI-style `tools` list) and returns either [`Recognition::Set`] — the members, the [`Template`] that
//! writes them the way the request's language does, and per-member payloads — or [`Recognition::NotASet`] with a
//! short reason, so the engine keeps its own backend for that request.
//!
//! Invariants:
//! - **exact**: for a recognized set, the request's language is exactly `{ template.segment(m) : m in members }`;
//!   the one documented exception is [`Recognized::trailing_whitespace`] (llama.cpp's `space` rule after the
//!   value): the request also allows optional whitespace after a segment, which libtrie does not emit (a subset
//!   that keeps every member);
//! - members are distinct and in the request's order; there is at least one;
//! - malformed input (non-UTF-8, non-JSON, an empty enum, a duplicate member, a grammar that does not parse, a
//!   tool without a name) is an [`Error`]; "not a set" is not an error;
//! - sizes are bounded by [`Limits`] (an error naming the limit); no parsing recursion deeper than
//!   [`Limits::max_depth`], so a crafted input cannot overflow the stack.

mod grammar;
mod regex;
mod schema;

use crate::error::{show_bytes, Error, ErrorKind, Result};
use crate::template::{End, Render, Template};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The request shapes a recognizer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A JSON array of strings (vLLM `structured_outputs.choice`): the output is one of them, as it is.
    Choices,
    /// A JSON schema: a string `enum`, a `const`, or `anyOf`/`oneOf` of those (the output is a JSON value).
    JsonSchema,
    /// An EBNF/GBNF grammar (llama.cpp GBNF, XGrammar EBNF) whose `root` is an alternation of string literals.
    Grammar,
    /// A regex that is an alternation of escaped literals (full-match semantics).
    Regex,
    /// An OpenAI-style `tools` list: the tool names are the set, each tool's `parameters` its payload.
    Tools,
}

impl Shape {
    /// All shapes, in the order of their C numbers (`TRIE_RECOGNIZE_*`).
    ///
    /// cbindgen:ignore
    pub const ALL: [Shape; 5] = [Shape::Choices, Shape::JsonSchema, Shape::Grammar, Shape::Regex, Shape::Tools];

    /// The shape's name as written in messages and in the Python binding.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Choices => "choices",
            Shape::JsonSchema => "json_schema",
            Shape::Grammar => "grammar",
            Shape::Regex => "regex",
            Shape::Tools => "tools",
        }
    }
}

/// Bounds on what a recognizer reads; exceeding one is an [`ErrorKind::LimitExceeded`] error naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest request text, in bytes.
    pub max_text_bytes: usize,
    /// The most members a set may have.
    pub max_members: usize,
    /// The deepest nesting (grammar parentheses and rule references, JSON schema `anyOf`/`oneOf`).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_text_bytes: 256 << 20, max_members: 10_000_000, max_depth: 64 }
    }
}

/// A request shape recognized as a finite set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recognized {
    /// The members, distinct, in the request's order (UTF-8 text for every shape but raw grammar literals,
    /// which are UTF-8 too since grammars are text).
    pub members: Vec<Vec<u8>>,
    /// How each member is written in the output ([`Template::segment`]).
    pub template: Template,
    /// One JSON text per member (the tool's `parameters` schema for [`Shape::Tools`]); `None` for other shapes.
    pub payloads: Option<Vec<String>>,
    /// The request also allows optional whitespace after each segment (llama.cpp's `space` rule), which the
    /// set does not emit: the set's language is a subset of the request's that keeps every member.
    pub trailing_whitespace: bool,
}

/// What a recognizer says about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recognition {
    /// The request is exactly this set (see [`Recognized`]).
    Set(Recognized),
    /// The request is not a finite set libtrie can serve exactly; the reason says why, in a few words.
    NotASet(String),
}

impl Recognition {
    /// The set, if recognized.
    pub fn set(self) -> Option<Recognized> {
        match self {
            Recognition::Set(r) => Some(r),
            Recognition::NotASet(_) => None,
        }
    }
}

/// Recognizes `text` as `shape` with the default [`Limits`].
pub fn recognize(shape: Shape, text: &[u8]) -> Result<Recognition> {
    recognize_with(shape, text, &Limits::default())
}

/// Recognizes `text` as `shape` within `limits`. Errors: malformed input (see the module docs), a limit hit.
pub fn recognize_with(shape: Shape, text: &[u8], limits: &Limits) -> Result<Recognition> {
    if text.len() > limits.max_text_bytes {
        return Err(Error::limit(format!(
            "the {} text is {} bytes, more than the limit max_text_bytes = {}",
            shape.name(),
            text.len(),
            limits.max_text_bytes
        )));
    }
    let text = utf8(shape, text)?;
    match shape {
        Shape::Choices => choices(text, limits),
        Shape::JsonSchema => schema::json_schema(text, limits),
        Shape::Grammar => grammar::grammar(text, limits),
        Shape::Regex => regex::regex(text, limits),
        Shape::Tools => schema::tools(text, limits),
    }
}

fn utf8(shape: Shape, text: &[u8]) -> Result<&str> {
    std::str::from_utf8(text).map_err(|e| {
        Error::invalid(format!(
            "the {} text is not UTF-8 (invalid byte at offset {}): {}",
            shape.name(),
            e.valid_up_to(),
            show_bytes(&text[e.valid_up_to()..], 16)
        ))
    })
}

/// A "not a set" answer.
pub(crate) fn not_a_set(reason: impl Into<String>) -> Result<Recognition> {
    Ok(Recognition::NotASet(reason.into()))
}

/// Parses JSON text with a clear message.
pub(crate) fn parse_json(shape: Shape, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| Error::invalid(format!("the {} text is not valid JSON: {e}", shape.name())))
}

/// Checks the member count and that members are distinct; `what` names the shape in messages. Members are
/// hashed once each (xxh3) into a table of hashes; only when two distinct members share a hash is every member
/// compared byte for byte.
pub(crate) fn check_members(members: &[Vec<u8>], what: &str, limits: &Limits) -> Result<()> {
    if members.is_empty() {
        return Err(Error::new(ErrorKind::EmptySet, format!("the {what} lists no member")));
    }
    check_count(members.len(), limits)?;
    let twice = |m: &[u8], i: usize| {
        Error::invalid(format!("the {what} lists {} twice (again at index {i})", show_bytes(m, 60)))
    };
    let mut first: HashMap<u64, usize, BuildHasherDefault<Identity>> =
        HashMap::with_capacity_and_hasher(members.len(), Default::default());
    let mut collision = false;
    for (i, m) in members.iter().enumerate() {
        match first.entry(xxhash_rust::xxh3::xxh3_64(m)) {
            Entry::Vacant(v) => {
                v.insert(i);
            }
            Entry::Occupied(o) if members[*o.get()] == *m => return Err(twice(m, i)),
            Entry::Occupied(_) => collision = true,
        }
    }
    if collision {
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(members.len());
        for (i, m) in members.iter().enumerate() {
            if !seen.insert(m) {
                return Err(twice(m, i));
            }
        }
    }
    Ok(())
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// An error when `n` members exceed the limit.
pub(crate) fn check_count(n: usize, limits: &Limits) -> Result<()> {
    if n > limits.max_members {
        return Err(Error::limit(format!(
            "the set has {n} members or more, more than the limit max_members = {}",
            limits.max_members
        )));
    }
    Ok(())
}

/// A recognized set with no payloads and no trailing whitespace.
pub(crate) fn set(members: Vec<Vec<u8>>, template: Template) -> Result<Recognition> {
    Ok(Recognition::Set(Recognized { members, template, payloads: None, trailing_whitespace: false }))
}

/// A JSON array of strings, each one member written as it is.
fn choices(text: &str, limits: &Limits) -> Result<Recognition> {
    let serde_json::Value::Array(items) = parse_json(Shape::Choices, text)? else {
        return Err(Error::invalid("the choices are not a JSON array of strings"));
    };
    check_count(items.len(), limits)?;
    let mut members = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            serde_json::Value::String(s) => members.push(s.into_bytes()),
            other => return Err(Error::invalid(format!("choice {i} is not a string: {}", short_json(&other)))),
        }
    }
    check_members(&members, "choice list", limits)?;
    set(members, Template::bare())
}

/// A value's JSON text, cut for a message.
pub(crate) fn short_json(v: &serde_json::Value) -> String {
    let s = v.to_string();
    show_bytes(s.as_bytes(), 60)
}

/// Members that are JSON texts, seen as JSON values where they all are: every member a JSON string literal
/// exactly as [`crate::template::json_string`] writes it → its string, [`Render::JsonString`]; every member one JSON scalar
/// (string, number, `true`, `false`, `null`) with no surrounding whitespace → as given, [`Render::JsonText`];
/// otherwise raw. The segments are the same bytes in every case.
pub(crate) fn json_view(mut members: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, Render) {
    if members.iter().all(|m| canonical_json_string(m)) {
        for m in &mut members {
            unescape_in_place(m);
        }
        return (members, Render::JsonString);
    }
    let scalar = |m: &[u8]| {
        !m.is_empty()
            && !m[0].is_ascii_whitespace()
            && !m[m.len() - 1].is_ascii_whitespace()
            && matches!(
                serde_json::from_slice::<serde_json::Value>(m),
                Ok(serde_json::Value::String(_) | serde_json::Value::Number(_) | serde_json::Value::Bool(_))
                    | Ok(serde_json::Value::Null)
            )
    };
    if members.iter().all(|m| scalar(m)) {
        (members, Render::JsonText)
    } else {
        (members, Render::Raw)
    }
}

/// Whether `m` (UTF-8) is a JSON string literal exactly as [`crate::template::json_string`] writes its string
/// (so rendering the string gives back the same bytes).
fn canonical_json_string(m: &[u8]) -> bool {
    let Some(body) = m.strip_prefix(b"\"").and_then(|b| b.strip_suffix(b"\"")) else { return false };
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'"' | 0x00..=0x1f => return false,
            b'\\' => match body.get(i + 1) {
                Some(b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r') => i += 2,
                Some(b'u') => {
                    // Only `\u00xx` (lowercase hex) for the controls without a short escape.
                    let Some(hex) = body.get(i + 2..i + 6) else { return false };
                    let ok = hex[..2] == *b"00"
                        && matches!(hex[2], b'0' | b'1')
                        && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                        && !matches!(&hex[2..], b"08" | b"09" | b"0a" | b"0c" | b"0d");
                    if !ok {
                        return false;
                    }
                    i += 6;
                }
                _ => return false,
            },
            _ => i += 1,
        }
    }
    true
}

/// Replaces a literal accepted by [`canonical_json_string`] with the string it stands for, in place (the string
/// is never longer than its literal).
fn unescape_in_place(m: &mut Vec<u8>) {
    let (mut r, mut w) = (1, 0);
    let end = m.len() - 1;
    while r < end {
        let c = m[r];
        let (out, len) = if c != b'\\' {
            (c, 1)
        } else {
            match m[r + 1] {
                b'b' => (0x08, 2),
                b't' => (0x09, 2),
                b'n' => (0x0a, 2),
                b'f' => (0x0c, 2),
                b'r' => (0x0d, 2),
                b'u' => {
                    let hex = |h: u8| if h.is_ascii_digit() { h - b'0' } else { h - b'a' + 10 };
                    ((hex(m[r + 4]) << 4) | hex(m[r + 5]), 6)
                }
                other => (other, 2),
            }
        };
        m[w] = out;
        w += 1;
        r += len;
    }
    m.truncate(w);
}

/// The default tool-call template: `{"name": ` + the name as a JSON string + `, "arguments": `, open.
pub fn tool_call_template() -> Template {
    Template::bare().prefix("{\"name\": ").suffix(", \"arguments\": ").render(Render::JsonString).end(End::Open)
}

#[cfg(test)]
mod tests;
