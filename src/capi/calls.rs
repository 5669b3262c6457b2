//! Tool calls (`trie_calls_*`): one engine for a whole tool-calling answer (free content, the marker, the name from
//! a trie, the hand-over to that tool's argument matcher, the close, further calls, the end), the argument matcher
//! supplied by the caller through a table of callbacks (see [`crate::calls`]).

use super::handle::{arc_to_ptr, box_to_ptr, free_arc, free_box, try_clone_arc, try_mut, try_ref, Castable};
use super::handle::{OwnershipArc, OwnershipBox};
use super::{
    boundary, check_out, guard, null, put, slice, slice_mut, trie_automaton, trie_options, trie_status, trie_vocab,
};
use crate::calls::{ArgFactory, ArgMatcher, CallsConfig, CallsMatcher, Format, Mode, Names, ToolCalls, FORMAT_NAMES};
use crate::error::{Error, ErrorKind, Result};
use crate::template::Render;
use crate::vocab::TokenId;
use std::ffi::{c_char, c_void, CStr};
use std::mem::offset_of;
use std::sync::{Arc, OnceLock};

/// The engine of one tool list (names, format, mode, stops): immutable, shared by the sequences of any number of
/// requests and threads. Reference counted: [`trie_calls_retain`], [`trie_calls_free`].
pub struct trie_calls {
    _private: [u8; 0],
}

/// One sequence of a [`trie_calls`] engine (its positions and argument matchers). Owned, freed once with
/// [`trie_calls_matcher_free`]; one thread at a time.
pub struct trie_calls_matcher {
    _private: [u8; 0],
}

impl Castable for trie_calls {
    type Ownership = OwnershipArc;
    type RustType = ToolCalls;
    const WHAT: &'static str = "calls";
}

impl Castable for trie_calls_matcher {
    type Ownership = OwnershipBox;
    type RustType = CallsMatcher;
    const WHAT: &'static str = "matcher";
}

/// [`trie_calls_config::mode`]: free text until the marker opens a call (`tool_choice="auto"`).
pub const TRIE_CALLS_AUTO: u32 = 0;
/// [`trie_calls_config::mode`]: the output starts with a call (`tool_choice="required"`); parallel calls written
/// in free text are separated by whitespace only.
pub const TRIE_CALLS_REQUIRED: u32 = 1;
/// [`trie_calls_config::mode`]: a call of the one tool `named_tool` ([`trie_calls_new`] only).
pub const TRIE_CALLS_NAMED: u32 = 2;

/// [`trie_calls_info::phase`]: free text until the marker.
pub const TRIE_CALLS_PHASE_FREE: u32 = 0;
/// [`trie_calls_info::phase`]: a tool's name.
pub const TRIE_CALLS_PHASE_NAME: u32 = 1;
/// [`trie_calls_info::phase`]: the tool's arguments (the caller's matcher), then the format's close.
pub const TRIE_CALLS_PHASE_ARGS: u32 = 2;
/// [`trie_calls_info::phase`]: only a stop token.
pub const TRIE_CALLS_PHASE_END: u32 = 3;
/// [`trie_calls_info::phase`]: ended by a stop token.
pub const TRIE_CALLS_PHASE_DONE: u32 = 4;

/// How a call is written: `trigger? prefix NAME suffix ARGS close`, list calls separated by `more`, the list ended by
/// `last`, a further list call beginning with `next_prefix`. Initialise with [`trie_calls_format_init`] (a named
/// format, or all empty), then set fields. Each byte string is a pointer and a length (NULL with 0 for none); the
/// bytes are copied by [`trie_calls_new`]. Versioned like [`trie_options`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_calls_format {
    /// `sizeof(trie_calls_format)` (set by [`trie_calls_format_init`]).
    pub struct_size: usize,
    /// Whether a marker opens a call in free text (`trigger`); false: the output starts with a call.
    pub has_trigger: bool,
    /// The marker (`<tool_call>`, `[TOOL_CALLS]`, `{`).
    pub trigger: *const u8,
    /// Length of `trigger`.
    pub trigger_len: usize,
    /// Before the name.
    pub prefix: *const u8,
    /// Length of `prefix`.
    pub prefix_len: usize,
    /// After the name, before the arguments.
    pub suffix: *const u8,
    /// Length of `suffix`.
    pub suffix_len: usize,
    /// After the arguments.
    pub close: *const u8,
    /// Length of `close`.
    pub close_len: usize,
    /// Between calls of a JSON list (`, `); empty: calls are separated by free text.
    pub more: *const u8,
    /// Length of `more`.
    pub more_len: usize,
    /// After the last call of a list (`]`).
    pub last: *const u8,
    /// Length of `last`.
    pub last_len: usize,
    /// The prefix of a further call of a list.
    pub next_prefix: *const u8,
    /// Length of `next_prefix`.
    pub next_prefix_len: usize,
    /// How a name is written: `TRIE_RENDER_JSON_STRING` or `TRIE_RENDER_RAW`.
    pub render: u32,
}

