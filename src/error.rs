//! Errors: one enum of kinds with stable numbers (the C status codes), and a message a person can act on.

use std::fmt;

/// What went wrong, as a stable category. The numbers are the C ABI's `trie_status` values and never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A required pointer or argument was null / missing.
    NullArgument = 1,
    /// An argument is out of its valid range (token id, length, option, UTF-8 where UTF-8 is required, ...).
    InvalidArgument = 2,
    /// Reading a file failed (missing, unreadable).
    Io = 3,
    /// The vocabulary cannot be served by a byte-level trie automaton (for example WordPiece `##` pieces).
    UnsupportedVocabulary = 4,
    /// A member of the set cannot be produced by any sequence of tokens of the vocabulary.
    UnreachableString = 5,
    /// A caller's output buffer is too short; nothing was written.
    BufferTooSmall = 6,
    /// The token is not allowed in this state; the state is unchanged.
    TokenRejected = 7,
    /// A panic was caught at the C boundary (a bug in libtrie: please report it).
    Panic = 8,
    /// A GGUF or tokenizer.json file is truncated or corrupt.
    MalformedFile = 9,
    /// The set of strings is empty.
    EmptySet = 10,
    /// A size limit was hit (too many states, strings, tokens or bytes for 32-bit ids).
    LimitExceeded = 11,
    /// The state is not a state of this automaton.
    InvalidState = 12,
    /// A saved automaton was compiled against another vocabulary than the one it is loaded with.
    VocabularyMismatch = 13,
}

/// An error of libtrie: a kind and a message that names what failed and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// A new error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::MalformedFile, message)
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::UnsupportedVocabulary, message)
    }

    pub(crate) fn limit(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::LimitExceeded, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The result type of libtrie.
pub type Result<T> = std::result::Result<T, Error>;

/// Shows at most `max` bytes of `bytes` for an error message, escaping what is not printable UTF-8.
pub(crate) fn show_bytes(bytes: &[u8], max: usize) -> String {
    let cut = &bytes[..bytes.len().min(max)];
    let mut s = String::from("\"");
    for chunk in cut.utf8_chunks() {
        for c in chunk.valid().chars() {
            s.extend(c.escape_debug());
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    if bytes.len() > max {
        s.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    s
}
