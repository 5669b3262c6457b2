//! The token vocabulary: the exact bytes each token id stands for, its kind, the end-of-generation ids, and the
//! alignment index (an Aho-Corasick automaton over all distinct text-token byte strings), built once per
//! tokenizer and shared by every compile.
//!
//! Invariants of a [`Vocabulary`]:
//! - ids are `0..n_vocab()`; ids at and past [`Vocabulary::n_listed`] are padding and never allowed;
//! - a *text token* is a Normal, Byte or UserDefined token with non-empty bytes that is not an EOG id;
//!   only text tokens move through the trie, and only EOG ids end a member;
//! - Control, Unknown and Unused tokens, and padding, never appear in any mask.

pub(crate) mod token_trie;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{ensure, Kind, Reader, Writer};
use crate::util::array::Array;
use crate::vocab::token_trie::TokenTrie;
use aho_corasick::nfa::contiguous;
use std::path::Path;
use std::sync::OnceLock;

pub use crate::ids::TokenId;

/// The kind of a token, numbered as in GGUF's `tokenizer.ggml.token_type` (and the C ABI's `TRIE_TOKEN_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TokenKind {
    /// Ordinary text.
    Normal = 1,
    /// The unknown-token placeholder (never generated as text).
    Unknown = 2,
    /// A control token such as `<s>` or `<|im_start|>` (never text).
    Control = 3,
    /// A user-defined token: its text is emitted verbatim.
    UserDefined = 4,
    /// A reserved or padding slot (never generated).
    Unused = 5,
    /// A single raw byte (SentencePiece byte fallback `<0xNN>`).
    Byte = 6,
}

impl TokenKind {
    /// The kind for a GGUF / C ABI number; 0 is read as Normal.
    pub fn from_u32(v: u32) -> Option<TokenKind> {
        Some(match v {
            0 | 1 => TokenKind::Normal,
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => return None,
        })
    }

    /// Whether tokens of this kind stand for text.
    pub fn is_text(self) -> bool {
        matches!(self, TokenKind::Normal | TokenKind::UserDefined | TokenKind::Byte)
    }
}

/// A tokenizer vocabulary ready for compiling sets. Immutable; `Send + Sync`; share it with `Arc`.
pub struct Vocabulary {
    /// Mask width: the model's vocabulary size (may exceed the listed tokens: padding).
    n_vocab: usize,
    /// Token `i`'s bytes are `bytes[offsets[i]..offsets[i + 1]]`; `offsets.len() == n_listed + 1`.
    offsets: Array<u32>,
    bytes: Array<u8>,
    /// [`TokenKind`] numbers, one per listed token (all valid).
    kinds: Array<u8>,
    /// Sorted, deduplicated end-of-generation ids (all `< n_listed`).
    eog: Array<TokenId>,
    /// xxh3-128 of `n_vocab`, the token bytes, kinds and EOG ids: what an automaton file checks it was
    /// compiled against.
    fingerprint: u128,
    pub(crate) index: TokenIndex,
}

/// The alignment index: patterns are the distinct byte strings of text tokens, ascending.
pub(crate) struct TokenIndex {
    /// The trie of the patterns (the default alignment index).
    pub(crate) trie: TokenTrie,
    /// Aho-Corasick automaton over the patterns (standard semantics: every match is reported), built on first
    /// use by [`crate::AlignmentMethod::AhoCorasick`].
    ac: OnceLock<std::result::Result<contiguous::NFA, String>>,
    /// Pattern `p` stands for tokens `pattern_tokens[pattern_offsets[p]..pattern_offsets[p + 1]]` (ascending).
    pub(crate) pattern_offsets: Array<u32>,
    pub(crate) pattern_tokens: Array<TokenId>,
    /// Byte length of each pattern.
    pub(crate) pattern_len: Array<u32>,
    /// The token code of each pattern (see [`TokenIndex::code_tokens`]).
    pub(crate) pattern_code: Array<u32>,
    /// The longest pattern's length (0 without patterns).
    pub(crate) max_pattern_len: u32,
    /// `single_byte[b]`: the one-byte string `[b]` is a pattern (some text token stands for exactly that byte).
    pub(crate) single_byte: [bool; 256],
}