/// What a [`trie_calls`] engine serves besides its names. Initialise with [`trie_calls_config_init`]. Versioned
/// like [`trie_options`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_calls_config {
    /// `sizeof(trie_calls_config)` (set by [`trie_calls_config_init`]).
    pub struct_size: usize,
    /// `TRIE_CALLS_AUTO`, `TRIE_CALLS_REQUIRED` or `TRIE_CALLS_NAMED`.
    pub mode: u32,
    /// `TRIE_CALLS_NAMED`: the index of the one tool in the names.
    pub named_tool: usize,
    /// Several calls (`parallel_tool_calls`), or one then only a stop token.
    pub parallel: bool,
    /// The tokens that end the answer (a request's stop ids).
    pub stops: *const i32,
    /// Length of `stops`.
    pub n_stops: usize,
    /// Once a call is written, only calls follow (whitespace, the next marker, a stop token): for an engine whose
    /// parser reads nothing else after a call (llama.cpp). Default `false`: free text between calls.
    pub only_calls_after_a_call: bool,
}

/// A name automaton built by the caller ([`trie_calls_from_automata`]): an open templated automaton
/// (`TRIE_END_OPEN`), and optionally the tool of each member (`tools[member]`; NULL: the member id is the tool).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_calls_names {
    /// The automaton (NULL: none).
    pub automaton: *const trie_automaton,
    /// Member id → tool index (NULL with 0: the same).
    pub tools: *const u32,
    /// Length of `tools`.
    pub n_tools: usize,
}

/// The caller's argument matcher, as callbacks (each gets `user` first). A matcher is an opaque pointer made by
/// `make` for one call and released by `release`. Required: `make`, `accept`, `fill`, `rollback`; the others may
/// be NULL. Callbacks run on the thread of the `trie_calls_*` call that needs them, never after
/// [`trie_calls_matcher_free`] returns. Versioned like [`trie_options`].
///
/// A llama.cpp grammar sampler fits as follows (llama-server's adapter, integrations/llama-server/
/// llama-libtrie-tools.cpp): `make` builds `llama_sampler_init_grammar` of the tool's GBNF (the arguments and the
/// format's close); `accept` checks the token against the grammar (apply on a one-token candidate array) then
/// `llama_sampler_accept`; `fill` applies the grammar to the whole vocabulary and sets the bits of the tokens left;
/// `rollback` rebuilds the grammar from a clone made at the call's start and replays the tokens kept;
/// `completed` applies the grammar to one end-of-generation token (allowed: the grammar is complete). While the
/// sequence is in its arguments, [`trie_calls_current_arguments`] gives the grammar back so that the sampler can
/// check a sampled token against it alone (llama.cpp's rejection sampling) instead of filling a whole row.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_calls_callbacks {
    /// `sizeof(trie_calls_callbacks)`.
    pub struct_size: usize,
    /// Passed to every callback.
    pub user: *mut c_void,
    /// A matcher of tool `tool`'s arguments and the format's close (`last`: no further call may follow); NULL when
    /// it cannot be made (the token that completed the name is rejected).
    pub make: Option<unsafe extern "C" fn(user: *mut c_void, tool: usize, last: bool) -> *mut c_void>,
    /// Told once per call when the name so far leaves one tool (prepare its matcher). May be NULL.
    pub prefetch: Option<unsafe extern "C" fn(user: *mut c_void, tool: usize, last: bool)>,
    /// Advance the matcher by `token`; false (unchanged) when its grammar does not allow it.
    pub accept: Option<unsafe extern "C" fn(user: *mut c_void, matcher: *mut c_void, token: i32) -> bool>,
    /// Write the tokens allowed next into `row` (`words` 32-bit words, every word written); false on failure.
    pub fill:
        Option<unsafe extern "C" fn(user: *mut c_void, matcher: *mut c_void, row: *mut u32, words: usize) -> bool>,
    /// Undo the matcher's last `n` accepted tokens.
    pub rollback: Option<unsafe extern "C" fn(user: *mut c_void, matcher: *mut c_void, n: usize)>,
    /// 1 when the matcher has read its whole grammar, 0 when not, negative when it cannot say. May be NULL (the
    /// engine then asks whether a stop token is accepted, and rolls it back).
    pub completed: Option<unsafe extern "C" fn(user: *mut c_void, matcher: *mut c_void) -> i32>,
    /// Release a matcher made by `make`. May be NULL.
    pub release: Option<unsafe extern "C" fn(user: *mut c_void, matcher: *mut c_void)>,
    /// Called once with `user` when the sequence is freed, after its matchers are released. May be NULL.
    pub free_user: Option<unsafe extern "C" fn(user: *mut c_void)>,
}

