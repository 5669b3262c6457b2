//! The C ABI of the request-set front end (`crate::sets`): `trie_set_cache_*`.

use super::handle::{arc_to_ptr, box_to_ptr, free_box, try_clone_arc, try_ref, Castable, OwnershipBox};
use super::{boundary, check_out, guard, null, put, slice, trie_automaton, trie_status, trie_vocab};
use crate::error::Result;
use crate::sets::{Options, SetCache};
use std::ffi::{c_char, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A request-set front end over one vocabulary: it checks a request's set spec (JSON) against the operator's
/// rules, compiles the set once and keeps it in an LRU shared by every request (see [`trie_set_cache_get`]).
/// Opaque; thread-safe: any number of threads may call it at once (a set asked for by several at once is
/// compiled once; the others wait for it). Free with [`trie_set_cache_free`] once no call is in flight.
pub struct trie_set_cache {
    _private: [u8; 0],
}

/// The operator's rules of a [`trie_set_cache`]. Initialise with [`trie_set_config_init`] (defaults, and
/// `struct_size`), then set fields. The defaults are those of the vLLM processor and llama-server.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_set_config {
    /// `sizeof(trie_set_config)` of the caller's header (set by [`trie_set_config_init`]). Versioned like
    /// [`trie_options`](super::trie_options): a smaller size keeps the defaults of the fields it does not reach, a larger one works
    /// when the fields this libtrie does not know are zero.
    pub struct_size: usize,
    /// The set directory (NUL-terminated; resolved once, when the cache is created). NULL or "": no sets from
    /// files, only inline sets. Requests name files relative to it; no symbolic link under it is followed.
    pub set_dir: *const c_char,
    /// Trusted callers only (an offline script): any readable regular file, absolute or relative to `set_dir`.
    pub allow_any_path: bool,
    /// The most strings of an inline set ("strings", "add" and "remove" together). Default 10,000.
    pub max_inline_strings: u64,
    /// The most bytes of an inline set (a byte per string counted for its separator). Default 1 MiB.
    pub max_inline_bytes: u64,
    /// The largest set file read. Default 256 MiB.
    pub max_file_bytes: u64,
    /// `trie_options.max_states` of every compile (0: the library's own bounds).
    pub max_states: u64,
    /// `trie_options.max_bytes` of every compile (0: no bound).
    pub max_bytes: u64,
    /// Compiled sets kept, least recently used dropped first (0 counts as 1). Default 64. A set dropped from the
    /// LRU while a request still holds it is found again, not compiled again.
    pub capacity: u64,
    /// The compiled directory (NULL or "": none; see [`trie_compiled_dir`](super::trie_compiled_dir)): the
    /// operator's directory, created (0700) if missing, where compiled sets of set files are saved and mapped
    /// from, keyed by the vocabulary, the file's content and the compile options, so other processes and restarts
    /// map the file instead of compiling. Inline sets are not saved; a damaged or stale file is compiled again and
    /// replaced; nothing else is ever deleted there.
    pub cache_dir: *const c_char,
}

/// What one [`trie_set_cache_get`] did (for logs).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct trie_set_info {
    /// This call compiled the set (else it was cached, or compiled by a concurrent call it waited for).
    pub compiled: bool,
    /// Seconds this call spent compiling (0 when it did not compile).
    pub seconds: f64,
    /// How messages name the set: `the set 'tools'`, `the set file 'sub/x.txt'`, `the inline set`
    /// (NUL-terminated, cut to fit).
    pub what: [c_char; 256],
    /// This call mapped the set from a file of `cache_dir` that another process (or an earlier run) had saved,
    /// instead of compiling it (`compiled` is true too: the set was new to this cache; `seconds` is the mapping's).
    pub loaded: bool,
}

/// Counters of a [`trie_set_cache`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct trie_set_stats {
    /// Compiles run (failed ones included).
    pub compiles: u64,
    /// Lookups served without compiling.
    pub hits: u64,
    /// Sets (and failures of sets) held in the LRU now.
    pub entries: u64,
    /// Compiles served by mapping a saved file of `cache_dir` instead (counted in `compiles` too).
    pub loaded: u64,
}

