//! Tool registries: an operator's file `NAME.json` of the set directory (an OpenAI `tools` list) that a request
//! names instead of sending its tools (llama-server's `"trie": {"registry": NAME}`).
//!
//! Invariants: a registry is looked up in the cache *before* it is read: the file is opened the way set files are
//! ([`Confinement`]: no symbolic link followed under the set directory, `..` and absolute paths refused, a fifo or
//! a device refused without being opened, the size bounded), its identity ([`FileKey`]: device, inode, size,
//! modification time with nanoseconds) taken from the open file, and only a new identity reads and recognizes the
//! file. The read is bounded by the size the open file had; a file that changed while it was read (grown, shrunk,
//! rewritten) is an I/O error, not cached, so the next request reads it again. A registry replaced while requests
//! run gets a new identity: running requests keep the one they hold, new requests get the new one.

use super::cache::Lru;
use super::confine::{Confinement, FileKey, Opened};
use super::recognize::{recognize_with, Limits, Recognition, Shape};
use super::search::{tool_texts, SearchLimits, ToolSearch};
use crate::error::{Error, ErrorKind, Result};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The longest registry name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// A registry, read and recognized: its tools' names (distinct) and parameters schemas (JSON text), and what a
/// tool search reads of each tool (its description and parameters' text, at most 16 KiB each), indexed on the first
/// [`Registry::search`].
#[derive(Debug)]
pub struct Registry {
    names: Vec<String>,
    parameters: Vec<String>,
    texts: Vec<String>,
    descriptions: Vec<String>,
    search: OnceLock<std::result::Result<Arc<ToolSearch>, Error>>,
    identity: u128,
}

impl Registry {
    /// The tools' names, in the file's order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The tools' `parameters` schemas (JSON text), by tool index.
    pub fn parameters(&self) -> &[String] {
        &self.parameters
    }

    /// The tools' descriptions ("" where a tool has none), by tool index.
    pub fn descriptions(&self) -> &[String] {
        &self.descriptions
    }

    /// The search index of the registry's tools (built on the first call, then shared: immutable).
    pub fn search(&self) -> Result<Arc<ToolSearch>> {
        let built = self.search.get_or_init(|| {
            let tools = self.names.iter().cloned().zip(self.texts.iter().cloned()).collect();
            ToolSearch::new(tools, registry_search_limits()).map(Arc::new)
        });
        built.clone()
    }

    /// A digest of the file's identity (device, inode, size, modification time with nanoseconds): a changed file
    /// has another one. For the caller's own caches of what it builds from the registry.
    pub fn identity(&self) -> u128 {
        self.identity
    }
}

/// The registries of one set directory, cached by file identity. Thread-safe.
pub struct RegistryCache {
    root: Option<PathBuf>,
    max_file_bytes: u64,
    max_tools: u64,
    lru: Lru<FileKey, Registry>,
}

/// What one [`RegistryCache::get`] did.
#[derive(Debug)]
pub struct GotRegistry {
    /// The registry.
    pub registry: Arc<Registry>,
    /// Whether this call read and recognized the file (else it was cached).
    pub read: bool,
}

impl RegistryCache {
    /// The registries of `set_dir` (`None`: none; the path is resolved once), files of at most `max_file_bytes`,
    /// at most `max_tools` tools each (0: no bound but the file's size), `capacity` registries kept. Errors: the
    /// set directory is not a directory (the message names it: it is the operator's).
    pub fn new(set_dir: Option<&Path>, max_file_bytes: u64, max_tools: u64, capacity: usize) -> Result<RegistryCache> {
        let root = match set_dir {
            None => None,
            Some(dir) => Some(dir.canonicalize().ok().filter(|p| p.is_dir()).ok_or_else(|| {
                Error::invalid(format!("LIBTRIE_SET_DIR / --trie-set-dir: {} is not a directory", dir.display()))
            })?),
        };
        Ok(RegistryCache { root, max_file_bytes, max_tools, lru: Lru::new(capacity) })
    }

    /// The registry `name` (the file `name.json` of the set directory): cached when the file's identity is
    /// unchanged, else read and recognized in this thread. Errors have a message fit for the client (an HTTP
    /// 400; the set directory's location is never in it): a bad name, no such file, a file refused (a link, not
    /// a regular file, too big), not UTF-8, not a list of functions (`InvalidArgument`), a file that changed
    /// while it was read (`Io`, not remembered).
    pub fn get(&self, name: &str) -> Result<GotRegistry> {
        let (opened, what) = self.open(name)?;
        let key = opened.key;
        let (result, read) = self.lru.get(&key, || self.load(opened, &what).map(Arc::new));
        Ok(GotRegistry { registry: result?, read })
    }

