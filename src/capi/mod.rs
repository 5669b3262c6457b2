//! The C ABI (see `include/trie.h`, generated from this file by cbindgen: `scripts/gen-header.sh`).
//!
//! Rules every function follows:
//! - no panic crosses the boundary: each call runs under one `catch_unwind` (`boundary`), and a panic returns the
//!   fallback of the function's return type (a status: [`trie_status::TRIE_ERR_PANIC`]; a pointer: NULL; a
//!   `bool`: false; a count: 0; a state: one no automaton has; a static string: `""`), its message stored;
//! - every pointer is checked for NULL (a NULL array with a zero length is accepted) and every length for
//!   overflow; a buffer that is too short gets [`trie_status::TRIE_ERR_BUFFER_TOO_SMALL`] and nothing is written into it;
//! - a failing call stores a message for its thread, read with [`trie_last_error`];
//! - handles are reference counted (`Arc`): an automaton keeps its vocabulary alive, `*_retain` adds a reference,
//!   `*_free` drops one.
#![allow(non_camel_case_types, clippy::enum_variant_names)]

use crate::error::{Error, ErrorKind, Result};
use crate::vocab::{TokenId, TokenKind, Vocabulary, MAX_VOCAB};
use crate::{Automaton, CompileOptions, State, Step};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Major version of libtrie (the `0` of `0.2.0`).
pub const TRIE_VERSION_MAJOR: u32 = 0;
/// Minor version of libtrie.
pub const TRIE_VERSION_MINOR: u32 = 2;
/// Patch version of libtrie.
pub const TRIE_VERSION_PATCH: u32 = 0;
/// The version as a string, `"MAJOR.MINOR.PATCH"` (in C, `TRIE_VERSION_STRING` is built from the numbers);
/// [`trie_version`] returns the version of the library linked at run time.
///
/// cbindgen:ignore
pub const TRIE_VERSION_STRING: &str = "0.2.0";

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

/// The largest `trie_options::struct_size` accepted (bytes): far above any future struct, small enough that a
/// garbage size (uninitialised options) is refused instead of read.
const MAX_OPTIONS_SIZE: usize = 4096;

impl trie_options {
    /// Reads options a caller laid out with its own `struct_size` (see the struct's documentation).
    unsafe fn read(options: *const trie_options) -> Result<CompileOptions> {
        if options.is_null() {
            return Ok(CompileOptions::new());
        }
        let size = (options as *const usize).read_unaligned();
        let ours = std::mem::size_of::<trie_options>();
        let min = std::mem::offset_of!(trie_options, drop_unreachable) + 1;
        // Checked before any byte past the first field is read: a garbage size must not make libtrie read
        // (and fault on) memory the caller never laid out.
        if !(min..=MAX_OPTIONS_SIZE).contains(&size) {
            return Err(Error::invalid(format!(
                "options.struct_size is {size}, outside {min}..={MAX_OPTIONS_SIZE}: initialise the options with \
                 trie_options_init (it sets struct_size = sizeof(trie_options) = {ours})"
            )));
        }
        let bytes = std::slice::from_raw_parts(options as *const u8, size);
        if size > ours && bytes[ours..].iter().any(|&b| b != 0) {
            return Err(Error::invalid(format!(
                "the options set fields this libtrie {} does not know (struct_size {size} > {ours}): use a newer \
                 libtrie or leave them zero",
                env!("CARGO_PKG_VERSION")
            )));
        }
        // Fields past the caller's struct_size keep their defaults; bool fields are read as bytes (nonzero: true).
        let field = |offset: usize, len: usize| (offset + len <= size).then(|| &bytes[offset..offset + len]);
        let u64_at = |offset: usize| field(offset, 8).map(|b| u64::from_ne_bytes(b.try_into().unwrap())).unwrap_or(0);
        let mut o = CompileOptions::new();
        o.drop_unreachable = field(std::mem::offset_of!(trie_options, drop_unreachable), 1).is_some_and(|b| b[0] != 0);
        let limit = |v: u64| (v != 0).then(|| usize::try_from(v).unwrap_or(usize::MAX));
        o.max_states = limit(u64_at(std::mem::offset_of!(trie_options, max_states)));
        o.max_bytes = limit(u64_at(std::mem::offset_of!(trie_options, max_bytes)));
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

// ---------------------------------------------------------------------------------------------------------------
// Errors and the panic boundary.

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A per-thread message slot of the C ABI (the last error; `trie_recognize_reason`): a C string that stays valid
/// until the thread's next write to the same slot.
type MessageSlot = std::thread::LocalKey<RefCell<CString>>;

/// Stores `message` in `slot` (NUL bytes written as `\0`); a slot being torn down or read is left alone.
fn store_message(slot: &'static MessageSlot, message: &str) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    let _ = slot.try_with(|cell| {
        if let Ok(mut s) = cell.try_borrow_mut() {
            *s = c;
        }
    });
}

/// The message in `slot`, or "" when it cannot be read; never NULL.
fn message_ptr(slot: &'static MessageSlot) -> *const c_char {
    slot.try_with(|cell| cell.try_borrow().map(|s| s.as_ptr()).unwrap_or(c"".as_ptr())).unwrap_or(c"".as_ptr())
}

