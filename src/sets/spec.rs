//! Parsing a request's set spec (JSON) and bounding its inline strings.
//!
//! Shapes: `{"set": NAME}` (the file `NAME.txt` of the set directory), `{"file": PATH}` (relative to it),
//! `{"strings": [...]}` (the members inline); short forms: a string (a path when it holds a `/`, else a set
//! name) and a list of strings. Optional keys: `"drop_unreachable": bool`, `"add": [...]`, `"remove": [...]`.
//! Invariant: a parsed [`Spec`] is within the operator's inline bounds (`strings`, `add` and `remove` counted
//! together, a byte per string for its separator).

use super::options::Options;
use crate::error::{Error, Result};
use serde_json::Value;

/// Where a set's members come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A file, by its path relative to the set directory (a set name already has `.txt` appended).
    File {
        /// The path as the request gave it.
        path: String,
        /// How messages name it: `the set 'tools'` or `the set file 'sub/tools.txt'`.
        what: String,
    },
    /// The members inline.
    Strings(Vec<String>),
}

/// A request's set: its members, and the changes made to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub source: Source,
    pub drop_unreachable: bool,
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

impl Spec {
    /// How messages name the set.
    pub fn what(&self) -> &str {
        match &self.source {
            Source::File { what, .. } => what,
            Source::Strings(_) => "the inline set",
        }
    }
}

/// The client's own words, quoted, not a megabyte of them.
pub(crate) fn shown(s: &str) -> String {
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("'{}...'", &s[..i]),
        None => format!("'{s}'"),
    }
}

fn refuse(msg: impl Into<String>) -> Error {
    Error::invalid(msg)
}

/// The most JSON text a spec may have: room for the inline bounds with every character escaped.
fn json_bound(opts: &Options) -> u64 {
    opts.max_inline_bytes.saturating_mul(12).saturating_add(64 << 10)
}

/// Parses `json` (UTF-8 JSON text) into a [`Spec`] checked against `opts`' inline bounds. Files are not touched.
pub(crate) fn parse(json: &[u8], opts: &Options) -> Result<Spec> {
    if json.len() as u64 > json_bound(opts) {
        return Err(refuse(format!(
            "the set spec is {} bytes of JSON, more than this server reads ({}); name a set of the set directory \
             instead",
            json.len(),
            json_bound(opts)
        )));
    }
    let value: Value = serde_json::from_slice(json).map_err(|e| {
        let text = e.to_string();
        let hint = if text.contains("surrogate") || text.contains("hex escape") || std::str::from_utf8(json).is_err() {
            " (strings must be valid Unicode: invalid UTF-8 and lone surrogates such as \\ud800 are refused)"
        } else {
            ""
        };
        refuse(format!("the set spec is not valid JSON: {e}{hint}"))
    })?;
    from_value(value, opts)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

const KEYS: [&str; 6] = ["set", "file", "strings", "drop_unreachable", "add", "remove"];

fn from_value(value: Value, opts: &Options) -> Result<Spec> {
    let mut obj = match value {
        Value::String(s) => {
            let key = if s.contains('/') { "file" } else { "set" };
            serde_json::Map::from_iter([(key.to_string(), Value::String(s))])
        }
        Value::Array(a) => serde_json::Map::from_iter([("strings".to_string(), Value::Array(a))]),
        Value::Object(o) => o,
        other => {
            return Err(refuse(format!(
                "a set must be a set name, a path, a list of strings or an object ({{\"set\": NAME}}, {{\"file\": \
                 PATH}} or {{\"strings\": [...]}}), not {}",
                type_name(&other)
            )))
        }
    };
    let mut unknown: Vec<String> = obj.keys().filter(|k| !KEYS.contains(&k.as_str())).map(|k| shown(k)).collect();
    if !unknown.is_empty() {
        unknown.truncate(8);
        return Err(refuse(format!(
            "the set has unknown keys [{}] (expected one of \"set\", \"file\", \"strings\", and optionally \
             \"drop_unreachable\", \"add\", \"remove\")",
            unknown.join(", ")
        )));
    }
    let given: Vec<&str> = ["set", "file", "strings"].into_iter().filter(|k| obj.contains_key(*k)).collect();
    if given.len() != 1 {
        return Err(refuse(format!("the set needs exactly one of \"set\", \"file\", \"strings\" (got {given:?})")));
    }
    let drop_unreachable = match obj.remove("drop_unreachable") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(refuse("\"drop_unreachable\" must be a boolean")),
    };
    let mut budget = Budget { opts, count: 0, bytes: 0 };
    let source = if let Some(v) = obj.remove("strings") {
        let strings = budget.take(v, "strings")?;
        if strings.is_empty() {
            return Err(Error::new(
                crate::ErrorKind::EmptySet,
                "\"strings\" is empty: a set needs at least one member",
            ));
        }
        Source::Strings(strings)
    } else if let Some(v) = obj.remove("set") {
        let name = match &v {
            Value::String(s) if !s.is_empty() && !s.contains(['/', '\\']) && !s.starts_with('.') => s,
            _ => {
                let got = match &v {
                    Value::String(s) => shown(s),
                    other => type_name(other).to_string(),
                };
                return Err(refuse(format!(
                    "\"set\" must be a plain set name (the name of a .txt file of the set directory), not {got}"
                )));
            }
        };
        Source::File { path: format!("{name}.txt"), what: format!("the set {}", shown(name)) }
    } else {
        match obj.remove("file") {
            Some(Value::String(s)) if !s.is_empty() => {
                Source::File { what: format!("the set file {}", shown(&s)), path: s }
            }
            _ => return Err(refuse("\"file\" must be a path relative to the set directory")),
        }
    };
    let add = obj.remove("add").map(|v| budget.take(v, "add")).transpose()?.unwrap_or_default();
    let remove = obj.remove("remove").map(|v| budget.take(v, "remove")).transpose()?.unwrap_or_default();
    Ok(Spec { source, drop_unreachable, add, remove })
}