impl TokenIndex {
    /// The token ids that pattern `p` stands for.
    #[inline]
    pub(crate) fn tokens_of(&self, p: usize) -> &[TokenId] {
        &self.pattern_tokens[self.pattern_offsets[p] as usize..self.pattern_offsets[p + 1] as usize]
    }

    /// The token ids a *token code* stands for. A pattern's code is its token id when one token has its bytes
    /// (the usual case: no lookup needed), else `MULTI | pattern`.
    #[inline]
    pub(crate) fn code_tokens<'a>(&'a self, code: &'a u32) -> &'a [TokenId] {
        if code & MULTI == 0 {
            std::slice::from_ref(code)
        } else {
            self.tokens_of((code & !MULTI) as usize)
        }
    }
}

// Section tags of a saved vocabulary.
const V_META: u32 = 1;
const V_OFFSETS: u32 = 2;
const V_BYTES: u32 = 3;
const V_KINDS: u32 = 4;
const V_EOG: u32 = 5;
const V_PATTERN_OFFSETS: u32 = 6;
const V_PATTERN_TOKENS: u32 = 7;
const V_PATTERN_LEN: u32 = 8;
const V_PATTERN_CODE: u32 = 9;

/// xxh3-128 of what decides a vocabulary's automata.
fn fingerprint(n_vocab: usize, offsets: &[u32], bytes: &[u8], kinds: &[u8], eog: &[u32]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(n_vocab as u64).to_le_bytes());
    h.update(&(kinds.len() as u64).to_le_bytes());
    h.update(bytemuck::cast_slice(offsets));
    h.update(bytes);
    h.update(kinds);
    h.update(bytemuck::cast_slice(eog));
    h.digest128()
}

/// Marks a token code that names a pattern of several tokens.
pub(crate) const MULTI: u32 = 1 << 31;

/// The most ids a vocabulary may have (ids are `int32_t` in C engines).
pub const MAX_VOCAB: usize = i32::MAX as usize;

/// Token texts that stand for padding or reserved slots in real vocabularies even when their type says
/// otherwise: `[PAD123]` (Qwen2/DeepSeek/Phi-3 conversions mark them user-defined) and `<unused123>` (Gemma
/// marks them normal). They are treated as Unused.
fn is_padding_text(text: &[u8]) -> bool {
    let digits_between = |pre: &[u8], post: &[u8]| {
        text.len() > pre.len() + post.len()
            && text.starts_with(pre)
            && text.ends_with(post)
            && text[pre.len()..text.len() - post.len()].iter().all(u8::is_ascii_digit)
    };
    digits_between(b"[PAD", b"]") || digits_between(b"<unused", b">")
}

impl Vocabulary {
    /// Builds a vocabulary from the bytes and kind of every token id, the end-of-generation ids, and the mask
    /// width `n_vocab` (at least `tokens.len()`; `None` means `tokens.len()`). This is the form a host engine
    /// such as llama.cpp hands over (`llama_token_to_piece` bytes, token attributes, `llama_vocab_is_eog`).
    ///
    /// Errors: `kinds` of another length than `tokens`; an EOG id or `n_vocab` out of range; more than
    /// [`MAX_VOCAB`] ids; more than 4 GiB of token bytes.
    pub fn new(
        tokens: Vec<Vec<u8>>,
        kinds: Vec<TokenKind>,
        eog_ids: &[TokenId],
        n_vocab: Option<usize>,
    ) -> Result<Vocabulary> {
        if kinds.len() != tokens.len() {
            return Err(Error::invalid(format!(
                "{} token kinds given for {} tokens: give one kind per token",
                kinds.len(),
                tokens.len()
            )));
        }
        let total: usize = tokens.iter().map(Vec::len).sum();
        if total > u32::MAX as usize {
            return Err(Error::limit(format!("{total} bytes of token text exceed the 4 GiB limit")));
        }
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        let mut bytes = Vec::with_capacity(total);
        offsets.push(0u32);
        for t in &tokens {
            bytes.extend_from_slice(t);
            offsets.push(bytes.len() as u32);
        }
        drop(tokens);
        Self::from_parts(bytes, offsets, kinds, eog_ids, n_vocab)
    }