fn set_last_error(message: &str) {
    store_message(&LAST_ERROR, message);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

fn report_panic(payload: Box<dyn std::any::Any + Send>) {
    let msg = panic_message(&*payload);
    // Dropping a payload can itself panic: forget it instead.
    std::mem::forget(payload);
    set_last_error(&format!("libtrie panicked (a bug: please report it): {msg}"));
}

/// What an `extern "C"` function returns when a panic is caught inside it, chosen by its return type (the idea of
/// rustls-ffi's `panic_boundary`): a status is `TRIE_ERR_PANIC`, a pointer NULL, a `bool` false, a count 0, a state
/// [`PANIC_STATE`], a static string the empty string. The panic's message is stored for `trie_last_error`.
trait PanicFallback {
    fn panic_fallback() -> Self;
}

impl PanicFallback for trie_status {
    fn panic_fallback() -> Self {
        TRIE_ERR_PANIC
    }
}

impl<T> PanicFallback for *mut T {
    fn panic_fallback() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> PanicFallback for *const T {
    fn panic_fallback() -> Self {
        std::ptr::null()
    }
}

impl PanicFallback for bool {
    fn panic_fallback() -> Self {
        false
    }
}

impl PanicFallback for usize {
    fn panic_fallback() -> Self {
        0
    }
}

/// `trie_state` is `u32`: the only `u32` an `extern "C"` function here returns is a state.
impl PanicFallback for trie_state {
    fn panic_fallback() -> Self {
        PANIC_STATE
    }
}

impl PanicFallback for () {
    fn panic_fallback() -> Self {}
}

/// A state no automaton has (valid states are below `n_states() < TRIE_STATE_FINISHED - 1`, and
/// `TRIE_STATE_FINISHED`): what a state-returning function gives after a panic, so the next call that takes it
/// fails with `TRIE_ERR_INVALID_STATE` instead of decoding from a wrong state.
const PANIC_STATE: trie_state = TRIE_STATE_FINISHED - 1;

/// A static NUL-terminated string, never NULL (its fallback is the empty string).
struct StaticStr(*const c_char);

impl PanicFallback for StaticStr {
    fn panic_fallback() -> Self {
        StaticStr(c"".as_ptr())
    }
}

/// The panic boundary of every `extern "C"` function: runs `f`; a panic gives the fallback of `T`.
fn boundary<T: PanicFallback>(f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            report_panic(payload);
            T::panic_fallback()
        }
    }
}

/// [`boundary`] for a function that returns a status: an error becomes its status, its message stored.
fn guard(f: impl FnOnce() -> Result<()>) -> trie_status {
    boundary(|| match f() {
        Ok(()) => TRIE_OK,
        Err(e) => {
            set_last_error(e.message());
            e.kind().into()
        }
    })
}

fn null(what: &str) -> Error {
    Error::new(ErrorKind::NullArgument, format!("{what} is NULL"))
}

/// A slice from a C array; NULL is fine when `len` is 0.
unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::new(ErrorKind::NullArgument, format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(format!("the length {len} of {what} is too large")));
    }
    Ok(std::slice::from_raw_parts(ptr, len))
}

/// Element `i` of an array of byte strings: like [`slice()`], naming `what[i]` only when failing.
unsafe fn element<'a>(ptr: *const u8, len: usize, what: &str, i: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || len > isize::MAX as usize {
        return slice(ptr, len, &format!("{what}[{i}]"));
    }
    Ok(std::slice::from_raw_parts(ptr, len))
}

unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Error::new(ErrorKind::NullArgument, format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(format!("the length {len} of {what} is too large")));
    }
    Ok(std::slice::from_raw_parts_mut(ptr, len))
}

unsafe fn vocab_ref<'a>(vocab: *const trie_vocab) -> Result<&'a Vocabulary> {
    if vocab.is_null() {
        return Err(null("vocab"));
    }
    Ok(&*(vocab as *const Vocabulary))
}

/// A new strong reference to the vocabulary behind a handle.
unsafe fn vocab_arc(vocab: *const trie_vocab) -> Result<Arc<Vocabulary>> {
    if vocab.is_null() {
        return Err(null("vocab"));
    }
    let p = vocab as *const Vocabulary;
    Arc::increment_strong_count(p);
    Ok(Arc::from_raw(p))
}

fn vocab_handle(vocab: Arc<Vocabulary>) -> *mut trie_vocab {
    Arc::into_raw(vocab) as *mut trie_vocab
}

unsafe fn automaton_ref<'a>(automaton: *const trie_automaton) -> Result<&'a Automaton> {
    if automaton.is_null() {
        return Err(null("automaton"));
    }
    Ok(&*(automaton as *const Automaton))
}

/// Sets `*n` to `items.len()` and copies the items (converted by `conv`) into the caller's buffer `buf`; a short
/// buffer is `TRIE_ERR_BUFFER_TOO_SMALL` (`what()` says what is there, the message adds the buffer's size) with
/// nothing written but `*n`. `n` must be checked non-NULL.
unsafe fn copy_out<T: Copy, U>(
    items: &[T],
    buf: &mut [U],
    n: *mut usize,
    conv: impl Fn(T) -> U,
    what: impl FnOnce() -> String,
) -> Result<()> {
    n.write(items.len());
    if buf.len() < items.len() {
        return Err(Error::new(ErrorKind::BufferTooSmall, format!("{}; the buffer holds {}", what(), buf.len())));
    }
    for (dst, &t) in buf.iter_mut().zip(items) {
        *dst = conv(t);
    }
    Ok(())
}

/// Writes `value` through an out pointer checked earlier.
unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        out.write(value);
    }
}

unsafe fn path_str<'a>(path: *const c_char) -> Result<&'a str> {
    if path.is_null() {
        return Err(null("path"));
    }
    CStr::from_ptr(path).to_str().map_err(|_| {
        Error::invalid(format!(
            "the path {} is not UTF-8",
            crate::error::show_bytes(CStr::from_ptr(path).to_bytes(), 200)
        ))
    })
}

fn check_state(automaton: &Automaton, state: trie_state) -> Result<State> {
    if state == TRIE_STATE_FINISHED || (state as usize) < automaton.n_states() {
        Ok(State(state))
    } else {
        Err(Error::new(
            ErrorKind::InvalidState,
            format!("state {state} is not a state of this automaton (it has {} states)", automaton.n_states()),
        ))
    }
}