/// Where a sequence is ([`trie_calls_info_of`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct trie_calls_info {
    /// `TRIE_CALLS_PHASE_*`.
    pub phase: u32,
    /// Calls completed.
    pub calls: usize,
    /// Whether `tool` is set: the current call's name is complete (kept after the call until the next name).
    pub has_tool: bool,
    /// The tool of the current call.
    pub tool: usize,
    /// Tokens accepted (and not rolled back).
    pub n_accepted: usize,
}

struct CallbackFactory(trie_calls_callbacks);

struct CallbackMatcher {
    cb: trie_calls_callbacks,
    matcher: *mut c_void,
}

impl ArgFactory for CallbackFactory {
    fn make(&mut self, tool: usize, last: bool) -> Result<Box<dyn ArgMatcher>> {
        let make = self.0.make.expect("checked at creation");
        let m = unsafe { make(self.0.user, tool, last) };
        if m.is_null() {
            return Err(Error::invalid(format!("callbacks.make returned NULL for tool {tool}")));
        }
        Ok(Box::new(CallbackMatcher { cb: self.0, matcher: m }))
    }

    fn prefetch(&mut self, tool: usize, last: bool) {
        if let Some(f) = self.0.prefetch {
            unsafe { f(self.0.user, tool, last) }
        }
    }
}

impl Drop for CallbackFactory {
    fn drop(&mut self) {
        if let Some(f) = self.0.free_user {
            unsafe { f(self.0.user) }
        }
    }
}

impl ArgMatcher for CallbackMatcher {
    fn accept_token(&mut self, token: TokenId) -> bool {
        unsafe { (self.cb.accept.expect("checked at creation"))(self.cb.user, self.matcher, token as i32) }
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) -> Result<()> {
        let fill = self.cb.fill.expect("checked at creation");
        if unsafe { fill(self.cb.user, self.matcher, row.as_mut_ptr(), row.len()) } {
            Ok(())
        } else {
            Err(Error::invalid("callbacks.fill failed (the argument matcher could not write its bitmask)"))
        }
    }

