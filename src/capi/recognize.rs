//! The C ABI of the recognizers ([`crate::sets::recognize`]): a request shape in, a set (members, template,
//! payloads) or "not a set" out.
//!
//! ```c
//! trie_recognize_limits limits;
//! trie_recognize_limits_init(&limits);                      /* the defaults; then the operator's bounds */
//! limits.max_members = max_inline_strings;
//! limits.max_member_bytes = max_inline_bytes;
//! trie_recognized *r;
//! if (trie_recognize_with(TRIE_RECOGNIZE_GRAMMAR, text, len, &limits, &r) != TRIE_OK) {
//!     /* malformed or a limit (TRIE_ERR_LIMIT_EXCEEDED: HTTP 400): trie_last_error() */
//! }
//! else if (!r) { /* not a set: trie_recognize_reason(); keep the engine's own backend */ }
//! else {
//!     const uint8_t *const *members; const size_t *lens;
//!     trie_recognized_members(r, &members, &lens);          /* ready for trie_compile */
//!     trie_compile(vocab, members, lens, trie_recognized_n_members(r), NULL, &a);
//!     trie_recognized_free(r);
//! }
//! ```

use super::handle::{box_to_ptr, free_box, try_ref, Castable, OwnershipBox};
use super::template::{TRIE_END_EOG, TRIE_END_OPEN, TRIE_RENDER_JSON_STRING, TRIE_RENDER_JSON_TEXT, TRIE_RENDER_RAW};
use super::{boundary, guard, null, out_view, slice, trie_status};
use crate::error::{Error, Result};
use crate::sets::recognize::{json_check_depth, recognize_with, Limits, Recognition, Recognized, Shape};
use crate::{End, Render};
use std::cell::RefCell;
use std::ffi::{c_char, CString};

/// `kind` of [`trie_recognize`]: a JSON array of strings (vLLM `choice`), written as they are.
pub const TRIE_RECOGNIZE_CHOICES: u32 = 0;
/// `kind` of [`trie_recognize`]: a JSON schema (`enum`, `const`, `anyOf`/`oneOf` of those).
pub const TRIE_RECOGNIZE_JSON_SCHEMA: u32 = 1;
/// `kind` of [`trie_recognize`]: an EBNF/GBNF grammar whose `root` is an alternation of string literals.
pub const TRIE_RECOGNIZE_GRAMMAR: u32 = 2;
/// `kind` of [`trie_recognize`]: a regex that is an alternation of escaped literals.
pub const TRIE_RECOGNIZE_REGEX: u32 = 3;
/// `kind` of [`trie_recognize`]: an OpenAI-style `tools` list (names as the set, `parameters` as payloads).
pub const TRIE_RECOGNIZE_TOOLS: u32 = 4;
/// `kind` of [`trie_recognize`]: the JSON schema vLLM writes for `tool_choice="required"`, in exactly that form
/// (members: the tool names; payloads: each tool's parameters schema; template: `[{"name": ` NAME
/// `, "parameters": `, open).
pub const TRIE_RECOGNIZE_VLLM_TOOLS: u32 = 5;
/// `kind` of [`trie_recognize`]: a grammar as XGrammar's EBNF reads it (vLLM `grammar`, SGLang `ebnf`): like
/// `TRIE_RECOGNIZE_GRAMMAR` (llama.cpp's GBNF), but llama.cpp's `space ::= | " " | ...` rules, which XGrammar
/// refuses, are not a set.
pub const TRIE_RECOGNIZE_XGRAMMAR_GRAMMAR: u32 = 6;

/// A flag of [`trie_recognize_limits`]`.flags`: a bound hit is "not a set" (`TRIE_OK`, a NULL set, the reason
/// from [`trie_recognize_reason`] naming the bound) instead of `TRIE_ERR_LIMIT_EXCEEDED`. For routing a request
/// the engine would serve itself (its grammar, schema, regex, choice or tool list): over the operator's bounds it
/// keeps the engine's path and is never refused for its size. Sets named through libtrie's own fields keep the
/// error.
pub const TRIE_RECOGNIZE_OVER_BOUNDS_NOT_A_SET: u64 = 1;

