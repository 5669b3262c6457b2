//! The file format of saved vocabularies and automata: their frozen arrays, laid out so that loading is a
//! memory map plus validation, never a rebuild.
//!
//! ```text
//! offset 0   header, 64 bytes:
//!            magic "LIBTRIE\0" | format version u32 | endian tag u32 (0x01020304 as written) | kind u32 |
//!            number of sections u32 | file length u64 | checksum u64 (see `checksum`) |
//!            vocabulary fingerprint (xxh3-128) 16 bytes | body end u64 (version 2; zero in version 1)
//! offset 64  section table: per section tag u32 | element size u32 | offset u64 | element count u64
//! then       the sections, each at a 64-byte aligned offset, in native byte order
//! version 2: at the body end, the xxh3-64 of each 64 KiB block of the body (bytes 64..body end), u64 each
//!            (version 8: of each 2 KiB block)
//! ```
//!
//! The checksum is the xxh3-64 of the header (checksum field zeroed) and of the block hashes; version 1 files have
//! the same checksum over the whole file in 1 MiB blocks, without stored block hashes. Version 2 stores them so that a file
//! can be checked block by block on first use ([`Reader::open_lazy`]): the header's checksum vouches for the
//! stored hashes, each stored hash for its block. Both versions are read.
//!
//! Version 3 is version 2's layout, written only for files whose owner asks for it ([`Writer::require_version`])
//! because they hold a section an older libtrie would ignore and must not: an automaton whose members carry
//! values (a libtrie that reads only versions 1 and 2 refuses such a file instead of loading it without its
//! values). Every other file is still written as version 2, byte for byte as before, so older libtries keep
//! reading them. Version 4 is the same layout again, required by an automaton that keeps no rows for its unary
//! states (`automaton/derived.rs`): an older libtrie would read their empty rows as dead ends. Version 5 is the
//! same layout again, required by a file holding an array of integers at a narrower width than its type's
//! ([`Writer::section_packed`], `util/packed.rs`: the element size in the section table is the width), which an
//! older libtrie would refuse by its element size anyway. Version 6 is the same layout again, required by an
//! automaton whose branching states keep only their byte children (an older libtrie would read those as whole
//! rows). Version 7 is the same layout again, required by an automaton whose members are front-coded (each
//! stores only the bytes after the prefix it shares with the member before it, `automaton/front.rs`: an older
//! libtrie would read those suffixes as whole members). Version 8 is version 2's layout with blocks of 2 KiB
//! instead of 64 KiB ([`SMALL_BLOCK`]): the first use of a state of a lazily loaded automaton hashes the few
//! blocks its arrays lie in, and a smaller block is fewer pages to map and bytes to hash (the stored hashes are
//! 0.4% of the body instead of 0.01%; on all npm names the first use p99 was about 16 us with 2 KiB blocks, 17-18
//! with 4, 25 with 8, 35 with 16, 100 with 64). It is written for every file whose body spans more than one 64 KiB
//! block, or that needs version 4 or later anyway (whatever its size: an older libtrie refuses it by its version
//! already); smaller files keep their version and blocks, byte for byte. Version 9 is version 8's layout again,
//! required by an automaton holding ascending arrays in blocks (`automaton/ascending.rs`: an older libtrie would
//! miss their plain sections). Files of versions 8 and 9 may hold the sections of versions 3 to 7. Versions 1 to 9
//! are read, the block size by the version; what a later version's section means is checked by its owner (an
//! automaton refuses a values section, derived rows, packed arrays, byte rows, front-coded members or arrays in
//! blocks in a file of an older version, so every such check is `version >= since`).
//!
//! Invariants checked on reading (a failure is [`ErrorKind::MalformedFile`], never a crash): the magic, version,
//! endianness and kind; the length; the checksum of everything after the header (a lazily opened file: of the
//! header and the block hashes, each block when first used); every section inside the body, aligned, with the
//! element size the reader expects. What the arrays mean is checked by their owner ([`crate::vocab`],
//! [`crate::automaton`]).

use crate::error::{Error, ErrorKind, Result};
use crate::util::array::{Array, Mapping};
use crate::util::packed::{Packed, Word};
use bytemuck::Pod;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"LIBTRIE\0";
/// The newest format this library reads and writes (see the module doc: it reads versions 1 to 9).
pub(crate) const FORMAT_VERSION: u32 = 9;
/// The version written unless the file's owner requires a later one ([`Writer::require_version`]).
pub(crate) const BASE_VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;
/// The bytes of a checksum block in versions 2 to 7: 64 KiB (a lazily loaded file hashes a block when it is first
/// used), 1 MiB in version 1.
const BLOCK: usize = 1 << 16;
const V1_BLOCK: usize = 1 << 20;
/// The first version whose checksum blocks are [`SMALL_BLOCK`] bytes.
pub(crate) const SMALL_BLOCKS_VERSION: u32 = 8;
/// The bytes of a checksum block from version 8 on: the first use of a lazily loaded state hashes a few of them.
pub(crate) const SMALL_BLOCK: usize = 1 << 11;
/// Files needing this version or later are written as [`SMALL_BLOCKS_VERSION`] whatever their size.
const SMALL_BLOCKS_ANYWAY: u32 = 4;