    fn rollback(&mut self, n: usize) {
        unsafe { (self.cb.rollback.expect("checked at creation"))(self.cb.user, self.matcher, n) }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn is_completed(&mut self) -> Option<bool> {
        let f = self.cb.completed?;
        let r = unsafe { f(self.cb.user, self.matcher) };
        (r >= 0).then_some(r > 0)
    }
}

impl Drop for CallbackMatcher {
    fn drop(&mut self) {
        if let Some(f) = self.cb.release {
            unsafe { f(self.cb.user, self.matcher) }
        }
    }
}

/// The named formats, kept for the process so that [`trie_calls_format_init`] can point into them.
fn named_formats() -> &'static [(&'static str, Format)] {
    static ALL: OnceLock<Vec<(&'static str, Format)>> = OnceLock::new();
    ALL.get_or_init(|| FORMAT_NAMES.iter().map(|&n| (n, Format::named(n).expect("a known name"))).collect())
}

fn render_code(r: Render) -> u32 {
    match r {
        Render::Raw => super::TRIE_RENDER_RAW,
        Render::JsonString => super::TRIE_RENDER_JSON_STRING,
        Render::JsonText => super::TRIE_RENDER_JSON_TEXT,
    }
}

/// Sets `*format` to the named format (`"hermes"`, `"llama"`, `"mistral"`, `"mistral_v11"`, `"json"`: the byte
/// strings point into libtrie's static table) or, for a NULL name, to an empty one (no trigger, JSON-string names),
/// and its `struct_size`. An unknown name is `TRIE_ERR_INVALID_ARGUMENT` listing the known ones.
///
/// # Safety
/// `format` must be NULL or writable; `name` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_format_init(format: *mut trie_calls_format, name: *const c_char) -> trie_status {
    guard(|| {
        if format.is_null() {
            return Err(null("format"));
        }
        let empty = Format {
            trigger: None,
            prefix: vec![],
            suffix: vec![],
            close: vec![],
            more: vec![],
            last: vec![],
            next_prefix: vec![],
            render: Render::JsonString,
        };
        let f = if name.is_null() {
            &empty
        } else {
            let n = CStr::from_ptr(name).to_string_lossy();
            match named_formats().iter().find(|(k, _)| *k == n) {
                Some((_, f)) => f,
                None => return Format::named(&n).map(|_| ()), // the error naming the known formats
            }
        };
        let b = |v: &[u8]| (if v.is_empty() { std::ptr::null() } else { v.as_ptr() }, v.len());
        let t = f.trigger.as_deref().unwrap_or_default();
        let (trigger, trigger_len) = b(t);
        let ((prefix, prefix_len), (suffix, suffix_len), (close, close_len)) =
            (b(&f.prefix), b(&f.suffix), b(&f.close));
        let ((more, more_len), (last, last_len), (next_prefix, next_prefix_len)) =
            (b(&f.more), b(&f.last), b(&f.next_prefix));
        format.write(trie_calls_format {
            struct_size: std::mem::size_of::<trie_calls_format>(),
            has_trigger: f.trigger.is_some(),
            trigger,
            trigger_len,
            prefix,
            prefix_len,
            suffix,
            suffix_len,
            close,
            close_len,
            more,
            more_len,
            last,
            last_len,
            next_prefix,
            next_prefix_len,
            render: render_code(f.render),
        });
        Ok(())
    })
}

unsafe fn read_format(p: *const trie_calls_format) -> Result<Format> {
    if p.is_null() {
        return Err(null("format"));
    }
    let v = super::boundary::Versioned::read(
        p,
        "format",
        "trie_calls_format_init",
        std::mem::size_of::<trie_calls_format>(),
    )?;
    let bytes = |ptr: usize, len: usize, what: &str| -> Result<Vec<u8>> {
        let (p, n) = (v.ptr::<u8>(ptr).unwrap_or(std::ptr::null()), v.usize(len).unwrap_or(0));
        Ok(slice(p, n, &format!("format.{what}"))?.to_vec())
    };
    type F = trie_calls_format;
    let render = match v.u32(offset_of!(F, render)).unwrap_or(super::TRIE_RENDER_JSON_STRING) {
        super::TRIE_RENDER_JSON_STRING => Render::JsonString,
        super::TRIE_RENDER_RAW => Render::Raw,
        r => {
            return Err(Error::invalid(format!(
                "format.render: {r} is not TRIE_RENDER_JSON_STRING (1) or TRIE_RENDER_RAW (0)"
            )))
        }
    };
    let trigger = bytes(offset_of!(F, trigger), offset_of!(F, trigger_len), "trigger")?;
    let has_trigger = v.bool(offset_of!(F, has_trigger)).unwrap_or(false);
    if has_trigger && trigger.is_empty() {
        return Err(Error::invalid("format.trigger: has_trigger is set but the trigger is empty"));
    }
    Ok(Format {
        trigger: has_trigger.then_some(trigger),
        prefix: bytes(offset_of!(F, prefix), offset_of!(F, prefix_len), "prefix")?,
        suffix: bytes(offset_of!(F, suffix), offset_of!(F, suffix_len), "suffix")?,
        close: bytes(offset_of!(F, close), offset_of!(F, close_len), "close")?,
        more: bytes(offset_of!(F, more), offset_of!(F, more_len), "more")?,
        last: bytes(offset_of!(F, last), offset_of!(F, last_len), "last")?,
        next_prefix: bytes(offset_of!(F, next_prefix), offset_of!(F, next_prefix_len), "next_prefix")?,
        render,
    })
}