/// Bounds of one recognition ([`trie_recognize_with`]). Initialise with [`trie_recognize_limits_init`], then
/// set fields; a limit hit is `TRIE_ERR_LIMIT_EXCEEDED` with a message naming the limit.
///
/// Versioned like [`super::trie_options`]: libtrie reads only the first `struct_size` bytes (fields past a
/// smaller, older struct keep their defaults), and a larger, newer struct's extra bytes must be zero.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_recognize_limits {
    /// `sizeof(trie_recognize_limits)` of the caller's header (set by [`trie_recognize_limits_init`]). Below
    /// `sizeof(size_t)` or over 4096 bytes: `TRIE_ERR_INVALID_ARGUMENT`.
    pub struct_size: usize,
    /// The request text's size, checked before anything parses it (default 8 MiB). 0: the default.
    pub max_text_bytes: u64,
    /// The set's members, counted as the expansion goes, before they are built (default 10,000). 0: the
    /// default.
    pub max_members: u64,
    /// All members' bytes + 1 per member (the inline-bytes rule), charged before a member is built (default
    /// 1 MiB). 0: the default.
    pub max_member_bytes: u64,
    /// JSON nesting (checked on the raw text) and grammar nesting, checked before recursion (default 64). 0:
    /// the default.
    pub max_depth: u32,
    /// `TRIE_RECOGNIZE_*` flags (default 0): `TRIE_RECOGNIZE_OVER_BOUNDS_NOT_A_SET`. Other bits:
    /// `TRIE_ERR_INVALID_ARGUMENT`. (64 bits: a caller built with an older header, whose struct ends at
    /// `max_depth`, never has its padding read as flags.)
    pub flags: u64,
}

impl Default for trie_recognize_limits {
    fn default() -> Self {
        let d = Limits::default();
        trie_recognize_limits {
            struct_size: std::mem::size_of::<trie_recognize_limits>(),
            max_text_bytes: d.max_text_bytes as u64,
            max_members: d.max_members as u64,
            max_member_bytes: d.max_member_bytes as u64,
            max_depth: d.max_depth as u32,
            flags: 0,
        }
    }
}

impl trie_recognize_limits {
    /// Reads limits a caller laid out with its own `struct_size` (NULL: the defaults; the rule of
    /// `boundary::Versioned`).
    unsafe fn read(limits: *const trie_recognize_limits) -> Result<Limits> {
        let mut out = Limits::default();
        if limits.is_null() {
            return Ok(out);
        }
        let v =
            boundary::Versioned::read(limits, "limits", "trie_recognize_limits_init", std::mem::size_of::<usize>())?;
        let u64_at = |offset: usize| v.u64(offset);
        let u32_at = |offset: usize| v.u32(offset);
        let set = |slot: &mut usize, v: Option<u64>| {
            if let Some(v) = v.filter(|&v| v != 0) {
                *slot = usize::try_from(v).unwrap_or(usize::MAX);
            }
        };
        set(&mut out.max_text_bytes, u64_at(std::mem::offset_of!(trie_recognize_limits, max_text_bytes)));
        set(&mut out.max_members, u64_at(std::mem::offset_of!(trie_recognize_limits, max_members)));
        set(&mut out.max_member_bytes, u64_at(std::mem::offset_of!(trie_recognize_limits, max_member_bytes)));
        set(&mut out.max_depth, u32_at(std::mem::offset_of!(trie_recognize_limits, max_depth)).map(u64::from));
        let flags = u64_at(std::mem::offset_of!(trie_recognize_limits, flags)).unwrap_or(0);
        if flags & !TRIE_RECOGNIZE_OVER_BOUNDS_NOT_A_SET != 0 {
            return Err(Error::invalid(format!("limits.flags: unknown bits {flags:#x}")));
        }
        out.over_bounds_not_a_set = flags & TRIE_RECOGNIZE_OVER_BOUNDS_NOT_A_SET != 0;
        Ok(out)
    }
}

/// Sets `*limits` to the defaults (text 8 MiB, 10,000 members, member bytes 1 MiB, depth 64) and `struct_size`
/// to `sizeof(trie_recognize_limits)`. `TRIE_ERR_NULL_ARGUMENT` for NULL.
///
/// # Safety
/// `limits` must be NULL or point to a writable `trie_recognize_limits`.
#[no_mangle]
pub unsafe extern "C" fn trie_recognize_limits_init(limits: *mut trie_recognize_limits) -> trie_status {
    guard(|| {
        if limits.is_null() {
            return Err(null("limits"));
        }
        limits.write(trie_recognize_limits::default());
        Ok(())
    })
}