/// Token ids as `int32_t` (vocabularies have fewer than 2^31 ids, so every id fits).
fn as_i32_ptr(ids: &[TokenId]) -> *const i32 {
    ids.as_ptr() as *const i32
}

// ---------------------------------------------------------------------------------------------------------------
// Messages and version.

/// The message of the last call that failed on this thread (the empty string if none has). Never NULL. The
/// pointer stays valid until the next failing libtrie call on this thread; successful calls leave it alone.
#[no_mangle]
pub extern "C" fn trie_last_error() -> *const c_char {
    boundary(|| StaticStr(message_ptr(&LAST_ERROR))).0
}

/// A short static description of a status, such as `"token rejected"`. Takes any integer, so a value that is not
/// a `trie_status` is safe too (it gives `"unknown status"`). Never NULL; never freed.
#[no_mangle]
pub extern "C" fn trie_status_str(status: c_int) -> *const c_char {
    boundary(|| {
        StaticStr(
            trie_status::ALL.iter().find(|&&s| s as c_int == status).map_or(c"unknown status", |s| s.text()).as_ptr(),
        )
    })
    .0
}

/// The version of the linked library, `"MAJOR.MINOR.PATCH"` (compare with `TRIE_VERSION_STRING` of the header you
/// compiled against). Static; never NULL.
#[no_mangle]
pub extern "C" fn trie_version() -> *const c_char {
    boundary(|| StaticStr(concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char)).0
}

/// The one `"trie"` of this library: the name of the llama.cpp sampler stage of `include/trie_llama.h`. Always the
/// same address (a `static`, never merged with other strings), so its identity, not its text, tells a stage made
/// by the header (in any translation unit, C or C++, of any shared object linked to this library) from a foreign
/// sampler that is also named "trie": `trie_llama_sampler_is_trie` compares the pointer its name callback returns
/// with this one before it reads the sampler's context. Static; never NULL.
#[no_mangle]
pub extern "C" fn trie_sampler_name() -> *const c_char {
    // A `static` has one fixed address (unlike a literal or a `const`, which may be duplicated or merged).
    static TRIE_SAMPLER_NAME: [u8; 5] = *b"trie\0";
    boundary(|| StaticStr(TRIE_SAMPLER_NAME.as_ptr() as *const c_char)).0
}

// ---------------------------------------------------------------------------------------------------------------
// Vocabularies.

unsafe fn vocab_from_arrays(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: Option<usize>,
) -> Result<Vocabulary> {
    if n_tokens > MAX_VOCAB {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("{n_tokens} tokens exceed the limit of {MAX_VOCAB} ids"),
        ));
    }
    let ptrs = slice(token_bytes, n_tokens, "token_bytes")?;
    let lens = slice(token_lens, n_tokens, "token_lens")?;
    let kinds: Vec<TokenKind> = if token_kinds.is_null() {
        vec![TokenKind::Normal; n_tokens]
    } else {
        slice(token_kinds, n_tokens, "token_kinds")?
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                TokenKind::from_u32(k).ok_or_else(|| {
                    Error::invalid(format!("token_kinds[{i}] = {k} is not a token kind (TRIE_TOKEN_*: 0..6)"))
                })
            })
            .collect::<Result<_>>()?
    };
    let mut tokens = Vec::with_capacity(n_tokens);
    for i in 0..n_tokens {
        tokens.push(element(ptrs[i], lens[i], "token_bytes", i)?.to_vec());
    }
    let eog = eog_list(eog_ids, n_eog)?;
    Vocabulary::new(tokens, kinds, &eog, n_vocab)
}

unsafe fn eog_list(eog_ids: *const i32, n_eog: usize) -> Result<Vec<TokenId>> {
    slice(eog_ids, n_eog, "eog_ids")?
        .iter()
        .enumerate()
        .map(|(i, &id)| {
            TokenId::try_from(id)
                .map_err(|_| Error::invalid(format!("eog_ids[{i}] = {id} is negative: token ids are 0..n_vocab")))
        })
        .collect()
}

unsafe fn check_out<T>(out: *mut *mut T) -> Result<()> {
    if out.is_null() {
        return Err(null("out"));
    }
    out.write(std::ptr::null_mut());
    Ok(())
}

/// Builds a vocabulary from the bytes of every token id `0..n_tokens` (`token_bytes[i]`, `token_lens[i]` bytes;
/// NULL is fine for an empty token), their kinds (`TRIE_TOKEN_*`; NULL: all normal) and the end-of-generation ids
/// (`eog_ids`, `n_eog`; NULL with 0 for none). The mask width is `n_tokens`; see [`trie_vocab_new_ex`] for
/// padded vocabularies. The bytes are copied. On success `*out` is a new vocabulary to free with
/// [`trie_vocab_free`]; on failure `*out` is NULL.
///
/// # Safety
/// Every non-NULL pointer must point to as many valid elements as its length says.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_new(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    trie_vocab_new_ex(token_bytes, token_lens, token_kinds, n_tokens, eog_ids, n_eog, 0, out)
}

/// Like [`trie_vocab_new`], with the mask width `n_vocab`: the model's vocabulary size when it is larger than
/// the listed tokens (padding, e.g. 151936 for Qwen2/Qwen3). Ids `n_tokens..n_vocab` are never allowed. 0 means
/// `n_tokens`; smaller than `n_tokens` is `TRIE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// As [`trie_vocab_new`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_vocab_new_ex(
    token_bytes: *const *const u8,
    token_lens: *const usize,
    token_kinds: *const u32,
    n_tokens: usize,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let n_vocab = if n_vocab == 0 { None } else { Some(n_vocab) };
        let v = vocab_from_arrays(token_bytes, token_lens, token_kinds, n_tokens, eog_ids, n_eog, n_vocab)?;
        out.write(vocab_handle(Arc::new(v)));
        Ok(())
    })
}

