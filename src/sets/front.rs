//! The front end itself: a request's spec in, a compiled automaton (cached) or a 400-grade error out.

use super::cache::Lru;
use super::compiled::{options_part, CompiledDir, Source as CompiledSource};
use super::confine::{Confinement, FileKey, Opened};
pub use super::options::Options;
use super::read;
use super::spec::{self, Source, Spec};
use crate::automaton::{Automaton, CompileOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::vocab::Vocabulary;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What the cache has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Compiles run (failed ones included).
    pub compiles: u64,
    /// Lookups served without compiling.
    pub hits: u64,
    /// Compiled sets (and failures) held now.
    pub entries: u64,
    /// Compiles served by mapping a saved file of [`Options::cache_dir`] instead (counted in `compiles` too).
    pub loaded: u64,
    /// Files of [`Options::cache_dir`] that failed to load (truncated, corrupt, another version), compiled again
    /// and replaced.
    pub rejected: u64,
}

/// The result of [`SetCache::get`].
#[derive(Clone)]
pub struct Got {
    /// The compiled set.
    pub automaton: Arc<Automaton>,
    /// Whether this call compiled it (else it was cached, or compiled by a concurrent call).
    pub compiled: bool,
    /// How messages name the set (`the set 'tools'`, `the set file 'sub/x.txt'`, `the inline set`).
    pub what: String,
    /// Seconds this call spent compiling (0 when it did not compile).
    pub seconds: f64,
    /// This call mapped the set from a file of [`Options::cache_dir`] that another process (or an earlier run)
    /// had saved, instead of compiling it (`compiled` is true too: the set was new to this cache).
    pub loaded: bool,
}

/// Identifies a compiled set: the file's identity or the inline members, the options, the changes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    File(FileKey, bool),
    Strings(Arc<[String]>, bool),
    Changed(Box<Key>, Vec<String>, Vec<String>),
}

/// The members of a set, ready to compile: a set file opened (not read yet), or inline strings.
enum Members {
    File(Opened),
    Strings(Arc<[String]>),
}

/// A parsed spec with its set file open: the base set's key, the changed set's key (when it has changes).
struct Resolved {
    members: Members,
    base: Key,
    key: Option<Key>,
    what: String,
    opts: CompileOptions,
    add: Vec<String>,
    remove: Vec<String>,
}

/// A request-set front end over one vocabulary: checks specs, compiles sets once, keeps them in an LRU.
/// Thread-safe; compiles run in the calling thread (concurrent requests for one set wait for one compile).
/// Without a vocabulary it only checks specs ([`SetCache::check`], for admission).
pub struct SetCache {
    options: Options,
    /// The real path of the set directory.
    root: Option<PathBuf>,
    vocab: Option<Arc<Vocabulary>>,
    lru: Lru<Key, Automaton>,
    compiled_dir: Option<CompiledDir>,
}

impl SetCache {
    /// A cache for `vocab` (`None`: checks only) under the operator's `options`. Errors: the set directory is not
    /// a directory (the message names it: it is the operator's, not a request's).
    pub fn new(vocab: Option<Arc<Vocabulary>>, options: Options) -> Result<SetCache> {
        let root = match &options.set_dir {
            None => None,
            Some(dir) => {
                let real = dir.canonicalize().ok().filter(|p| p.is_dir());
                Some(real.ok_or_else(|| {
                    Error::invalid(format!("LIBTRIE_SET_DIR / --trie-set-dir: {} is not a directory", dir.display()))
                })?)
            }
        };
        let compiled_dir = options.cache_dir.as_ref().map(CompiledDir::new).transpose()?;
        let lru = Lru::new(options.capacity);
        Ok(SetCache { options, root, vocab, lru, compiled_dir })
    }

    /// The operator's options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Checks the spec `json` as [`get`](Self::get) would, without reading or compiling: the shape, the inline
    /// bounds, and for a set file its confinement, type and size (the file is opened, then closed).
    pub fn check(&self, json: &[u8]) -> Result<()> {
        let spec = spec::parse(json, &self.options)?;
        if let Source::File { path, what } = &spec.source {
            self.confinement().open(path, what)?;
        }
        Ok(())
    }

    /// The compiled set the spec `json` names: from the LRU, or compiled in this thread (a set file is opened
    /// once: its identity and its content come from that open file). Errors have a message fit for the client
    /// (an HTTP 400): the spec's shape or bounds, the file refused or unreadable, not UTF-8, empty, a member the
    /// vocabulary cannot spell, beyond the compile bounds.
    pub fn get(&self, json: &[u8]) -> Result<Got> {
        let t = Instant::now();
        let (vocab, r) = self.resolve(json)?;
        let Resolved { members, base, key, what, opts, add, remove } = r;
        let loaded = std::cell::Cell::new(false);
        let compile_base = || {
            let (a, source) = self.compile(vocab, members, &opts, &what)?;
            loaded.set(source == Some(CompiledSource::Loaded));
            Ok(a)
        };
        let (result, compiled) = match &key {
            None => self.lru.get(&base, compile_base),
            Some(key) => self.lru.get(key, || {
                let from = self.lru.get(&base, compile_base).0?;
                from.with_changes(&add, &remove, &opts).map(Arc::new).map_err(|e| compile_error(&what, e))
            }),
        };
        let seconds = if compiled { t.elapsed().as_secs_f64() } else { 0.0 };
        Ok(Got { automaton: result?, compiled, what, seconds, loaded: compiled && loaded.get() })
    }

