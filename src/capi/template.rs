//! The C ABI of sets inside an output: compiling with a template, member identity, and the hand-over of open
//! segments (see [`crate::template`] and [`crate::Automaton::compile_template`]).

use super::*;
use crate::template::{End, Render, Template};

/// [`trie_template::render`]: the member's bytes as they are.
pub const TRIE_RENDER_RAW: u32 = 0;
/// [`trie_template::render`]: the member (UTF-8) as a JSON string literal, escaped like
/// `json.dumps(s, ensure_ascii=False)`: `"` `\` with a backslash, `\b \t \n \f \r`, other characters below
/// U+0020 as `\u00xx`, everything else as itself.
pub const TRIE_RENDER_JSON_STRING: u32 = 1;
/// [`trie_template::render`]: the member is the JSON text of one value (`42`, `true`, `"a"`...), written as given.
pub const TRIE_RENDER_JSON_TEXT: u32 = 2;
/// [`trie_template::end`]: end-of-generation tokens are allowed where a segment is complete.
pub const TRIE_END_EOG: u32 = 0;
/// [`trie_template::end`]: a complete segment is handed over to what follows (no end-of-generation, nothing of the
/// set allowed there); tokens that finish a segment and go on past it are listed by [`trie_crossing`].
pub const TRIE_END_OPEN: u32 = 1;

/// A literal prefix and suffix around every member, a rendering and an end: the automaton's language is
/// exactly `{ prefix + render(m) + suffix }` (each string a *segment*). Initialise with [`trie_template_init`]
/// (the bare set), then set fields. The bytes are copied by [`trie_compile_template`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_template {
    /// `sizeof(trie_template)` of the caller's header (set by [`trie_template_init`]). Versioned like
    /// [`trie_options`]: a larger size (a newer header) works when the fields this libtrie does not know are zero;
    /// fields are only ever appended.
    pub struct_size: usize,
    /// Bytes before every member (NULL with 0 for none).
    pub prefix: *const u8,
    /// Length of `prefix`.
    pub prefix_len: usize,
    /// Bytes after every member (NULL with 0 for none).
    pub suffix: *const u8,
    /// Length of `suffix`.
    pub suffix_len: usize,
    /// `TRIE_RENDER_*`.
    pub render: u32,
    /// `TRIE_END_*`.
    pub end: u32,
}

/// Sets `*template` to the bare set (no prefix, no suffix, raw, end-of-generation) and its `struct_size`.
///
/// # Safety
/// `template` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_template_init(template: *mut trie_template) -> trie_status {
    guard(|| {
        if template.is_null() {
            return Err(null("template"));
        }
        template.write(trie_template::default_fields());
        Ok(())
    })
}

impl trie_template {
    /// The bare set, with this header's `struct_size`.
    fn default_fields() -> trie_template {
        trie_template {
            struct_size: std::mem::size_of::<trie_template>(),
            prefix: std::ptr::null(),
            prefix_len: 0,
            suffix: std::ptr::null(),
            suffix_len: 0,
            render: TRIE_RENDER_RAW,
            end: TRIE_END_EOG,
        }
    }
}