/// Reads the tokenizer of a GGUF file (a model or a vocab-only file; only the metadata is read). The path must
/// be UTF-8 (else `TRIE_ERR_INVALID_ARGUMENT`). Errors: `TRIE_ERR_IO`, `TRIE_ERR_MALFORMED_FILE`,
/// `TRIE_ERR_UNSUPPORTED_VOCABULARY` (WordPiece). On failure `*out` is NULL.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_gguf(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    guard(|| {
        check_out(out)?;
        let path = path_str(path)?;
        let v = Vocabulary::from_gguf(path)?;
        out.write(vocab_handle(Arc::new(v)));
        Ok(())
    })
}

/// Reads a Hugging Face `tokenizer.json`. The end-of-generation ids are inferred from the added tokens' names
/// (`</s>`, `<|endoftext|>`, `<|im_end|>`, `<|eot_id|>`, ...) and the mask width is the largest id + 1; use
/// [`trie_vocab_from_tokenizer_json_ex`] to give them. A library built without the `hf` feature returns
/// `TRIE_ERR_UNSUPPORTED_VOCABULARY`. On failure `*out` is NULL.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_tokenizer_json(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    trie_vocab_from_tokenizer_json_ex(path, std::ptr::null(), 0, 0, out)
}

/// Like [`trie_vocab_from_tokenizer_json`], with the end-of-generation ids (`eog_ids`, `n_eog`, e.g.
/// `eos_token_id` of `generation_config.json`; `eog_ids` NULL: infer them; non-NULL with `n_eog` 0: none) and
/// the mask width `n_vocab` (the model's padded vocabulary size; 0: the largest id + 1).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `eog_ids` NULL or `n_eog` valid elements.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_from_tokenizer_json_ex(
    path: *const c_char,
    eog_ids: *const i32,
    n_eog: usize,
    n_vocab: usize,
    out: *mut *mut trie_vocab,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let path = path_str(path)?;
        let eog = if eog_ids.is_null() {
            if n_eog != 0 {
                return Err(Error::new(ErrorKind::NullArgument, format!("eog_ids is NULL but n_eog is {n_eog}")));
            }
            None
        } else {
            Some(eog_list(eog_ids, n_eog)?)
        };
        let n_vocab = if n_vocab == 0 { None } else { Some(n_vocab) };
        let v = load_tokenizer_json(path, eog, n_vocab)?;
        out.write(vocab_handle(Arc::new(v)));
        Ok(())
    })
}

#[cfg(feature = "hf")]
fn load_tokenizer_json(path: &str, eog_ids: Option<Vec<TokenId>>, n_vocab: Option<usize>) -> Result<Vocabulary> {
    Vocabulary::from_tokenizer_json(path, &crate::load::hf::HfOptions { eog_ids, n_vocab })
}

#[cfg(not(feature = "hf"))]
fn load_tokenizer_json(path: &str, _eog_ids: Option<Vec<TokenId>>, _n_vocab: Option<usize>) -> Result<Vocabulary> {
    Err(Error::unsupported(format!(
        "cannot read {path}: this libtrie was built without tokenizer.json support (cargo feature `hf`)"
    )))
}

/// Saves `vocab` with its alignment index to `path` (UTF-8; written atomically as [`trie_automaton_save`] does), so that servers can
/// [`trie_vocab_load`] it in milliseconds instead of reading a GGUF or a tokenizer.json again. Errors:
/// `TRIE_ERR_IO`, `TRIE_ERR_INVALID_ARGUMENT` (a path that is not UTF-8 or not a file path).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `path` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_save(vocab: *const trie_vocab, path: *const c_char) -> trie_status {
    guard(|| {
        let v = vocab_ref(vocab)?;
        v.save(path_str(path)?)
    })
}

/// Writes the vocabulary's fingerprint to `out` (16 bytes): a digest of its mask width, token bytes, kinds and
/// end-of-generation ids. Equal fingerprints mean interchangeable vocabularies (a saved automaton loads with
/// either); a good key for caches of compiled sets.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `out` NULL or 16 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_fingerprint(vocab: *const trie_vocab, out: *mut u8) -> trie_status {
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        let v = vocab_ref(vocab)?;
        std::ptr::copy_nonoverlapping(v.fingerprint().to_be_bytes().as_ptr(), out, 16);
        Ok(())
    })
}

/// Loads a vocabulary saved by [`trie_vocab_save`]: the file is memory-mapped (pages shared between processes)
/// and checked, not rebuilt. Errors: `TRIE_ERR_IO`; `TRIE_ERR_MALFORMED_FILE` (truncated, corrupt, another format
/// version or byte order, not a vocabulary file). On failure `*out` is NULL. No file, as it is when loaded, can
/// crash or hang the process; the checksum detects damage, but a file crafted with a valid one can make masks
/// wrong: load files that libtrie wrote into a directory you trust. The file is memory-mapped: it must not change while loaded (truncating it makes the next access to a lost
/// page raise SIGBUS, which kills the process; rewriting it in place can make masks wrong or calls fail with
/// `TRIE_ERR_PANIC`). The save functions never change an existing file: they rename a new one over it, so what
/// was loaded from the old one keeps working. Replace files the same way (write a new file, then `rename`).
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_load(path: *const c_char, out: *mut *mut trie_vocab) -> trie_status {
    guard(|| {
        check_out(out)?;
        let v = Vocabulary::load(path_str(path)?)?;
        out.write(vocab_handle(Arc::new(v)));
        Ok(())
    })
}

