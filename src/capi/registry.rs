//! The C ABI of tool registries (`crate::sets::RegistryCache`): `trie_registry_*`.

use super::handle::{arc_to_ptr, box_to_ptr, free_arc, free_box, try_ref, Castable, OwnershipArc, OwnershipBox};
use super::{check_out, guard, put, slice, trie_status};
use crate::error::Error;
use crate::sets::{Registry, RegistryCache};
use std::ffi::{c_char, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The tool registries of a set directory (files `NAME.json`, OpenAI `tools` lists), cached by file identity (see
/// [`trie_registry_cache_get`]). Opaque; thread-safe. Free with [`trie_registry_cache_free`] once no call is in
/// flight.
pub struct trie_registry_cache {
    _private: [u8; 0],
}

/// One registry, read and recognized: its tools' names and parameters schemas. Opaque, immutable, reference
/// counted (a registry replaced on disk while a request holds this one stays valid): free with
/// [`trie_registry_free`]. Views into it stay valid while it lives.
pub struct trie_registry {
    _private: [u8; 0],
}

impl Castable for trie_registry_cache {
    type Ownership = OwnershipBox;
    type RustType = RegistryCache;
    const WHAT: &'static str = "cache";
}

impl Castable for trie_registry {
    type Ownership = OwnershipArc;
    type RustType = Registry;
    const WHAT: &'static str = "registry";
}

/// Creates the registry cache of `set_dir` (NUL-terminated; resolved once; NULL or "": no registries, every get
/// fails with a message saying so): files of at most `max_file_bytes`, at most `max_tools` tools each (0: no bound
/// but the size), `capacity` registries kept (0 counts as 1). Errors: `TRIE_ERR_INVALID_ARGUMENT` when `set_dir`
/// is not a directory. On failure `*out` is NULL.
///
/// # Safety
/// `set_dir` must be NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_cache_new(
    set_dir: *const c_char,
    max_file_bytes: u64,
    max_tools: u64,
    capacity: u64,
    out: *mut *mut trie_registry_cache,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let dir = if set_dir.is_null() { &[][..] } else { CStr::from_ptr(set_dir).to_bytes() };
        let dir = (!dir.is_empty()).then(|| Path::new(OsStr::from_bytes(dir)));
        let capacity = usize::try_from(capacity).unwrap_or(usize::MAX).max(1);
        out.write(box_to_ptr(RegistryCache::new(dir, max_file_bytes, max_tools, capacity)?));
        Ok(())
    })
}

/// Frees a registry cache (NULL: nothing). Registries handed out stay valid.
///
/// # Safety
/// `cache` must be NULL or a live registry cache, freed once, with no call on it in flight.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_cache_free(cache: *mut trie_registry_cache) {
    guard(|| {
        free_box(cache);
        Ok(())
    });
}

/// The registry `name` (`len` bytes: 1 to 128 characters of `[A-Za-z0-9_.-]`, not starting with `.`): the file
/// `name.json` of the set directory. The file is opened first, without following links (a link, a fifo, a device,
/// a directory or a file over `max_file_bytes` is refused, never read and never blocking), and looked up in the
/// cache by its identity (device, inode, size, modification time with nanoseconds): only a new identity reads and
/// recognizes it (an OpenAI `tools` list: distinct names, object `parameters`). A file that changed while it was
/// read is `TRIE_ERR_IO` (not remembered: try again). On success `*out` is a new reference and `*read` (when not
/// NULL) says whether this call read the file. On failure `*out` is NULL and [`trie_last_error`](super::trie_last_error)
/// holds a message fit for the client (an HTTP 400; the set directory's location is never in it).
///
/// # Safety
/// `cache` must be NULL or a live registry cache; `name` must hold `len` bytes; `out` NULL or writable; `read`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_cache_get(
    cache: *const trie_registry_cache,
    name: *const u8,
    len: usize,
    out: *mut *mut trie_registry,
    read: *mut bool,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let cache = try_ref(cache)?;
        let name = std::str::from_utf8(slice(name, len, "name")?)
            .map_err(|_| Error::invalid("a registry name is 1 to 128 characters of [A-Za-z0-9_.-] (not UTF-8)"))?;
        let got = cache.get(name)?;
        if !read.is_null() {
            put(read, got.read);
        }
        out.write(arc_to_ptr(got.registry));
        Ok(())
    })
}