    /// Like [`get`](Self::get) without compiling: the compiled set when it is ready (or its failure, when a
    /// failure of the set is remembered), `None` when it is not compiled yet or still compiling.
    pub fn lookup(&self, json: &[u8]) -> Result<Option<Got>> {
        let (_, r) = self.resolve(json)?;
        let found = self.lru.peek(r.key.as_ref().unwrap_or(&r.base));
        match found {
            None => Ok(None),
            Some(result) => {
                Ok(Some(Got { automaton: result?, compiled: false, what: r.what, seconds: 0.0, loaded: false }))
            }
        }
    }

    /// Parses `json` and opens its set file: what [`get`](Self::get) needs to find or compile the set.
    fn resolve(&self, json: &[u8]) -> Result<(&Arc<Vocabulary>, Resolved)> {
        let Some(vocab) = &self.vocab else {
            return Err(Error::invalid("this set cache has no vocabulary: it only checks sets"));
        };
        let spec = spec::parse(json, &self.options)?;
        let what = spec.what().to_string();
        let Spec { source, drop_unreachable: drop, add, remove } = spec;
        let (members, base) = match source {
            Source::File { path, what } => {
                let opened = self.confinement().open(&path, &what)?;
                let key = Key::File(opened.key, drop);
                (Members::File(opened), key)
            }
            Source::Strings(s) => {
                let s: Arc<[String]> = s.into();
                (Members::Strings(s.clone()), Key::Strings(s, drop))
            }
        };
        let key = (!add.is_empty() || !remove.is_empty())
            .then(|| Key::Changed(Box::new(base.clone()), add.clone(), remove.clone()));
        let opts = self.compile_options(drop);
        Ok((vocab, Resolved { members, base, key, what, opts, add, remove }))
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> Stats {
        let c = self.lru.counters();
        let d = self.compiled_dir.as_ref().map(CompiledDir::counters).unwrap_or_default();
        let entries = self.lru.len() as u64;
        Stats { compiles: c.compiles, hits: c.hits, entries, loaded: d.loaded, rejected: d.rejected }
    }

    fn confinement(&self) -> Confinement<'_> {
        Confinement {
            root: self.root.as_deref(),
            allow_any_path: self.options.allow_any_path,
            max_file_bytes: self.options.max_file_bytes,
        }
    }

    fn compile_options(&self, drop_unreachable: bool) -> CompileOptions {
        let bound = |v: u64| (v != 0).then(|| usize::try_from(v).unwrap_or(usize::MAX));
        let mut o = CompileOptions::new();
        o.drop_unreachable = drop_unreachable;
        o.max_states = bound(self.options.max_states);
        o.max_bytes = bound(self.options.max_bytes);
        o
    }

    /// Compiles the members (a set file's are read here). A set file's compiled set goes through the compiled
    /// directory when there is one: keyed by a digest of the file's content (not its identity: another process,
    /// another path, a touched file with the same content map the same file) and the compile options. Also says
    /// how the compiled directory got it (`None`: no directory, or inline members).
    fn compile(
        &self,
        vocab: &Arc<Vocabulary>,
        members: Members,
        opts: &CompileOptions,
        what: &str,
    ) -> Result<(Arc<Automaton>, Option<CompiledSource>)> {
        let text = match &members {
            Members::Strings(_) => None,
            Members::File(opened) => {
                Some(read::members(&opened.file, opened.key.size, self.options.max_file_bytes, what)?)
            }
        };
        let strings: Vec<&str> = match (&members, &text) {
            (Members::Strings(s), _) => s.iter().map(String::as_str).collect(),
            (Members::File(_), text) => read::lines(text.as_deref().unwrap_or_default()),
        };
        if strings.is_empty() {
            return Err(Error::new(ErrorKind::EmptySet, format!("{what} is empty: a set needs at least one member")));
        }
        let compile = || Automaton::compile(vocab.clone(), &strings, opts).map_err(|e| compile_error(what, e));
        match (&self.compiled_dir, &text) {
            (Some(dir), Some(text)) => {
                let content = xxhash_rust::xxh3::xxh3_128(text.as_bytes()).to_le_bytes();
                let o = options_part(opts);
                let (a, source) = dir.get_or_compile(vocab, &[b"set-file-lines", &content, &o], compile)?;
                Ok((Arc::new(a), Some(source)))
            }
            _ => Ok((Arc::new(compile()?), None)),
        }
    }

    /// The real path of the set directory (for the operator's logs; never put it in a client's message).
    pub fn set_dir(&self) -> Option<&Path> {
        self.root.as_deref()
    }
}

/// A compile error as the client sees it: the set, the status, the library's message, and what to do about it.
fn compile_error(what: &str, e: Error) -> Error {
    let (name, hint) = match e.kind() {
        ErrorKind::LimitExceeded => (
            "limit exceeded",
            " (this server's bounds: LIBTRIE_MAX_STATES / --trie-max-states, LIBTRIE_MAX_BYTES / --trie-max-bytes)",
        ),
        ErrorKind::UnreachableString => ("unreachable string", " (\"drop_unreachable\": true drops such members)"),
        ErrorKind::EmptySet => ("empty set", ""),
        _ => ("error", ""),
    };
    let mut msg = e.message().to_string();
    if msg.len() > 600 {
        let cut = (0..=600).rev().find(|&i| msg.is_char_boundary(i)).unwrap_or(0);
        msg.truncate(cut);
        msg.push_str("...");
    }
    Error::new(e.kind(), format!("{what} cannot be compiled: {name}: {msg}{hint}"))
}
