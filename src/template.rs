//! Templates: a set written inside a larger output.
//!
//! A [`Template`] puts a literal `prefix` before and a literal `suffix` after every member, writes each member
//! with a [`Render`]ing, and says how the output goes on after the suffix ([`End`]). The language of an automaton
//! compiled with a template is exactly `{ prefix + render(m) + suffix : m in the set }` (each string is one
//! *segment*), followed by an end-of-generation token ([`End::Eog`]) or handed over to whatever constrains the
//! rest of the output ([`End::Open`]).
//!
//! JSON strings are written as JSON encoders write them with `ensure_ascii=False` (Python's
//! `json.dumps(s, ensure_ascii=False)`, serde_json, nlohmann's `dump()`, llama.cpp's json-schema-to-grammar):
//! `"` and `\` escaped with a backslash; U+0008, U+0009, U+000A, U+000C, U+000D as `\b \t \n \f \r`; the other
//! characters below U+0020 as `\u00xx` (lowercase hex); everything else, `/` and U+007F included, as itself.

use crate::error::{show_bytes, Error, Result};

/// How a member is written between the prefix and the suffix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Render {
    /// The member's bytes as they are.
    #[default]
    Raw,
    /// The member (UTF-8 text) as a JSON string literal, quotes included (see the module docs for the escaping).
    JsonString,
    /// The member is the JSON text of one value (a number, `true`, `null`, a string literal, ...), written as
    /// given; it must parse as exactly one JSON value with no surrounding whitespace.
    JsonText,
}

/// What follows a complete segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum End {
    /// End-of-generation tokens are allowed exactly where a segment is complete (the bare set's behaviour).
    #[default]
    Eog,
    /// The segment is handed over: where it is complete no token of the set is allowed and no end-of-generation
    /// either; the engine continues with another constraint (or none). Tokens that finish the segment and go on
    /// past it are reported by [`crate::Automaton::crossing`]. No segment may be a proper prefix of another.
    Open,
}

/// A literal prefix and suffix around every member, a rendering, and an end. [`Template::default`] is the bare
/// set: no prefix, no suffix, raw bytes, end-of-generation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Template {
    /// Bytes before every member.
    pub prefix: Vec<u8>,
    /// Bytes after every member.
    pub suffix: Vec<u8>,
    /// How members are written.
    pub render: Render,
    /// What follows a segment.
    pub end: End,
}

impl Template {
    /// The bare set (same as `default()`).
    pub fn bare() -> Self {
        Self::default()
    }

    /// Sets the prefix.
    pub fn prefix(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the suffix.
    pub fn suffix(mut self, suffix: impl Into<Vec<u8>>) -> Self {
        self.suffix = suffix.into();
        self
    }

    /// Sets the rendering.
    pub fn render(mut self, render: Render) -> Self {
        self.render = render;
        self
    }

    /// Sets the end.
    pub fn end(mut self, end: End) -> Self {
        self.end = end;
        self
    }

    /// Whether this is the bare set (no prefix, no suffix, raw, end-of-generation).
    pub fn is_bare(&self) -> bool {
        *self == Template::default()
    }

    /// Appends `render(member)` to `out`. Errors ([`crate::ErrorKind::InvalidArgument`]): a member that is not
    /// UTF-8 for [`Render::JsonString`], or not exactly one JSON value for [`Render::JsonText`].
    pub fn render_member(&self, member: &[u8], out: &mut Vec<u8>) -> Result<()> {
        match self.render {
            Render::Raw => out.extend_from_slice(member),
            Render::JsonString => {
                let s = std::str::from_utf8(member).map_err(|e| {
                    Error::invalid(format!(
                        "member {} is not UTF-8 (invalid byte at {}): a JSON string member must be text",
                        show_bytes(member, 40),
                        e.valid_up_to()
                    ))
                })?;
                json_string(s, out);
            }
            Render::JsonText => {
                check_json_text(member)?;
                out.extend_from_slice(member);
            }
        }
        Ok(())
    }

    /// The whole segment of `member`: `prefix + render(member) + suffix`.
    pub fn segment(&self, member: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.prefix.len() + member.len() + 2 + self.suffix.len());
        out.extend_from_slice(&self.prefix);
        self.render_member(member, &mut out)?;
        out.extend_from_slice(&self.suffix);
        Ok(out)
    }
}

/// Appends `s` as a JSON string literal (quotes included), escaped as `json.dumps(s, ensure_ascii=False)` does.
pub fn json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Checks that `text` is exactly one JSON value with no surrounding whitespace.
fn check_json_text(text: &[u8]) -> Result<()> {
    let bad = |why: &str| Error::invalid(format!("member {} is not one JSON value: {why}", show_bytes(text, 40)));
    match (text.first(), text.last()) {
        (Some(a), Some(z)) if !a.is_ascii_whitespace() && !z.is_ascii_whitespace() => {}
        (None, _) => return Err(bad("it is empty")),
        _ => return Err(bad("it has surrounding whitespace")),
    }
    serde_json::from_slice::<serde_json::Value>(text).map_err(|e| bad(&e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn js(s: &str) -> String {
        let mut out = Vec::new();
        json_string(s, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_strings_are_escaped_like_ensure_ascii_false() {
        assert_eq!(js("plain"), "\"plain\"");
        assert_eq!(js("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(js("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(js("\u{1}\u{1f}\u{7f}/é€😀"), "\"\\u0001\\u001f\u{7f}/é€😀\"");
        // serde_json writes the same text for every string.
        for s in ["", "x", "\u{0}\u{1b}q\"\\/\u{2028}", "São Paulo", "a\tb\nc"] {
            assert_eq!(js(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn segments_and_bad_members() {
        let t = Template::bare().prefix("{\"name\": ").suffix(", \"arguments\": ").render(Render::JsonString);
        assert_eq!(t.segment(b"get").unwrap(), b"{\"name\": \"get\", \"arguments\": ");
        assert!(t.segment(b"\xff").unwrap_err().message().contains("not UTF-8"));
        let j = Template::bare().render(Render::JsonText);
        assert_eq!(j.segment(b"42").unwrap(), b"42");
        assert_eq!(j.segment(b"\"a\"").unwrap(), b"\"a\"");
        for bad in [&b""[..], b" 1", b"1 2", b"{", b"tru"] {
            assert!(j.segment(bad).is_err(), "{bad:?}");
        }
        assert!(Template::default().is_bare() && !t.is_bare());
    }
}