/// Sets `*config` to the defaults (auto, one call, no stop token) and its `struct_size`.
///
/// # Safety
/// `config` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_config_init(config: *mut trie_calls_config) -> trie_status {
    guard(|| {
        if config.is_null() {
            return Err(null("config"));
        }
        config.write(trie_calls_config {
            struct_size: std::mem::size_of::<trie_calls_config>(),
            mode: TRIE_CALLS_AUTO,
            named_tool: 0,
            parallel: false,
            stops: std::ptr::null(),
            n_stops: 0,
            only_calls_after_a_call: false,
        });
        Ok(())
    })
}

/// (the configuration, the named tool for `TRIE_CALLS_NAMED`)
unsafe fn read_config(p: *const trie_calls_config, format: Format) -> Result<(CallsConfig, Option<usize>)> {
    if p.is_null() {
        return Err(null("config"));
    }
    type C = trie_calls_config;
    let v = super::boundary::Versioned::read(p, "config", "trie_calls_config_init", std::mem::size_of::<C>())?;
    let (mode, named) = match v.u32(offset_of!(C, mode)).unwrap_or(TRIE_CALLS_AUTO) {
        TRIE_CALLS_AUTO => (Mode::Auto, None),
        TRIE_CALLS_REQUIRED => (Mode::Required, None),
        TRIE_CALLS_NAMED => (Mode::Required, Some(v.usize(offset_of!(C, named_tool)).unwrap_or(0))),
        m => {
            return Err(Error::invalid(format!(
                "config.mode: {m} is not TRIE_CALLS_AUTO (0), TRIE_CALLS_REQUIRED (1) or TRIE_CALLS_NAMED (2)"
            )))
        }
    };
    let stops = slice(
        v.ptr::<i32>(offset_of!(C, stops)).unwrap_or(std::ptr::null()),
        v.usize(offset_of!(C, n_stops)).unwrap_or(0),
        "config.stops",
    )?;
    if let Some((i, t)) = stops.iter().enumerate().find(|(_, &t)| t < 0) {
        return Err(Error::invalid(format!("config.stops[{i}]: {t} is not a token id")));
    }
    let config = CallsConfig {
        format,
        mode,
        parallel: v.bool(offset_of!(C, parallel)).unwrap_or(false),
        stops: stops.iter().map(|&t| t as TokenId).collect(),
        only_calls_after_a_call: v.bool(offset_of!(C, only_calls_after_a_call)).unwrap_or(false),
    };
    Ok((config, named))
}

/// Compiles the engine of a tool list: `names` (`n` byte strings given as pointers and lengths; tool `i` is
/// `names[i]`; distinct, not empty, UTF-8 for a JSON-string format) written in `format`, under `config`;
/// `options` (NULL: defaults) bound the compiles of the name automata. `*out` receives a new engine (free it with
/// [`trie_calls_free`]). Errors: `TRIE_ERR_EMPTY_SET` (no name), `TRIE_ERR_INVALID_ARGUMENT` (a duplicate or empty
/// name, a bad format or config field, each named), those of [`trie_compile_template`](super::trie_compile_template).
///
/// # Safety
/// `vocab` a live vocabulary; `names`/`lens` `n` readable entries each (NULL with `n` 0); `format`, `config`
/// readable structs; `options` NULL or readable; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_new(
    vocab: *const trie_vocab,
    names: *const *const u8,
    lens: *const usize,
    n: usize,
    format: *const trie_calls_format,
    config: *const trie_calls_config,
    options: *const trie_options,
    out: *mut *mut trie_calls,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let v = try_clone_arc(vocab)?;
        let names = super::byte_strings(names, lens, n, "names", "lens")?;
        let (config, named) = read_config(config, read_format(format)?)?;
        let options = trie_options::read(options)?;
        let calls = match named {
            Some(tool) => ToolCalls::compile_named(v, &names, tool, config, &options)?,
            None => ToolCalls::compile(v, &names, config, &options)?,
        };
        out.write(arc_to_ptr(Arc::new(calls)));
        Ok(())
    })
}