/// The inline strings of one spec, counted against the operator's bounds as they are taken.
struct Budget<'a> {
    opts: &'a Options,
    count: u64,
    bytes: u64,
}

impl Budget<'_> {
    fn take(&mut self, value: Value, name: &str) -> Result<Vec<String>> {
        let Value::Array(items) = value else {
            return Err(refuse(format!("\"{name}\" must be a list of strings")));
        };
        self.count += items.len() as u64;
        if self.count > self.opts.max_inline_strings {
            return Err(refuse(format!(
                "the inline set has {} strings, more than this server accepts ({}, LIBTRIE_MAX_INLINE_STRINGS / \
                 --trie-max-inline-strings); name a set of the set directory instead",
                self.count, self.opts.max_inline_strings
            )));
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let Value::String(s) = item else {
                return Err(refuse(format!("\"{name}\" must be a list of strings (item {i} is not)")));
            };
            self.bytes += s.len() as u64 + 1;
            if self.bytes > self.opts.max_inline_bytes {
                return Err(refuse(format!(
                    "the inline set is larger than this server accepts ({} bytes, LIBTRIE_MAX_INLINE_BYTES / \
                     --trie-max-inline-bytes); name a set of the set directory instead",
                    self.opts.max_inline_bytes
                )));
            }
            out.push(s);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(json: &str) -> Result<Spec> {
        parse(json.as_bytes(), &Options::default())
    }

    fn refused(json: &str, opts: &Options, reason: &str) -> String {
        let e = parse(json.as_bytes(), opts).expect_err(json);
        assert!(e.message().contains(reason), "{json}: {e}");
        assert!(e.message().len() < 600, "{json}: a short message");
        e.message().to_string()
    }

    #[test]
    fn the_shapes() {
        let file = |path: &str, what: &str| Source::File { path: path.into(), what: what.into() };
        assert_eq!(p(r#""tools""#).unwrap().source, file("tools.txt", "the set 'tools'"));
        assert_eq!(p(r#"{"set": "tools"}"#).unwrap().source, file("tools.txt", "the set 'tools'"));
        assert_eq!(p(r#""sub/x.txt""#).unwrap().source, file("sub/x.txt", "the set file 'sub/x.txt'"));
        assert_eq!(p(r#"{"file": "x.txt"}"#).unwrap().source, file("x.txt", "the set file 'x.txt'"));
        let s = p(r#"["a", "b"]"#).unwrap();
        assert_eq!((s.source, s.drop_unreachable), (Source::Strings(vec!["a".into(), "b".into()]), false));
        let s = p(r#"{"strings": ["東京"], "drop_unreachable": true, "add": ["x"], "remove": []}"#).unwrap();
        assert_eq!(s.source, Source::Strings(vec!["東京".into()]));
        assert!(s.drop_unreachable);
        assert_eq!((s.add, s.remove), (vec!["x".to_string()], vec![]));
    }

    #[test]
    fn bad_shapes_are_refused_with_the_reason() {
        let o = Options::default();
        refused("42", &o, "must be a set name, a path, a list of strings or an object");
        refused("null", &o, "not null");
        refused(r#"{"strings": ["a"], "bogus": 1}"#, &o, "unknown keys ['bogus']");
        refused(r#"{"set": "a", "file": "a.txt"}"#, &o, "exactly one of");
        refused("{}", &o, "exactly one of");
        refused(r#"{"strings": "abc"}"#, &o, "\"strings\" must be a list of strings");
        refused(r#"{"strings": ["a", 3]}"#, &o, "(item 1 is not)");
        refused(r#"{"strings": ["a"], "drop_unreachable": 1}"#, &o, "must be a boolean");
        refused(r#"{"set": "colors", "add": "blue"}"#, &o, "\"add\" must be a list");
        refused(r#"{"set": "colors", "remove": [1]}"#, &o, "\"remove\" must be a list of strings (item 0");
        refused(r#"{"add": ["x"]}"#, &o, "exactly one of");
        refused(r#"{"file": ""}"#, &o, "\"file\" must be a path");
        refused(r#"{"file": 3}"#, &o, "\"file\" must be a path");
        for name in [r#""../x""#, r#"".hidden""#, r#""""#, r#""a\\b""#, "3", r#""a/b""#] {
            refused(&format!(r#"{{"set": {name}}}"#), &o, "must be a plain set name");
        }
        let e = parse(br#"{"strings": []}"#, &o).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::EmptySet);
        assert!(e.message().contains("is empty"));
        refused("{", &o, "not valid JSON");
    }

    #[test]
    fn lone_surrogates_and_invalid_utf8_are_refused() {
        let o = Options::default();
        let m = refused(r#"{"strings": ["ok", "\ud800"]}"#, &o, "not valid JSON");
        assert!(m.contains("lone surrogates"), "{m}");
        let m = refused(r#"["\udc00x"]"#, &o, "valid Unicode");
        assert!(m.contains("not valid JSON"), "{m}");
        let e = parse(b"[\"caf\xe9\"]", &o).unwrap_err();
        assert!(e.message().contains("invalid UTF-8"), "{e}");
        // A surrogate pair is a character.
        assert_eq!(p(r#"["\ud83c\udf89"]"#).unwrap().source, Source::Strings(vec!["🎉".into()]));
    }

    #[test]
    fn inline_sets_are_bounded() {
        let o = Options { max_inline_strings: 100, max_inline_bytes: 64, ..Options::default() };
        let list = |s: &str, n: usize| serde_json::to_string(&vec![s; n]).unwrap();
        parse(list("xxxxxxxxxx", 5).as_bytes(), &o).unwrap(); // 5 x (10 + 1) = 55 bytes
        let m = refused(&list("x", 101), &o, "101 strings, more than this server accepts (100");
        assert!(m.contains("LIBTRIE_MAX_INLINE_STRINGS"));
        refused(&list("xxxxxxxxxx", 6), &o, "larger than this server accepts (64 bytes, LIBTRIE_MAX_INLINE_BYTES");
        refused(&list(&"é".repeat(40), 1), &o, "LIBTRIE_MAX_INLINE_BYTES"); // 80 bytes of UTF-8
                                                                            // strings, add and remove count together
        let o4 = Options { max_inline_strings: 4, ..Options::default() };
        parse(br#"{"strings": ["a", "b"], "add": ["c"], "remove": ["a"]}"#, &o4).unwrap();
        refused(r#"{"strings": ["a", "b"], "add": ["c", "d"], "remove": ["a"]}"#, &o4, "5 strings");
        refused(r#"{"set": "colors", "add": ["x", "x", "x", "x", "x"]}"#, &o4, "LIBTRIE_MAX_INLINE_STRINGS");
        // the defaults: 10,000 strings, 1 MiB
        refused(&list("x", 10_001), &Options::default(), "10001 strings");
        parse(list("x", 10_000).as_bytes(), &Options::default()).unwrap();
        refused(&list(&"x".repeat(1 << 20), 1), &Options::default(), "LIBTRIE_MAX_INLINE_BYTES");
        // the JSON text itself is bounded before it is parsed
        let huge = format!("[\"{}\"]", " ".repeat(20 << 20));
        refused(&huge, &Options::default(), "bytes of JSON, more than this server reads");
    }

    #[test]
    fn long_names_are_cut_in_messages() {
        let m = refused(&format!(r#"{{"set": "{}/"}}"#, "x".repeat(100_000)), &Options::default(), "plain set name");
        assert!(m.len() < 400 && m.contains("..."), "{m}");
    }
}