impl Default for trie_set_config {
    fn default() -> Self {
        let o = Options::default();
        trie_set_config {
            struct_size: std::mem::size_of::<trie_set_config>(),
            set_dir: std::ptr::null(),
            allow_any_path: o.allow_any_path,
            max_inline_strings: o.max_inline_strings,
            max_inline_bytes: o.max_inline_bytes,
            max_file_bytes: o.max_file_bytes,
            max_states: o.max_states,
            max_bytes: o.max_bytes,
            capacity: o.capacity as u64,
            cache_dir: std::ptr::null(),
        }
    }
}

impl trie_set_config {
    /// The options a caller's config stands for (NULL: the defaults).
    unsafe fn read(config: *const trie_set_config) -> Result<Options> {
        if config.is_null() {
            return Ok(Options::default());
        }
        // Versioned (boundary::Versioned): a shorter config keeps the defaults of the fields it does not reach.
        let min = std::mem::offset_of!(trie_set_config, set_dir) + std::mem::size_of::<*const c_char>();
        let v = boundary::Versioned::read(config, "config", "trie_set_config_init", min)?;
        let d = trie_set_config::default();
        macro_rules! get {
            ($field:ident, $how:ident) => {
                v.$how(std::mem::offset_of!(trie_set_config, $field)).unwrap_or(d.$field)
            };
        }
        let c = trie_set_config {
            struct_size: d.struct_size,
            set_dir: get!(set_dir, ptr),
            allow_any_path: get!(allow_any_path, bool),
            max_inline_strings: get!(max_inline_strings, u64),
            max_inline_bytes: get!(max_inline_bytes, u64),
            max_file_bytes: get!(max_file_bytes, u64),
            max_states: get!(max_states, u64),
            max_bytes: get!(max_bytes, u64),
            capacity: get!(capacity, u64),
            cache_dir: get!(cache_dir, ptr),
        };
        let path = |p: *const c_char| {
            let bytes = if p.is_null() { &[][..] } else { CStr::from_ptr(p).to_bytes() };
            (!bytes.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(bytes)))
        };
        Ok(Options {
            set_dir: path(c.set_dir),
            allow_any_path: c.allow_any_path,
            max_inline_strings: c.max_inline_strings,
            max_inline_bytes: c.max_inline_bytes,
            max_file_bytes: c.max_file_bytes,
            max_states: c.max_states,
            max_bytes: c.max_bytes,
            capacity: usize::try_from(c.capacity).unwrap_or(usize::MAX).max(1),
            cache_dir: path(c.cache_dir),
        })
    }
}

/// Sets `*config` to the defaults (no set directory; 10,000 strings and 1 MiB inline; 256 MiB files; no compile
/// bounds; 64 sets kept) and `struct_size`. `TRIE_ERR_NULL_ARGUMENT` for NULL.
///
/// # Safety
/// `config` must be NULL or point to a writable `trie_set_config`.
#[no_mangle]
pub unsafe extern "C" fn trie_set_config_init(config: *mut trie_set_config) -> trie_status {
    guard(|| {
        if config.is_null() {
            return Err(null("config"));
        }
        config.write(trie_set_config::default());
        Ok(())
    })
}

impl Castable for trie_set_cache {
    type Ownership = OwnershipBox;
    type RustType = SetCache;
    const WHAT: &'static str = "cache";
}

/// Creates a set cache for `vocab` under the rules of `config` (NULL: the defaults). `vocab` may be NULL: the
/// cache then only checks specs ([`trie_set_cache_check`], for admission in a process without the model), and
/// [`trie_set_cache_get`] fails. The cache keeps its own reference to `vocab`. Errors:
/// `TRIE_ERR_INVALID_ARGUMENT` (a bad `struct_size`; the set directory is not a directory). On failure `*out` is
/// NULL.
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; `config` NULL or an initialised `trie_set_config` whose `set_dir`
/// is NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_new(
    vocab: *const trie_vocab,
    config: *const trie_set_config,
    out: *mut *mut trie_set_cache,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = if vocab.is_null() { None } else { Some(try_clone_arc(vocab)?) };
        let cache = SetCache::new(vocab, trie_set_config::read(config)?)?;
        out.write(box_to_ptr(cache));
        Ok(())
    })
}