/// Adds a reference to `vocab` and returns it (NULL for NULL). Free each reference with [`trie_vocab_free`].
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_retain(vocab: *const trie_vocab) -> *mut trie_vocab {
    boundary(|| match vocab_arc(vocab) {
        Ok(v) => vocab_handle(v),
        Err(_) => std::ptr::null_mut(),
    })
}

/// Drops a reference to `vocab` (NULL: no-op). Automata compiled from it keep it alive.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary reference, freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_free(vocab: *mut trie_vocab) {
    if vocab.is_null() {
        return;
    }
    boundary(|| drop(Arc::from_raw(vocab as *const Vocabulary)));
}

/// The number of token ids, which is the mask width in bits: ids are `0..n`. 0 for NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_n_tokens(vocab: *const trie_vocab) -> usize {
    boundary(|| vocab_ref(vocab).map(|v| v.n_vocab()).unwrap_or(0))
}

/// Heap bytes held by the vocabulary (its token index included). 0 for NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_memory_usage(vocab: *const trie_vocab) -> usize {
    boundary(|| vocab_ref(vocab).map(|v| v.memory_usage()).unwrap_or(0))
}

/// The bytes token `token` stands for, without copying (`*len` may be 0: padding and control tokens may have
/// none). The view lives as long as the vocabulary. `TRIE_ERR_INVALID_ARGUMENT` for an id outside `0..n`. On
/// failure `*bytes` is NULL and `*len` 0.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `bytes` and `len` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_token(
    vocab: *const trie_vocab,
    token: i32,
    bytes: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    guard(|| {
        if bytes.is_null() || len.is_null() {
            return Err(null(if bytes.is_null() { "bytes" } else { "len" }));
        }
        bytes.write(std::ptr::null());
        len.write(0);
        let v = vocab_ref(vocab)?;
        let id = v.check_id(token as i64)?;
        let b = v.token_bytes(id);
        bytes.write(b.as_ptr());
        len.write(b.len());
        Ok(())
    })
}

/// The end-of-generation ids, ascending, without copying (they live as long as the vocabulary). On failure
/// `*ids` is NULL and `*n_ids` 0.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `ids` and `n_ids` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_vocab_eog_ids(
    vocab: *const trie_vocab,
    ids: *mut *const i32,
    n_ids: *mut usize,
) -> trie_status {
    guard(|| {
        if ids.is_null() || n_ids.is_null() {
            return Err(null(if ids.is_null() { "ids" } else { "n_ids" }));
        }
        ids.write(std::ptr::null());
        n_ids.write(0);
        let v = vocab_ref(vocab)?;
        ids.write(as_i32_ptr(v.eog_ids()));
        n_ids.write(v.eog_ids().len());
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Compiling.

/// Compiles the set `strings[i]` (`lens[i]` bytes each; arbitrary bytes; duplicates, prefixes and the empty
/// string allowed; NULL is fine for an empty string) against `vocab`. `options` may be NULL (defaults; else
/// initialised with [`trie_options_init`]). The strings are not kept. On success `*out` is a new automaton
/// (holding its own reference to `vocab`) to free with [`trie_automaton_free`]; on failure `*out` is NULL.
/// Errors: `TRIE_ERR_EMPTY_SET`, `TRIE_ERR_UNREACHABLE_STRING` (the message names the strings), `TRIE_ERR_LIMIT_EXCEEDED` (32-bit limits, `max_states`, `max_bytes`),
/// `TRIE_ERR_INVALID_ARGUMENT` (options without a valid `struct_size`).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `options` NULL or a `trie_options` of `struct_size` bytes;
/// non-NULL arrays must hold `n_strings` elements; each `strings[i]` must hold `lens[i]` bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_compile(
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    n_strings: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = vocab_arc(vocab)?;
        let ptrs = slice(strings, n_strings, "strings")?;
        let lens = slice(lens, n_strings, "lens")?;
        let mut set: Vec<&[u8]> = Vec::with_capacity(n_strings);
        for (i, (&p, &n)) in ptrs.iter().zip(lens).enumerate() {
            set.push(element(p, n, "strings", i)?);
        }
        let opts = trie_options::read(options)?;
        let a = Automaton::compile(vocab, &set, &opts)?;
        out.write(Arc::into_raw(Arc::new(a)) as *mut trie_automaton);
        Ok(())
    })
}

/// Builds a new automaton for the set of `automaton` with the strings `add[i]` (`add_lens[i]` bytes) added and
/// `remove[i]` (`remove_lens[i]` bytes) removed, equal to a full [`trie_compile`] of the resulting set but built
/// from `automaton` (the rows no change touches are copied; fast for vocabularies that spell every byte with a
/// single-byte token, otherwise a full compile). `automaton` is unchanged and stays valid: sequences decoding on
/// it go on. The resulting set is (members - remove) + add: removing a non-member does nothing, a string in both
/// lists stays, duplicates merge; [`trie_automaton_dropped`] of the result lists indices into `add`. `options`
/// may be NULL (defaults) and bounds the new set as in [`trie_compile`]. On success `*out` is a new automaton
/// (holding its own reference to the vocabulary) to free with [`trie_automaton_free`]; on failure `*out` is
/// NULL. Errors: `TRIE_ERR_EMPTY_SET` (nothing remains), `TRIE_ERR_UNREACHABLE_STRING` (an added string; the
/// message names it by its index in `add`), `TRIE_ERR_LIMIT_EXCEEDED`, `TRIE_ERR_INVALID_ARGUMENT`,
/// `TRIE_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `options` NULL or a `trie_options` of `struct_size` bytes;
/// non-NULL arrays must hold `n_add` (`n_remove`) elements; each string must hold its length in bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_with(
    automaton: *const trie_automaton,
    add: *const *const u8,
    add_lens: *const usize,
    n_add: usize,
    remove: *const *const u8,
    remove_lens: *const usize,
    n_remove: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let a = automaton_ref(automaton)?;
        let strings = |ptrs: *const *const u8, lens: *const usize, n: usize, what: &str| -> Result<Vec<&[u8]>> {
            let ptrs = slice(ptrs, n, what)?;
            let lens = slice(lens, n, &format!("{what}_lens"))?;
            ptrs.iter().zip(lens).enumerate().map(|(i, (&p, &len))| element(p, len, what, i)).collect()
        };
        let add = strings(add, add_lens, n_add, "add")?;
        let remove = strings(remove, remove_lens, n_remove, "remove")?;
        let opts = trie_options::read(options)?;
        let b = a.with_changes(&add, &remove, &opts)?;
        out.write(Arc::into_raw(Arc::new(b)) as *mut trie_automaton);
        Ok(())
    })
}

