//! The C ABI (see `include/trie.h`, generated from the files of this folder by cbindgen: `scripts/gen-header.sh`).
//! This file holds the types, the status table and the options; `boundary` the panic boundary and argument checks;
//! `handle` the typed handles; the other files one object family each, declared below in the header's order.
//!
//! Rules every function follows:
//! - no panic crosses the boundary: each call runs under one `catch_unwind` (`boundary`), and a panic returns the
//!   fallback of the function's return type (a status: [`trie_status::TRIE_ERR_PANIC`]; a pointer: NULL; a
//!   `bool`: false; a count: 0; a state: one no automaton has; a static string: `""`), its message stored;
//! - every pointer is checked for NULL (a NULL array with a zero length is accepted) and every length for
//!   overflow; a buffer that is too short gets [`trie_status::TRIE_ERR_BUFFER_TOO_SMALL`] and nothing is written into it;
//! - a failing call stores a message for its thread, read with [`trie_last_error`];
//! - handles are converted only through `handle` (each C handle type names its Rust type and ownership);
//!   vocabularies and automata are reference counted (`Arc`): an automaton keeps its vocabulary alive, `*_retain`
//!   adds a reference, `*_free` drops one; set caches and recognized sets are owned (`Box`), freed once.
#![allow(non_camel_case_types, clippy::enum_variant_names)]

use crate::error::{Error, ErrorKind, Result};
use crate::vocab::{TokenId, TokenKind, Vocabulary, MAX_VOCAB};
use crate::{Automaton, CompileOptions, State, Step};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Major version of libtrie (the `0` of `0.3.0`).
pub const TRIE_VERSION_MAJOR: u32 = 0;
/// Minor version of libtrie.
pub const TRIE_VERSION_MINOR: u32 = 3;
/// Patch version of libtrie.
pub const TRIE_VERSION_PATCH: u32 = 0;
/// The version as a string, `"MAJOR.MINOR.PATCH"` (in C, `TRIE_VERSION_STRING` is built from the numbers);
/// [`trie_version`] returns the version of the library linked at run time.
///
/// cbindgen:ignore
pub const TRIE_VERSION_STRING: &str = "0.3.0";

/// Token kind numbers (GGUF's `tokenizer.ggml.token_type`) for `token_kinds` of [`trie_vocab_new`]. 0 also means normal.
pub const TRIE_TOKEN_NORMAL: u32 = 1;
/// The unknown-token placeholder: never text.
pub const TRIE_TOKEN_UNKNOWN: u32 = 2;
/// A control token such as `<s>` or `<|im_start|>`: never text.
pub const TRIE_TOKEN_CONTROL: u32 = 3;
/// A user-defined token: its bytes are emitted verbatim.
pub const TRIE_TOKEN_USER_DEFINED: u32 = 4;
/// A reserved or padding slot: never generated.
pub const TRIE_TOKEN_UNUSED: u32 = 5;
/// A single raw byte (SentencePiece byte fallback `<0xNN>`).
pub const TRIE_TOKEN_BYTE: u32 = 6;

/// A decoding state: a plain integer. Keep one per sequence; copy it freely; it is only meaningful with the
/// automaton that produced it. The start state is 0.
pub type trie_state = u32;

/// The state after an end-of-generation token: the member is complete. Only end-of-generation tokens are
/// allowed there, and they keep it there.
pub const TRIE_STATE_FINISHED: trie_state = u32::MAX;

/// A token vocabulary. Opaque, immutable once built: it may be used from any number of threads at once.
/// Reference counted: [`trie_vocab_retain`] adds a reference, [`trie_vocab_free`] drops one (each reference is
/// freed once). Compiled automata hold their own reference, so the vocabulary may be freed right after compiling.
pub struct trie_vocab {
    _private: [u8; 0],
}

/// A set of strings compiled against a vocabulary. Opaque, immutable: it may be used from any number of threads
/// at once (decoding state lives in the caller's `trie_state` integers). Keeps its vocabulary alive. Reference
/// counted: [`trie_automaton_retain`] adds a reference, [`trie_automaton_free`] drops one.
pub struct trie_automaton {
    _private: [u8; 0],
}

impl Castable for trie_vocab {
    type Ownership = OwnershipArc;
    type RustType = Vocabulary;
    const WHAT: &'static str = "vocab";
}