/// A request shape recognized as a finite set: members (distinct, in the request's order), a template
/// (prefix, suffix, rendering, end), optional per-member payloads (JSON text) and the trailing-whitespace flag.
/// Opaque and immutable; free with [`trie_recognized_free`]. Views into it stay valid while it lives.
pub struct trie_recognized {
    _private: [u8; 0],
}

pub(super) struct Handle {
    set: Recognized,
    ptrs: Vec<*const u8>,
    lens: Vec<usize>,
}

thread_local! {
    static REASON: RefCell<CString> = RefCell::new(CString::default());
}

fn set_reason(reason: &str) {
    super::store_message(&REASON, reason);
}

impl Castable for trie_recognized {
    type Ownership = OwnershipBox;
    type RustType = Handle;
    const WHAT: &'static str = "recognized";
}

/// [`trie_recognize_with`] with the default limits (`limits` NULL).
///
/// # Safety
/// As [`trie_recognize_with`].
#[no_mangle]
pub unsafe extern "C" fn trie_recognize(
    kind: u32,
    text: *const u8,
    len: usize,
    out: *mut *mut trie_recognized,
) -> trie_status {
    trie_recognize_with(kind, text, len, std::ptr::null(), out)
}

/// Reads `text` (`len` bytes, UTF-8) as the request shape `kind` (`TRIE_RECOGNIZE_*`) within `limits` (NULL:
/// the defaults of [`trie_recognize_limits_init`]). On `TRIE_OK`, `*out` is a new set to free with
/// [`trie_recognized_free`], or NULL when the request is not a set: the reason is then
/// [`trie_recognize_reason`] and the engine should keep its own backend. Malformed input (not UTF-8, not JSON,
/// an empty enum, a duplicate choice or tool, a grammar that does not parse, a tool without a name) is
/// `TRIE_ERR_INVALID_ARGUMENT` (`TRIE_ERR_EMPTY_SET` for an empty list), a limit `TRIE_ERR_LIMIT_EXCEEDED`
/// (the message names it), with the message in `trie_last_error()`; `*out` is NULL then.
///
/// # Safety
/// `text` must point to `len` readable bytes (NULL is fine with 0); `limits` NULL or a `trie_recognize_limits`
/// of `struct_size` bytes; `out` must be writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognize_with(
    kind: u32,
    text: *const u8,
    len: usize,
    limits: *const trie_recognize_limits,
    out: *mut *mut trie_recognized,
) -> trie_status {
    set_reason("");
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        out.write(std::ptr::null_mut());
        let n = Shape::ALL.len() - 1;
        let shape = *Shape::ALL
            .get(kind as usize)
            .ok_or_else(|| Error::invalid(format!("kind {kind} is not a request shape (TRIE_RECOGNIZE_*: 0..={n})")))?;
        let limits = trie_recognize_limits::read(limits)?;
        let text = slice(text, len, "text")?;
        match recognize_with(shape, text, &limits)? {
            Recognition::NotASet(reason) => set_reason(&reason),
            Recognition::Set(set) => {
                let ptrs = set.members.iter().map(|m| m.as_ptr()).collect();
                let lens = set.members.iter().map(Vec::len).collect();
                out.write(box_to_ptr(Handle { set, ptrs, lens }));
            }
        }
        Ok(())
    })
}

/// Checks that the JSON text `text` (`len` bytes) nests arrays and objects at most `max_depth` deep, by a byte
/// scan that skips strings, before any parser touches it: `TRIE_OK`, or `TRIE_ERR_LIMIT_EXCEEDED` with a
/// message naming the depth. Only nesting is checked (malformed JSON passes; its parser refuses it).
///
/// # Safety
/// `text` must point to `len` readable bytes (NULL is fine with 0).
#[no_mangle]
pub unsafe extern "C" fn trie_json_check_depth(text: *const u8, len: usize, max_depth: u32) -> trie_status {
    guard(|| json_check_depth(slice(text, len, "text")?, max_depth as usize))
}