/// Saves `automaton` to `path` (UTF-8; written atomically and durably: a new temporary file with a unique name,
/// flushed to disk, renamed over `path`; an existing file is replaced, never rewritten, so automata loaded from it
/// keep working, and concurrent saves to one path leave one complete file). The file holds
/// the frozen arrays and the fingerprint of the vocabulary: [`trie_automaton_load`] maps it back without
/// compiling. Errors: `TRIE_ERR_IO`, `TRIE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `path` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_save(automaton: *const trie_automaton, path: *const c_char) -> trie_status {
    guard(|| {
        let a = automaton_ref(automaton)?;
        a.save(path_str(path)?)
    })
}

/// Loads an automaton saved by [`trie_automaton_save`] for use with `vocab` (which it keeps alive): the file is
/// memory-mapped (processes loading the same file share its pages) and checked, header, checksum and every
/// array, so a damaged or crafted file is an error, never a crash. Errors: `TRIE_ERR_IO`;
/// `TRIE_ERR_MALFORMED_FILE`; `TRIE_ERR_VOCAB_MISMATCH` when the file was compiled against another vocabulary.
/// On failure `*out` is NULL. The file is memory-mapped: it must not change while loaded (truncating it makes the next access to a lost
/// page raise SIGBUS, which kills the process; rewriting it in place can make masks wrong or calls fail with
/// `TRIE_ERR_PANIC`). The save functions never change an existing file: they rename a new one over it, so what
/// was loaded from the old one keeps working. Replace files the same way (write a new file, then `rename`).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `path` NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_load(
    vocab: *const trie_vocab,
    path: *const c_char,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = vocab_arc(vocab)?;
        let a = Automaton::load(vocab, path_str(path)?)?;
        out.write(Arc::into_raw(Arc::new(a)) as *mut trie_automaton);
        Ok(())
    })
}

/// Compiles token sequences instead of strings: the automaton allows exactly the token paths `sequences[i]`
/// (`lens[i]` ids each; NULL is fine for an empty sequence), each followed by an end-of-generation token. Pass
/// the model tokenizer's own tokenization of every member (e.g. `llama_tokenize` without special tokens) to
/// allow only canonical tokenizations. Every id must be a text token of `vocab` (else
/// `TRIE_ERR_INVALID_ARGUMENT` naming the sequence and position). `options` as for [`trie_compile`]
/// (`max_states`, `max_bytes`; `drop_unreachable` does not apply). On failure `*out` is NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; non-NULL arrays must hold `n_sequences` elements; each
/// `sequences[i]` must hold `lens[i]` ids.
#[no_mangle]
pub unsafe extern "C" fn trie_compile_tokens(
    vocab: *const trie_vocab,
    sequences: *const *const i32,
    lens: *const usize,
    n_sequences: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = vocab_arc(vocab)?;
        let ptrs = slice(sequences, n_sequences, "sequences")?;
        let lens = slice(lens, n_sequences, "lens")?;
        let mut seqs: Vec<Vec<TokenId>> = Vec::with_capacity(n_sequences);
        for (i, (&p, &n)) in ptrs.iter().zip(lens).enumerate() {
            let ids = if n == 0 {
                &[][..]
            } else if p.is_null() {
                return Err(Error::new(
                    ErrorKind::NullArgument,
                    format!("sequences[{i}] is NULL but lens[{i}] is {n}"),
                ));
            } else {
                slice(p, n, "sequences")?
            };
            let ids: Vec<TokenId> = ids
                .iter()
                .enumerate()
                .map(|(j, &t)| {
                    TokenId::try_from(t)
                        .map_err(|_| Error::invalid(format!("token {j} of sequence {i} is negative ({t})")))
                })
                .collect::<Result<_>>()?;
            seqs.push(ids);
        }
        let opts = trie_options::read(options)?;
        let a = Automaton::compile_tokens(vocab, &seqs, &opts)?;
        out.write(Arc::into_raw(Arc::new(a)) as *mut trie_automaton);
        Ok(())
    })
}

/// Adds a reference to `automaton` and returns it (NULL for NULL). Free each reference with
/// [`trie_automaton_free`].
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_retain(automaton: *const trie_automaton) -> *mut trie_automaton {
    if automaton.is_null() {
        return std::ptr::null_mut();
    }
    boundary(|| {
        Arc::increment_strong_count(automaton as *const Automaton);
        automaton as *mut trie_automaton
    })
}

/// Drops a reference to `automaton` (NULL: no-op); the last one frees it (and its reference to the vocabulary).
///
/// # Safety
/// `automaton` must be NULL or a live automaton reference, freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_free(automaton: *mut trie_automaton) {
    if automaton.is_null() {
        return;
    }
    boundary(|| drop(Arc::from_raw(automaton as *const Automaton)));
}

