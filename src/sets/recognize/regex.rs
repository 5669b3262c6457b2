//! Regexes that are an alternation of escaped literals, read with full-match semantics (as constrained
//! decoding engines read them): `a|b`, `(a|b)`, `(?:a|b)`, `^(?:a|b\.c)$`, `^a$`.
//!
//! A literal character is any character but `\ . ^ $ | ? * + ( ) [ ] { }`; escapes: `\` + an ASCII character that is
//! not a letter or digit (that character, as Python's `re.escape` writes them), `\n \r \t \f \v`, `\xHH`, `\uHHHH` (a Unicode scalar value). Anchors are accepted at
//! the two ends only, around one group or one alternative. Everything else — classes, quantifiers, other groups,
//! `\d \w \s \b`, back references, flags — is "not a set". Escapes are read as Python's `re` reads them: a
//! backslash and an ASCII letter other than `n r t f v x u` (`\a`, `\U`, `\N{...}`, classes, assertions), a
//! backslash and a digit (a back reference or an octal escape), a backslash and a non-ASCII character (libtrie
//! does not decide it) are not sets. Alternatives that give the same string are served once (`a|a` is `{"a"}`).

use super::{dedup_members, not_a_set, set, Charge, Limits, Recognition};
use crate::template::Template;

/// Recognizes a regex (see the module docs).
pub(super) fn regex(src: &str, limits: &Limits) -> Result<Recognition, crate::Error> {
    if src.contains('\0') {
        // XGrammar refuses such a regex ("The regex must not contain null characters"): the engine's to judge.
        return not_a_set("the regex has a NUL character (XGrammar refuses it)");
    }
    let mut body = src;
    let anchored_start = body.starts_with('^');
    if anchored_start {
        body = &body[1..];
    }
    let anchored_end = body.ends_with('$') && !escaped_at(body, body.len() - 1);
    if anchored_end {
        body = &body[..body.len() - 1];
    }
    let mut grouped = false;
    for open in ["(?:", "("] {
        if body.starts_with(open) && body.ends_with(')') && !escaped_at(body, body.len() - 1) {
            let inner = &body[open.len()..body.len() - 1];
            // The group must span the whole text: no unescaped parenthesis inside.
            if !has_unescaped(inner, &['(', ')']) {
                body = inner;
                grouped = true;
            }
            break;
        }
    }
    let mut members: Vec<Vec<u8>> = Vec::new();
    let charge = Charge::new(limits, "regex");
    let mut bytes = 0usize;
    let mut current = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '|' => {
                // Charged as listed (before duplicates are dropped), so a long list stops at the limits.
                bytes += current.len();
                members.push(std::mem::take(&mut current));
                charge.check(members.len(), bytes)?;
            }
            '\\' => {
                let rest = &body[i + 1..];
                let (ch, len) = match escape(rest) {
                    Ok(v) => v,
                    Err(why) => return not_a_set(format!("the regex has {why}")),
                };
                current.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                for _ in 0..len {
                    chars.next();
                }
            }
            '.' | '^' | '$' | '?' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}' => {
                return not_a_set(format!("the regex has the unescaped metacharacter `{c}` inside the alternation"));
            }
            c => current.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    members.push(current);
    if (anchored_start || anchored_end) && !grouped && members.len() > 1 {
        return not_a_set("an anchor binds to one alternative only (write `^(?:a|b)$`)");
    }
    dedup_members(&mut members, "regex", limits)?;
    set(members, Template::bare())
}

/// Whether the character at byte `at` is escaped (preceded by an odd number of backslashes).
fn escaped_at(s: &str, at: usize) -> bool {
    s.as_bytes()[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

fn has_unescaped(s: &str, set: &[char]) -> bool {
    s.char_indices().any(|(i, c)| set.contains(&c) && !escaped_at(s, i))
}

/// One escape after a backslash: the character and how many characters of `rest` it uses.
fn escape(rest: &str) -> Result<(char, usize), String> {
    let Some(c) = rest.chars().next() else { return Err("a trailing backslash".into()) };
    let ch = match c {
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'f' => '\u{c}',
        'v' => '\u{b}',
        'x' | 'u' => {
            let n = if c == 'x' { 2 } else { 4 };
            let hex = rest.get(1..1 + n).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
            if c == 'x' && rest.as_bytes().get(3).is_some_and(u8::is_ascii_hexdigit) {
                // Python's `re` reads two digits, XGrammar's regex every hex digit that follows: they disagree.
                return Err(
                    "a \\x escape followed by a third hex digit (Python and XGrammar read it differently)".into()
                );
            }
            let cp = hex.and_then(|h| u32::from_str_radix(h, 16).ok()).and_then(char::from_u32);
            if cp == Some('\0') {
                // XGrammar reads an escaped NUL as the empty string (`b\x00` matches "b"): not the same language.
                return Err(format!("the escape \\{} of U+0000 (XGrammar reads it as nothing)", &rest[..1 + n]));
            }
            return cp
                .map(|ch| (ch, 1 + n))
                .ok_or_else(|| format!("the escape \\{c} without {n} hex digits of a scalar value"));
        }
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => c,
        c => return Err(format!("the escape \\{c} (a class, an assertion or a reference)")),
    };
    Ok((ch, 1))
}