/// Checks a request's set spec (`spec`: `len` bytes of UTF-8 JSON; see [`trie_set_cache_get`]) without reading
/// or compiling it: its shape, the inline bounds, and for a set file its confinement, type and size (the file is
/// opened, then closed). The message of a failure is fit for the client (an HTTP 400).
///
/// # Safety
/// `cache` must be NULL or a live set cache; `spec` must hold `len` bytes (NULL with 0 is an empty spec).
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_check(
    cache: *const trie_set_cache,
    spec: *const u8,
    len: usize,
) -> trie_status {
    guard(|| try_ref(cache)?.check(slice(spec, len, "spec")?))
}

/// The compiled set a request's spec names. `spec` is `len` bytes of UTF-8 JSON, one of:
/// `{"set": NAME}` (the file NAME.txt of the set directory), `{"file": PATH}` (relative to it),
/// `{"strings": [...]}` (the members inline); short forms: a string (a path when it holds a `/`, else a set
/// name), a list of strings; optional `"drop_unreachable": true` and `"add": [...]`, `"remove": [...]` (the set
/// `(base - remove) + add`, built from the cached base by [`trie_automaton_with`](super::trie_automaton_with)).
/// Set files hold one member per line (UTF-8, `\n` separated, a final newline ignored).
///
/// The set is looked up in the LRU, or compiled in the calling thread (one compile per set however many threads
/// ask; the others wait). A set file is opened once, without following links: its identity (device, inode, size,
/// modification time) and its content come from that open file, so a changed file is a new set. With a
/// `cache_dir`, a set file's compiled set is mapped from there when another process (or an earlier run) compiled
/// the same content, and saved there otherwise. On success
/// `*out` is a new reference to the compiled set (free it with [`trie_automaton_free`](super::trie_automaton_free))
/// and `*info` (when not NULL) says what the call did. On failure `*out` is NULL and [`trie_last_error`](super::trie_last_error)
/// holds a message fit for the client (an HTTP 400; the set directory's location is never in it): a bad shape
/// or bound and a refused path (`TRIE_ERR_INVALID_ARGUMENT`), not UTF-8 (`TRIE_ERR_INVALID_ARGUMENT`), empty
/// (`TRIE_ERR_EMPTY_SET`), unreachable members (`TRIE_ERR_UNREACHABLE_STRING`), the compile bounds
/// (`TRIE_ERR_LIMIT_EXCEEDED`), an unreadable file (`TRIE_ERR_IO`). Failures of a set itself are remembered
/// (asked again, it is not compiled again); I/O failures are not.
///
/// # Safety
/// `cache` must be NULL or a live set cache; `spec` must hold `len` bytes; `out` NULL or writable; `info` NULL or
/// a writable `trie_set_info`.
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_get(
    cache: *const trie_set_cache,
    spec: *const u8,
    len: usize,
    out: *mut *mut trie_automaton,
    info: *mut trie_set_info,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let got = try_ref(cache)?.get(slice(spec, len, "spec")?)?;
        if !info.is_null() {
            let mut what = [0 as c_char; 256];
            let mut n = got.what.len().min(what.len() - 1);
            while !got.what.is_char_boundary(n) {
                n -= 1;
            }
            for (d, &b) in what.iter_mut().zip(&got.what.as_bytes()[..n]) {
                *d = b as c_char;
            }
            put(info, trie_set_info { compiled: got.compiled, seconds: got.seconds, what, loaded: got.loaded });
        }
        out.write(arc_to_ptr(got.automaton));
        Ok(())
    })
}

