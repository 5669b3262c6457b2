//! Saving, loading and validating automata: the container sections of an automaton file.

use super::ascending::{Shape, Tags};
use super::*;

// Section tags of a saved automaton.
const A_META: u32 = 1;
const A_OFFSETS: u32 = 2;
const A_TOKENS: u32 = 3;
const A_TARGETS: u32 = 4;
const A_ACCEPTING: u32 = 5;
const A_DEPTH: u32 = 6;
const A_SINGLE: u32 = 7;
const A_DENSE_STATES: u32 = 8;
const A_DENSE_ROWS: u32 = 9;
const A_CHAIN_BASE: u32 = 10;
const A_CHAIN_MEMBER: u32 = 11;
const A_CHAIN_DEPTH: u32 = 12;
const A_MEMBER_OFFSETS: u32 = 13;
const A_MEMBER_BYTES: u32 = 14;
const A_DROPPED: u32 = 15;
// (16 to 18: the template sections, `segments.rs`; 19: the member values, `values.rs`.)
const A_DERIVED: u32 = 24;
const A_UNARY_BYTE: u32 = 25;
const A_BYTE_ROWS: u32 = 26;
const A_MEMBER_LCP: u32 = 27;
// The ascending arrays in blocks (format version 9, see `ascending`): their shapes, then each array's bases and
// per-element values in place of its plain section.
const A_BLOCKED: u32 = 40;
const T_OFFSETS: Tags = Tags { plain: A_OFFSETS, bases: 41, deltas: 42 };
const T_CHAIN_BASE: Tags = Tags { plain: A_CHAIN_BASE, bases: 43, deltas: 44 };
const T_CHAIN_MEMBER: Tags = Tags { plain: A_CHAIN_MEMBER, bases: 45, deltas: 46 };
const T_MEMBER_OFFSETS: Tags = Tags { plain: A_MEMBER_OFFSETS, bases: 47, deltas: 48 };
/// The format version of files with derived rows (sections `A_DERIVED`, `A_UNARY_BYTE`): older libtries, which
/// would read their empty rows as dead ends, refuse them by their version.
const DERIVED_VERSION: u32 = 4;
/// The format version of files holding arrays at packed widths (`offsets`, `tokens`, `targets`, `depth`,
/// `single_member`, the chain arrays, `member_offsets`: [`Packed`], the width as the section's element size):
/// written for automata with derived rows whose arrays fit narrower widths; older libtries refuse them by their
/// version. (`tokens` and `targets` were packed later, in the same versions: a libtrie from before reads them only
/// at 4 bytes, and refuses a file holding them narrower by their element size.)
const PACKED_VERSION: u32 = 5;
/// The format version of files whose branching states may keep only their byte children (section
/// `A_BYTE_ROWS`): older libtries would read those rows as the whole rows, and refuse the files by their version.
const BYTE_ROWS_VERSION: u32 = 6;
/// The format version of files whose members are front-coded (section `A_MEMBER_LCP`, see `front`): older
/// libtries would read the suffixes as whole members, and refuse the files by their version.
const FRONT_VERSION: u32 = 7;
/// The format version of files holding ascending arrays in blocks (section `A_BLOCKED`, see `ascending`): older
/// libtries would miss their plain sections, and refuse the files by their version.
pub(super) const BLOCKED_VERSION: u32 = 9;

/// The header of a saved automaton ([`Automaton::file_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// The format version the file was written in (this libtrie reads 1 to [`Automaton::FORMAT_VERSION`]).
    pub format_version: u32,
    /// The [`Vocabulary::fingerprint`] of the vocabulary the set was compiled against.
    pub vocab_fingerprint: u128,
    /// The file's size in bytes.
    pub file_bytes: u64,
}

impl Automaton {
    /// The newest file format version. [`Automaton::save`] writes version 2 (which older libtries read) unless
    /// the automaton needs a later one: 3 for members with values, 4 for derived rows, 5 for arrays at packed
    /// widths (automata with derived rows), 6 for branching states keeping only their byte children, 7 for
    /// front-coded members (automata with derived rows), 9 for ascending arrays in blocks (the same automata);
    /// and at least 8 (the file checked in 2 KiB blocks instead of 64 KiB, so that the first use of a lazily
    /// loaded state is cheap) for every file over 64 KiB or needing version 4 or later.
    pub const FORMAT_VERSION: u32 = crate::format::FORMAT_VERSION;