unsafe fn read_names(p: *const trie_calls_names, what: &str) -> Result<Option<Names>> {
    if p.is_null() {
        return Ok(None);
    }
    let n = p.read();
    if n.automaton.is_null() {
        return Ok(None);
    }
    let automaton = try_clone_arc(n.automaton)?;
    let tools = if n.tools.is_null() && n.n_tools == 0 {
        None
    } else {
        Some(Arc::from(slice(n.tools, n.n_tools, &format!("{what}.tools"))?))
    };
    Ok(Some(Names { automaton, tools }))
}

/// The engine over name automata the caller built and keeps (a registry's, updated with
/// [`trie_automaton_with`](super::trie_automaton_with) when its file changes): `first` (segments
/// `prefix NAME suffix`), `following` (a parallel JSON list's further calls: `next_prefix NAME suffix`; needed
/// then), `opener` (`TRIE_CALLS_REQUIRED` with a trigger: `trigger prefix NAME suffix`; needed then); each an open
/// templated automaton of one vocabulary, with its member → tool map. `config.mode` `TRIE_CALLS_NAMED` is refused
/// (compile the one name instead). `*out` receives a new engine.
///
/// # Safety
/// `first` readable with a live automaton; `following`, `opener` NULL or readable (their automata NULL or live);
/// each `tools` array `n_tools` readable entries; `format`, `config` readable; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_from_automata(
    first: *const trie_calls_names,
    following: *const trie_calls_names,
    opener: *const trie_calls_names,
    format: *const trie_calls_format,
    config: *const trie_calls_config,
    out: *mut *mut trie_calls,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let first = read_names(first, "first")?.ok_or_else(|| null("first.automaton"))?;
        let (following, opener) = (read_names(following, "following")?, read_names(opener, "opener")?);
        let (config, named) = read_config(config, read_format(format)?)?;
        if named.is_some() {
            return Err(Error::invalid("config.mode: TRIE_CALLS_NAMED needs trie_calls_new (the one name compiled)"));
        }
        let vocab = first.automaton.vocab().clone();
        let calls = ToolCalls::from_names(vocab, config, first, following, opener)?;
        out.write(arc_to_ptr(Arc::new(calls)));
        Ok(())
    })
}

/// Adds a reference to `calls` and returns it (NULL for NULL).
///
/// # Safety
/// `calls` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_retain(calls: *const trie_calls) -> *const trie_calls {
    boundary(|| match try_clone_arc(calls) {
        Ok(a) => arc_to_ptr::<trie_calls>(a) as *const trie_calls,
        Err(_) => std::ptr::null(),
    })
}

/// Drops a reference to `calls` (NULL: nothing). Sequences made from it keep it alive.
///
/// # Safety
/// `calls` NULL or live, each reference freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_free(calls: *const trie_calls) {
    boundary(|| free_arc(calls))
}