/// The bytes of a checksum block of a version 2 or later file.
pub(crate) fn block_size(version: u32) -> usize {
    if version >= SMALL_BLOCKS_VERSION {
        SMALL_BLOCK
    } else {
        BLOCK
    }
}
const ENDIAN_TAG: u32 = 0x0102_0304;
const HEADER: usize = 64;
const ENTRY: usize = 24;
const ALIGN: usize = 64;

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Vocabulary = 1,
    Automaton = 2,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Vocabulary => "vocabulary",
            Kind::Automaton => "automaton",
        }
    }

    /// The name with its indefinite article, for messages.
    fn with_article(self) -> &'static str {
        match self {
            Kind::Vocabulary => "a vocabulary",
            Kind::Automaton => "an automaton",
        }
    }

    /// The kind numbered `n` in a file header, if this libtrie knows it.
    fn from_u32(n: u32) -> Option<Kind> {
        [Kind::Vocabulary, Kind::Automaton].into_iter().find(|&k| k as u32 == n)
    }
}

/// The xxh3-64 of each `block` bytes of `body`, on every core for large bodies.
fn block_hashes(body: &[u8], block: usize) -> Vec<u64> {
    use rayon::prelude::*;
    if body.len() > 4 << 20 {
        body.par_chunks(block).with_min_len((1 << 20) / block).map(xxhash_rust::xxh3::xxh3_64).collect()
    } else {
        body.chunks(block).map(xxhash_rust::xxh3::xxh3_64).collect()
    }
}

/// The checksum of a header (its checksum field, bytes 32..40, taken as zero) and its body's block hashes.
fn checksum_of(header: &[u8], blocks: &[u64]) -> u64 {
    let mut head = [0u8; HEADER];
    head.copy_from_slice(&header[..HEADER]);
    head[32..40].fill(0);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&head);
    h.update(bytemuck::cast_slice(blocks));
    h.digest()
}

/// Collects sections, then writes the file atomically (a temporary file renamed over the target, so a reader
/// never sees a partial file and mappings of an older file stay valid).
pub(crate) struct Writer {
    kind: Kind,
    fingerprint: u128,
    version: u32,
    sections: Vec<(u32, u32, Vec<u8>)>,
}

impl Writer {
    pub(crate) fn new(kind: Kind, fingerprint: u128) -> Writer {
        Writer { kind, fingerprint, version: BASE_VERSION, sections: Vec::new() }
    }

    /// Writes the file as format `version` (at most [`FORMAT_VERSION`]) or later: for a file holding a section
    /// that a libtrie reading only older versions must refuse rather than ignore.
    pub(crate) fn require_version(&mut self, version: u32) {
        debug_assert!(version <= FORMAT_VERSION);
        self.version = self.version.max(version);
    }

    /// Adds section `tag` holding `items`.
    pub(crate) fn section<T: Pod>(&mut self, tag: u32, items: &[T]) {
        self.sections.push((tag, std::mem::size_of::<T>() as u32, bytemuck::cast_slice(items).to_vec()));
    }

    /// Adds section `tag` holding the packed array `items`, its width as the element size (at the full width,
    /// byte for byte the section of the plain array).
    pub(crate) fn section_packed<T: Word>(&mut self, tag: u32, items: &Packed<T>) {
        self.sections.push((tag, items.width() as u32, items.bytes().to_vec()));
    }

    /// The version the file is written as: the one required, raised to [`SMALL_BLOCKS_VERSION`] for a body of
    /// more than one 64 KiB block or a required version of 4 or later (see the module doc).
    fn written_version(&self, body_bytes: usize) -> u32 {
        if body_bytes > BLOCK || self.version >= SMALL_BLOCKS_ANYWAY {
            self.version.max(SMALL_BLOCKS_VERSION)
        } else {
            self.version
        }
    }

