//! Reading a set file's members: bounded, UTF-8 checked, one member per line.

use crate::error::{Error, ErrorKind, Result};
use std::io::Read;

/// The members of a set file, read from the open `file`: one per line, `\n` separated, a final newline ignored
/// (`\r` kept). At most `max_bytes` are read (a file that grew past them is refused); the text must be valid
/// UTF-8 (the message names the first bad line). `what` names the file in messages.
pub(crate) fn members(file: impl Read, size_hint: u64, max_bytes: u64, what: &str) -> Result<String> {
    let mut data = Vec::with_capacity(size_hint.min(max_bytes) as usize + 1);
    file.take(max_bytes.saturating_add(1)).read_to_end(&mut data).map_err(|e| {
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        Error::new(ErrorKind::Io, format!("{what} cannot be read: {text}"))
    })?;
    if data.len() as u64 > max_bytes {
        return Err(Error::invalid(format!("{what} is refused: more than {max_bytes} bytes")));
    }
    String::from_utf8(data).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..bad].iter().filter(|&&b| b == b'\n').count();
        Error::invalid(format!("{what} is not valid UTF-8 (line {line})"))
    })
}

/// The members of a set file's text: one per line, `\n` separated, a final newline ignored (`\r` kept); none
/// for an empty text. The one reading of the set-file format (the set directory's files, the `libtrie` command).
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n').unwrap_or(text).split('\n').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_a_file() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("\n"), vec![""]);
        assert_eq!(lines("a\nb"), vec!["a", "b"]);
        assert_eq!(lines("a\nb\n"), vec!["a", "b"]);
        assert_eq!(lines("a\r\n\nb\n\n"), vec!["a\r", "", "b", ""]);
    }

    #[test]
    fn bounded_and_checked() {
        assert_eq!(members(&b"red\ngreen\n"[..], 10, 10, "f").unwrap(), "red\ngreen\n");
        let e = members(&b"red\ngreen\n"[..], 10, 9, "the set 'c'").unwrap_err();
        assert_eq!(e.message(), "the set 'c' is refused: more than 9 bytes");
        let e = members(&b"ok\ncaf\xe9\n"[..], 0, 100, "the set 'latin1'").unwrap_err();
        assert_eq!(
            (e.kind(), e.message()),
            (ErrorKind::InvalidArgument, "the set 'latin1' is not valid UTF-8 (line 2)")
        );
        // UTF-8 encoded surrogates (CESU-8) and overlong forms are not UTF-8
        for bad in [&b"\xed\xa0\x80\n"[..], b"\xc0\xaf", b"\xf4\x90\x80\x80"] {
            assert!(members(bad, 0, 100, "f").unwrap_err().message().contains("not valid UTF-8 (line 1)"));
        }
        assert_eq!(members("東京\n".as_bytes(), 0, 100, "f").unwrap(), "東京\n");
    }
}