/// For a vocabulary and a marker (`trigger`, `len` bytes) with `pending` of its bytes already at the end of the
/// output (`0..len`): the tokens that would finish the marker and go on past it in one token (masked in free text,
/// so that a call starts at a token boundary), ascending. `*n` is their number; `ids` (room for `capacity`) gets
/// them, or `TRIE_ERR_BUFFER_TOO_SMALL` with only `*n` written.
///
/// # Safety
/// `vocab` live; `trigger` `len` readable bytes; `ids` NULL (with 0) or `capacity` writable; `n` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_straddlers(
    vocab: *const trie_vocab,
    trigger: *const u8,
    len: usize,
    pending: usize,
    ids: *mut i32,
    capacity: usize,
    n: *mut usize,
) -> trie_status {
    guard(|| {
        if n.is_null() {
            return Err(null("n"));
        }
        n.write(0);
        let v = try_ref(vocab)?;
        let trigger = slice(trigger, len, "trigger")?;
        if pending >= trigger.len() {
            return Err(Error::invalid(format!(
                "pending: {pending} is not below the trigger's {} bytes",
                trigger.len()
            )));
        }
        let all = crate::calls::straddlers(v, trigger);
        let buf = slice_mut(ids, capacity, "ids")?;
        super::copy_out(&all[pending], buf, n, |t| t as i32, || format!("{} tokens", all[pending].len()))
    })
}

/// A new sequence of `calls` at its start, its argument matchers made through `callbacks` (copied; `make`,
/// `accept`, `fill` and `rollback` required). `*out` receives it; free it with [`trie_calls_matcher_free`].
///
/// # Safety
/// `calls` live; `callbacks` readable, its functions callable with its `user` until the sequence is freed; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_matcher_new(
    calls: *const trie_calls,
    callbacks: *const trie_calls_callbacks,
    out: *mut *mut trie_calls_matcher,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let c = try_clone_arc(calls)?;
        if callbacks.is_null() {
            return Err(null("callbacks"));
        }
        let min = std::mem::size_of::<trie_calls_callbacks>();
        super::boundary::Versioned::read(callbacks, "callbacks", "sizeof(trie_calls_callbacks)", min)?;
        let cb = callbacks.read_unaligned();
        let missing = [("make", cb.make.is_none()), ("accept", cb.accept.is_none()), ("fill", cb.fill.is_none())]
            .into_iter()
            .chain([("rollback", cb.rollback.is_none())])
            .find(|&(_, m)| m);
        if let Some((what, _)) = missing {
            return Err(null(&format!("callbacks.{what}")));
        }
        out.write(box_to_ptr::<trie_calls_matcher>(CallsMatcher::new(c, Box::new(CallbackFactory(cb)))));
        Ok(())
    })
}

/// Frees a sequence (NULL: nothing): its argument matchers are released, then `free_user` is called.
///
/// # Safety
/// `matcher` NULL or live, freed once, no call on it in flight.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_matcher_free(matcher: *mut trie_calls_matcher) {
    boundary(|| free_box(matcher))
}

/// Writes the tokens allowed next into `row` (`words` 32-bit words, at least the vocabulary's; every word
/// written): free text but the straddling tokens, the names' tokens, the argument matcher's own fill, or the stop
/// tokens.
///
/// # Safety
/// `matcher` live; `row` `words` writable words.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_fill_bitmask(
    matcher: *mut trie_calls_matcher,
    row: *mut u32,
    words: usize,
) -> trie_status {
    guard(|| {
        let m = try_mut(matcher)?;
        let row = slice_mut(row, words, "row")?;
        m.fill_bitmask(row)
    })
}

/// Advances the sequence by `token`. `TRIE_ERR_TOKEN_REJECTED` (nothing changed) when the tool calls do not allow
/// it; the message says the phase, or why the argument matcher of the tool could not be made. After a stop token
/// every token is accepted and ignored.
///
/// # Safety
/// `matcher` live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_accept(matcher: *mut trie_calls_matcher, token: i32) -> trie_status {
    guard(|| {
        let m = try_mut(matcher)?;
        if token >= 0 && m.accept_token(token as TokenId) {
            return Ok(());
        }
        let why = match m.last_error() {
            Some(e) if token >= 0 => e.to_string(),
            _ => format!("token {token} is not allowed in phase {}", m.phase().as_str()),
        };
        Err(Error::new(ErrorKind::TokenRejected, why))
    })
}