    /// The file's bytes.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let table_end = HEADER + ENTRY * self.sections.len();
        let mut offset = table_end.next_multiple_of(ALIGN);
        let mut entries = Vec::with_capacity(self.sections.len());
        for (tag, size, bytes) in &self.sections {
            entries.push((*tag, *size, offset, bytes.len() / (*size as usize).max(1)));
            offset = (offset + bytes.len()).next_multiple_of(ALIGN);
        }
        let body_end = offset;
        let version = self.written_version(body_end - HEADER);
        let block = block_size(version);
        let n_blocks = (body_end - HEADER).div_ceil(block);
        let mut out = vec![0u8; body_end + 8 * n_blocks];
        for ((_, _, bytes), &(_, _, at, _)) in self.sections.iter().zip(&entries) {
            out[at..at + bytes.len()].copy_from_slice(bytes);
        }
        for (i, &(tag, size, at, count)) in entries.iter().enumerate() {
            let e = HEADER + ENTRY * i;
            out[e..e + 4].copy_from_slice(&tag.to_ne_bytes());
            out[e + 4..e + 8].copy_from_slice(&size.to_ne_bytes());
            out[e + 8..e + 16].copy_from_slice(&(at as u64).to_ne_bytes());
            out[e + 16..e + 24].copy_from_slice(&(count as u64).to_ne_bytes());
        }
        out[0..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&version.to_ne_bytes());
        out[12..16].copy_from_slice(&ENDIAN_TAG.to_ne_bytes());
        out[16..20].copy_from_slice(&(self.kind as u32).to_ne_bytes());
        out[20..24].copy_from_slice(&(self.sections.len() as u32).to_ne_bytes());
        let len = out.len() as u64;
        out[24..32].copy_from_slice(&len.to_ne_bytes());
        out[40..56].copy_from_slice(&self.fingerprint.to_ne_bytes());
        out[56..64].copy_from_slice(&(body_end as u64).to_ne_bytes());
        let blocks = block_hashes(&out[HEADER..body_end], block);
        out[body_end..].copy_from_slice(bytemuck::cast_slice(&blocks));
        let sum = checksum_of(&out, &blocks);
        out[32..40].copy_from_slice(&sum.to_ne_bytes());
        out
    }

    /// Writes the file to `path` atomically and durably: the bytes go to a new temporary file beside it (a name
    /// unique to this process and call, created exclusively), which is flushed to disk (`fsync`) and then
    /// renamed over `path`; the directory is flushed after the rename. So a reader sees the old file or the new
    /// one, never a part; concurrent saves to one path leave one of them, complete; and an existing file is never
    /// rewritten in place (a mapping of it, [`Reader::open`], keeps its bytes).
    pub(crate) fn write(&self, path: &Path) -> Result<()> {
        write_file(path, &self.to_bytes())
    }
}

/// Writes `bytes` to `path` as [`Writer::write`] does (atomically and durably).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let io =
        |what: &str, e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot {what} {}: {e}", path.display()));
    let name = path.file_name().ok_or_else(|| Error::invalid(format!("{} is not a file path", path.display())))?;
    let (tmp, mut file) = create_temporary(path, name).map_err(|e| io("create a temporary file beside", e))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let renamed = written
        .map_err(|e| io("write", e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io(&format!("rename {} to", tmp.display()), e)));
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the directory is flushed (a no-op where directories cannot be opened).
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = std::fs::File::open(dir) {
        d.sync_all().map_err(|e| io("flush the directory of", e))?;
    }
    Ok(())
}

