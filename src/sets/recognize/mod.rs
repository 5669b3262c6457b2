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
use crate::template::{json_string, End, Render, Template};
use std::collections::HashSet;

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

/// Checks the member count and that members are distinct; `what` names the shape in messages.
pub(crate) fn check_members(members: &[Vec<u8>], what: &str, limits: &Limits) -> Result<()> {
    if members.is_empty() {
        return Err(Error::new(ErrorKind::EmptySet, format!("the {what} lists no member")));
    }
    check_count(members.len(), limits)?;
    let mut seen: HashSet<&[u8], xxhash_rust::xxh3::Xxh3Builder> =
        HashSet::with_capacity_and_hasher(members.len(), Default::default());
    for (i, m) in members.iter().enumerate() {
        if !seen.insert(m) {
            return Err(Error::invalid(format!("the {what} lists {} twice (again at index {i})", show_bytes(m, 60))));
        }
    }
    Ok(())
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
/// exactly as [`json_string`] writes it → its string, [`Render::JsonString`]; every member one JSON scalar
/// (string, number, `true`, `false`, `null`) with no surrounding whitespace → as given, [`Render::JsonText`];
/// otherwise raw. The segments are the same bytes in every case.
pub(crate) fn json_view(members: Vec<Vec<u8>>) -> (Vec<Vec<u8>>, Render) {
    let as_string = |m: &[u8]| -> Option<Vec<u8>> {
        if m.first() != Some(&b'"') {
            return None;
        }
        let s: String = serde_json::from_slice(m).ok()?;
        let mut again = Vec::with_capacity(m.len());
        json_string(&s, &mut again);
        (again == m).then(|| s.into_bytes())
    };
    let strings: Option<Vec<Vec<u8>>> = members.iter().map(|m| as_string(m)).collect();
    if let Some(strings) = strings {
        return (strings, Render::JsonString);
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

/// The default tool-call template: `{"name": ` + the name as a JSON string + `, "arguments": `, open.
pub fn tool_call_template() -> Template {
    Template::bare().prefix("{\"name\": ").suffix(", \"arguments\": ").render(Render::JsonString).end(End::Open)
}

#[cfg(test)]
mod tests;
