//! The grammar lexer: the tokens both dialects (llama.cpp's GBNF, XGrammar's EBNF) read the same way, and a
//! "not a set" token for every construct where they differ or that is never part of a literal alternation.
//! The comparison of the two dialects is the table in [`super::grammar`]'s documentation.

use crate::error::show_bytes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// A rule name in the two dialects' common alphabet (`[A-Za-z-][A-Za-z0-9-]*`, not a keyword or macro).
    Name,
    Assign,
    /// A literal whose decoded bytes are `arena[a..b]`.
    Lit,
    Pipe,
    Open,
    Close,
    /// A construct that is never part of a finite literal alternation, or one the dialects read differently:
    /// its description is `OTHER[a]`.
    Other,
    /// A literal whose meaning is not certain: the reason is `Lexed::reasons[a]`.
    BadLit,
}

/// One token: 20 bytes, so a hostile text of `|||...` costs at most 20 bytes per byte of text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token {
    pub kind: Kind,
    /// A line break (`\n` or `\r`; a comment's end counts) came between this token and the previous one.
    pub newline_before: bool,
    pub start: u32,
    pub end: u32,
    pub a: u32,
    pub b: u32,
}

/// The descriptions of [`Kind::Other`] tokens.
pub(super) const OTHER: [&str; 7] = [
    "a character class",
    "a repetition {m,n}",
    "a repetition (*, + or ?)",
    "a construct other than literals, alternation, grouping and rule references",
    "a construct GBNF and XGrammar read differently, a rule name or `.` (GBNF names are [a-zA-Z0-9-]+; XGrammar's \
     are [a-zA-Z_.-][a-zA-Z0-9_.-]* and `true`, `false` and its macros are not rule references)",
    "a NUL byte (both engines stop reading there)",
    "a text too long for the grammar lexer",
];

/// XGrammar's macros (`Name(...)` in a rule body is a macro call there, a rule reference in GBNF).
const MACROS: [&str; 6] = ["TagDispatch", "Token", "ExcludeToken", "TokenTagDispatch", "Regex", "Substring"];

pub(super) struct Lexed {
    pub tokens: Vec<Token>,
    /// The decoded literals.
    pub arena: Vec<u8>,
    /// The reasons of [`Kind::BadLit`] tokens.
    pub reasons: Vec<String>,
}

impl Lexed {
    pub fn text<'s>(&self, src: &'s str, t: &Token) -> &'s str {
        &src[t.start as usize..t.end as usize]
    }
    /// Why token `t` (`Other` or `BadLit`) is not part of a literal alternation.
    pub fn why(&self, t: &Token) -> &str {
        match t.kind {
            Kind::BadLit => &self.reasons[t.a as usize],
            _ => OTHER[t.a as usize],
        }
    }
}

/// Whether `name` is a rule name both dialects read as one name and as a rule reference.
fn common_name(name: &[u8]) -> bool {
    let first_ok = name.first().is_some_and(|&c| c.is_ascii_alphabetic() || c == b'-');
    first_ok
        && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
        && !matches!(name, b"true" | b"false")
        && !MACROS.iter().any(|m| m.as_bytes() == name)
}

/// An unterminated literal: the message (the caller decides whether it is an error or "not a set").
pub(super) struct Unterminated(pub String);

/// Splits a grammar into tokens. An unterminated literal is `Err` (with whether a construct this lexer does not
/// know came earlier: the lexer may then be out of step with the real syntax).
pub(super) fn lex(src: &str) -> Result<Lexed, (Unterminated, bool)> {
    let b = src.as_bytes();
    let mut out = Lexed { tokens: Vec::new(), arena: Vec::new(), reasons: Vec::new() };
    if u32::try_from(b.len()).is_err() {
        let t = Token { kind: Kind::Other, newline_before: false, start: 0, end: 0, a: 6, b: 0 };
        out.tokens.push(t);
        return Ok(out);
    }
    let mut i = 0;
    let mut newline = false;
    let mut unknown_seen = false;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let (mut kind, mut a, mut bb) = (Kind::Other, 0u32, 0u32);
        match c {
            b' ' | b'\t' => {
                i += 1;
                continue;
            }
            b'\n' | b'\r' => {
                // Both engines end a line at `\r` too (GBNF ends a rule there; XGrammar counts a line).
                newline = true;
                i += 1;
                continue;
            }
            b'#' => {
                // A comment ends at `\n` or `\r` in both engines.
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
                continue;
            }
            b':' if b[i..].starts_with(b"::=") => {
                i += 3;
                kind = Kind::Assign;
            }
            b'"' => match literal(src, i + 1, &mut out.arena) {
                Ok((lit, next)) => {
                    i = next;
                    match lit {
                        Ok((s, e)) => (kind, a, bb) = (Kind::Lit, s as u32, e as u32),
                        Err(why) => {
                            (kind, a) = (Kind::BadLit, out.reasons.len() as u32);
                            out.reasons.push(why);
                        }
                    }
                }
                Err(msg) => return Err((Unterminated(msg), unknown_seen)),
            },
            b'|' => {
                i += 1;
                kind = Kind::Pipe;
            }
            b'(' => {
                i += 1;
                kind = Kind::Open;
            }
            b')' => {
                i += 1;
                kind = Kind::Close;
            }
            b'[' => {
                // A character class: skip to its unescaped `]`.
                i += 1;
                while i < b.len() && b[i] != b']' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                unknown_seen = true;
            }
            b'{' => {
                while i < b.len() && b[i] != b'}' {
                    i += 1;
                }
                i = (i + 1).min(b.len());
                a = 1;
            }
            b'*' | b'+' | b'?' => {
                i += 1;
                a = 2;
            }
            0 => {
                i += 1;
                a = 5;
                unknown_seen = true;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-' | b'.')) {
                    i += 1;
                }
                if common_name(&b[start..i]) {
                    kind = Kind::Name;
                } else {
                    a = 4;
                    unknown_seen = true;
                }
            }
            _ => {
                unknown_seen = true;
                i += src[i..].chars().next().map_or(1, char::len_utf8);
                a = 3;
            }
        }
        out.tokens.push(Token { kind, newline_before: newline, start: start as u32, end: i as u32, a, b: bb });
        newline = false;
    }
    Ok(out)
}

