//! Messages and version: the last error, status texts, the library version and the sampler name.

use super::*;

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