/// Why the last [`trie_recognize`] call on this thread found no set (the empty string after a call that found
/// one or failed). Never NULL; valid until the next `trie_recognize` call on this thread.
#[no_mangle]
pub extern "C" fn trie_recognize_reason() -> *const c_char {
    boundary(|| super::message_ptr(&REASON))
}

/// Frees a set from [`trie_recognize`] (NULL is a no-op).
///
/// # Safety
/// `r` must be NULL or a set from `trie_recognize` not freed before.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_free(r: *mut trie_recognized) {
    boundary(|| {
        free_box(r);
    })
}

/// The number of members (0 for NULL).
///
/// # Safety
/// `r` must be NULL or a live set.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_n_members(r: *const trie_recognized) -> usize {
    boundary(|| try_ref(r).map_or(0, |h| h.set.members.len()))
}

/// All members as the arrays [`super::trie_compile`] takes: `*strings` (n pointers) and `*lens` (n lengths),
/// views into `r`.
///
/// # Safety
/// `r` must be NULL or a live set; `strings` and `lens` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_members(
    r: *const trie_recognized,
    strings: *mut *const *const u8,
    lens: *mut *const usize,
) -> trie_status {
    guard(|| {
        if strings.is_null() || lens.is_null() {
            return Err(null(if strings.is_null() { "strings" } else { "lens" }));
        }
        strings.write(std::ptr::null());
        lens.write(std::ptr::null());
        let h = try_ref(r)?;
        strings.write(h.ptrs.as_ptr());
        lens.write(h.lens.as_ptr());
        Ok(())
    })
}

/// Writes a byte view through [`out_view`] (the out pointers named `bytes` and `len`) inside the panic boundary.
unsafe fn view(
    bytes: *mut *const u8,
    len: *mut usize,
    data: impl FnOnce() -> Result<(*const u8, usize)>,
) -> trie_status {
    guard(|| out_view(bytes, len, ("bytes", "len"), data))
}

fn index_error(i: usize, n: usize, what: &str) -> Error {
    Error::invalid(format!("{what} index {i} is out of range (the set has {n} members)"))
}

/// Member `i`: `*bytes` (a view into `r`, not NUL-terminated) and `*len`.
///
/// # Safety
/// `r` must be NULL or a live set; `bytes` and `len` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_member(
    r: *const trie_recognized,
    i: usize,
    bytes: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    view(bytes, len, || {
        let h = try_ref(r)?;
        let m = h.set.members.get(i).ok_or_else(|| index_error(i, h.set.members.len(), "member"))?;
        Ok((m.as_ptr(), m.len()))
    })
}

/// The template's prefix (bytes before every member; may be empty).
///
/// # Safety
/// `r` must be NULL or a live set; `bytes` and `len` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_prefix(
    r: *const trie_recognized,
    bytes: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    view(bytes, len, || try_ref(r).map(|h| (h.set.template.prefix.as_ptr(), h.set.template.prefix.len())))
}

/// The template's suffix (bytes after every member; may be empty).
///
/// # Safety
/// `r` must be NULL or a live set; `bytes` and `len` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_suffix(
    r: *const trie_recognized,
    bytes: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    view(bytes, len, || try_ref(r).map(|h| (h.set.template.suffix.as_ptr(), h.set.template.suffix.len())))
}

/// How members are written: `TRIE_RENDER_*` (RAW for NULL).
///
/// # Safety
/// `r` must be NULL or a live set.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_render(r: *const trie_recognized) -> u32 {
    boundary(|| {
        try_ref(r).map_or(TRIE_RENDER_RAW, |h| match h.set.template.render {
            Render::Raw => TRIE_RENDER_RAW,
            Render::JsonString => TRIE_RENDER_JSON_STRING,
            Render::JsonText => TRIE_RENDER_JSON_TEXT,
        })
    })
}

/// What follows a segment: `TRIE_END_*` (EOG for NULL).
///
/// # Safety
/// `r` must be NULL or a live set.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_end(r: *const trie_recognized) -> u32 {
    boundary(|| {
        try_ref(r).map_or(TRIE_END_EOG, |h| match h.set.template.end {
            End::Eog => TRIE_END_EOG,
            End::Open => TRIE_END_OPEN,
        })
    })
}