/// Checks what [`trie_registry_cache_get`] would check before reading: the name, the set directory, the file
/// opened as `get` opens it (no link followed, a regular file within the size bound). Reads and recognizes nothing,
/// for an API server's admission (the engine that serves the request reads the registry). `*cached` (may be NULL):
/// whether the file's current identity is cached (a `get` now reads nothing). Errors as for `get`, with a message
/// fit for the client.
///
/// # Safety
/// `cache` must be NULL or a live registry cache; `name` must hold `len` bytes; `cached` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_cache_check(
    cache: *const trie_registry_cache,
    name: *const u8,
    len: usize,
    cached: *mut bool,
) -> trie_status {
    guard(|| {
        let cache = try_ref(cache)?;
        let name = std::str::from_utf8(slice(name, len, "name")?)
            .map_err(|_| Error::invalid("a registry name is 1 to 128 characters of [A-Za-z0-9_.-] (not UTF-8)"))?;
        let hit = cache.check(name)?;
        if !cached.is_null() {
            put(cached, hit);
        }
        Ok(())
    })
}

/// Drops a reference to a registry (NULL: nothing).
///
/// # Safety
/// `registry` must be NULL or a live registry, each reference freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_free(registry: *const trie_registry) {
    guard(|| {
        free_arc(registry);
        Ok(())
    });
}

/// The number of tools of a registry (0 for NULL).
///
/// # Safety
/// `registry` must be NULL or a live registry.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_n_tools(registry: *const trie_registry) -> usize {
    super::boundary(|| try_ref(registry).map(|r| r.names().len()).unwrap_or(0))
}

/// Views of tool `i`'s name and parameters schema (JSON text) in `registry`, valid while it lives.
/// `TRIE_ERR_INVALID_ARGUMENT` for `i` out of range.
///
/// # Safety
/// `registry` must be NULL or a live registry; the four output pointers writable.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_tool(
    registry: *const trie_registry,
    i: usize,
    name: *mut *const u8,
    name_len: *mut usize,
    parameters: *mut *const u8,
    parameters_len: *mut usize,
) -> trie_status {
    guard(|| {
        let r = try_ref(registry)?;
        for (p, what) in [(name as *mut u8, "name"), (parameters as *mut u8, "parameters")] {
            if p.is_null() {
                return Err(super::null(what));
            }
        }
        for (p, what) in [(name_len, "name_len"), (parameters_len, "parameters_len")] {
            if p.is_null() {
                return Err(super::null(what));
            }
        }
        let (Some(n), Some(p)) = (r.names().get(i), r.parameters().get(i)) else {
            return Err(Error::invalid(format!("tool {i} of a registry of {} tools", r.names().len())));
        };
        put(name, n.as_ptr());
        put(name_len, n.len());
        put(parameters, p.as_ptr());
        put(parameters_len, p.len());
        Ok(())
    })
}

/// Writes the registry's identity, a 16-byte digest of its file's device, inode, size and modification time
/// (nanoseconds), to `out`: a changed file has another one (a key for what the caller builds from a registry).
///
/// # Safety
/// `registry` must be NULL or a live registry; `out` NULL or 16 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_identity(registry: *const trie_registry, out: *mut u8) -> trie_status {
    guard(|| {
        let r = try_ref(registry)?;
        if out.is_null() {
            return Err(super::null("out"));
        }
        std::ptr::copy_nonoverlapping(r.identity().to_le_bytes().as_ptr(), out, 16);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::trie_status::*;

    #[test]
    fn through_the_c_abi() {
        let tmp = std::env::temp_dir().join(format!("libtrie-capi-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("t.json"), r#"[{"name": "f", "parameters": {"type": "object"}}]"#).unwrap();
        let dir = std::ffi::CString::new(tmp.to_str().unwrap()).unwrap();
        unsafe {
            let mut cache = std::ptr::null_mut();
            assert_eq!(trie_registry_cache_new(dir.as_ptr(), 1 << 20, 0, 4, &mut cache), TRIE_OK);
            let mut r = std::ptr::null_mut();
            let mut read = false;
            assert_eq!(trie_registry_cache_get(cache, b"t".as_ptr(), 1, &mut r, &mut read), TRIE_OK);
            assert!(read && trie_registry_n_tools(r) == 1);
            let (mut n, mut nl, mut p, mut pl) = (std::ptr::null(), 0, std::ptr::null(), 0);
            assert_eq!(trie_registry_tool(r, 0, &mut n, &mut nl, &mut p, &mut pl), TRIE_OK);
            assert_eq!(std::slice::from_raw_parts(n, nl), b"f");
            assert_eq!(trie_registry_tool(r, 1, &mut n, &mut nl, &mut p, &mut pl), TRIE_ERR_INVALID_ARGUMENT);
            let mut id = [0u8; 16];
            assert_eq!(trie_registry_identity(r, id.as_mut_ptr()), TRIE_OK);
            let mut r2 = std::ptr::null_mut();
            assert_eq!(
                trie_registry_cache_get(cache, b"../t".as_ptr(), 4, &mut r2, &mut read),
                TRIE_ERR_INVALID_ARGUMENT
            );
            assert!(r2.is_null());
            trie_registry_free(r);
            trie_registry_cache_free(cache);
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