impl Castable for trie_automaton {
    type Ownership = OwnershipArc;
    type RustType = Automaton;
    const WHAT: &'static str = "automaton";
}

/// The result of a call. The numbers are stable and never renumbered; new codes may be added at the end.
/// Details of the last failure on the calling thread: [`trie_last_error`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum trie_status {
    /// Success.
    TRIE_OK = 0,
    /// A required pointer argument was NULL.
    TRIE_ERR_NULL_ARGUMENT = 1,
    /// An argument is out of range: a token id, a token kind, a length, a non-UTF-8 path.
    TRIE_ERR_INVALID_ARGUMENT = 2,
    /// A file could not be read.
    TRIE_ERR_IO = 3,
    /// The vocabulary cannot be served by a byte-level trie (for example WordPiece).
    TRIE_ERR_UNSUPPORTED_VOCABULARY = 4,
    /// A string of the set cannot be produced by any token sequence (see `trie_options.drop_unreachable`).
    TRIE_ERR_UNREACHABLE_STRING = 5,
    /// An output buffer is too short; nothing was written into it.
    TRIE_ERR_BUFFER_TOO_SMALL = 6,
    /// The token is not allowed in this state; the state is unchanged.
    TRIE_ERR_TOKEN_REJECTED = 7,
    /// A panic was caught inside libtrie (a bug: please report it with the message of `trie_last_error`).
    TRIE_ERR_PANIC = 8,
    /// A GGUF or tokenizer.json file is truncated or corrupt.
    TRIE_ERR_MALFORMED_FILE = 9,
    /// The set of strings is empty.
    TRIE_ERR_EMPTY_SET = 10,
    /// A size limit was hit (32-bit ids of states, tokens, bytes).
    TRIE_ERR_LIMIT_EXCEEDED = 11,
    /// The state is not a state of this automaton.
    TRIE_ERR_INVALID_STATE = 12,
    /// A saved automaton was compiled against another vocabulary than the one given to [`trie_automaton_load`].
    TRIE_ERR_VOCAB_MISMATCH = 13,
}

use trie_status::*;

/// The one table of statuses: every `trie_status` with its Rust [`ErrorKind`] (none for `TRIE_OK`) and its
/// [`trie_status_str`] text. From it come the text lookup, `From<ErrorKind>`, [`trie_status::error_kind`] and
/// [`trie_status::ALL`]; the compiler checks it against the enum above: each status and each `ErrorKind` must
/// appear (the generated matches are exhaustive; a repeat is an unreachable pattern, an error under clippy's
/// `-D warnings`) and each pair must have the same number (const assertions).
///
/// The enum is written out above rather than generated here because cbindgen reads the source as written (it does
/// not expand macros without a nightly compiler), and the header must declare it. The Python and Swift tables are
/// generated from the header: `scripts/gen-status.py`, checked by `scripts/check-header.sh`.
macro_rules! status_table {
    ($ok:ident => $ok_text:literal; $($status:ident <=> $kind:ident => $text:literal;)*) => {
        impl trie_status {
            /// Every status, `TRIE_OK` first, in number order.
            pub const ALL: &'static [trie_status] = &[$ok, $($status),*];

            /// The short static text of this status, as [`trie_status_str`] returns it.
            pub fn text(self) -> &'static CStr {
                match self {
                    $ok => $ok_text,
                    $($status => $text,)*
                }
            }

            /// The Rust error kind of a failure status; `None` for `TRIE_OK`.
            pub fn error_kind(self) -> Option<ErrorKind> {
                match self {
                    $ok => None,
                    $($status => Some(ErrorKind::$kind),)*
                }
            }
        }

        impl From<ErrorKind> for trie_status {
            fn from(kind: ErrorKind) -> trie_status {
                match kind {
                    $(ErrorKind::$kind => $status,)*
                }
            }
        }

        const _: () = assert!($ok as i32 == 0);
        $(const _: () = assert!($status as i32 == ErrorKind::$kind as i32, concat!(stringify!($status), " and ErrorKind::", stringify!($kind), " differ"));)*
    };
}