/// A new reference to the vocabulary of `automaton` (NULL for NULL); free it with [`trie_vocab_free`].
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_vocab(automaton: *const trie_automaton) -> *mut trie_vocab {
    boundary(|| match automaton_ref(automaton) {
        Ok(a) => vocab_handle(a.vocab().clone()),
        Err(_) => std::ptr::null_mut(),
    })
}

/// The number of token ids of the automaton's vocabulary (the mask width in bits). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_vocab(automaton: *const trie_automaton) -> usize {
    boundary(|| automaton_ref(automaton).map(|a| a.vocab().n_vocab()).unwrap_or(0))
}

/// The number of 32-bit words of one bitmask row: `(n_vocab + 31) / 32`. 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_mask_words(automaton: *const trie_automaton) -> usize {
    boundary(|| automaton_ref(automaton).map(|a| a.mask_words()).unwrap_or(0))
}

/// The number of states (valid states are `0..n` and `TRIE_STATE_FINISHED`). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_states(automaton: *const trie_automaton) -> usize {
    boundary(|| automaton_ref(automaton).map(|a| a.n_states()).unwrap_or(0))
}

/// The number of distinct strings the automaton can produce (dropped ones excluded). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_n_members(automaton: *const trie_automaton) -> usize {
    boundary(|| automaton_ref(automaton).map(|a| a.n_members()).unwrap_or(0))
}

/// Heap bytes held by the automaton, not counting its shared vocabulary ([`trie_vocab_memory_usage`]). 0 for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_memory_usage(automaton: *const trie_automaton) -> usize {
    boundary(|| automaton_ref(automaton).map(|a| a.memory_usage()).unwrap_or(0))
}

/// The input indices (positions in the `strings` given to [`trie_compile`]) of the strings dropped as
/// unreachable with `drop_unreachable`, ascending, without copying (they live as long as the automaton). On
/// failure `*indices` is NULL and `*n_indices` 0.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `indices` and `n_indices` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_dropped(
    automaton: *const trie_automaton,
    indices: *mut *const usize,
    n_indices: *mut usize,
) -> trie_status {
    guard(|| {
        if indices.is_null() || n_indices.is_null() {
            return Err(null(if indices.is_null() { "indices" } else { "n_indices" }));
        }
        indices.write(std::ptr::null());
        n_indices.write(0);
        let a = automaton_ref(automaton)?;
        indices.write(a.dropped().as_ptr());
        n_indices.write(a.dropped().len());
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding.

/// The start state: 0 for every automaton (also for NULL).
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_start(automaton: *const trie_automaton) -> trie_state {
    boundary(|| automaton_ref(automaton).map(|a| a.start().0).unwrap_or(0))
}

/// Copies the tokens allowed in `state`, ascending, into `tokens` (room for `capacity` ids) and sets `*n_tokens`
/// to their number. In `TRIE_STATE_FINISHED` these are the end-of-generation ids. When `capacity` is short the
/// call returns `TRIE_ERR_BUFFER_TOO_SMALL`, still sets `*n_tokens` to the number needed, and writes nothing into
/// `tokens`: call with `tokens` NULL and `capacity` 0 to learn it. A buffer of [`trie_automaton_n_vocab`] ids is
/// always large enough. On other failures `*n_tokens` is 0.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `tokens` NULL (with `capacity` 0) or `capacity` writable ids;
/// `n_tokens` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_allowed(
    automaton: *const trie_automaton,
    state: trie_state,
    tokens: *mut i32,
    capacity: usize,
    n_tokens: *mut usize,
) -> trie_status {
    guard(|| {
        if n_tokens.is_null() {
            return Err(null("n_tokens"));
        }
        n_tokens.write(0);
        let a = automaton_ref(automaton)?;
        let s = check_state(a, state)?;
        let buf = slice_mut(tokens, capacity, "tokens")?;
        let allowed = a.allowed(s);
        copy_out(&allowed, buf, n_tokens, |t| t as i32, || format!("state {state} allows {} tokens", allowed.len()))
    })
}

/// Writes the bitmask of `state` into `bitmask` (`n_words` words, at least [`trie_automaton_mask_words`]):
/// token `t` is bit `t % 32` of word `t / 32`, 1 = allowed (the XGrammar / LLGuidance layout). Every one of the
/// `n_words` words is written; bits past the vocabulary are 0. Too short: `TRIE_ERR_BUFFER_TOO_SMALL`, nothing
/// written.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `bitmask` NULL or `n_words` writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask(
    automaton: *const trie_automaton,
    state: trie_state,
    bitmask: *mut u32,
    n_words: usize,
) -> trie_status {
    guard(|| {
        let a = automaton_ref(automaton)?;
        let s = check_state(a, state)?;
        // NULL with 0 words is an empty buffer: "too small", like any short buffer.
        let row = slice_mut(bitmask, n_words, "bitmask")?;
        a.fill_bitmask(s, row)
    })
}

/// Fills one bitmask row per state: row `i` is `bitmask[i * row_words .. (i + 1) * row_words]`, `row_words` at
/// least [`trie_automaton_mask_words`], `n_words` (the buffer's length) at least `n_states * row_words`. Rows
/// are filled in parallel for large batches. All states are checked before anything is written; on any error
/// nothing is written. `n_states` 0 is a no-op.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `states` NULL or `n_states` states; `bitmask` NULL or
/// `n_words` writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask_batch(
    automaton: *const trie_automaton,
    states: *const trie_state,
    n_states: usize,
    bitmask: *mut u32,
    n_words: usize,
    row_words: usize,
) -> trie_status {
    guard(|| {
        let a = automaton_ref(automaton)?;
        let states = slice(states as *const State, n_states, "states")?;
        if n_states == 0 {
            return Ok(());
        }
        if bitmask.is_null() {
            return Err(null("bitmask"));
        }
        let out = slice_mut(bitmask, n_words, "bitmask")?;
        for &s in states {
            check_state(a, s.0)?;
        }
        a.fill_bitmask_batch(states, out, row_words)
    })
}