/// A literal's decoded range in the arena, or why its meaning is not certain.
type LitResult = Result<(usize, usize), String>;

/// Reads a string literal whose body starts at `i` (the GBNF reading: to the next unescaped quote); returns the
/// decoded range (or why it is not certain) and the index after the closing quote. `Err`: unterminated.
pub(super) fn literal(src: &str, mut i: usize, out: &mut Vec<u8>) -> Result<(LitResult, usize), String> {
    let b = src.as_bytes();
    let open = i - 1;
    let start = out.len();
    let mut bad: Option<String> = None;
    loop {
        // Copy the run of plain bytes up to the next quote, backslash, line break or NUL at once.
        let run = b[i..].iter().position(|&c| matches!(c, b'"' | b'\\' | b'\n' | b'\r' | 0)).unwrap_or(b.len() - i);
        out.extend_from_slice(&b[i..i + run]);
        i += run;
        let Some(&c) = b.get(i) else {
            return Err(format!("unterminated string literal at offset {open}: {}", show_bytes(&b[open..], 40)));
        };
        match c {
            b'"' => break,
            0 => return Err(format!("a NUL byte inside the string literal at offset {open}")),
            b'\n' | b'\r' => {
                // GBNF reads the line break as a character; XGrammar ends the literal there with an error.
                bad.get_or_insert("a line break (XGrammar refuses it, GBNF reads it as a character)".into());
                out.push(c);
                i += 1;
            }
            _ => {
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
        }
    }
    let lit = match bad {
        Some(why) => {
            out.truncate(start);
            Err(why)
        }
        None => Ok((start, out.len())),
    };
    Ok((lit, i + 1))
}

/// One escape at the start of `b` (which begins with `\`) that both dialects read the same way: its code point
/// and its length. GBNF knows `\\ \" \[ \] \- \n \r \t \xHH \uHHHH \UHHHHHHHH`; XGrammar
/// `\\ \" \' \? \/ \a \b \f \n \r \t \v \0 \e`, `\x` with any number of hex digits, `\u`, `\U`. The common ones
/// are understood; the others are reasons for "not a set".
pub(super) fn escape(b: &[u8]) -> Result<(u32, usize), String> {
    let Some(&c) = b.get(1) else { return Err("a backslash ends the grammar".into()) };
    match c {
        b'n' => return Ok((0x0a, 2)),
        b'r' => return Ok((0x0d, 2)),
        b't' => return Ok((0x09, 2)),
        b'\\' | b'"' => return Ok((c as u32, 2)),
        b'[' | b']' | b'-' => {
            return Err(format!("the escape \\{} (GBNF reads it, XGrammar refuses it)", c as char));
        }
        b'\'' | b'?' | b'/' | b'a' | b'b' | b'f' | b'v' | b'0' | b'e' => {
            return Err(format!("the escape \\{} (XGrammar reads it, GBNF refuses it)", c as char));
        }
        _ => {}
    }
    let digits = match c {
        b'x' => 2,
        b'u' => 4,
        b'U' => 8,
        _ => {
            let shown = std::str::from_utf8(&b[1..]).ok().and_then(|s| s.chars().next()).unwrap_or('?');
            return Err(format!("the escape \\{shown} is not understood"));
        }
    };
    let hex = b.get(2..2 + digits).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
    let Some(hex) = hex else { return Err(format!("\\{} needs {digits} hex digits", c as char)) };
    if c == b'x' && b.get(4).is_some_and(u8::is_ascii_hexdigit) {
        // GBNF reads two digits, XGrammar all of them: the two disagree.
        return Err("a \\x escape followed by a third hex digit (GBNF and XGrammar read it differently)".into());
    }
    let cp = hex.iter().fold(0u32, |acc, &h| (acc << 4) | (h as char).to_digit(16).unwrap_or(0));
    if cp == 0 {
        // llama.cpp's matcher works on C strings: a literal U+0000 is never matched there (XGrammar matches it).
        return Err(format!(
            "the escape {} (U+0000: llama.cpp never matches it)",
            String::from_utf8_lossy(&b[..2 + digits])
        ));
    }
    Ok((cp, 2 + digits))
}