pub(super) unsafe fn read_template(t: *const trie_template) -> Result<Template> {
    if t.is_null() {
        return Err(null("template"));
    }
    // Versioned (boundary::Versioned): every field up to `end` was in the first header; later fields default.
    let v = boundary::Versioned::read(t, "template", "trie_template_init", std::mem::size_of::<trie_template>())?;
    let d = trie_template::default_fields();
    let t = trie_template {
        struct_size: std::mem::size_of::<trie_template>(),
        prefix: v.ptr(std::mem::offset_of!(trie_template, prefix)).unwrap_or(d.prefix),
        prefix_len: v.usize(std::mem::offset_of!(trie_template, prefix_len)).unwrap_or(d.prefix_len),
        suffix: v.ptr(std::mem::offset_of!(trie_template, suffix)).unwrap_or(d.suffix),
        suffix_len: v.usize(std::mem::offset_of!(trie_template, suffix_len)).unwrap_or(d.suffix_len),
        render: v.u32(std::mem::offset_of!(trie_template, render)).unwrap_or(d.render),
        end: v.u32(std::mem::offset_of!(trie_template, end)).unwrap_or(d.end),
    };
    let render = match t.render {
        TRIE_RENDER_RAW => Render::Raw,
        TRIE_RENDER_JSON_STRING => Render::JsonString,
        TRIE_RENDER_JSON_TEXT => Render::JsonText,
        x => return Err(Error::invalid(format!("template.render is {x}: use a TRIE_RENDER_* value (0, 1 or 2)"))),
    };
    let end = match t.end {
        TRIE_END_EOG => End::Eog,
        TRIE_END_OPEN => End::Open,
        x => return Err(Error::invalid(format!("template.end is {x}: use TRIE_END_EOG (0) or TRIE_END_OPEN (1)"))),
    };
    Ok(Template {
        prefix: slice(t.prefix, t.prefix_len, "template.prefix")?.to_vec(),
        suffix: slice(t.suffix, t.suffix_len, "template.suffix")?.to_vec(),
        render,
        end,
    })
}

/// Compiles the members `strings[i]` (`lens[i]` bytes) inside `template`: like [`trie_compile`], but the
/// language is `{ prefix + render(m) + suffix }` followed by end-of-generation (`TRIE_END_EOG`) or handed over
/// (`TRIE_END_OPEN`). Members are identified by their index `i` (the first copy of a duplicate): see
/// [`trie_member`]. Errors: those of [`trie_compile`]; `TRIE_ERR_INVALID_ARGUMENT` for a member the rendering
/// refuses (the message names its index), a bad template, or with `TRIE_END_OPEN` a segment that is a prefix of
/// another.
///
/// # Safety
/// As [`trie_compile`]; `template` NULL or an initialised `trie_template` whose pointers hold their lengths.
#[no_mangle]
pub unsafe extern "C" fn trie_compile_template(
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    n_strings: usize,
    template: *const trie_template,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let set = byte_strings(strings, lens, n_strings, "strings", "lens")?;
        let t = read_template(template)?;
        let opts = trie_options::read(options)?;
        let a = Automaton::compile_template(vocab, &set, &t, &opts)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Whether `automaton` hands segments over at their end (`TRIE_END_OPEN`). False for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_is_open(automaton: *const trie_automaton) -> bool {
    boundary(|| try_ref(automaton).map(|a| a.is_open()).unwrap_or(false))
}

/// Sets `*member` to the member whose segment is complete in `state` (where [`trie_is_accepting`] holds): its
/// index in the input of [`trie_compile_template`], its rank in byte order for automata of [`trie_compile`].
/// Elsewhere (and in `TRIE_STATE_FINISHED`) `*member` is `SIZE_MAX`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `member` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_member(
    automaton: *const trie_automaton,
    state: trie_state,
    member: *mut usize,
) -> trie_status {
    guard(|| {
        if member.is_null() {
            return Err(null("member"));
        }
        member.write(usize::MAX);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        member.write(a.member_at(s).unwrap_or(usize::MAX));
        Ok(())
    })
}

/// Copies the members still possible in `state` (their segments begin with the text so far; ids as in
/// [`trie_member`], in byte order of their segments) into `members` (room for `capacity`) and sets `*n_members`
/// to their number. Short: `TRIE_ERR_BUFFER_TOO_SMALL`, `*n_members` still set, nothing written (call with NULL
/// and 0 to count).
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `members` NULL (with 0) or `capacity` writable; `n_members`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_possible_members(
    automaton: *const trie_automaton,
    state: trie_state,
    members: *mut usize,
    capacity: usize,
    n_members: *mut usize,
) -> trie_status {
    guard(|| {
        if n_members.is_null() {
            return Err(null("n_members"));
        }
        n_members.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let buf = slice_mut(members, capacity, "members")?;
        let ids = a.possible_members(s);
        copy_out(&ids, buf, n_members, |m| m, || format!("{} members are possible in state {state}", ids.len()))
    })
}