/// Fills one bitmask row per `(automata[i], states[i])` pair: the batch of a serving engine whose sequences follow
/// different sets. Row `i` is `bitmask[i * row_words .. (i + 1) * row_words]`; `row_words` must be at least every
/// automaton's [`trie_automaton_mask_words`] and `n_words` (the buffer's length) at least `n_rows * row_words`. A
/// NULL `automata[i]` marks an unconstrained sequence: its row is all ones. Every pair is checked before anything
/// is written; on any error (the message names the row) nothing is written. `n_rows` 0 is a no-op. Parallel for
/// large batches.
///
/// # Safety
/// `automata` and `states` NULL or `n_rows` elements, each automaton NULL or live; `bitmask` NULL or `n_words`
/// writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_mask_rows(
    automata: *const *const trie_automaton,
    states: *const trie_state,
    n_rows: usize,
    bitmask: *mut u32,
    n_words: usize,
    row_words: usize,
) -> trie_status {
    guard(|| {
        let automata = slice(automata, n_rows, "automata")?;
        let states = slice(states, n_rows, "states")?;
        if n_rows == 0 {
            return Ok(());
        }
        if bitmask.is_null() {
            return Err(null("bitmask"));
        }
        let out = slice_mut(bitmask, n_words, "bitmask")?;
        let rows: Vec<(Option<&Automaton>, State)> = automata
            .iter()
            .zip(states)
            .map(|(&a, &s)| ((!a.is_null()).then(|| &*(a as *const Automaton)), State(s)))
            .collect();
        Automaton::fill_bitmask_rows(&rows, out, row_words)
    })
}

/// The state after `token` in `*next` (`TRIE_STATE_FINISHED` after an end-of-generation token). A token not
/// allowed gives `TRIE_ERR_TOKEN_REJECTED` and leaves `*next` untouched (as every failure does); an id outside
/// `0..n_vocab` gives `TRIE_ERR_INVALID_ARGUMENT`, a bad state `TRIE_ERR_INVALID_STATE`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `next` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_advance(
    automaton: *const trie_automaton,
    state: trie_state,
    token: i32,
    next: *mut trie_state,
) -> trie_status {
    guard(|| {
        if next.is_null() {
            return Err(null("next"));
        }
        let a = automaton_ref(automaton)?;
        let s = check_state(a, state)?;
        let id = a.vocab().check_id(token as i64)?;
        let n = match a.advance(s, id)? {
            Step::Next(n) => n.0,
            Step::Finished => TRIE_STATE_FINISHED,
        };
        next.write(n);
        Ok(())
    })
}

/// Whether a string of the set may end in `state` (end-of-generation tokens are allowed there). True for
/// `TRIE_STATE_FINISHED`; false for NULL or an invalid state.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_is_accepting(automaton: *const trie_automaton, state: trie_state) -> bool {
    boundary(|| automaton_ref(automaton).map(|a| a.is_accepting(State(state))).unwrap_or(false))
}

/// The forced continuation: when exactly one string of the set remains below `state`, `*is_forced` is true,
/// `*n_bytes` is the length of the rest of its bytes and `*n_tokens` that of a token path spelling them (longest
/// tokens first; no end-of-generation token; both 0 when the string is complete). Otherwise (several strings
/// left, or `TRIE_STATE_FINISHED`) `*is_forced` is false and both lengths 0.
///
/// The bytes go to `bytes` (`bytes_cap` bytes) and the tokens to `tokens` (`tokens_cap` ids); either may be NULL
/// with a capacity of 0. When a capacity is short the call returns `TRIE_ERR_BUFFER_TOO_SMALL`, still sets
/// `*is_forced`, `*n_bytes` and `*n_tokens` to the sizes needed, and writes nothing into the buffers: call once
/// with capacities 0 to learn the sizes.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `bytes` / `tokens` NULL or as long as their capacities;
/// `n_bytes`, `n_tokens`, `is_forced` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_forced(
    automaton: *const trie_automaton,
    state: trie_state,
    bytes: *mut u8,
    bytes_cap: usize,
    n_bytes: *mut usize,
    tokens: *mut i32,
    tokens_cap: usize,
    n_tokens: *mut usize,
    is_forced: *mut bool,
) -> trie_status {
    guard(|| {
        for (p, what) in
            [(n_bytes.is_null(), "n_bytes"), (n_tokens.is_null(), "n_tokens"), (is_forced.is_null(), "is_forced")]
        {
            if p {
                return Err(null(what));
            }
        }
        let a = automaton_ref(automaton)?;
        let s = check_state(a, state)?;
        let byte_buf = slice_mut(bytes, bytes_cap, "bytes")?;
        let token_buf = slice_mut(tokens, tokens_cap, "tokens")?;
        let Some(f) = a.forced(s) else {
            put(is_forced, false);
            put(n_bytes, 0);
            put(n_tokens, 0);
            return Ok(());
        };
        put(is_forced, true);
        put(n_bytes, f.bytes.len());
        put(n_tokens, f.tokens.len());
        if byte_buf.len() < f.bytes.len() || token_buf.len() < f.tokens.len() {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!(
                    "the forced continuation needs {} bytes and {} tokens; the buffers hold {} and {}",
                    f.bytes.len(),
                    f.tokens.len(),
                    byte_buf.len(),
                    token_buf.len()
                ),
            ));
        }
        byte_buf[..f.bytes.len()].copy_from_slice(&f.bytes);
        for (dst, &t) in token_buf.iter_mut().zip(&f.tokens) {
            *dst = t as i32;
        }
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

pub mod recognize;
mod sets;
mod template;