/// Like [`trie_set_cache_get`] without compiling: `*out` is the compiled set when it is ready (a new reference),
/// NULL when it is not compiled yet or still compiling (then `TRIE_OK` too). A spec that is refused, or a set whose
/// failure is remembered, fails as in [`trie_set_cache_get`]. For a scheduler that starts compiles elsewhere and
/// must not wait.
///
/// # Safety
/// As [`trie_set_cache_get`].
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_lookup(
    cache: *const trie_set_cache,
    spec: *const u8,
    len: usize,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        if let Some(got) = try_ref(cache)?.lookup(slice(spec, len, "spec")?)? {
            out.write(arc_to_ptr(got.automaton));
        }
        Ok(())
    })
}

/// Writes the counters of `cache` to `*out`.
///
/// # Safety
/// `cache` must be NULL or a live set cache; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_stats(cache: *const trie_set_cache, out: *mut trie_set_stats) -> trie_status {
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        let s = try_ref(cache)?.stats();
        out.write(trie_set_stats { compiles: s.compiles, hits: s.hits, entries: s.entries, loaded: s.loaded });
        Ok(())
    })
}

/// Frees `cache` (NULL: no-op). Automata it handed out stay valid (each holds its own reference).
///
/// # Safety
/// `cache` must be NULL or a live set cache, freed once, with no call on it in flight.
#[no_mangle]
pub unsafe extern "C" fn trie_set_cache_free(cache: *mut trie_set_cache) {
    if cache.is_null() {
        return;
    }
    boundary(|| free_box(cache));
}

#[cfg(test)]
mod tests {
    use super::super::{
        trie_automaton_free, trie_automaton_n_members, trie_last_error, trie_vocab_new, TRIE_TOKEN_NORMAL,
    };
    use super::*;
    use crate::capi::trie_status::*;