status_table! {
    TRIE_OK => c"ok";
    TRIE_ERR_NULL_ARGUMENT <=> NullArgument => c"null argument";
    TRIE_ERR_INVALID_ARGUMENT <=> InvalidArgument => c"invalid argument";
    TRIE_ERR_IO <=> Io => c"I/O error";
    TRIE_ERR_UNSUPPORTED_VOCABULARY <=> UnsupportedVocabulary => c"unsupported vocabulary";
    TRIE_ERR_UNREACHABLE_STRING <=> UnreachableString => c"unreachable string";
    TRIE_ERR_BUFFER_TOO_SMALL <=> BufferTooSmall => c"buffer too small";
    TRIE_ERR_TOKEN_REJECTED <=> TokenRejected => c"token rejected";
    TRIE_ERR_PANIC <=> Panic => c"panic in libtrie";
    TRIE_ERR_MALFORMED_FILE <=> MalformedFile => c"malformed file";
    TRIE_ERR_EMPTY_SET <=> EmptySet => c"empty set";
    TRIE_ERR_LIMIT_EXCEEDED <=> LimitExceeded => c"limit exceeded";
    TRIE_ERR_INVALID_STATE <=> InvalidState => c"invalid state";
    TRIE_ERR_VOCAB_MISMATCH <=> VocabularyMismatch => c"vocabulary mismatch";
}

/// Options of [`trie_compile`]. Initialise with [`trie_options_init`], then set fields:
///
/// ```c
/// trie_options o;
/// trie_options_init(&o);            // sets struct_size and the defaults
/// o.max_bytes = 512u << 20;
/// trie_compile(vocab, strings, lens, n, &o, &automaton);
/// ```
///
/// NULL options mean the defaults. The struct may grow in later versions (new fields are appended): libtrie
/// reads only the first `struct_size` bytes, so a program compiled against an older header keeps working, and
/// a newer program's extra fields must be zero when an older libtrie reads them (else
/// `TRIE_ERR_INVALID_ARGUMENT`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_options {
    /// `sizeof(trie_options)` of the header the caller compiled against (set by [`trie_options_init`]). A size
    /// too small for `drop_unreachable` or over 4096 bytes is `TRIE_ERR_INVALID_ARGUMENT` (nothing past this
    /// field is read then).
    pub struct_size: usize,
    /// Drop the strings no token sequence can produce (list them with [`trie_automaton_dropped`]) instead of
    /// failing with `TRIE_ERR_UNREACHABLE_STRING`. Compiling still fails when no string is left.
    pub drop_unreachable: bool,
    /// The most states the automaton may have (checked on the set's trie, an upper bound on the states, before
    /// any alignment work); more is `TRIE_ERR_LIMIT_EXCEEDED`. 0: no limit but the 32-bit ones.
    pub max_states: u64,
    /// The most heap bytes compiling may allocate (trie, alignment, automaton), checked before each large
    /// allocation; more is `TRIE_ERR_LIMIT_EXCEEDED`, never an abort. 0: no bound.
    pub max_bytes: u64,
}

impl Default for trie_options {
    fn default() -> Self {
        trie_options {
            struct_size: std::mem::size_of::<trie_options>(),
            drop_unreachable: false,
            max_states: 0,
            max_bytes: 0,
        }
    }
}

impl trie_options {
    /// Reads options a caller laid out with its own `struct_size` (the rule of [`boundary::Versioned`]).
    unsafe fn read(options: *const trie_options) -> Result<CompileOptions> {
        if options.is_null() {
            return Ok(CompileOptions::new());
        }
        let min = std::mem::offset_of!(trie_options, drop_unreachable) + 1;
        let v = boundary::Versioned::read(options, "options", "trie_options_init", min)?;
        let mut o = CompileOptions::new();
        o.drop_unreachable = v.bool(std::mem::offset_of!(trie_options, drop_unreachable)).unwrap_or(false);
        let limit = |v: Option<u64>| v.filter(|&v| v != 0).map(|v| usize::try_from(v).unwrap_or(usize::MAX));
        o.max_states = limit(v.u64(std::mem::offset_of!(trie_options, max_states)));
        o.max_bytes = limit(v.u64(std::mem::offset_of!(trie_options, max_bytes)));
        Ok(o)
    }
}

