//! The C ABI of the compiled directory (`crate::sets::CompiledDir`): `trie_compiled_dir_*`, compiled sets shared
//! between processes through files of the operator's directory.

use super::handle::{arc_to_ptr, box_to_ptr, free_box, try_clone_arc, try_ref, Castable, OwnershipBox};
use super::template::read_template;
use super::{boundary, byte_strings, check_out, guard, null, path_str, put};
use super::{trie_automaton, trie_options, trie_status, trie_template, trie_vocab};
use crate::sets::{CompiledDir, CompiledSource};
use std::sync::Arc;

/// A directory of compiled sets shared by every process of a machine (llama-server's `--trie-compiled-dir`,
/// `LIBTRIE_COMPILED_DIR` of the Python integrations). A compiled set is the file `<32 hex digits>.trie` named by
/// an xxh3-128 digest of this libtrie's version, the vocabulary's fingerprint, the members, the template and the
/// compile options: the first process compiles and saves it atomically (a temporary file renamed into place),
/// the others map it lazily, so the page cache holds one copy. A file that fails to load (truncated, corrupt,
/// another version) is compiled again and replaced. Nothing else is ever deleted there: the operator bounds it.
/// Two processes missing one key at once both compile; the last rename wins, and no reader sees a partial file.
/// Opaque; thread-safe. Free with [`trie_compiled_dir_free`].
pub struct trie_compiled_dir {
    _private: [u8; 0],
}

impl Castable for trie_compiled_dir {
    type Ownership = OwnershipBox;
    type RustType = CompiledDir;
    const WHAT: &'static str = "compiled directory";
}

/// Counters of a [`trie_compiled_dir`] (this process's calls).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct trie_compiled_stats {
    /// Sets served by mapping a file of the directory (no compile).
    pub loaded: u64,
    /// Sets compiled because their file was missing or rejected.
    pub compiled: u64,
    /// Files that failed to load, compiled again and replaced.
    pub rejected: u64,
    /// Compiled sets whose file could not be written (served from memory instead).
    pub save_failed: u64,
}

/// Opens the compiled directory `path` (NUL-terminated UTF-8), creating it (mode 0700, parents included) if it
/// is missing. Errors: `TRIE_ERR_NULL_ARGUMENT`; `TRIE_ERR_INVALID_ARGUMENT` when it is not a directory and
/// cannot be created (the message names it). On failure `*out` is NULL.
///
/// # Safety
/// `path` NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_compiled_dir_new(
    path: *const std::ffi::c_char,
    out: *mut *mut trie_compiled_dir,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let dir = CompiledDir::new(path_str(path)?)?;
        out.write(box_to_ptr(dir));
        Ok(())
    })
}

/// [`trie_compile_template`](super::trie_compile_template) through the directory: the set's file mapped when
/// it loads, else compiled here, saved, and returned mapped from the saved file. `*loaded` (when not NULL) is
/// true when nothing was compiled. Errors: those of `trie_compile_template` (a failed save is not an error: the
/// compiled set is returned and counted in `save_failed`). The same members in another order are another file.
///
/// # Safety
/// As [`trie_compile_template`](super::trie_compile_template); `dir` NULL or live; `loaded` NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_compiled_dir_compile_template(
    dir: *const trie_compiled_dir,
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    n_strings: usize,
    template: *const trie_template,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
    loaded: *mut bool,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let dir = try_ref(dir)?;
        let vocab = try_clone_arc(vocab)?;
        let set = byte_strings(strings, lens, n_strings, "strings", "lens")?;
        let t = read_template(template)?;
        let opts = trie_options::read(options)?;
        let (a, how) = dir.compile_template(&vocab, &set, &t, &opts)?;
        put(loaded, how == CompiledSource::Loaded);
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Writes the counters of `dir` to `*out`.
///
/// # Safety
/// `dir` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_compiled_dir_stats(
    dir: *const trie_compiled_dir,
    out: *mut trie_compiled_stats,
) -> trie_status {
    guard(|| {
        if out.is_null() {
            return Err(null("out"));
        }
        let c = try_ref(dir)?.counters();
        out.write(trie_compiled_stats {
            loaded: c.loaded,
            compiled: c.compiled,
            rejected: c.rejected,
            save_failed: c.save_failed,
        });
        Ok(())
    })
}