/// Decides, for [`trie_crossing`], whether the constraint that follows a segment can begin with `overflow`
/// (`len` bytes, the start of a crossing token's bytes past the segment of `member`): true keeps the tokens
/// whose overflow begins so, false skips all of them.
pub type trie_overflow_fn =
    Option<unsafe extern "C" fn(user: *mut std::ffi::c_void, member: usize, overflow: *const u8, len: usize) -> bool>;

/// The hand-over of an open automaton: the tokens that finish a segment below `state` and go on past its end.
/// They are not in `state`'s mask. Offer such a token when the constraint that follows accepts its last
/// `overflow[i]` bytes (XGrammar's `accept_string`, a llama.cpp grammar); once sampled, the segment of
/// `members[i]` is complete and the following constraint continues from those bytes ([`trie_cross`] tells the
/// same for one token). With `keep` non-NULL, only tokens whose every overflow prefix `keep` accepts are listed
/// (a JSON object that must begin with `{` costs a few calls); with NULL, all of them: one byte before a
/// segment's end that is every token beginning with that byte, tens of thousands on byte-level vocabularies.
/// Entries are ascending by token; `*n` is set to their number. Short buffers: `TRIE_ERR_BUFFER_TOO_SMALL`, `*n`
/// still set, nothing written. Not open: no entries.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `tokens`, `overflow`, `members` NULL (with 0) or `capacity`
/// writable; `n` NULL or writable; `keep` NULL or a function safe to call with `user`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_crossing(
    automaton: *const trie_automaton,
    state: trie_state,
    keep: trie_overflow_fn,
    user: *mut std::ffi::c_void,
    tokens: *mut i32,
    overflow: *mut u32,
    members: *mut usize,
    capacity: usize,
    n: *mut usize,
) -> trie_status {
    guard(|| {
        if n.is_null() {
            return Err(null("n"));
        }
        n.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let (tb, ob, mb) = (
            slice_mut(tokens, capacity, "tokens")?,
            slice_mut(overflow, capacity, "overflow")?,
            slice_mut(members, capacity, "members")?,
        );
        let found = match keep {
            Some(f) => a.crossing_where(s, |m, o| f(user, m, o.as_ptr(), o.len())),
            None => a.crossing(s),
        };
        n.write(found.len());
        if capacity < found.len() {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("{} tokens cross a segment's end in state {state}; the buffers hold {capacity}", found.len()),
            ));
        }
        for (i, c) in found.iter().enumerate() {
            tb[i] = c.token as i32;
            ob[i] = c.overflow as u32;
            mb[i] = c.member;
        }
        Ok(())
    })
}

/// The hand-over by one token (an entry of [`trie_crossing`]): sets `*member` and `*overflow` (the number of the
/// token's last bytes past the segment). `TRIE_ERR_TOKEN_REJECTED` when the token does not finish a segment and
/// go on past it in `state` (or the automaton is not open); `*member` is then `SIZE_MAX`.
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `member`, `overflow` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_cross(
    automaton: *const trie_automaton,
    state: trie_state,
    token: i32,
    member: *mut usize,
    overflow: *mut usize,
) -> trie_status {
    guard(|| {
        if member.is_null() || overflow.is_null() {
            return Err(null(if member.is_null() { "member" } else { "overflow" }));
        }
        member.write(usize::MAX);
        overflow.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let token = TokenId::try_from(token).map_err(|_| Error::invalid(format!("token id {token} is negative")))?;
        let c = a.cross(s, token)?;
        member.write(c.member);
        overflow.write(c.overflow);
        Ok(())
    })
}