/// `*n_accepted`: how many of `tokens` (`n` ids) the sequence accepts in a row from here (stopping after a stop
/// token); nothing changes (the tokens are accepted, then rolled back, argument matchers included). No message
/// is stored for the rejected token.
///
/// # Safety
/// `matcher` live; `tokens` `n` readable ids (NULL with 0); `n_accepted` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_validate(
    matcher: *mut trie_calls_matcher,
    tokens: *const i32,
    n: usize,
    n_accepted: *mut usize,
) -> trie_status {
    guard(|| {
        if n_accepted.is_null() {
            return Err(null("n_accepted"));
        }
        n_accepted.write(0);
        let m = try_mut(matcher)?;
        let ids = slice(tokens, n, "tokens")?;
        let k = ids.iter().position(|&t| t < 0).unwrap_or(ids.len());
        let ids: Vec<TokenId> = ids[..k].iter().map(|&t| t as TokenId).collect();
        n_accepted.write(m.validate_tokens(&ids));
        Ok(())
    })
}

/// Undoes the last `n` accepted tokens (at most back to the start), the argument matchers with them.
///
/// # Safety
/// `matcher` live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_rollback(matcher: *mut trie_calls_matcher, n: usize) -> trie_status {
    guard(|| {
        try_mut(matcher)?.rollback(n);
        Ok(())
    })
}

/// Back to the start (the argument matchers released).
///
/// # Safety
/// `matcher` live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_reset(matcher: *mut trie_calls_matcher) -> trie_status {
    guard(|| {
        try_mut(matcher)?.reset();
        Ok(())
    })
}

/// Whether a stop token ended the answer (false for NULL).
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_is_terminated(matcher: *const trie_calls_matcher) -> bool {
    boundary(|| try_ref(matcher).is_ok_and(|m| m.is_terminated()))
}

/// Where the sequence is: `*info` gets the phase, the calls completed, the current call's tool, the tokens
/// accepted.
///
/// # Safety
/// `matcher` live; `info` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_info_of(
    matcher: *const trie_calls_matcher,
    info: *mut trie_calls_info,
) -> trie_status {
    guard(|| {
        if info.is_null() {
            return Err(null("info"));
        }
        let m = try_ref(matcher)?;
        put(
            info,
            trie_calls_info {
                phase: m.phase() as u32,
                calls: m.calls_so_far(),
                has_tool: m.tool().is_some(),
                tool: m.tool().unwrap_or(0),
                n_accepted: m.n_accepted(),
            },
        );
        Ok(())
    })
}

/// The forced token run from here, at most `capacity` tokens, into `tokens`: in a tool's name, the name
/// automaton's forced run (the format's fixed text, the rest of the only name left, the suffix: what a serving
/// engine may propose as a speculative draft or decode in one batch); 0 tokens in every other phase. `*n_tokens`
/// is their number (0 on failure).
///
/// # Safety
/// `matcher` live; `tokens` NULL (with `capacity` 0) or `capacity` writable ids; `n_tokens` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_draft(
    matcher: *const trie_calls_matcher,
    tokens: *mut i32,
    capacity: usize,
    n_tokens: *mut usize,
) -> trie_status {
    guard(|| {
        if n_tokens.is_null() {
            return Err(null("n_tokens"));
        }
        n_tokens.write(0);
        let m = try_ref(matcher)?;
        let buf = slice_mut(tokens, capacity, "tokens")?;
        let d = m.draft(capacity);
        for (dst, &t) in buf.iter_mut().zip(&d) {
            *dst = t as i32;
        }
        n_tokens.write(d.len());
        Ok(())
    })
}

/// The argument matcher of the current call (the pointer `callbacks.make` returned for it) while the sequence is
/// in `TRIE_CALLS_PHASE_ARGS`, else NULL (also for a NULL or dead-looking handle). There the sequence's mask is
/// exactly that matcher's, so an engine may apply its own matcher directly (llama.cpp's rejection sampling checks
/// the sampled token against the grammar before masking the whole vocabulary). The pointer stays owned by the
/// sequence: valid until the next call that changes it.
///
/// # Safety
/// `matcher` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn trie_calls_current_arguments(matcher: *const trie_calls_matcher) -> *mut c_void {
    boundary(|| {
        let Ok(m) = try_ref(matcher) else { return std::ptr::null_mut() };
        m.current_arguments()
            .and_then(|a| a.as_any())
            .and_then(|a| a.downcast_ref::<CallbackMatcher>())
            .map_or(std::ptr::null_mut(), |c| c.matcher)
    })
}
