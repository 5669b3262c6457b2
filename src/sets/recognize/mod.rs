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
//! - members are distinct and in the request's order; there is at least one. A duplicate that does not change
//!   the language (grammar and regex alternatives, a schema's `enum`, `anyOf`) is dropped (the first occurrence
//!   is kept); a duplicate is an error only where the client lists the members on purpose ([`Shape::Choices`],
//!   [`Shape::Tools`], [`Shape::VllmTools`]);
//! - malformed input (non-UTF-8, non-JSON, an empty enum, a duplicate choice or tool, a grammar that does not
//!   parse in either dialect, a tool without a name) is an [`Error`]; "not a set" is not an error;
//! - bounded by [`Limits`] (an [`ErrorKind::LimitExceeded`] error naming the limit): the text's size is checked
//!   before anything parses it, a JSON text's nesting before serde reads it ([`json_check_depth`]), and members
//!   *and* their bytes are charged before they are built (a grammar's concatenation is counted, saturating,
//!   before it is materialized), so no request allocates much more than its limits; no parsing recursion
//!   deeper than [`Limits::max_depth`], so a crafted input cannot overflow the stack.

mod dupkeys;
mod grammar;
mod lex;
mod regex;
mod schema;
mod vllm;

pub use vllm::vllm_tool_call_template;

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
    /// A grammar whose `root` is an alternation of string literals, as llama.cpp's GBNF reads it (llama-server,
    /// the llama.cpp sampler). Every form where GBNF and XGrammar's EBNF differ is "not a set", except
    /// llama.cpp's own `space ::= | " " | ...` rules, which only GBNF reads: see [`Shape::XgrammarGrammar`].
    Grammar,
    /// A regex that is an alternation of escaped literals (full-match semantics).
    Regex,
    /// An OpenAI-style `tools` list: the tool names are the set, each tool's `parameters` its payload.
    Tools,
    /// The JSON schema vLLM writes for `tool_choice="required"` (`get_json_schema_from_tools`), in exactly that
    /// form: the tool names are the set, each tool's `parameters` its payload, the template writes
    /// `[{"name": NAME, "parameters": ` (open: the arguments and `}]` follow).
    VllmTools,
    /// A grammar as XGrammar's EBNF reads it (vLLM's `grammar`, SGLang's `ebnf`): [`Shape::Grammar`], except
    /// that llama.cpp's `space` rules opening with an empty alternative are "not a set" (XGrammar refuses them).
    XgrammarGrammar,
}

impl Shape {
    /// All shapes, in the order of their C numbers (`TRIE_RECOGNIZE_*`).
    ///
    /// cbindgen:ignore
    pub const ALL: [Shape; 7] = [
        Shape::Choices,
        Shape::JsonSchema,
        Shape::Grammar,
        Shape::Regex,
        Shape::Tools,
        Shape::VllmTools,
        Shape::XgrammarGrammar,
    ];

    /// The shape's name as written in messages and in the Python binding.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Choices => "choices",
            Shape::JsonSchema => "json_schema",
            Shape::Grammar => "grammar",
            Shape::Regex => "regex",
            Shape::Tools => "tools",
            Shape::VllmTools => "vllm_tools",
            Shape::XgrammarGrammar => "xgrammar_grammar",
        }
    }
}

/// Bounds on what a recognizer reads; exceeding one is an [`ErrorKind::LimitExceeded`] error naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest request text, in bytes (checked before anything parses it). Default 8 MiB.
    pub max_text_bytes: usize,
    /// The most members a set may have (counted as the expansion goes, before members are built; a grammar's
    /// intermediate results are bounded by it too). Default 10,000.
    pub max_members: usize,
    /// The most bytes of all members + 1 per member (the inline-bytes rule of [`crate::sets::Options`]),
    /// charged before a member is built; every member string a grammar's expansion builds, intermediate ones
    /// included, is charged to a work budget of [`WORK_FACTOR`] times this. Default 1 MiB.
    pub max_member_bytes: usize,
    /// The deepest nesting: JSON texts (checked on the raw text, [`json_check_depth`]), grammar parentheses
    /// and rule references. Default 64; a value above [`MAX_DEPTH`] is read as [`MAX_DEPTH`].
    pub max_depth: usize,
    /// A bound hit is [`Recognition::NotASet`] (its reason names the bound) instead of an
    /// [`ErrorKind::LimitExceeded`] error. For routing a request the engine would serve itself (a grammar, a
    /// schema, a regex, a `choice` list, a tool list): over the operator's bounds it keeps the engine's path, as
    /// any other request that is not a set, and is never refused for its size. Sets the client names through
    /// libtrie's own fields (a registry, a set file, a `"trie"` set) keep the error. Default `false`.
    pub over_bounds_not_a_set: bool,
}

