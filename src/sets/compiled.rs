//! Compiled sets shared between processes: a directory of the operator's in which a compiled automaton is a file
//! named by a digest of everything that decides its content, written once by the first process that compiles it
//! and mapped lazily ([`Automaton::load_lazy`]) by every other, so N serving processes on one machine hold one
//! copy in the page cache instead of N heaps, and only the first compiles.
//!
//! Invariants:
//! - **the name is the key**: `xxh3-128(version tag, vocabulary fingerprint, each part of the caller's key)` in
//!   hex, plus `.trie`. The version tag holds this crate's version, so another libtrie never maps a file of a
//!   different compiler. Parts are length-prefixed, so no two lists of parts write the same bytes. No text a
//!   client sent is ever part of a path: only the hex digest is.
//! - **a file is never trusted blindly**: a file that fails to load (truncated, corrupt header or section table,
//!   another format version, another vocabulary) is compiled again and replaced ([`Counters::rejected`]). What a
//!   lazy load does not check at once (the data blocks) is checked against the block hashes on first use: a
//!   flipped bit there is an error of the queries that reach it, never a wrong mask.
//! - **writes are atomic**: [`Automaton::save`] writes a temporary file beside the target, flushes it, renames it
//!   into place and flushes the directory. Two processes that miss the same key at once both compile; the last
//!   rename wins, both files are complete, and a reader maps either the old complete file or the new one, never a
//!   partial one (a mapping keeps the inode it mapped alive, so a replaced file does not disturb its readers).
//!   No lock file: a crashed writer leaves at worst a `.NAME.tmp-*` file, never a stale lock.
//! - **the compiled automaton is returned mapped**: after saving, the file is loaded back lazily and that is what
//!   the caller gets, so the compiling process shares the page cache with the others too (the heap copy is
//!   dropped, and the freed heap given back to the system with glibc's `malloc_trim`). If the save fails (a full disk, a read-only directory), the heap copy is returned: the request is
//!   served, and [`Counters::save_failed`] says the directory did not help.
//! - **bounded by the operator**: nothing is ever deleted here except a file that failed to load; the directory
//!   grows by one file per distinct (vocabulary, set, options). It is the operator's (trusted path, created
//!   with mode 0700 if missing); sets a client chooses (inline sets, additions and removals) are not written.

use crate::automaton::{Automaton, CompileOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::template::{End, Render, Template};
use crate::vocab::Vocabulary;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a [`CompiledDir`] has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Sets served by mapping a file of the directory (no compile).
    pub loaded: u64,
    /// Sets compiled because their file was missing or rejected.
    pub compiled: u64,
    /// Files that failed to load (truncated, corrupt, another version or vocabulary), compiled again and replaced.
    pub rejected: u64,
    /// Compiled sets whose file could not be written (the set was still served, from the heap).
    pub save_failed: u64,
}

/// How [`CompiledDir::get_or_compile`] got its automaton.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Mapped from the directory's file: nothing compiled.
    Loaded,
    /// Compiled by this call (and saved, unless the save failed).
    Compiled,
}

/// The directory of compiled sets (see the module doc). Thread-safe; any number of processes may share it.
#[derive(Debug)]
pub struct CompiledDir {
    dir: PathBuf,
    loaded: AtomicU64,
    compiled: AtomicU64,
    rejected: AtomicU64,
    save_failed: AtomicU64,
}

/// The tag hashed first into every key: a file of another libtrie (or another key layout) is never mapped.
const VERSION_TAG: &str = concat!("libtrie-compiled-v1 ", env!("CARGO_PKG_VERSION"));