    /// Saves the automaton to `path` (written atomically: a temporary file renamed into place). The file is the
    /// frozen arrays themselves, tagged with the vocabulary's [`Vocabulary::fingerprint`]: [`Automaton::load`]
    /// maps it back in milliseconds, and processes loading the same file share its pages.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        match &self.lazy {
            // The file as it was loaded: its checksum and block hashes still vouch for what was not checked yet.
            Some(l) => crate::format::write_file(path.as_ref(), l.file_bytes()),
            None => self.writer().write(path.as_ref()),
        }
    }

    /// The saved form of the automaton, in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.lazy {
            Some(l) => l.file_bytes().to_vec(),
            None => self.writer().to_bytes(),
        }
    }

    pub(super) fn writer(&self) -> Writer {
        let mut w = Writer::new(FileKind::Automaton, self.vocab.fingerprint());
        let dropped: Vec<u64> = self.dropped.iter().map(|&d| d as u64).collect();
        w.section(A_META, &[self.vocab.n_vocab() as u64, self.n_dropped_members as u64]);
        let mut shapes: Vec<Shape> = vec![self.offsets.write(&mut w, T_OFFSETS)];
        w.section_packed(A_TOKENS, &self.tokens);
        w.section_packed(A_TARGETS, &self.targets);
        w.section(A_ACCEPTING, &self.accepting);
        w.section_packed(A_DEPTH, &self.depth);
        w.section_packed(A_SINGLE, &self.single_member);
        w.section(A_DENSE_STATES, &self.dense_states);
        w.section(A_DENSE_ROWS, &self.dense_rows);
        shapes.push(self.chain_base.write(&mut w, T_CHAIN_BASE));
        shapes.push(self.chain_member.write(&mut w, T_CHAIN_MEMBER));
        w.section_packed(A_CHAIN_DEPTH, &self.chain_first_depth);
        shapes.push(self.member_offsets.write(&mut w, T_MEMBER_OFFSETS));
        w.section(A_MEMBER_BYTES, &self.member_bytes);
        w.section(A_DROPPED, &dropped);
        if !self.derived.is_empty() {
            w.section(A_DERIVED, &self.derived);
            w.section(A_UNARY_BYTE, &self.unary_byte);
            w.require_version(DERIVED_VERSION);
        }
        if !self.byte_rows.is_empty() {
            w.section(A_BYTE_ROWS, &self.byte_rows);
            w.require_version(BYTE_ROWS_VERSION);
        }
        if !self.arrays_plain() {
            w.require_version(PACKED_VERSION);
        }
        if self.is_front_coded() {
            w.section_packed(A_MEMBER_LCP, &self.member_lcp);
            w.require_version(FRONT_VERSION);
        }
        if shapes.iter().any(|s| s[2] != 0) {
            w.section(A_BLOCKED, &shapes.concat());
            w.require_version(BLOCKED_VERSION);
        }
        if let Some(seg) = &self.segments {
            seg.write(&mut w);
        }
        self.write_values(&mut w);
        w
    }

    /// What the header of the automaton file at `path` says, without a vocabulary (checked as by
    /// [`Automaton::load_lazy`]: header, section table, the checksum of the header and block hashes): for tools
    /// that describe a file before they know which vocabulary it needs. Errors as [`Automaton::load_lazy`].
    pub fn file_info(path: impl AsRef<Path>) -> Result<FileInfo> {
        let path = path.as_ref();
        let r = Reader::open_lazy(path, FileKind::Automaton)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))?;
        Ok(FileInfo { format_version: r.version(), vocab_fingerprint: r.fingerprint(), file_bytes: r.len() as u64 })
    }

    /// Whether the automaton's arrays live in a file mapping ([`Automaton::load`]) rather than on the heap.
    pub fn is_mapped(&self) -> bool {
        self.tokens.is_mapped()
    }

    /// Loads an automaton saved by [`Automaton::save`] for use with `vocab`: the file is memory-mapped and checked
    /// (header, checksum, and every array against the others, so that no lookup can leave its bounds), not
    /// rebuilt. Errors: [`ErrorKind::Io`]; [`ErrorKind::MalformedFile`] (truncated, corrupt, another format
    /// version or byte order, not an automaton); [`ErrorKind::VocabularyMismatch`] when the file was compiled
    /// against another vocabulary. The file must not change while loaded (truncating it raises SIGBUS; see the
    /// README's "Limits"): replace it by renaming a new file over it, as [`Automaton::save`] does.
    pub fn load(vocab: Arc<Vocabulary>, path: impl AsRef<Path>) -> Result<Automaton> {
        let path = path.as_ref();
        Self::from_reader(vocab, Reader::open(path, FileKind::Automaton)?)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Like [`Automaton::load`], with the checks made on first use instead of at load, so that loading costs
    /// milliseconds whatever the file's size (the pages are read when used). At load: the header, the section
    /// table, the checksum of the header and of the file's stored block hashes, the sizes of the arrays. Then,
    /// once each: an explicit state's row, depth, member and mask row the first time the state is queried; a
    /// chain the first time one of its states is; every block of the file (2 KiB from format version 8 on, 64 KiB
    /// before) against its stored hash the first time an array in it is read; the whole automaton the first time
    /// a member is looked up by rank (`member_at`, `member_range`, `member_bytes`, `member_id`, the member values,
    /// `crossing`, `cross`) or it is updated with [`Automaton::with_changes`]. A state whose part of the file fails its check behaves as an invalid state
    /// ([`ErrorKind::MalformedFile`] from [`Automaton::advance`] and the mask fills; empty, `false` or `None`
    /// from the others), so a damaged or crafted file is still never a crash; but a damaged file is noticed when
    /// the damaged part is used, not at load. A file with a template, and a version 1 file (no block hashes),
    /// are checked whole at load, as by [`Automaton::load`]. [`Automaton::save`] of a lazily loaded automaton
    /// writes the file as it was loaded.
    pub fn load_lazy(vocab: Arc<Vocabulary>, path: impl AsRef<Path>) -> Result<Automaton> {
        let path = path.as_ref();
        Self::from_reader(vocab, Reader::open_lazy(path, FileKind::Automaton)?)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Like [`Automaton::load`], from the bytes of a saved automaton (copied).
    pub fn from_bytes(vocab: Arc<Vocabulary>, bytes: &[u8]) -> Result<Automaton> {
        Self::from_reader(vocab, Reader::from_bytes(bytes, FileKind::Automaton)?)
    }

    /// Like [`Automaton::load_lazy`], from the bytes of a saved automaton (copied): for the tests and fuzz
    /// targets of the lazy checks.
    #[doc(hidden)]
    pub fn from_bytes_lazy(vocab: Arc<Vocabulary>, bytes: &[u8]) -> Result<Automaton> {
        Self::from_reader(vocab, Reader::from_bytes_lazy(bytes, FileKind::Automaton)?)
    }

    /// Whether the automaton was loaded lazily and not yet checked whole ([`Automaton::load_lazy`]).
    #[doc(hidden)]
    pub fn is_lazy(&self) -> bool {
        self.lazy.is_some()
    }

    pub(super) fn from_reader(vocab: Arc<Vocabulary>, mut r: Reader) -> Result<Automaton> {
        if r.fingerprint() != vocab.fingerprint() {
            return Err(Error::new(
                ErrorKind::VocabularyMismatch,
                format!(
                    "the automaton was compiled against another vocabulary (fingerprint {:032x}, this one is \
                     {:032x}): compile the set again for this vocabulary",
                    r.fingerprint(),
                    vocab.fingerprint()
                ),
            ));
        }
        let blocks = r.take_blocks();
        let meta: Array<u64> = r.array(A_META)?;
        let dropped: Array<u64> = r.array(A_DROPPED)?;
        ensure(blocks.as_ref().map_or(true, |b| b.verify(&meta) && b.verify(&dropped)), || {
            "a block of the file fails its checksum: the file is corrupt".into()
        })?;
        ensure(meta.len() == 2 && meta[0] == vocab.n_vocab() as u64, || "automaton metadata".into())?;
        let shapes = Self::read_shapes(&r)?;
        let shape = |i: usize| shapes.as_ref().map(|s| &s[i * 3..i * 3 + 3]);
        let a = Automaton {
            offsets: Ascending::read(&r, T_OFFSETS, shape(0), "offsets")?,
            tokens: r.packed(A_TOKENS)?,
            targets: r.packed(A_TARGETS)?,
            accepting: r.array(A_ACCEPTING)?,
            depth: r.packed(A_DEPTH)?,
            single_member: r.packed(A_SINGLE)?,
            dense_states: r.array(A_DENSE_STATES)?,
            dense_rows: r.array(A_DENSE_ROWS)?,
            derived: Self::read_optional(&r, A_DERIVED, DERIVED_VERSION)?,
            unary_byte: Self::read_optional(&r, A_UNARY_BYTE, DERIVED_VERSION)?,
            byte_rows: Self::read_optional(&r, A_BYTE_ROWS, BYTE_ROWS_VERSION)?,
            byte_tokens: derived::ByteTokens::new(&vocab),
            chain_base: Ascending::read(&r, T_CHAIN_BASE, shape(1), "chain bases")?,
            chain_member: Ascending::read(&r, T_CHAIN_MEMBER, shape(2), "chain members")?,
            chain_first_depth: r.packed(A_CHAIN_DEPTH)?,
            member_offsets: Ascending::read(&r, T_MEMBER_OFFSETS, shape(3), "member offsets")?,
            member_bytes: r.array(A_MEMBER_BYTES)?,
            member_lcp: Self::read_front(&r)?,
            dropped: dropped.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect(),
            n_dropped_members: usize::try_from(meta[1]).unwrap_or(usize::MAX),
            segments: Segments::read(&r)?,
            values: Self::read_values(&r)?,
            vocab,
            lazy: None,
            row_cache: row_cache::RowCache::new(row_cache::DEFAULT_BUDGET),
        };
        let version = r.version();
        ensure(version >= PACKED_VERSION || a.arrays_plain(), || {
            format!("arrays at packed widths in a format version {version} file (they need version {PACKED_VERSION})")
        })?;
        ensure(version >= BLOCKED_VERSION || shapes.is_none(), || {
            format!(
                "arrays in blocks (section {A_BLOCKED}) in a format version {version} file (they need version \
                 {BLOCKED_VERSION})"
            )
        })?;
        match blocks {
            Some(blocks) => a.lazy_checks(blocks),
            None => {
                a.validate()?;
                let mut a = a;
                if a.is_front_coded() {
                    // Validated: the large layout keeps its ascending arrays in blocks, also when an older file
                    // (version 7 or 8) held them plain (see `ascending`).
                    a.offsets = std::mem::take(&mut a.offsets).into_blocks(ascending::OFFSETS_BLOCKS);
                    a.chain_base = std::mem::take(&mut a.chain_base).into_blocks(ascending::CHAIN_BLOCKS);
                    a.chain_member = std::mem::take(&mut a.chain_member).into_blocks(ascending::CHAIN_BLOCKS);
                    a.member_offsets = std::mem::take(&mut a.member_offsets).into_blocks(ascending::MEMBER_BLOCKS);
                }
                Ok(a)
            }
        }
    }

    /// A section of the derived-rows layout (empty when absent; present only in files of version `since` and
    /// later).
    fn read_optional<T: bytemuck::Pod>(r: &Reader, tag: u32, since: u32) -> Result<Array<T>> {
        if !r.has(tag) {
            return Ok(Vec::new().into());
        }
        let version = r.version();
        ensure(version >= since, || {
            format!("derived rows (section {tag}) in a format version {version} file (they need version {since})")
        })?;
        r.array(tag)
    }

    /// The shapes of the four ascending arrays (`None` when absent: all plain; present only in files of version
    /// [`BLOCKED_VERSION`] and later, checked once the other sections' versions are).
    fn read_shapes(r: &Reader) -> Result<Option<Array<u64>>> {
        if !r.has(A_BLOCKED) {
            return Ok(None);
        }
        let shapes: Array<u64> = r.array(A_BLOCKED)?;
        ensure(shapes.len() == 12, || format!("section {A_BLOCKED}: {} values, not 12", shapes.len()))?;
        Ok(Some(shapes))
    }

    /// The shared prefix lengths of front-coded members (empty when absent; present only in files of version
    /// [`FRONT_VERSION`] and later).
    fn read_front(r: &Reader) -> Result<Packed<u32>> {
        if !r.has(A_MEMBER_LCP) {
            return Ok(Packed::default());
        }
        let version = r.version();
        ensure(version >= FRONT_VERSION, || {
            format!(
                "front-coded members (section {A_MEMBER_LCP}) in a format version {version} file (they need version \
                 {FRONT_VERSION})"
            )
        })?;
        r.packed(A_MEMBER_LCP)
    }

    /// Whether every packed array is at its type's full width (the layout of format versions 1 to 4).
    pub(super) fn arrays_plain(&self) -> bool {
        self.offsets.is_plain()
            && self.tokens.is_plain()
            && self.targets.is_plain()
            && self.depth.is_plain()
            && self.single_member.is_plain()
            && self.chain_base.is_plain()
            && self.chain_member.is_plain()
            && self.chain_first_depth.is_plain()
            && self.member_offsets.is_plain()
    }

    /// The sizes of the derived-rows arrays: the unary bits and bytes both empty, or one bit and one byte per
    /// explicit state; the byte-row bits empty or one per explicit state.
    pub(super) fn derived_sizes_ok(&self) -> bool {
        let e = self.depth.len();
        ((self.derived.is_empty() && self.unary_byte.is_empty())
            || (self.derived.len() == e.div_ceil(64) && self.unary_byte.len() == e))
            && (self.byte_rows.is_empty() || self.byte_rows.len() == e.div_ceil(64))
    }

    /// A chain of member `m` (`< n_members`) from depth `first`, `n` states long, is sound: it ends at the member's
    /// end and (front-coded) begins past the prefix the member shares with the one before it, so every position
    /// reads its rest from the member's stored bytes (see `front`).
    pub(super) fn chain_ok(&self, m: usize, first: u64, n: u64) -> bool {
        let len = self.member_len(m) as u64;
        first >= 1 && first > self.member_shared(m) as u64 && first + n - 1 == len
    }

    /// A derived state `s` (`< n_explicit`) is sound: its child `s + 1` is an explicit state and its row empty.
    pub(super) fn derived_state_ok(&self, s: usize) -> bool {
        s + 1 < self.depth.len() && {
            let (from, to) = self.offsets.pair(s);
            from == to
        }
    }

    /// Checks a loaded automaton's arrays against each other and its vocabulary: every index used when decoding
    /// is in bounds, so a crafted or damaged file is an error and never a crash.
    pub(super) fn validate(&self) -> Result<()> {
        let mo = &self.member_offsets;
        let n_members = mo.len().checked_sub(1);
        ensure(n_members.is_some() && mo.get(0) == 0, || "member offsets".into())?;
        let n_members = n_members.unwrap();
        mo.ensure_sound("member offsets", false)?;
        self.offsets.ensure_sound("row offsets", false)?;
        self.chain_base.ensure_sound("chain bases", true)?;
        self.chain_member.ensure_sound("chain members", true)?;
        ensure(mo.get(n_members) == self.member_bytes.len() as u64 && self.n_dropped_members <= n_members, || {
            "member offsets are not within the member bytes".into()
        })?;
        // Front coding sound, members sorted and distinct: `with_changes` binary-searches them.
        self.validate_members()?;
        let e = self.depth.len();
        ensure(
            e >= 1
                && self.offsets.len() == e + 1
                && self.single_member.len() == e
                && self.accepting.len() == e.div_ceil(64)
                && self.offsets.get(0) == 0
                && self.offsets.get(e) as usize == self.tokens.len()
                && self.targets.len() == self.tokens.len(),
            || "explicit state tables of inconsistent sizes".into(),
        )?;
        let k = self.chain_member.len();
        ensure(
            self.chain_base.len() == k + 1
                && self.chain_first_depth.len() == k
                && self.chain_base.get(0) == 0
                && self.chain_member.last().map_or(true, |m| (m as usize) < n_members),
            || "chain tables".into(),
        )?;
        let bad_chain = (0..k).into_par_iter().with_min_len(1 << 14).find_any(|&i| {
            let m = self.chain_member.get(i) as usize;
            let (from, to) = self.chain_base.pair(i);
            let (first, n) = (self.chain_first_depth.get(i) as u64, (to - from) as u64);
            !self.chain_ok(m, first, n)
        });
        ensure(bad_chain.is_none(), || {
            format!("chain {} does not end at its member's end, or begins inside its shared prefix", bad_chain.unwrap())
        })?;
        let n_states = e as u64 + self.chain_base.get(k) as u64;
        ensure(n_states < State::FINISHED.0 as u64, || "too many states".into())?;
        // The transitions, in parallel blocks of states: ids of the vocabulary, ascending within each state, and
        // targets inside the automaton.
        let n_vocab = self.vocab.n_vocab() as u64;
        const BLOCK: usize = 1 << 14;
        let bad = (0..e.div_ceil(BLOCK)).into_par_iter().find_any(|&b| {
            (b * BLOCK..((b + 1) * BLOCK).min(e)).any(|s| {
                let r = self.range(s);
                let toks = self.tokens.slice(r.clone());
                !(toks.ascending(true)
                    && toks.last().map_or(true, |t| (t as u64) < n_vocab)
                    && self.targets.slice(r).all(|t| t == State::FINISHED.0 || (t as u64) < n_states))
            })
        });
        ensure(bad.is_none(), || "a state's tokens are not ascending ids of the vocabulary, or lead outside".into())?;
        ensure(self.depth.ints().all(|d| (d as usize) <= self.member_bytes.len()), || "state depths".into())?;
        ensure(self.derived_sizes_ok(), || "derived rows: tables of inconsistent sizes".into())?;
        let bad_derived = (0..e).into_par_iter().with_min_len(1 << 14).find_any(|&s| {
            self.is_unary(s) && !(self.derived_state_ok(s) && self.dense_states.binary_search(&(s as u32)).is_err())
        });
        ensure(bad_derived.is_none(), || format!("derived state {} is not unary", bad_derived.unwrap()))?;
        ensure(self.single_member.ints().all(|m| m == NONE || (m as usize) < n_members), || "single members".into())?;
        let words = self.mask_words();
        ensure(
            self.dense_states.windows(2).all(|w| w[0] < w[1])
                && self.dense_states.iter().all(|&s| (s as usize) < e)
                && self.dense_rows.len() == self.dense_states.len() * words,
            || "dense rows".into(),
        )?;
        // A precomputed row must be its state's allowed list (masks and allowed lists never disagree).
        let bad_row = (0..self.dense_states.len()).into_par_iter().find_any(|&i| {
            let allowed = self.tokens.slice(self.range(self.dense_states[i] as usize));
            let row = &self.dense_rows[i * words..(i + 1) * words];
            row.iter().map(|w| w.count_ones() as usize).sum::<usize>() != allowed.len()
                || !allowed.all(|t| row[(t >> 5) as usize] >> (t & 31) & 1 == 1)
        });
        ensure(bad_row.is_none(), || {
            format!("dense row {} differs from its state's allowed tokens", bad_row.unwrap())
        })?;
        if let Some(seg) = &self.segments {
            seg.validate(self)?;
        }
        self.validate_values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;

    /// Every byte a token, a few longer ones, an end-of-generation id (259): rows are derived, arrays packed.
    fn byte_vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        toks.extend([b"ab".to_vec(), b"tool".to_vec(), b"_name".to_vec(), b"</s>".to_vec()]);
        let mut kinds = vec![TokenKind::Normal; toks.len()];
        kinds[259] = TokenKind::Control;
        Arc::new(Vocabulary::new(toks, kinds, &[259], None).unwrap())
    }

    fn version_of(file: &[u8]) -> u32 {
        u32::from_ne_bytes(file[8..12].try_into().unwrap())
    }

    /// Stores the ascending arrays plain at their widths (the layout before format version 9).
    fn unblocked(a: &mut Automaton) {
        a.offsets = Ascending::narrow(&a.offsets.iter().collect::<Vec<_>>());
        a.chain_base = Ascending::narrow(&a.chain_base.iter().collect::<Vec<_>>());
        a.chain_member = Ascending::narrow(&a.chain_member.iter().collect::<Vec<_>>());
        a.member_offsets = Ascending::narrow(&a.member_offsets.iter().collect::<Vec<_>>());
        a.validate().unwrap();
    }

    /// Stores every member whole and the ascending arrays plain (the layout before format version 7).
    fn members_whole(a: &mut Automaton) {
        let (offsets, bytes) = a.decoded_members().expect("front-coded");
        unblocked(a);
        a.member_offsets = MemberOffsets::narrow(&offsets);
        a.member_bytes = bytes.into();
        a.member_lcp = Packed::default();
        a.validate().unwrap();
    }

    fn same_answers(a: &Automaton, b: &Automaton) {
        assert_eq!((a.n_states(), a.n_explicit(), a.n_members()), (b.n_states(), b.n_explicit(), b.n_members()));
        let (mut ra, mut rb) = (vec![0u32; a.mask_words()], vec![0u32; a.mask_words()]);
        for s in (0..a.n_states() as u32).map(State).chain([State::FINISHED]) {
            assert_eq!(a.allowed(s), b.allowed(s), "{s:?}");
            assert_eq!((a.depth(s), a.forced(s), a.is_accepting(s)), (b.depth(s), b.forced(s), b.is_accepting(s)));
            assert_eq!(a.possible_members(s), b.possible_members(s), "{s:?}");
            a.fill_bitmask(s, &mut ra).unwrap();
            b.fill_bitmask(s, &mut rb).unwrap();
            assert_eq!(ra, rb, "{s:?}");
            for t in [0, 97, 116, 256, 257, 258, 259] {
                assert_eq!(a.advance(s, t).ok(), b.advance(s, t).ok(), "{s:?} {t}");
            }
        }
        for r in 0..a.n_members() {
            assert_eq!(a.member_bytes(r), b.member_bytes(r));
        }
    }

    /// A version 4 file (derived rows, every array at its full width, as the libtrie before packed widths wrote
    /// it) still loads, eagerly and lazily, to the same answers; the packed automaton needs version 5 (written as
    /// 8, and as 5 loads the same).
    #[test]
    fn version_4_files_with_full_widths_still_load() {
        let v = byte_vocab();
        let set: Vec<String> = (0..300).map(|i| format!("tool_name_{}{}", i % 7, i * 7919 % 1000)).collect();
        // (Without byte rows, which need version 6: see the next test.)
        let opts = CompileOptions::new().derive_rows(true).byte_rows_max(0);
        let a = Automaton::compile(v.clone(), &set, &opts).unwrap();
        assert!(a.has_derived() && !a.arrays_plain() && a.byte_rows.is_empty());
        assert_eq!(a.depth.width(), 1, "depths under 255");
        assert!(a.member_offsets.plain_array().is_none(), "front-coded offsets in blocks");
        assert_eq!(a.tokens.width(), 2, "token ids up to 259");
        assert!(a.n_states() < 65_535 && a.targets.width() <= 2, "{} states", a.n_states());
        // Needs version 9 (arrays in blocks); with every member whole and every array plain it needs version 5
        // (written as 8, 2 KiB checksum blocks), and the file as the libtrie before versions 7 and 8 wrote it
        // loads the same.
        assert_eq!(version_of(&a.to_bytes()), BLOCKED_VERSION);
        let mut whole = Automaton::from_bytes(v.clone(), &a.to_bytes()).unwrap();
        members_whole(&mut whole);
        let packed = whole.to_bytes();
        assert_eq!(version_of(&packed), crate::format::SMALL_BLOCKS_VERSION);
        let v5 = crate::format::as_version(&packed, PACKED_VERSION);
        same_answers(&a, &Automaton::from_bytes(v.clone(), &v5).unwrap());
        same_answers(&a, &Automaton::from_bytes_lazy(v.clone(), &v5).unwrap());
        let mut wide = Automaton::from_bytes(v.clone(), &packed).unwrap();
        same_answers(&a, &wide);
        wide.offsets = Ascending::plain(wide.offsets.iter().collect());
        wide.tokens = Packed::plain(wide.tokens.iter().collect());
        wide.targets = Packed::plain(wide.targets.iter().collect());
        wide.depth = Packed::plain(wide.depth.iter().collect());
        wide.single_member = Packed::plain(wide.single_member.iter().collect());
        wide.chain_base = Ascending::plain(wide.chain_base.iter().collect());
        wide.chain_member = Ascending::plain(wide.chain_member.iter().collect());
        wide.chain_first_depth = Packed::plain(wide.chain_first_depth.iter().collect());
        wide.member_offsets = MemberOffsets::plain(wide.member_offsets.iter().collect());
        assert!(wide.arrays_plain());
        assert!(wide.memory_usage() > a.memory_usage());
        let old = crate::format::as_version(&wide.to_bytes(), DERIVED_VERSION);
        for lazy in [false, true] {
            let b =
                if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
            let b = b.unwrap();
            assert_eq!(b.memory_usage() - b.lazy.as_ref().map_or(0, |l| l.memory_usage()), wide.memory_usage());
            same_answers(&a, &b);
        }
    }

    /// Branching states keeping only their byte children need a version 6 file (written as 8), loading (eagerly and lazily) to
    /// the answers of the automaton storing every row.
    #[test]
    fn byte_rows_need_version_6() {
        let v = byte_vocab();
        let set: Vec<String> = (0..300).map(|i| format!("tool_name_{}{}", i % 7, i * 7919 % 1000)).collect();
        let stored = Automaton::compile(v.clone(), &set, &CompileOptions::new().derive_rows(false)).unwrap();
        let a = Automaton::compile(v.clone(), &set, &CompileOptions::new().derive_rows(true)).unwrap();
        assert!(!a.byte_rows.is_empty() && a.allowed_total() < stored.allowed_total());
        let n_byte_rows: u32 = a.byte_rows.iter().map(|w| w.count_ones()).sum();
        assert!(n_byte_rows >= 10, "{n_byte_rows}");
        same_answers(&stored, &a);
        // Front-coded with arrays in blocks (needs version 9), front-coded with plain arrays (needs version 7)
        // and with every member whole (needs 6), the last two written as 8 (2 KiB checksum blocks); and as
        // versions 7 and 6 (64 KiB blocks, before version 8).
        let blocked = a.to_bytes();
        assert_eq!(version_of(&blocked), BLOCKED_VERSION);
        let mut plain = Automaton::from_bytes(v.clone(), &blocked).unwrap();
        unblocked(&mut plain);
        let front = plain.to_bytes();
        assert_eq!(version_of(&front), crate::format::SMALL_BLOCKS_VERSION);
        assert!(front.len() > blocked.len(), "blocks save bytes");
        let mut whole = Automaton::from_bytes(v.clone(), &front).unwrap();
        members_whole(&mut whole);
        let bytes = whole.to_bytes();
        assert_eq!(version_of(&bytes), crate::format::SMALL_BLOCKS_VERSION);
        assert!(bytes.len() > front.len(), "front coding saves bytes");
        let v6 = crate::format::as_version(&bytes, BYTE_ROWS_VERSION);
        let v7 = crate::format::as_version(&front, FRONT_VERSION);
        for b in [&blocked, &front, &bytes, &v6, &v7] {
            same_answers(&stored, &Automaton::from_bytes(v.clone(), b).unwrap());
            same_answers(&stored, &Automaton::from_bytes_lazy(v.clone(), b).unwrap());
        }
        // (A version 5 header over byte rows is refused: tests/derived.rs, which reseals crafted files.)
    }
}