    unsafe fn vocab() -> *mut trie_vocab {
        let toks: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
        let ptrs: Vec<*const u8> = toks.iter().map(|t| t.as_ptr()).collect();
        let lens: Vec<usize> = toks.iter().map(|t| t.len()).collect();
        let kinds = vec![TRIE_TOKEN_NORMAL; toks.len()];
        let eog = [0i32];
        let mut v = std::ptr::null_mut();
        let st = trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), toks.len(), eog.as_ptr(), 1, &mut v);
        assert_eq!(st, TRIE_OK);
        v
    }

    fn last_error() -> String {
        unsafe { CStr::from_ptr(trie_last_error()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_cache_through_the_c_abi() {
        unsafe {
            let v = vocab();
            let mut cfg = std::mem::zeroed::<trie_set_config>();
            assert_eq!(trie_set_config_init(&mut cfg), TRIE_OK);
            cfg.max_inline_strings = 3;
            let mut cache = std::ptr::null_mut();
            assert_eq!(trie_set_cache_new(v, &cfg, &mut cache), TRIE_OK);
            crate::capi::trie_vocab_free(v); // the cache keeps its own reference
            let spec = br#"["red", "green"]"#;
            let mut a = std::ptr::null_mut();
            let mut info = std::mem::zeroed::<trie_set_info>();
            assert_eq!(trie_set_cache_get(cache, spec.as_ptr(), spec.len(), &mut a, &mut info), TRIE_OK);
            assert!(info.compiled);
            assert!(!info.loaded, "no compiled directory: nothing to map");
            assert_eq!(CStr::from_ptr(info.what.as_ptr()).to_str().unwrap(), "the inline set");
            assert_eq!(trie_automaton_n_members(a), 2);
            let mut b = std::ptr::null_mut();
            assert_eq!(trie_set_cache_get(cache, spec.as_ptr(), spec.len(), &mut b, std::ptr::null_mut()), TRIE_OK);
            assert_eq!(a, b, "the same compiled set");
            trie_automaton_free(a);
            trie_automaton_free(b);
            let mut c = std::ptr::null_mut();
            assert_eq!(trie_set_cache_lookup(cache, spec.as_ptr(), spec.len(), &mut c), TRIE_OK);
            assert_eq!(c, b, "ready: found without compiling");
            trie_automaton_free(c);
            let other = br#"["blue"]"#;
            assert_eq!(trie_set_cache_lookup(cache, other.as_ptr(), other.len(), &mut c), TRIE_OK);
            assert!(c.is_null(), "not compiled: not there, and not compiled by a lookup");
            // Refusals: a status and a message for the client.
            let bad = br#"["a", "b", "c", "d"]"#;
            assert_eq!(trie_set_cache_check(cache, bad.as_ptr(), bad.len()), TRIE_ERR_INVALID_ARGUMENT);
            assert!(last_error().contains("4 strings, more than this server accepts"), "{}", last_error());
            assert_eq!(
                trie_set_cache_get(cache, bad.as_ptr(), bad.len(), &mut a, &mut info),
                TRIE_ERR_INVALID_ARGUMENT
            );
            assert!(a.is_null());
            let file = br#""colors""#;
            assert_eq!(
                trie_set_cache_get(cache, file.as_ptr(), file.len(), &mut a, &mut info),
                TRIE_ERR_INVALID_ARGUMENT
            );
            assert!(last_error().contains("does not read sets from files"));
            let empty = br#"{"strings": []}"#;
            assert_eq!(trie_set_cache_check(cache, empty.as_ptr(), empty.len()), TRIE_ERR_EMPTY_SET);
            let mut stats = trie_set_stats::default();
            assert_eq!(trie_set_cache_stats(cache, &mut stats), TRIE_OK);
            assert_eq!((stats.compiles, stats.hits, stats.entries, stats.loaded), (1, 2, 1, 0));
            trie_set_cache_free(cache);
        }
    }

    #[test]
    fn pointers_and_sizes_are_checked() {
        unsafe {
            let mut a = std::ptr::null_mut();
            assert_eq!(
                trie_set_cache_get(std::ptr::null(), b"1".as_ptr(), 1, &mut a, std::ptr::null_mut()),
                TRIE_ERR_NULL_ARGUMENT
            );
            assert_eq!(trie_set_cache_check(std::ptr::null(), std::ptr::null(), 0), TRIE_ERR_NULL_ARGUMENT);
            assert_eq!(trie_set_cache_stats(std::ptr::null(), std::ptr::null_mut()), TRIE_ERR_NULL_ARGUMENT);
            assert_eq!(trie_set_config_init(std::ptr::null_mut()), TRIE_ERR_NULL_ARGUMENT);
            trie_set_cache_free(std::ptr::null_mut());
            // a caller that forgot trie_set_config_init: refused, nothing read past it
            let cfg = trie_set_config { struct_size: 1 << 40, ..trie_set_config::default() };
            let mut cache = std::ptr::null_mut();
            assert_eq!(trie_set_cache_new(std::ptr::null(), &cfg, &mut cache), TRIE_ERR_INVALID_ARGUMENT);
            assert!(cache.is_null() && last_error().contains("trie_set_config_init"));
            let dir = c"/nonexistent/libtrie-sets";
            let cfg = trie_set_config { set_dir: dir.as_ptr(), ..trie_set_config::default() };
            assert_eq!(trie_set_cache_new(std::ptr::null(), &cfg, &mut cache), TRIE_ERR_INVALID_ARGUMENT);
            assert!(last_error().contains("is not a directory"));
            // No vocabulary: checks only.
            assert_eq!(trie_set_cache_new(std::ptr::null(), std::ptr::null(), &mut cache), TRIE_OK);
            assert_eq!(trie_set_cache_check(cache, b"[\"x\"]".as_ptr(), 5), TRIE_OK);
            assert_eq!(
                trie_set_cache_get(cache, b"[\"x\"]".as_ptr(), 5, &mut a, std::ptr::null_mut()),
                TRIE_ERR_INVALID_ARGUMENT
            );
            assert_eq!(trie_set_cache_check(cache, std::ptr::null(), 3), TRIE_ERR_NULL_ARGUMENT);
            let lone = br#"["\ud800"]"#;
            assert_eq!(trie_set_cache_check(cache, lone.as_ptr(), lone.len()), TRIE_ERR_INVALID_ARGUMENT);
            assert!(last_error().contains("lone surrogates"));
            trie_set_cache_free(cache);
        }
    }
}