impl CompiledDir {
    /// The directory `dir`, created (mode 0700, parents included) if it is missing. Errors: it exists and is not a
    /// directory, or cannot be created ([`ErrorKind::InvalidArgument`] naming it: it is the operator's setting).
    pub fn new(dir: impl Into<PathBuf>) -> Result<CompiledDir> {
        let dir = dir.into();
        if !dir.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| {
                Error::invalid(format!(
                    "LIBTRIE_COMPILED_DIR / --trie-compiled-dir: {} is not a directory and cannot be created: {e}",
                    dir.display()
                ))
            })?;
        }
        let zero = || AtomicU64::new(0);
        Ok(CompiledDir { dir, loaded: zero(), compiled: zero(), rejected: zero(), save_failed: zero() })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The file of the key `parts` for `vocab`: `<dir>/<32 hex digits>.trie`. The parts are whatever decides the
    /// automaton besides the vocabulary: a digest of the members' content, the template, the compile options
    /// that change the result or bound it.
    pub fn file_for(&self, vocab: &Vocabulary, parts: &[&[u8]]) -> PathBuf {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut part = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(VERSION_TAG.as_bytes());
        part(&vocab.fingerprint().to_le_bytes());
        for p in parts {
            part(p);
        }
        self.dir.join(format!("{:032x}.trie", h.digest128()))
    }

    /// The automaton of the key `parts` for `vocab`: the directory's file mapped lazily if it loads, else
    /// `compile()` run in this thread, saved atomically and returned mapped from the saved file. A file that fails
    /// to load is replaced. Errors: only those of `compile` (a failed save is counted, not returned).
    pub fn get_or_compile(
        &self,
        vocab: &Arc<Vocabulary>,
        parts: &[&[u8]],
        compile: impl FnOnce() -> Result<Automaton>,
    ) -> Result<(Automaton, Source)> {
        let path = self.file_for(vocab, parts);
        match Automaton::load_lazy(vocab.clone(), &path) {
            Ok(a) => {
                self.loaded.fetch_add(1, Ordering::Relaxed);
                return Ok((a, Source::Loaded));
            }
            Err(e) if e.kind() == ErrorKind::Io && !path.exists() => {} // missing: the first to ask
            Err(_) => {
                // Never trusted: removed now, so that a failing compile below does not leave it for the next one.
                self.rejected.fetch_add(1, Ordering::Relaxed);
                let _ = std::fs::remove_file(&path);
            }
        }
        let a = compile()?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        if a.save(&path).is_err() {
            self.save_failed.fetch_add(1, Ordering::Relaxed);
            return Ok((a, Source::Compiled));
        }
        // Mapped from the file just written (or a concurrent writer's, equally complete): the page cache's copy.
        match Automaton::load_lazy(vocab.clone(), &path) {
            Ok(mapped) => {
                drop(a);
                release_freed_heap();
                Ok((mapped, Source::Compiled))
            }
            Err(_) => Ok((a, Source::Compiled)),
        }
    }

    /// [`Automaton::compile_template`] through the directory: the key is a digest of the members (in the order
    /// given: the same set listed in another order is another file), the template and the options that change the
    /// result. Errors: those of [`Automaton::compile_template`].
    pub fn compile_template<S: AsRef<[u8]> + Sync>(
        &self,
        vocab: &Arc<Vocabulary>,
        members: &[S],
        template: &Template,
        options: &CompileOptions,
    ) -> Result<(Automaton, Source)> {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for m in members {
            let m = m.as_ref();
            h.update(&(m.len() as u64).to_le_bytes());
            h.update(m);
        }
        let members_digest = h.digest128().to_le_bytes();
        let parts: [&[u8]; 4] = [b"members", &members_digest, &template_part(template), &options_part(options)];
        self.get_or_compile(vocab, &parts, || Automaton::compile_template(vocab.clone(), members, template, options))
    }

    /// What the directory has done so far (this process's calls).
    pub fn counters(&self) -> Counters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Counters {
            loaded: get(&self.loaded),
            compiled: get(&self.compiled),
            rejected: get(&self.rejected),
            save_failed: get(&self.save_failed),
        }
    }
}

/// Gives the heap the compile freed back to the system (glibc keeps it otherwise: measured on the 4.5 M npm names,
/// the compiling process kept 462 MB of freed heap beside the mapped file; 27 MB after this). Elsewhere nothing.
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's arenas to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The compile options as a key part: those that change the automaton (`drop_unreachable`) and the bounds (a set
/// compiled under a larger bound is not handed to a caller whose bound it exceeds). The alignment method is left
/// out: both methods give the same automaton.
pub fn options_part(opts: &CompileOptions) -> Vec<u8> {
    let bound = |v: Option<usize>| v.map_or(0, |v| v as u64);
    [opts.drop_unreachable as u64, bound(opts.max_states), bound(opts.max_bytes)]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// A template as a key part: its prefix, suffix (length-prefixed), render and end.
pub fn template_part(t: &Template) -> Vec<u8> {
    let render = match t.render {
        Render::Raw => 0u8,
        Render::JsonString => 1,
        Render::JsonText => 2,
    };
    let end = match t.end {
        End::Eog => 0u8,
        End::Open => 1,
    };
    let mut out = Vec::with_capacity(t.prefix.len() + t.suffix.len() + 18);
    for bytes in [&t.prefix, &t.suffix] {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out.extend_from_slice(&[render, end]);
    out
}