    /// The checks of [`RegistryCache::get`] that need no read: the name, the set directory, and the file opened
    /// as [`RegistryCache::get`] opens it (no link followed, a regular file within the size bound); whether its
    /// identity is cached (`true`: a `get` now reads nothing). Nothing is read or recognized: for an API server's
    /// admission, where reading a 100,000-tool registry after each change would hold up every other request; the
    /// engine that serves the request reads it (an error there names the registry too).
    pub fn check(&self, name: &str) -> Result<bool> {
        let (opened, _) = self.open(name)?;
        Ok(matches!(self.lru.peek(&opened.key), Some(Ok(_))))
    }

    /// The registry file `name.json` opened confined (the name checked first), and how messages name it.
    fn open(&self, name: &str) -> Result<(Opened, String)> {
        check_name(name)?;
        let what = format!("the registry '{name}'");
        if self.root.is_none() {
            return Err(Error::invalid(format!(
                "{what} is refused: this server has no set directory (--trie-set-dir / LIBTRIE_SET_DIR)"
            )));
        }
        let confinement =
            Confinement { root: self.root.as_deref(), allow_any_path: false, max_file_bytes: self.max_file_bytes };
        let opened = confinement.open(&format!("{name}.json"), &what)?;
        Ok((opened, what))
    }

    fn load(&self, opened: Opened, what: &str) -> Result<Registry> {
        let text = read_unchanged(opened.file, &opened.key, what)?;
        let limits = Limits {
            max_text_bytes: usize::try_from(self.max_file_bytes).unwrap_or(usize::MAX),
            max_members: match self.max_tools {
                0 => usize::MAX,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            },
            max_member_bytes: usize::try_from(self.max_file_bytes).unwrap_or(usize::MAX),
            ..Limits::default()
        };
        let found = recognize_with(Shape::Tools, text.as_bytes(), &limits)
            .map_err(|e| Error::new(e.kind(), format!("{what}: {}", e.message())))?;
        let set = match found {
            Recognition::Set(set) => set,
            Recognition::NotASet(reason) => {
                return Err(Error::invalid(format!("{what} is not a list of functions: {reason}")));
            }
        };
        let names: Vec<String> = set.members.into_iter().map(|m| String::from_utf8_lossy(&m).into_owned()).collect();
        let parameters = set.payloads.unwrap_or_default();
        let found = tool_texts(text.as_bytes(), &registry_search_limits())
            .map_err(|e| Error::new(e.kind(), format!("{what}: {}", e.message())))?;
        if found.len() != names.len() || found.iter().zip(&names).any(|(t, m)| &t.name != m) {
            return Err(Error::invalid(format!("{what}: its tools are not read alike by the search (a bug)")));
        }
        let (texts, descriptions) = found.into_iter().map(|t| (t.text, t.description)).unzip();
        let search = OnceLock::new();
        Ok(Registry { names, parameters, texts, descriptions, search, identity: identity_of(&opened.key) })
    }
}

/// A registry's search bounds: the file's size bounds it already (no bound on the tools but 32-bit indices).
fn registry_search_limits() -> SearchLimits {
    SearchLimits { max_tools: u32::MAX as usize, max_list_bytes: usize::MAX, ..SearchLimits::default() }
}

/// A registry name: 1 to [`MAX_NAME_BYTES`] characters of `[A-Za-z0-9_.-]`, not starting with `.` (so no
/// path: no `/`, no `..`, no hidden file).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "a registry name is 1 to {MAX_NAME_BYTES} characters of [A-Za-z0-9_.-], not starting with '.' (got {})",
        super::spec::shown(name)
    )))
}

/// The content of the open file, which must still be the file of `key`: exactly `key.size` bytes, and the same
/// identity after the read (a file growing, shrinking or rewritten while read is an `Io` error).
fn read_unchanged(file: std::fs::File, key: &FileKey, what: &str) -> Result<String> {
    let changed = || Error::new(ErrorKind::Io, format!("{what} changed while it was read; try again"));
    let mut data = Vec::with_capacity(usize::try_from(key.size).unwrap_or(0));
    let mut reader = (&file).take(key.size.saturating_add(1));
    reader.read_to_end(&mut data).map_err(|e| {
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        Error::new(ErrorKind::Io, format!("{what} cannot be read: {text}"))
    })?;
    let meta = file.metadata().map_err(|_| changed())?;
    let now = (meta.size(), meta.mtime(), meta.mtime_nsec(), meta.ino());
    if data.len() as u64 != key.size || now != (key.size, key.mtime, key.mtime_nsec, key.ino) {
        return Err(changed());
    }
    String::from_utf8(data).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        Error::invalid(format!("{what} is not valid UTF-8 (at byte {bad})"))
    })
}

fn identity_of(key: &FileKey) -> u128 {
    let mut h = Vec::with_capacity(64);
    h.extend_from_slice(b"libtrie-registry-v1\0");
    for v in [key.dev, key.ino, key.size, key.mtime as u64, key.mtime_nsec as u64] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_128(&h)
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