/// Creates a new file `.NAME.tmp-PID-COUNTER-RANDOM` beside `path`, exclusively (`create_new`: never an existing
/// file, never a symlink followed), retrying on the unlikely collision. The counter is one per process, shared by
/// its threads, so no two saves of a process share a name (no thread handle is taken: `thread::current()` would
/// allocate one that a C host's main thread never frees).
fn create_temporary(path: &Path, name: &std::ffi::OsStr) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = None;
    for _ in 0..16 {
        // RandomState is seeded from the OS per process and varies per instance: enough to avoid collisions
        // between processes that share a pid namespace's numbers (containers on one volume).
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp-{}-{}-{random:016x}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
        let tmp = path.with_file_name(tmp_name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

/// A checked file: its mapping and section table.
pub(crate) struct Reader {
    map: Arc<Mapping>,
    sections: Vec<(u32, u32, usize, usize)>,
    fingerprint: u128,
    /// The file's format version (1 to [`FORMAT_VERSION`]).
    version: u32,
    /// A lazily opened version 2 file: its blocks, not yet checked against their hashes.
    blocks: Option<Blocks>,
}

fn malformed(what: &str, why: impl std::fmt::Display) -> Error {
    Error::malformed(format!("{what}: {why}"))
}

/// The body blocks of a lazily opened file ([`Reader::open_lazy`]): each is hashed and compared with its stored
/// hash (which the header's checksum vouches for) the first time an array that lies in it is used.
pub(crate) struct Blocks {
    map: Arc<Mapping>,
    body_end: usize,
    /// The stored hash of each block (in the file, past the body).
    hashes: Array<u64>,
    /// log2 of the block size ([`block_size`] of the file's version).
    shift: u32,
    /// Bit `i`: block `i` matched its hash.
    checked: Box<[AtomicU64]>,
}

impl Blocks {
    /// Whether every block holding a byte of `items` (elements of an array of this file's mapping) matches its
    /// stored hash. Each block is hashed once (the first time it is asked for); a block that does not match is
    /// asked again each time and fails again. `items` outside the body: `false`.
    pub(crate) fn verify<T: Pod>(&self, items: &[T]) -> bool {
        if items.is_empty() {
            return true;
        }
        let base = self.map.bytes().as_ptr() as usize;
        let start = (items.as_ptr() as usize).wrapping_sub(base);
        let end = start.wrapping_add(std::mem::size_of_val(items));
        if start < HEADER || end > self.body_end || start >= end {
            return false;
        }
        ((start - HEADER) >> self.shift..=(end - 1 - HEADER) >> self.shift).all(|i| self.block(i))
    }

    /// Whether block `i` matches its stored hash (hashing it on its first check).
    fn block(&self, i: usize) -> bool {
        let (word, bit) = (&self.checked[i / 64], 1u64 << (i % 64));
        if word.load(Ordering::Relaxed) & bit != 0 {
            return true;
        }
        let from = HEADER + (i << self.shift);
        let bytes = &self.map.bytes()[from..(from + (1 << self.shift)).min(self.body_end)];
        // Under the fuzzer no checksum is checked, so that damaged arrays reach the validation behind it.
        let ok = cfg!(fuzzing) || xxhash_rust::xxh3::xxh3_64(bytes) == self.hashes[i];
        if ok {
            word.fetch_or(bit, Ordering::Relaxed);
        }
        ok
    }

    /// Checks every block not yet checked, on every core: `Some(i)` names a block that does not match.
    pub(crate) fn verify_all(&self) -> Option<usize> {
        use rayon::prelude::*;
        (0..self.hashes.len()).into_par_iter().find_any(|&i| !self.block(i))
    }

    /// The file's bytes (a lazily loaded automaton saves them as they are).
    pub(crate) fn file_bytes(&self) -> &[u8] {
        self.map.bytes()
    }

    /// Bytes of memory of the check bits.
    pub(crate) fn memory_usage(&self) -> usize {
        self.checked.len() * 8
    }
}

impl Reader {
    /// Maps the file at `path` and checks its header, checksum (every byte) and section table.
    pub(crate) fn open(path: &Path, kind: Kind) -> Result<Reader> {
        Self::open_with(path, kind, false)
    }

    /// Maps the file at `path` and checks its header, section table and the checksum of the header and the
    /// stored block hashes; each block is checked against its hash when first used ([`Reader::take_blocks`]). The
    /// pages are not read in advance. A version 1 file (no block hashes) is checked whole, as by
    /// [`Reader::open`].
    pub(crate) fn open_lazy(path: &Path, kind: Kind) -> Result<Reader> {
        Self::open_with(path, kind, true)
    }

    fn open_with(path: &Path, kind: Kind, lazy: bool) -> Result<Reader> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot open {}: {e}", path.display())))?;
        let len = file
            .metadata()
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot read {}: {e}", path.display())))?
            .len();
        if len < HEADER as u64 {
            return Err(malformed(&path.display().to_string(), "not a libtrie file (too short)"));
        }
        let mut options = memmap2::MmapOptions::new();
        if !lazy {
            options.populate();
        }
        // SAFETY: the mapping is read-only. libtrie writes its files by renaming a new file into place
        // (`Writer::write`), so a file being replaced does not change an existing mapping. Changing a loaded file
        // in place (truncating: SIGBUS; rewriting: arrays that change under their validation) is outside the
        // documented contract (`trie_vocab_load`, `trie_automaton_load`, README "Limits"), as for any mapped file.
        let map = unsafe { options.map(&file) }
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot map {}: {e}", path.display())))?;
        Self::check(Arc::new(Mapping::Mmap(map)), kind, lazy)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Checks the file held in `bytes` (copied into an aligned buffer).
    pub(crate) fn from_bytes(bytes: &[u8], kind: Kind) -> Result<Reader> {
        Self::check(Arc::new(Mapping::copy_of(bytes)), kind, false)
    }

    /// Like [`Reader::from_bytes`], the blocks left to be checked on first use (as [`Reader::open_lazy`]).
    pub(crate) fn from_bytes_lazy(bytes: &[u8], kind: Kind) -> Result<Reader> {
        Self::check(Arc::new(Mapping::copy_of(bytes)), kind, true)
    }

    fn check(map: Arc<Mapping>, kind: Kind, lazy: bool) -> Result<Reader> {
        let b = map.bytes();
        let what = "libtrie file";
        if b.len() < HEADER || &b[0..8] != MAGIC {
            return Err(malformed(what, format!("not a libtrie {} file (bad magic)", kind.name())));
        }
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        if u32_at(12) != ENDIAN_TAG {
            return Err(malformed(what, "written on a machine of the other byte order; save it again here"));
        }
        let version = u32_at(8);
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(malformed(
                what,
                format!(
                    "format version {version}, but this libtrie {} reads versions {OLDEST_VERSION} to \
                     {FORMAT_VERSION}; save it again with this version",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        let found = u32_at(16);
        if found != kind as u32 {
            let other = match Kind::from_u32(found) {
                Some(k) => k.with_article().to_string(),
                None => format!(
                    "an unknown kind {found} (this libtrie {} knows 1, a vocabulary, and 2, an automaton)",
                    env!("CARGO_PKG_VERSION")
                ),
            };
            return Err(malformed(what, format!("this file holds {other}, not {}", kind.with_article())));
        }
        if u64_at(24) != b.len() as u64 {
            return Err(malformed(
                what,
                format!("truncated or extended: {} bytes, the header says {}", b.len(), u64_at(24)),
            ));
        }
        let n = u32_at(20) as usize;
        if n > 1024 || HEADER + ENTRY * n > b.len() {
            return Err(malformed(what, format!("{n} sections do not fit")));
        }
        // The body, and (version 2) the block hashes past it.
        let block = block_size(version);
        let body_end = if version == 1 { b.len() as u64 } else { u64_at(56) };
        let body_end = usize::try_from(body_end)
            .ok()
            .filter(|&e| e >= HEADER + ENTRY * n && e % 8 == 0 && e <= b.len())
            .filter(|&e| version == 1 || b.len() - e == 8 * (e - HEADER).div_ceil(block))
            .ok_or_else(|| malformed(what, "the body and its block hashes do not fit the file"))?;
        let stored: Option<Array<u64>> =
            (version >= 2).then(|| Array::mapped(&map, body_end, (b.len() - body_end) / 8)).flatten();
        // Under the fuzzer the checksum is not checked, so that damaged arrays reach the validation behind it.
        let corrupt = || malformed(what, "checksum mismatch: the file is corrupt");
        let mut blocks = None;
        match &stored {
            None => {
                if !cfg!(fuzzing) && checksum_of(b, &block_hashes(&b[HEADER..], V1_BLOCK)) != u64_at(32) {
                    return Err(corrupt());
                }
            }
            Some(hashes) => {
                if !cfg!(fuzzing) && checksum_of(b, hashes) != u64_at(32) {
                    return Err(corrupt());
                }
                if lazy {
                    let checked = (0..hashes.len().div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
                    let hashes = Array::mapped(&map, body_end, hashes.len()).expect("mapped above");
                    let shift = block.trailing_zeros();
                    blocks = Some(Blocks { map: map.clone(), body_end, hashes, shift, checked });
                } else if !cfg!(fuzzing) && block_hashes(&b[HEADER..body_end], block)[..] != hashes[..] {
                    return Err(corrupt());
                }
            }
        }
        let mut sections = Vec::with_capacity(n);
        for i in 0..n {
            let e = HEADER + ENTRY * i;
            let (tag, size, offset, count) = (u32_at(e), u32_at(e + 4), u64_at(e + 8), u64_at(e + 16));
            let fits = usize::try_from(offset).ok().zip(usize::try_from(count).ok()).and_then(|(o, c)| {
                let end = c.checked_mul(size as usize)?.checked_add(o)?;
                (end <= body_end && o % ALIGN == 0 && o >= HEADER).then_some((o, c))
            });
            let Some((offset, count)) = fits else {
                return Err(malformed(what, format!("section {tag} lies outside the file")));
            };
            sections.push((tag, size, offset, count));
        }
        let fingerprint = u128::from_ne_bytes(b[40..56].try_into().unwrap());
        Ok(Reader { map, sections, fingerprint, version, blocks })
    }

    /// The blocks still to be checked of a lazily opened version 2 file (`None`: every byte was checked).
    pub(crate) fn take_blocks(&mut self) -> Option<Blocks> {
        self.blocks.take()
    }

    /// The vocabulary fingerprint in the header.
    pub(crate) fn fingerprint(&self) -> u128 {
        self.fingerprint
    }

    /// The file's format version (1 to [`FORMAT_VERSION`]).
    pub(crate) fn version(&self) -> u32 {
        self.version
    }

    /// The file's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.bytes().len()
    }

    /// Whether the file has section `tag` (optional sections are read only when present).
    pub(crate) fn has(&self, tag: u32) -> bool {
        self.sections.iter().any(|s| s.0 == tag)
    }

    /// The entry of section `tag`: element size, offset, element count.
    fn entry(&self, tag: u32) -> Result<(u32, usize, usize)> {
        let &(_, size, offset, count) = self
            .sections
            .iter()
            .find(|s| s.0 == tag)
            .ok_or_else(|| malformed("libtrie file", format!("section {tag} is missing")))?;
        Ok((size, offset, count))
    }

    /// Section `tag` as a packed array of `T`, at the width its element size says (1, 2, 3, 4 or 8 bytes, at
    /// most `T`'s).
    pub(crate) fn packed<T: Word>(&self, tag: u32) -> Result<Packed<T>> {
        let (size, offset, count) = self.entry(tag)?;
        Packed::mapped(&self.map, offset, count, size as usize).ok_or_else(|| {
            malformed("libtrie file", format!("section {tag} has elements of {size} bytes or is misplaced"))
        })
    }

    /// Section `tag` as an array of `T`.
    pub(crate) fn array<T: Pod>(&self, tag: u32) -> Result<Array<T>> {
        let (size, offset, count) = self.entry(tag)?;
        if size as usize != std::mem::size_of::<T>() {
            return Err(malformed("libtrie file", format!("section {tag} has elements of {size} bytes")));
        }
        Array::mapped(&self.map, offset, count)
            .ok_or_else(|| malformed("libtrie file", format!("section {tag} is misplaced")))
    }
}

/// Fails with a malformed-file error naming `what` unless `ok`.
pub(crate) fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::malformed(format!("libtrie file: {}", what())))
    }
}

/// Recomputes a version 2 or later file's block hashes (at the block size of the version its header says, the
/// file's length with them) and checksum after an edit (a crafted file with valid sums; tests only).
#[cfg(test)]
pub(crate) fn reseal(b: &mut Vec<u8>) {
    let version = u32::from_ne_bytes(b[8..12].try_into().unwrap());
    let body_end = u64::from_ne_bytes(b[56..64].try_into().unwrap()) as usize;
    let blocks = block_hashes(&b[HEADER..body_end], block_size(version));
    b.truncate(body_end);
    b.extend_from_slice(bytemuck::cast_slice(&blocks));
    let len = b.len() as u64;
    b[24..32].copy_from_slice(&len.to_ne_bytes());
    let sum = checksum_of(b, &blocks);
    b[32..40].copy_from_slice(&sum.to_ne_bytes());
}

/// The version 2 or later file `file` saying format `version`, its block hashes at that version's block size
/// (the file an older libtrie wrote; tests only).
#[cfg(test)]
pub(crate) fn as_version(file: &[u8], version: u32) -> Vec<u8> {
    let mut b = file.to_vec();
    b[8..12].copy_from_slice(&version.to_ne_bytes());
    reseal(&mut b);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_corruption_is_an_error() {
        let mut w = Writer::new(Kind::Automaton, 42);
        w.section(1, &[1u32, 2, 3]);
        w.section(2, &[9u8]);
        let bytes = w.to_bytes();
        let r = Reader::from_bytes(&bytes, Kind::Automaton).unwrap();
        assert_eq!(r.fingerprint(), 42);
        assert_eq!(&r.array::<u32>(1).unwrap()[..], &[1, 2, 3]);
        assert_eq!(&r.array::<u8>(2).unwrap()[..], &[9]);
        assert!(r.array::<u64>(1).is_err(), "element size");
        assert!(r.array::<u32>(7).is_err(), "missing");
        let e = Reader::from_bytes(&bytes, Kind::Vocabulary).err().unwrap();
        assert!(e.message().contains("holds an automaton, not a vocabulary"), "{e}");
        for cut in [0, 10, 63, 64, bytes.len() - 1] {
            assert_eq!(
                Reader::from_bytes(&bytes[..cut], Kind::Automaton).err().unwrap().kind(),
                ErrorKind::MalformedFile
            );
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(Reader::from_bytes(&bad, Kind::Automaton).is_err(), "byte {i} flipped unnoticed");
        }
    }

    /// The same file in version 1's layout: no block hashes, reserved bytes zero, the checksum over the body.
    fn as_version_1(v2: &[u8]) -> Vec<u8> {
        let body_end = u64::from_ne_bytes(v2[56..64].try_into().unwrap()) as usize;
        let mut b = v2[..body_end].to_vec();
        b[8..12].copy_from_slice(&1u32.to_ne_bytes());
        b[24..32].copy_from_slice(&(body_end as u64).to_ne_bytes());
        b[56..64].fill(0);
        let sum = checksum_of(&b, &block_hashes(&b[HEADER..], V1_BLOCK));
        b[32..40].copy_from_slice(&sum.to_ne_bytes());
        b
    }

    /// Many blocks (sections over 2 MiB), so that lazily checked blocks can be told apart.
    fn large_file() -> Vec<u8> {
        let mut w = Writer::new(Kind::Automaton, 7);
        w.section(1, &(0..700_000u32).collect::<Vec<_>>());
        w.section(2, &[5u8; 3000]);
        w.to_bytes()
    }

    #[test]
    fn version_1_files_are_read_and_other_versions_refused() {
        let v2 = large_file();
        let v1 = as_version_1(&v2);
        assert!(v1.len() < v2.len(), "version 2 stores the block hashes");
        for lazy in [false, true] {
            let r = if lazy {
                Reader::from_bytes_lazy(&v1, Kind::Automaton)
            } else {
                Reader::from_bytes(&v1, Kind::Automaton)
            };
            let mut r = r.unwrap();
            assert!(r.take_blocks().is_none(), "a version 1 file is checked whole");
            assert_eq!(r.array::<u32>(1).unwrap().len(), 700_000);
            assert_eq!(&r.array::<u8>(2).unwrap()[..], &[5u8; 3000][..]);
        }
        let mut bad = v1.clone();
        bad[1000] ^= 1;
        assert!(Reader::from_bytes_lazy(&bad, Kind::Automaton).err().unwrap().message().contains("checksum"));
        for version in [0u32, FORMAT_VERSION + 1, 99] {
            let mut other = v2.clone();
            other[8..12].copy_from_slice(&version.to_ne_bytes());
            reseal(&mut other);
            let e = Reader::from_bytes(&other, Kind::Automaton).err().unwrap();
            assert_eq!(e.kind(), ErrorKind::MalformedFile);
            assert!(e.message().contains(&format!("format version {version}, but this libtrie")), "{e}");
            assert!(e.message().contains(&format!("reads versions 1 to {FORMAT_VERSION}")), "{e}");
        }
    }

    #[test]
    fn lazy_blocks_are_checked_on_first_use() {
        let good = large_file();
        let mut r = Reader::from_bytes_lazy(&good, Kind::Automaton).unwrap();
        let blocks = r.take_blocks().expect("a version 2 file opened lazily");
        let big = r.array::<u32>(1).unwrap();
        assert!(blocks.verify(&big[..1]) && blocks.verify(&big[..]) && blocks.verify(&big[..0]));
        assert_eq!(blocks.verify_all(), None);
        // Not an array of this file: refused.
        assert!(!blocks.verify(&[1u32, 2][..]));
        // A flipped byte of the body is found by the block that holds it, and only by it.
        let (at, _) = {
            let (_, _, offset, count) = r.sections[0];
            (offset, count)
        };
        let mut bad = good.clone();
        let flip = at + 4 * 600_000; // element 600,000 of section 1: past the first block
        bad[flip] ^= 0x08;
        let mut r = Reader::from_bytes_lazy(&bad, Kind::Automaton).unwrap();
        let blocks = r.take_blocks().unwrap();
        let big = r.array::<u32>(1).unwrap();
        assert!(blocks.verify(&big[..1000]), "the first block is sound");
        assert!(!blocks.verify(&big[599_990..600_010]), "the damaged block");
        assert!(!blocks.verify(&big[599_990..600_010]), "and again");
        assert!(!blocks.verify(&big[..]));
        assert_eq!(blocks.verify_all(), Some((flip - HEADER) / SMALL_BLOCK));
        // Eagerly, the same damage is an error at once.
        assert!(Reader::from_bytes(&bad, Kind::Automaton).err().unwrap().message().contains("checksum"));
        // Damage to the stored hashes or the header is an error at open, lazily too.
        for i in [good.len() - 3, 40, 57] {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            assert!(Reader::from_bytes_lazy(&bad, Kind::Automaton).is_err(), "byte {i}");
        }
    }

    /// Which files are written as version 8 (2 KiB blocks): a body over one 64 KiB block, or a file needing
    /// version 4 or later; the others keep their version and 64 KiB blocks, so older libtries read them.
    #[test]
    fn small_blocks_for_large_files_and_late_versions() {
        let tail = |b: &[u8]| b.len() - u64::from_ne_bytes(b[56..64].try_into().unwrap()) as usize;
        let version = |b: &[u8]| u32::from_ne_bytes(b[8..12].try_into().unwrap());
        let large = large_file();
        let body = u64::from_ne_bytes(large[56..64].try_into().unwrap()) as usize - HEADER;
        assert_eq!((version(&large), tail(&large)), (8, 8 * body.div_ceil(SMALL_BLOCK)));
        let small = |required: Option<u32>| {
            let mut w = Writer::new(Kind::Automaton, 7);
            w.section(1, &[3u32; 5000]);
            if let Some(v) = required {
                w.require_version(v);
            }
            w.to_bytes()
        };
        assert_eq!((version(&small(None)), tail(&small(None))), (2, 8));
        assert_eq!((version(&small(Some(3))), tail(&small(Some(3)))), (3, 8));
        for required in [4, 6, 7, 8] {
            let b = small(Some(required));
            let body = u64::from_ne_bytes(b[56..64].try_into().unwrap()) as usize - HEADER;
            assert_eq!((version(&b), tail(&b)), (8, 8 * body.div_ceil(SMALL_BLOCK)), "requiring version {required}");
            assert!(tail(&b) >= 8 * 5, "{} blocks", tail(&b) / 8);
            let r = Reader::from_bytes_lazy(&b, Kind::Automaton).unwrap();
            assert_eq!(&r.array::<u32>(1).unwrap()[..], &[3u32; 5000][..]);
        }
        // A body of exactly one 64 KiB block stays version 2; one byte more does not fit one block.
        let at = |n: usize| {
            let mut w = Writer::new(Kind::Vocabulary, 1);
            w.section(1, &vec![1u8; n]);
            version(&w.to_bytes())
        };
        let table = (HEADER + ENTRY).next_multiple_of(ALIGN) - HEADER;
        assert_eq!((at(BLOCK - table), at(BLOCK - table + 1)), (2, 8));
    }

    /// A large file in the older layout (64 KiB blocks, any version from 2 to 7) still loads, eagerly and lazily,
    /// its blocks checked at their own size; the same damage is found in a 2 KiB block of a version 8 file and in a
    /// 64 KiB one of the older file, so a neighbouring 2 KiB block is sound in one and damaged in the other.
    #[test]
    fn older_block_sizes_still_load() {
        let v8 = large_file();
        let flip = {
            let r = Reader::from_bytes(&v8, Kind::Automaton).unwrap();
            r.sections[0].2 + 4 * 600_000
        };
        let near = 600_000 - 1500; // 6,000 bytes before: another 2 KiB block, the same 64 KiB one
        assert_ne!((flip - HEADER) / SMALL_BLOCK, (flip - 6000 - HEADER) / SMALL_BLOCK);
        assert_eq!((flip - HEADER) / BLOCK, (flip - 6000 - HEADER) / BLOCK);
        for version in [2, 5, 7, 8] {
            let good = as_version(&v8, version);
            let body = u64::from_ne_bytes(good[56..64].try_into().unwrap()) as usize - HEADER;
            assert_eq!(good.len() - HEADER - body, 8 * body.div_ceil(block_size(version)));
            assert_eq!(Reader::from_bytes(&good, Kind::Automaton).unwrap().array::<u32>(1).unwrap()[near], near as u32);
            let mut bad = good.clone();
            bad[flip] ^= 0x10;
            assert!(Reader::from_bytes(&bad, Kind::Automaton).err().unwrap().message().contains("checksum"));
            let mut r = Reader::from_bytes_lazy(&bad, Kind::Automaton).unwrap();
            let blocks = r.take_blocks().unwrap();
            let big = r.array::<u32>(1).unwrap();
            assert!(blocks.verify(&big[..1000]), "version {version}: the first block is sound");
            assert!(!blocks.verify(&big[600_000..600_001]), "version {version}: the damaged block");
            assert_eq!(blocks.verify(&big[near..near + 1]), version >= 8, "version {version}: its neighbour");
            assert_eq!(blocks.verify_all(), Some((flip - HEADER) / block_size(version)));
        }
        // A version 8 file whose hashes were laid out at 64 KiB (or the other way round) is refused at open.
        for (from, to) in [(8, 2u32), (2, 8)] {
            let mut b = as_version(&v8, from);
            b[8..12].copy_from_slice(&to.to_ne_bytes());
            let e = Reader::from_bytes_lazy(&b, Kind::Automaton).err().unwrap();
            assert!(e.message().contains("block hashes do not fit"), "{from} as {to}: {e}");
        }
    }

    /// The kind mismatch message: the right article, and an unknown kind named by its number (B10).
    #[test]
    fn kind_mismatch_names_the_kind_found() {
        let vocab_file = Writer::new(Kind::Vocabulary, 1).to_bytes();
        let e = Reader::from_bytes(&vocab_file, Kind::Automaton).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("this file holds a vocabulary, not an automaton"), "{e}");
        assert!(!e.message().contains("a automaton"), "{e}");
        // A kind this libtrie does not know (a later version's file, or damage), with a valid checksum.
        let mut unknown = vocab_file.clone();
        unknown[16..20].copy_from_slice(&7u32.to_ne_bytes());
        reseal(&mut unknown);
        for kind in [Kind::Automaton, Kind::Vocabulary] {
            let e = Reader::from_bytes(&unknown, kind).err().unwrap();
            assert_eq!(e.kind(), ErrorKind::MalformedFile);
            assert!(e.message().contains("unknown kind 7"), "{e}");
            assert!(!e.message().contains("holds an automaton") && !e.message().contains("holds a vocabulary"), "{e}");
        }
    }
}