/// The deepest nesting any caller may allow: the recursion of the readers stays well within a thread's stack.
///
/// cbindgen:ignore
pub const MAX_DEPTH: usize = 256;

/// A grammar's expansion may build at most this many times [`Limits::max_member_bytes`] in all (intermediate
/// concatenations and alternations included), so its time and memory stay proportional to the limits.
///
/// cbindgen:ignore
pub const WORK_FACTOR: usize = 8;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_text_bytes: 8 << 20,
            max_members: 10_000,
            max_member_bytes: 1 << 20,
            max_depth: 64,
            over_bounds_not_a_set: false,
        }
    }
}

/// Checks that the JSON text `text` nests arrays and objects at most `max_depth` deep, by a byte scan that
/// skips strings (no parser, no recursion, no allocation): run it before any recursive parser touches a
/// request. Only nesting is checked (malformed JSON is left to the parser). An
/// [`ErrorKind::LimitExceeded`] error naming `max_depth` when deeper.
pub fn json_check_depth(text: &[u8], max_depth: usize) -> Result<()> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                // Skip the string: to the next unescaped quote.
                i += 1;
                while i < text.len() {
                    match text[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(Error::limit(format!(
                        "the JSON text nests deeper than the limit max_depth = {max_depth} (at byte {i})"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Members and their bytes charged against [`Limits`] before they are built.
pub(crate) struct Charge<'a> {
    limits: &'a Limits,
    what: &'static str,
}

impl<'a> Charge<'a> {
    pub(crate) fn new(limits: &'a Limits, what: &'static str) -> Self {
        Charge { limits, what }
    }

    /// An error unless `n` members of `bytes` bytes in all (+ 1 per member) fit the limits.
    pub(crate) fn check(&self, n: usize, bytes: usize) -> Result<()> {
        if n > self.limits.max_members {
            return Err(Error::limit(format!(
                "the {} has {n} members or more, more than the limit max_members = {}",
                self.what, self.limits.max_members
            )));
        }
        let total = bytes.saturating_add(n);
        if total > self.limits.max_member_bytes {
            return Err(Error::limit(format!(
                "the {}'s members take {total} bytes or more (+ 1 per member), more than the limit \
                 max_member_bytes = {}",
                self.what, self.limits.max_member_bytes
            )));
        }
        Ok(())
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

/// Recognizes `text` as `shape` within `limits`. Errors: malformed input (see the module docs), a limit hit
/// (unless [`Limits::over_bounds_not_a_set`]: then "not a set", the reason naming the bound).
pub fn recognize_with(shape: Shape, text: &[u8], limits: &Limits) -> Result<Recognition> {
    match recognize_within(shape, text, limits) {
        Err(e) if limits.over_bounds_not_a_set && e.kind() == ErrorKind::LimitExceeded => {
            not_a_set(format!("{} (over this server's bounds: the engine serves it)", e.message()))
        }
        found => found,
    }
}

fn recognize_within(shape: Shape, text: &[u8], limits: &Limits) -> Result<Recognition> {
    if text.len() > limits.max_text_bytes {
        return Err(Error::limit(format!(
            "the {} text is {} bytes, more than the limit max_text_bytes = {}",
            shape.name(),
            text.len(),
            limits.max_text_bytes
        )));
    }
    let limits = &Limits { max_depth: limits.max_depth.min(MAX_DEPTH), ..*limits };
    let text = utf8(shape, text)?;
    if matches!(shape, Shape::Choices | Shape::JsonSchema | Shape::Tools | Shape::VllmTools) {
        json_check_depth(text.as_bytes(), limits.max_depth)
            .map_err(|e| Error::limit(format!("the {} text: {}", shape.name(), e.message())))?;
    }
    if matches!(shape, Shape::JsonSchema | Shape::Tools | Shape::VllmTools) {
        if let Some(key) = dupkeys::first_duplicate_key(text) {
            return not_a_set(format!(
                "the {} text writes the key {key:?} twice in one object (engines read duplicate keys differently)",
                shape.name()
            ));
        }
    }
    match shape {
        Shape::Choices => choices(text, limits),
        Shape::JsonSchema => schema::json_schema(text, limits),
        Shape::Grammar => grammar::grammar(text, limits, grammar::Dialect::Gbnf),
        Shape::XgrammarGrammar => grammar::grammar(text, limits, grammar::Dialect::Xgrammar),
        Shape::Regex => regex::regex(text, limits),
        Shape::Tools => schema::tools(text, limits),
        Shape::VllmTools => vllm::vllm_tools(text, limits),
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

/// Checks the member count and bytes and that members are distinct (a duplicate is an error: the client
/// listed it on purpose); `what` names the shape in messages. Members are hashed once each (xxh3) into a table
/// of hashes; only when two distinct members share a hash is every member compared byte for byte.
pub(crate) fn check_members(members: &[Vec<u8>], what: &'static str, limits: &Limits) -> Result<()> {
    if members.is_empty() {
        return Err(Error::new(ErrorKind::EmptySet, format!("the {what} lists no member")));
    }
    let bytes = members.iter().fold(0usize, |a, m| a.saturating_add(m.len()));
    Charge::new(limits, what).check(members.len(), bytes)?;
    if let Some((first, again)) = first_duplicate(members) {
        return Err(Error::invalid(format!(
            "the {what} lists {} twice (at index {first} and again at index {again})",
            show_bytes(&members[again], 60)
        )));
    }
    Ok(())
}

/// The first member equal to an earlier one: `(earlier index, its index)`.
pub(crate) fn first_duplicate(members: &[Vec<u8>]) -> Option<(usize, usize)> {
    let mut first: HashMap<u64, usize, BuildHasherDefault<Identity>> =
        HashMap::with_capacity_and_hasher(members.len(), Default::default());
    let mut collision = false;
    for (i, m) in members.iter().enumerate() {
        match first.entry(xxhash_rust::xxh3::xxh3_64(m)) {
            Entry::Vacant(v) => {
                v.insert(i);
            }
            Entry::Occupied(o) if members[*o.get()] == *m => return Some((*o.get(), i)),
            Entry::Occupied(_) => collision = true,
        }
    }
    if collision {
        let mut seen: HashMap<&[u8], usize> = HashMap::with_capacity(members.len());
        for (i, m) in members.iter().enumerate() {
            if let Some(&f) = seen.get(m.as_slice()) {
                return Some((f, i));
            }
            seen.insert(m, i);
        }
    }
    None
}

/// Drops the members equal to an earlier one (the language is the same), keeping the request's order.
pub(crate) fn dedup(members: &mut Vec<Vec<u8>>) {
    if first_duplicate(members).is_none() {
        return;
    }
    let mut seen: HashSet<Vec<u8>> = HashSet::with_capacity(members.len());
    members.retain(|m| seen.insert(m.clone()));
}

/// Deduplicates (see [`dedup`]) then checks the members as [`check_members`] does.
pub(crate) fn dedup_members(members: &mut Vec<Vec<u8>>, what: &'static str, limits: &Limits) -> Result<()> {
    dedup(members);
    check_members(members, what, limits)
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

/// An error when `n` members exceed the limit (before their bytes are known).
pub(crate) fn check_count(n: usize, what: &'static str, limits: &Limits) -> Result<()> {
    Charge::new(limits, what).check(n, 0)
}

/// A recognized set with no payloads and no trailing whitespace.
pub(crate) fn set(members: Vec<Vec<u8>>, template: Template) -> Result<Recognition> {
    Ok(Recognition::Set(Recognized { members, template, payloads: None, trailing_whitespace: false }))
}

/// A JSON array of strings, each one member written as it is.
fn choices(text: &str, limits: &Limits) -> Result<Recognition> {
    // Counted on the raw text first: a million-member list is refused before it is parsed.
    check_count(top_level_items(text.as_bytes()), "choice list", limits)?;
    let serde_json::Value::Array(items) = parse_json(Shape::Choices, text)? else {
        return Err(Error::invalid("the choices are not a JSON array of strings"));
    };
    check_count(items.len(), "choice list", limits)?;
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

/// Calls `f(byte, depth)` for every byte of a JSON text outside its strings (the quotes themselves included),
/// `depth` the nesting of `[`/`{` before the byte: the one raw scan of the counts read without parsing
/// (malformed text is left to the parser).
pub(crate) fn json_scan(text: &[u8], mut f: impl FnMut(u8, usize)) {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < text.len() {
        let c = text[i];
        f(c, depth);
        match c {
            b'"' => {
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
}

/// The number of items of a JSON array text (its first-level commas + 1; 0 for `[]`), a bound read without
/// parsing (malformed text is left to the parser).
pub(crate) fn top_level_items(text: &[u8]) -> usize {
    let (mut commas, mut any) = (0usize, false);
    json_scan(text, |c, depth| {
        if depth == 1 && !c.is_ascii_whitespace() && !matches!(c, b']' | b',') {
            any = true;
        }
        if c == b',' && depth == 1 {
            commas += 1;
        }
    });
    if any {
        commas + 1
    } else {
        0
    }
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