/// Sets `*options` to the defaults (no dropping, no bounds) and `struct_size` to `sizeof(trie_options)`.
/// `TRIE_ERR_NULL_ARGUMENT` for NULL.
///
/// # Safety
/// `options` must be NULL or point to a writable `trie_options`.
#[no_mangle]
pub unsafe extern "C" fn trie_options_init(options: *mut trie_options) -> trie_status {
    guard(|| {
        if options.is_null() {
            return Err(null("options"));
        }
        options.write(trie_options::default());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_a_status_and_a_message() {
        let st = guard(|| panic!("boom {}", 42));
        assert_eq!(st, TRIE_ERR_PANIC);
        let msg = unsafe { CStr::from_ptr(trie_last_error()) }.to_str().unwrap().to_string();
        assert!(msg.contains("boom 42"), "{msg}");
        // The fallback follows the return type, with the message stored each time.
        let msg = || unsafe { CStr::from_ptr(trie_last_error()) }.to_str().unwrap().to_string();
        assert!(boundary(|| -> *mut trie_vocab { panic!("p1") }).is_null());
        assert!(msg().contains("p1"));
        assert!(boundary(|| -> *const u8 { panic!("p2") }).is_null());
        assert!(!boundary(|| -> bool { panic!("p3") }));
        assert_eq!(boundary(|| -> usize { panic!("p4") }), 0);
        assert!(msg().contains("p4"));
        let state: trie_state = boundary(|| -> trie_state { panic!("p5") });
        assert!(state == PANIC_STATE && state != TRIE_STATE_FINISHED && state != 0);
        boundary(|| -> () { panic!("p6") });
        assert!(msg().contains("p6"));
        let s = boundary(|| -> StaticStr { panic!("p7") }).0;
        assert!(!s.is_null() && unsafe { CStr::from_ptr(s) }.is_empty());
        assert_eq!(boundary(|| -> trie_status { panic!("p8") }), TRIE_ERR_PANIC);
        assert_eq!(boundary(|| 5usize), 5, "no panic: the value itself");
    }

    #[test]
    fn statuses_match_error_kinds() {
        for (n, &st) in trie_status::ALL.iter().enumerate() {
            assert_eq!(st as usize, n, "ALL is in number order with no gap");
            match st.error_kind() {
                None => assert_eq!(st, TRIE_OK),
                Some(k) => {
                    assert_eq!(k as i32, st as i32);
                    assert_eq!(trie_status::from(k), st);
                }
            }
            let text = unsafe { CStr::from_ptr(trie_status_str(st as c_int)) };
            assert_eq!(text, st.text());
            assert_ne!(text, c"unknown status");
        }
        assert_eq!(trie_status::ALL.last(), Some(&TRIE_ERR_VOCAB_MISMATCH));
        for n in [-1, trie_status::ALL.len() as c_int, c_int::MAX, c_int::MIN] {
            assert_eq!(unsafe { CStr::from_ptr(trie_status_str(n)) }, c"unknown status");
        }
    }

    #[test]
    fn version_matches_cargo() {
        assert_eq!(TRIE_VERSION_STRING, env!("CARGO_PKG_VERSION"));
        assert_eq!(TRIE_VERSION_MAJOR.to_string(), env!("CARGO_PKG_VERSION_MAJOR"));
        assert_eq!(TRIE_VERSION_MINOR.to_string(), env!("CARGO_PKG_VERSION_MINOR"));
        assert_eq!(TRIE_VERSION_PATCH.to_string(), env!("CARGO_PKG_VERSION_PATCH"));
        let v = unsafe { CStr::from_ptr(trie_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn sampler_name_is_one_static_string() {
        let p = trie_sampler_name();
        assert!(!p.is_null());
        assert_eq!(p, trie_sampler_name(), "the same address on every call");
        assert_eq!(unsafe { CStr::from_ptr(p) }.to_bytes(), b"trie");
    }
}

// cbindgen writes the functions in the order it meets them: these modules are declared in the header's order
// (rustfmt sorts adjacent `mod` lines, hence one per group).
mod boundary;

mod handle;

mod info;

mod vocab;

mod compile;

mod lazy;

mod decode;

mod draft;

pub mod recognize;

mod sets;

mod registry;

mod template;

mod calls;
mod compiled;
mod values;

mod search;

use boundary::*;
pub use calls::*;
pub use compile::*;
pub use compiled::*;
pub use decode::*;
pub use draft::*;
use handle::*;
pub use info::*;
pub use lazy::*;
pub use search::*;
pub use sets::*;
pub use template::*;
pub use values::*;
pub use vocab::*;