/// Whether the request also allows optional whitespace after each segment (llama.cpp's `space` rule), which
/// the set does not emit (false for NULL).
///
/// # Safety
/// `r` must be NULL or a live set.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_trailing_whitespace(r: *const trie_recognized) -> bool {
    boundary(|| try_ref(r).is_ok_and(|h| h.set.trailing_whitespace))
}

/// Whether the members carry payloads (a `tools` list: each tool's `parameters`); false for NULL.
///
/// # Safety
/// `r` must be NULL or a live set.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_has_payloads(r: *const trie_recognized) -> bool {
    boundary(|| try_ref(r).is_ok_and(|h| h.set.payloads.is_some()))
}

/// The payload of member `i` (JSON text, a view into `r`, not NUL-terminated). A set without payloads gives
/// `TRIE_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `r` must be NULL or a live set; `json` and `len` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_recognized_payload(
    r: *const trie_recognized,
    i: usize,
    json: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    view(json, len, || {
        let h = try_ref(r)?;
        let p = h.set.payloads.as_ref().ok_or_else(|| Error::invalid("this set has no payloads"))?;
        let s = p.get(i).ok_or_else(|| index_error(i, p.len(), "payload"))?;
        Ok((s.as_ptr(), s.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn kinds_match_the_shapes() {
        let kinds = [
            (TRIE_RECOGNIZE_CHOICES, Shape::Choices),
            (TRIE_RECOGNIZE_JSON_SCHEMA, Shape::JsonSchema),
            (TRIE_RECOGNIZE_GRAMMAR, Shape::Grammar),
            (TRIE_RECOGNIZE_REGEX, Shape::Regex),
            (TRIE_RECOGNIZE_TOOLS, Shape::Tools),
            (TRIE_RECOGNIZE_VLLM_TOOLS, Shape::VllmTools),
            (TRIE_RECOGNIZE_XGRAMMAR_GRAMMAR, Shape::XgrammarGrammar),
        ];
        assert_eq!(Shape::ALL.len(), kinds.len());
        for (k, s) in kinds {
            assert_eq!(Shape::ALL[k as usize], s);
        }
    }

    #[test]
    fn set_not_a_set_and_errors() {
        unsafe {
            let mut r = std::ptr::NonNull::<trie_recognized>::dangling().as_ptr();
            let g = b"root ::= \"a\" | \"b\"*";
            assert_eq!(trie_recognize(TRIE_RECOGNIZE_GRAMMAR, g.as_ptr(), g.len(), &mut r), trie_status::TRIE_OK);
            assert!(r.is_null());
            assert!(CStr::from_ptr(trie_recognize_reason()).to_str().unwrap().contains("repetition"));
            let t = br#"[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]"#;
            assert_eq!(trie_recognize(TRIE_RECOGNIZE_TOOLS, t.as_ptr(), t.len(), &mut r), trie_status::TRIE_OK);
            assert!(!r.is_null());
            assert_eq!(CStr::from_ptr(trie_recognize_reason()).to_bytes(), b"");
            let (mut p, mut n) = (std::ptr::null(), 0);
            assert_eq!(trie_recognized_payload(r, 0, &mut p, &mut n), trie_status::TRIE_OK);
            assert_eq!(std::slice::from_raw_parts(p, n), br#"{"type": "object"}"#);
            assert_eq!(trie_recognized_payload(r, 1, &mut p, &mut n), trie_status::TRIE_ERR_INVALID_ARGUMENT);
            assert!(p.is_null() && n == 0);
            assert_eq!(trie_recognized_end(r), TRIE_END_OPEN);
            trie_recognized_free(r);
            assert_eq!(trie_recognize(9, t.as_ptr(), t.len(), &mut r), trie_status::TRIE_ERR_INVALID_ARGUMENT);
            assert_eq!(trie_recognize(0, std::ptr::null(), 3, &mut r), trie_status::TRIE_ERR_NULL_ARGUMENT);
            assert_eq!(
                trie_recognize(0, t.as_ptr(), t.len(), std::ptr::null_mut()),
                trie_status::TRIE_ERR_NULL_ARGUMENT
            );
            assert_eq!(trie_recognized_n_members(std::ptr::null()), 0);
            trie_recognized_free(std::ptr::null_mut());
        }
    }
}