/// Frees `dir` (NULL: no-op); its files stay. Automata it handed out stay valid.
///
/// # Safety
/// `dir` NULL or live, freed once, with no call on it in flight.
#[no_mangle]
pub unsafe extern "C" fn trie_compiled_dir_free(dir: *mut trie_compiled_dir) {
    if dir.is_null() {
        return;
    }
    boundary(|| free_box(dir));
}

#[cfg(test)]
mod tests {
    use super::super::{trie_automaton_free, trie_automaton_n_members, trie_vocab_free, trie_vocab_new};
    use super::super::{TRIE_RENDER_JSON_STRING, TRIE_TOKEN_NORMAL};
    use super::*;
    use crate::capi::trie_status::*;
    use std::ffi::CString;

    #[test]
    fn a_compiled_dir_through_the_c_abi() {
        let dir = std::env::temp_dir().join(format!("libtrie-capi-compiled-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        unsafe {
            let toks: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
            let ptrs: Vec<*const u8> = toks.iter().map(|t| t.as_ptr()).collect();
            let lens: Vec<usize> = toks.iter().map(|t| t.len()).collect();
            let kinds = vec![TRIE_TOKEN_NORMAL; toks.len()];
            let mut v = std::ptr::null_mut();
            assert_eq!(
                trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), 128, [0i32].as_ptr(), 1, &mut v),
                TRIE_OK
            );
            let mut d = std::ptr::null_mut();
            assert_eq!(trie_compiled_dir_new(std::ptr::null(), &mut d), TRIE_ERR_NULL_ARGUMENT);
            let path = CString::new(dir.join("sub").to_str().unwrap()).unwrap();
            assert_eq!(trie_compiled_dir_new(path.as_ptr(), &mut d), TRIE_OK);
            let members = [&b"red"[..], b"green"];
            let (mp, ml): (Vec<_>, Vec<_>) = members.iter().map(|m| (m.as_ptr(), m.len())).unzip();
            let mut t = std::mem::zeroed::<trie_template>();
            assert_eq!(super::super::trie_template_init(&mut t), TRIE_OK);
            t.render = TRIE_RENDER_JSON_STRING;
            for want_loaded in [false, true] {
                let (mut a, mut loaded) = (std::ptr::null_mut(), !want_loaded);
                let st = trie_compiled_dir_compile_template(
                    d,
                    v,
                    mp.as_ptr(),
                    ml.as_ptr(),
                    2,
                    &t,
                    std::ptr::null(),
                    &mut a,
                    &mut loaded,
                );
                assert_eq!((st, loaded), (TRIE_OK, want_loaded));
                assert_eq!(trie_automaton_n_members(a), 2);
                trie_automaton_free(a);
            }
            let mut s = trie_compiled_stats::default();
            assert_eq!(trie_compiled_dir_stats(d, &mut s), TRIE_OK);
            assert_eq!((s.loaded, s.compiled, s.rejected, s.save_failed), (1, 1, 0, 0));
            assert_eq!(trie_compiled_dir_stats(d, std::ptr::null_mut()), TRIE_ERR_NULL_ARGUMENT);
            let mut a = std::ptr::null_mut();
            let st = trie_compiled_dir_compile_template(
                std::ptr::null(),
                v,
                mp.as_ptr(),
                ml.as_ptr(),
                2,
                &t,
                std::ptr::null(),
                &mut a,
                std::ptr::null_mut(),
            );
            assert_eq!((st, a.is_null()), (TRIE_ERR_NULL_ARGUMENT, true));
            trie_compiled_dir_free(d);
            trie_vocab_free(v);
        }
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
