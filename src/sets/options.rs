//! The operator's rules of the request front end, read by the spec parser ([`super::spec`]) and the cache
//! ([`super::front`]): one place, so neither imports the other for them.

use std::path::PathBuf;

/// What the operator allows (the same names and defaults as the vLLM processor's and llama-server's settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The set directory; `None`: no sets from files (only inline sets). Resolved once by [`SetCache::new`](super::SetCache::new).
    pub set_dir: Option<PathBuf>,
    /// Trusted callers only (an offline script): any readable regular file, absolute or relative to `set_dir`.
    pub allow_any_path: bool,
    /// The most strings of an inline set (`strings`, `add` and `remove` together). Default 10,000.
    pub max_inline_strings: u64,
    /// The most bytes of an inline set, a byte per string counted for its separator. Default 1 MiB.
    pub max_inline_bytes: u64,
    /// The largest set file read. Default 256 MiB.
    pub max_file_bytes: u64,
    /// `CompileOptions::max_states` of every compile (0: the library's own bounds).
    pub max_states: u64,
    /// `CompileOptions::max_bytes` of every compile (0: none).
    pub max_bytes: u64,
    /// Compiled sets kept (least recently used dropped first). Default 64.
    pub capacity: usize,
    /// The compiled directory ([`CompiledDir`](super::CompiledDir); `LIBTRIE_COMPILED_DIR`, llama-server's
    /// `--trie-compiled-dir`): the operator's directory (created 0700 if missing) where compiled sets of set files
    /// are saved and mapped from, so a restarted server, or every other process of the machine, maps the file
    /// (one copy in the page cache) instead of compiling. Keyed by a digest of the vocabulary, the file's content
    /// (not its name or identity) and the compile options; sets a client chooses (inline sets, additions and
    /// removals) are not saved. A damaged or stale file is compiled again and replaced; nothing else is ever
    /// deleted there. `None`: nothing saved.
    pub cache_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            set_dir: None,
            allow_any_path: false,
            max_inline_strings: 10_000,
            max_inline_bytes: 1 << 20,
            max_file_bytes: 256 << 20,
            max_states: 0,
            max_bytes: 0,
            capacity: 64,
            cache_dir: None,
        }
    }
}