    /// Like [`Vocabulary::new`], from the token bytes laid end to end: token `i` is
    /// `bytes[offsets[i]..offsets[i + 1]]` (`offsets` ascending, one more entry than `kinds`).
    pub(crate) fn from_parts(
        bytes: Vec<u8>,
        offsets: Vec<u32>,
        kinds: Vec<TokenKind>,
        eog_ids: &[TokenId],
        n_vocab: Option<usize>,
    ) -> Result<Vocabulary> {
        let n_listed = kinds.len();
        debug_assert_eq!(offsets.len(), n_listed + 1);
        let n_vocab = n_vocab.unwrap_or(n_listed);
        if n_vocab < n_listed {
            return Err(Error::invalid(format!("n_vocab {n_vocab} is smaller than the {n_listed} tokens given")));
        }
        if n_vocab > MAX_VOCAB {
            return Err(Error::limit(format!("{n_vocab} token ids exceed the limit of {MAX_VOCAB}")));
        }
        if n_vocab == 0 {
            return Err(Error::invalid("the vocabulary has no tokens"));
        }
        let mut eog: Vec<TokenId> = eog_ids.to_vec();
        eog.sort_unstable();
        eog.dedup();
        if let Some(&bad) = eog.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(Error::invalid(format!("end-of-generation id {bad} is out of range (n_vocab = {n_vocab})")));
        }
        if let Some(&bad) = eog.iter().find(|&&id| id as usize >= n_listed) {
            return Err(Error::invalid(format!(
                "end-of-generation id {bad} is a padding id: the vocabulary lists {n_listed} tokens and ids \
                 {n_listed}..{n_vocab} are padding, which is never allowed; give the id of a listed token"
            )));
        }
        let mut kinds = kinds;
        for (id, kind) in kinds.iter_mut().enumerate() {
            if kind.is_text() && is_padding_text(&bytes[offsets[id] as usize..offsets[id + 1] as usize]) {
                *kind = TokenKind::Unused;
            }
        }
        let kinds: Vec<u8> = kinds.into_iter().map(|k| k as u8).collect();
        let fingerprint = fingerprint(n_vocab, &offsets, &bytes, &kinds, &eog);
        let mut vocab = Vocabulary {
            n_vocab,
            offsets: offsets.into(),
            bytes: bytes.into(),
            kinds: kinds.into(),
            eog: eog.into(),
            fingerprint,
            index: TokenIndex {
                trie: TokenTrie::build(&[], &[]),
                ac: OnceLock::new(),
                pattern_offsets: vec![0].into(),
                pattern_tokens: Array::default(),
                pattern_len: Array::default(),
                pattern_code: Array::default(),
                max_pattern_len: 0,
                single_byte: [false; 256],
            },
        };
        vocab.index = vocab.build_index()?;
        Ok(vocab)
    }

    fn build_index(&self) -> Result<TokenIndex> {
        // Group text tokens by their bytes: one pattern per distinct byte string.
        let text_ids: Vec<TokenId> = (0..self.n_listed() as TokenId).filter(|&id| self.is_text_token(id)).collect();
        let texts: Vec<&[u8]> = text_ids.iter().map(|&id| self.token_bytes(id)).collect();
        let ids: Vec<TokenId> =
            crate::util::sort::sorted_order(&texts).into_iter().map(|i| text_ids[i as usize]).collect();
        let mut patterns: Vec<&[u8]> = Vec::new();
        let mut pattern_offsets = vec![0u32];
        let mut pattern_len = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let b = self.token_bytes(id);
            if i > 0 && self.token_bytes(ids[i - 1]) == b {
                *pattern_offsets.last_mut().unwrap() += 1;
                continue;
            }
            patterns.push(b);
            pattern_len.push(b.len() as u32);
            pattern_offsets.push(pattern_offsets.last().unwrap() + 1);
        }
        let pattern_code: Vec<u32> = (0..patterns.len())
            .map(|p| {
                let (a, b) = (pattern_offsets[p] as usize, pattern_offsets[p + 1] as usize);
                if b - a == 1 {
                    ids[a]
                } else {
                    MULTI | p as u32
                }
            })
            .collect();
        let trie = TokenTrie::build(&patterns, &pattern_code);
        let max_pattern_len = pattern_len.iter().copied().max().unwrap_or(0);
        let mut single_byte = [false; 256];
        for p in patterns.iter().filter(|p| p.len() == 1) {
            single_byte[p[0] as usize] = true;
        }
        Ok(TokenIndex {
            trie,
            ac: OnceLock::new(),
            pattern_offsets: pattern_offsets.into(),
            pattern_tokens: ids.into(),
            pattern_len: pattern_len.into(),
            pattern_code: pattern_code.into(),
            max_pattern_len,
            single_byte,
        })
    }

    /// The bytes of pattern `p`.
    pub(crate) fn pattern_bytes(&self, p: usize) -> &[u8] {
        self.token_bytes(self.index.tokens_of(p)[0])
    }

    /// The Aho-Corasick automaton over the patterns, built on first use.
    pub(crate) fn aho_corasick(&self) -> Result<&contiguous::NFA> {
        self.index
            .ac
            .get_or_init(|| {
                let patterns: Vec<&[u8]> = (0..self.n_patterns()).map(|p| self.pattern_bytes(p)).collect();
                contiguous::Builder::new()
                    .match_kind(aho_corasick::MatchKind::Standard)
                    .build(&patterns)
                    .map_err(|e| format!("cannot build the Aho-Corasick index over {} patterns: {e}", patterns.len()))
            })
            .as_ref()
            .map_err(|e| Error::limit(e.clone()))
    }

    /// Mask width: the number of token ids (including padding past the listed tokens).
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Number of ids with listed bytes and kinds; ids from here to `n_vocab` are padding.
    pub fn n_listed(&self) -> usize {
        self.kinds.len()
    }

    /// Number of 32-bit words in one bitmask row: `ceil(n_vocab / 32)`.
    pub fn mask_words(&self) -> usize {
        self.n_vocab.div_ceil(32)
    }

    /// The bytes token `id` stands for (empty for padding ids and out-of-range ids).
    pub fn token_bytes(&self, id: TokenId) -> &[u8] {
        let i = id as usize;
        if i >= self.n_listed() {
            return &[];
        }
        &self.bytes[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The kind of token `id`; padding ids are Unused.
    pub fn kind(&self, id: TokenId) -> TokenKind {
        self.kinds.get(id as usize).and_then(|&k| TokenKind::from_u32(k as u32)).unwrap_or(TokenKind::Unused)
    }

    /// The end-of-generation ids, ascending.
    pub fn eog_ids(&self) -> &[TokenId] {
        &self.eog
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// Whether `id` is a text token: it can move through the trie.
    pub fn is_text_token(&self, id: TokenId) -> bool {
        self.kind(id).is_text() && !self.token_bytes(id).is_empty() && !self.is_eog(id)
    }

    /// Number of distinct text-token byte strings (patterns of the alignment index).
    pub fn n_patterns(&self) -> usize {
        self.index.pattern_len.len()
    }

    /// Bytes held by this vocabulary, its index included (heap or, after [`Vocabulary::load`], mapped file pages).
    pub fn memory_usage(&self) -> usize {
        self.bytes.size_bytes()
            + self.offsets.size_bytes()
            + self.kinds.size_bytes()
            + self.eog.size_bytes()
            + self.index.trie.memory_usage()
            + self
                .index
                .ac
                .get()
                .and_then(|r| r.as_ref().ok())
                .map_or(0, aho_corasick::automaton::Automaton::memory_usage)
            + self.index.pattern_offsets.size_bytes()
            + self.index.pattern_tokens.size_bytes()
            + self.index.pattern_len.size_bytes()
            + self.index.pattern_code.size_bytes()
    }

    /// A digest of everything that decides what an automaton compiled against this vocabulary contains (mask
    /// width, token bytes, kinds, end-of-generation ids): equal fingerprints mean interchangeable vocabularies.
    pub fn fingerprint(&self) -> u128 {
        self.fingerprint
    }

    /// Saves the vocabulary with its alignment index to `path` (written atomically; see the `file` module of
    /// the crate for the format), so that a server can [`Vocabulary::load`] it in milliseconds instead of
    /// reading a GGUF or a tokenizer.json again.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.writer().write(path.as_ref())
    }

    /// The saved form of the vocabulary, in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.writer().to_bytes()
    }

    fn writer(&self) -> Writer {
        let mut w = Writer::new(Kind::Vocabulary, self.fingerprint);
        w.section(V_META, &[self.n_vocab as u64, self.index.max_pattern_len as u64]);
        w.section(V_OFFSETS, &self.offsets);
        w.section(V_BYTES, &self.bytes);
        w.section(V_KINDS, &self.kinds);
        w.section(V_EOG, &self.eog);
        w.section(V_PATTERN_OFFSETS, &self.index.pattern_offsets);
        w.section(V_PATTERN_TOKENS, &self.index.pattern_tokens);
        w.section(V_PATTERN_LEN, &self.index.pattern_len);
        w.section(V_PATTERN_CODE, &self.index.pattern_code);
        self.index.trie.write(&mut w);
        w
    }

    /// Whether the vocabulary's arrays live in a file mapping ([`Vocabulary::load`]) rather than on the heap.
    pub fn is_mapped(&self) -> bool {
        self.bytes.is_mapped()
    }

    /// Loads a vocabulary saved by [`Vocabulary::save`]: the file is memory-mapped (its pages are shared by every
    /// process that loads it) and checked, not rebuilt. The checks keep every lookup of the index in bounds, so no file
    /// can crash or hang the process; that the index agrees with the token bytes rests on the checksum (damage is
    /// detected), not on a re-derivation, which would cost as much as building the index: load files that libtrie
    /// wrote into a directory you trust, as you would a model. Errors: [`ErrorKind::Io`]; [`ErrorKind::MalformedFile`]
    /// for a file that is truncated, corrupt (checksum), of another format version or byte order, or not a
    /// vocabulary. The file must not change while loaded (truncating it raises SIGBUS; see the README's
    /// "Limits"): replace it by renaming a new file over it, as [`Vocabulary::save`] does.
    pub fn load(path: impl AsRef<Path>) -> Result<Vocabulary> {
        Self::from_reader(Reader::open(path.as_ref(), Kind::Vocabulary)?)
    }

    /// Like [`Vocabulary::load`], from the bytes of a saved vocabulary (copied).
    pub fn from_bytes(bytes: &[u8]) -> Result<Vocabulary> {
        Self::from_reader(Reader::from_bytes(bytes, Kind::Vocabulary)?)
    }

    fn from_reader(r: Reader) -> Result<Vocabulary> {
        let meta: Array<u64> = r.array(V_META)?;
        ensure(meta.len() == 2, || "vocabulary metadata of the wrong size".into())?;
        let offsets: Array<u32> = r.array(V_OFFSETS)?;
        let bytes: Array<u8> = r.array(V_BYTES)?;
        let kinds: Array<u8> = r.array(V_KINDS)?;
        let eog: Array<u32> = r.array(V_EOG)?;
        let n_listed = kinds.len();
        let n_vocab = usize::try_from(meta[0]).unwrap_or(usize::MAX);
        ensure(n_listed > 0 || n_vocab > 0, || "the vocabulary has no tokens".into())?;
        ensure(n_vocab >= n_listed && n_vocab <= MAX_VOCAB, || format!("n_vocab {n_vocab} is out of range"))?;
        ensure(offsets.len() == n_listed + 1 && offsets[0] == 0, || "token offsets of the wrong size".into())?;
        ensure(offsets.windows(2).all(|w| w[0] <= w[1]) && offsets[n_listed] as usize == bytes.len(), || {
            "token offsets are not ascending within the token bytes".into()
        })?;
        ensure(kinds.iter().all(|&k| (1..=6).contains(&k)), || "a token kind is not 1..6".into())?;
        ensure(eog.windows(2).all(|w| w[0] < w[1]) && eog.iter().all(|&e| (e as usize) < n_listed), || {
            "end-of-generation ids are not ascending listed ids".into()
        })?;
        let pattern_offsets: Array<u32> = r.array(V_PATTERN_OFFSETS)?;
        let pattern_tokens: Array<u32> = r.array(V_PATTERN_TOKENS)?;
        let pattern_len: Array<u32> = r.array(V_PATTERN_LEN)?;
        let pattern_code: Array<u32> = r.array(V_PATTERN_CODE)?;
        let n_patterns = pattern_len.len();
        ensure(
            pattern_offsets.len() == n_patterns + 1
                && pattern_code.len() == n_patterns
                && pattern_offsets[0] == 0
                && pattern_offsets.windows(2).all(|w| w[0] < w[1])
                && pattern_offsets[n_patterns] as usize == pattern_tokens.len()
                && pattern_tokens.iter().all(|&t| (t as usize) < n_listed),
            || "the pattern tables are inconsistent".into(),
        )?;
        let valid_code =
            |c: u32| if c & MULTI != 0 { ((c & !MULTI) as usize) < n_patterns } else { (c as usize) < n_listed };
        ensure(pattern_code.iter().all(|&c| valid_code(c)), || "a pattern code is out of range".into())?;
        let trie = TokenTrie::read(&r, &|c| c == crate::ids::NONE || valid_code(c))?;
        let max_pattern_len = u32::try_from(meta[1]).unwrap_or(u32::MAX);
        ensure(
            pattern_len.iter().all(|&l| l > 0 && l <= max_pattern_len)
                && (n_patterns == 0 || pattern_len.contains(&max_pattern_len)),
            || "pattern lengths".into(),
        )?;
        let mut single_byte = [false; 256];
        for p in 0..n_patterns {
            if pattern_len[p] == 1 {
                let t = pattern_tokens[pattern_offsets[p] as usize] as usize;
                let b = &bytes[offsets[t] as usize..offsets[t + 1] as usize];
                ensure(b.len() == 1, || "a pattern's length disagrees with its token".into())?;
                single_byte[b[0] as usize] = true;
            }
        }
        let fingerprint = fingerprint(n_vocab, &offsets, &bytes, &kinds, &eog);
        ensure(fingerprint == r.fingerprint(), || "the fingerprint does not match the vocabulary".into())?;
        Ok(Vocabulary {
            n_vocab,
            offsets,
            bytes,
            kinds,
            eog,
            fingerprint,
            index: TokenIndex {
                trie,
                ac: OnceLock::new(),
                pattern_offsets,
                pattern_tokens,
                pattern_len,
                pattern_code,
                max_pattern_len,
                single_byte,
            },
        })
    }

    /// Checks a token id from a foreign caller (C engines use `int32_t`): `0 <= id < n_vocab`, else
    /// [`ErrorKind::InvalidArgument`].
    pub fn check_id(&self, id: i64) -> Result<TokenId> {
        if id < 0 || id as u64 >= self.n_vocab as u64 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("token id {id} is out of range: the vocabulary has ids 0..{}", self.n_vocab),
            ));
        }
        Ok(id as TokenId)
    }
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("n_vocab", &self.n_vocab)
            .field("n_listed", &self.n_listed())
            .field("n_patterns", &self.n_patterns())
            .field("eog", &self.eog)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_texts_are_recognised() {
        assert!(is_padding_text(b"[PAD151646]"));
        assert!(is_padding_text(b"<unused12>"));
        assert!(!is_padding_text(b"[PAD]"));
        assert!(!is_padding_text(b"<unused>"));
        assert!(!is_padding_text(b"[PAD1x]"));
    }

    #[test]
    fn duplicate_bytes_share_one_pattern() {
        let v = Vocabulary::new(
            vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec(), b"</s>".to_vec()],
            vec![TokenKind::Normal, TokenKind::Normal, TokenKind::UserDefined, TokenKind::Control],
            &[3],
            Some(40),
        )
        .unwrap();
        assert_eq!(v.n_patterns(), 2);
        assert_eq!(v.index.tokens_of(0), &[0, 2]);
        assert_eq!(v.mask_words(), 2);
        assert!(!v.is_text_token(3));
    }

    #[test]
    fn bad_arguments_are_errors() {
        let e = Vocabulary::new(vec![b"a".to_vec()], vec![], &[], None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = Vocabulary::new(vec![b"a".to_vec()], vec![TokenKind::Normal], &[5], None).unwrap_err();
        assert!(e.message().contains("out of range"), "{e}");
        let e = Vocabulary::new(vec![b"a".to_vec()], vec![TokenKind::Normal], &[], Some(0)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        // An end-of-generation id in the padding range would put padding into masks.
        let e = Vocabulary::new(vec![b"a".to_vec()], vec![TokenKind::Normal], &[3], Some(8)).unwrap_err();
        assert!(e.message().contains("padding"), "{e}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
