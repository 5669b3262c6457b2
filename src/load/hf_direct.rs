//! The direct reader of `tokenizer.json`: serde on just the parts a [`Vocabulary`](crate::Vocabulary) needs, with
//! the vocabulary's texts borrowed from the file, instead of building a whole `tokenizers::Tokenizer` (its merge
//! table, its added-token matchers and its regexes), which takes 1.5-2 s for 200K-token files.
//!
//! It gives exactly what the `tokenizers` path gives, or nothing (`None`: the caller then takes that path, which
//! also makes its errors): every part the `tokenizers` crate would refuse is checked the same way here
//! (`version`, `truncation`, `padding`, `normalizer`, `pre_tokenizer`, `post_processor` and `decoder` are read
//! with the crate's own types; a BPE model's `dropout` range and merges are checked as its builder checks them,
//! a Unigram model's `unk_id` as `Unigram::from` checks it, a WordPiece model's required fields as its visitor
//! does), and the added tokens get their ids as the crate gives them (`AddedVocabulary::add_tokens`: the id of
//! an earlier added token or model token of the same content, else the next id past the model's size, whatever
//! id the file writes). Models: `BPE` (`vocab` a map of text to id), `Unigram` (`vocab` a list of
//! `[piece, score]`, the id of a piece its position) and `WordPiece` (read to the end, then refused with the
//! crate path's error). Anything else goes to the `tokenizers` path: WordLevel, a model without `"type"` as its
//! first key, a key given twice in an object the reader parses into a structure, two distinct vocabulary texts
//! with one 64-bit hash, or a panic inside the crate's deserializers.
//!
//! Cost (a 262K-token file, 33 MB): the serde pass over the file (merges parsed into borrowed pairs), then the
//! merge check, three exact lookups per merge in an [`Index`] of the vocabulary, in parallel.

use super::Parts;
use crate::vocab::TokenId;
use rayon::prelude::*;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PaddingParams, PostProcessorWrapper, PreTokenizerWrapper,
    TruncationParams,
};

fn hash(text: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text)
}

/// Bytes of a text kept in its [`Index`] slot.
const INLINE: usize = 16;

/// One slot of an [`Index`]: the text's first [`INLINE`] bytes (zero-padded), its length and its position in the
/// file's list; `len == EMPTY` for a free slot.
#[derive(Clone, Copy)]
struct Slot {
    inline: [u8; INLINE],
    len: u32,
    pos: u32,
}

const EMPTY: u32 = u32::MAX;

impl Slot {
    fn of(text: &[u8], pos: u32) -> Slot {
        let mut inline = [0u8; INLINE];
        let n = text.len().min(INLINE);
        inline[..n].copy_from_slice(&text[..n]);
        Slot { inline, len: text.len() as u32, pos }
    }
}

/// The model's vocabulary by text: for each distinct text the position (in the file's list) of its last entry,
/// the id the crate's map keeps. An open-addressing table (linear probing, at most half full) keyed by the
/// texts' xxh3 hashes whose slots hold the texts' first 16 bytes, so that a lookup (there are three per merge,
/// 1.5 M for a 262K-token file) costs one cache miss, and a second one only for a text longer than 16 bytes.
/// Lookups are exact: a hit is always confirmed by the whole text.
struct Index<'v, 'a> {
    list: &'v [(Cow<'a, str>, u32)],
    slots: Vec<Slot>,
    mask: usize,
    /// Positions whose text comes again later in the list (the crate's map drops them).
    shadowed: Vec<u32>,
}

impl<'v, 'a> Index<'v, 'a> {
    fn new(list: &'v [(Cow<'a, str>, u32)]) -> Option<Self> {
        let hashes: Vec<u64> = list.par_iter().with_min_len(1 << 12).map(|(t, _)| hash(t.as_bytes())).collect();
        let n_slots = (2 * list.len()).max(16).checked_next_power_of_two()?;
        let empty = Slot { inline: [0; INLINE], len: EMPTY, pos: 0 };
        let mut index = Index { list, slots: vec![empty; n_slots], mask: n_slots - 1, shadowed: Vec::new() };
        for (pos, &h) in hashes.iter().enumerate() {
            let text = list[pos].0.as_bytes();
            if text.len() >= EMPTY as usize {
                return None;
            }
            match index.find(h, text) {
                Ok(i) => {
                    index.shadowed.push(index.slots[i].pos);
                    index.slots[i].pos = pos as u32;
                }
                Err(i) => index.slots[i] = Slot::of(text, pos as u32),
            }
        }
        Some(index)
    }

    /// `Ok(slot)` of `text` (whose hash is `h`), or `Err(free slot)` where it would go.
    fn find(&self, h: u64, text: &[u8]) -> Result<usize, usize> {
        let probe = Slot::of(text, 0);
        let mut i = h as usize & self.mask;
        loop {
            let s = &self.slots[i];
            if s.len == EMPTY {
                return Err(i);
            }
            if s.len == probe.len
                && s.inline == probe.inline
                && (text.len() <= INLINE || self.list[s.pos as usize].0.as_bytes()[INLINE..] == text[INLINE..])
            {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Loads the first slot of each hash (independent loads, whose cache misses overlap).
    fn touch(&self, hashes: impl Iterator<Item = u64>) {
        let x = hashes.fold(0u32, |x, h| x ^ self.slots[h as usize & self.mask].len);
        std::hint::black_box(x);
    }

    /// The id of `text`, as the crate's map gives it.
    fn get(&self, text: &str) -> Option<u32> {
        let slot = self.find(hash(text.as_bytes()), text.as_bytes()).ok()?;
        Some(self.list[self.slots[slot].pos as usize].1)
    }

    #[allow(dead_code)]
    fn contains(&self, text: &str) -> bool {
        self.find(hash(text.as_bytes()), text.as_bytes()).is_ok()
    }

    /// The distinct texts with the ids the crate's map keeps.
    fn entries(&self) -> Vec<(Cow<'a, str>, TokenId)> {
        let mut keep = vec![true; self.list.len()];
        for &p in &self.shadowed {
            keep[p as usize] = false;
        }
        self.list.iter().zip(keep).filter(|(_, k)| *k).map(|((t, id), _)| (t.clone(), *id as TokenId)).collect()
    }
}

/// A JSON string, borrowed from the input when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The model's vocabulary as the file lists it: (text, id) in file order, texts borrowed where they have no
/// escapes (a JSON object of text -> id: BPE, WordPiece).
struct VocabMap<'a>(Vec<(Cow<'a, str>, u32)>);

impl<'de: 'a, 'a> Deserialize<'de> for VocabMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VocabMap<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of token texts to ids")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VocabMap<'de>, A::Error> {
                let mut m = Vec::with_capacity(map.size_hint().unwrap_or(1 << 17));
                while let Some((Text(k), v)) = map.next_entry::<Text, u32>()? {
                    m.push((k, v));
                }
                Ok(VocabMap(m))
            }
        }
        d.deserialize_map(V)
    }
}

/// A Unigram vocabulary: `[[piece, score], ...]`, the id of a piece is its position (scores are read as the crate
/// reads them, f64, and dropped).
struct PieceList<'a>(Vec<(Cow<'a, str>, u32)>);

impl<'de: 'a, 'a> Deserialize<'de> for PieceList<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PieceList<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of [piece, score] pairs")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PieceList<'de>, A::Error> {
                let mut m = Vec::with_capacity(seq.size_hint().unwrap_or(1 << 15));
                while let Some((Text(k), _score)) = seq.next_element::<(Text, f64)>()? {
                    let id = u32::try_from(m.len()).map_err(|_| de::Error::custom("too many pieces"))?;
                    m.push((k, id));
                }
                Ok(PieceList(m))
            }
        }
        d.deserialize_seq(V)
    }
}

/// One merge: `"a b"` (the legacy form) or `["a", "b"]`.
enum Merge<'a> {
    Line(Cow<'a, str>),
    Pair(Cow<'a, str>, Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Merge<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Merge<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a merge: a string or a pair of strings")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Merge<'de>, E> {
                Ok(Merge::Line(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Merge<'de>, E> {
                Ok(Merge::Line(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Merge<'de>, E> {
                Ok(Merge::Line(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merge<'de>, A::Error> {
                let a: Text = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let b: Text = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(Merge::Pair(a.0, b.0))
            }
        }
        d.deserialize_any(V)
    }
}

/// A BPE model as the crate's `BPEVisitor` reads it (its `"type"` already read by [`Model`]).
#[derive(Deserialize)]
struct Bpe<'a> {
    /// A second `"type"` key: declined (the crate's flattened tag handles it its own way).
    #[serde(rename = "type", default)]
    type_again: Option<IgnoredAny>,
    #[serde(default)]
    dropout: Option<f32>,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    fuse_unk: Option<bool>,
    #[serde(default)]
    byte_fallback: Option<bool>,
    #[serde(default)]
    #[allow(dead_code)]
    ignore_merges: Option<bool>,
    #[serde(borrow)]
    vocab: VocabMap<'a>,
    #[serde(borrow)]
    merges: Vec<Merge<'a>>,
}

/// A Unigram model as the crate's `UnigramVisitor` reads it (from the flattened rest of the tagged model: unknown
/// keys ignored, `byte_fallback` a bool when present, `unk_id` a non-negative integer or null).
#[derive(Deserialize)]
struct Unigram<'a> {
    #[serde(rename = "type", default)]
    type_again: Option<IgnoredAny>,
    #[serde(default)]
    unk_id: Option<usize>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(borrow)]
    vocab: PieceList<'a>,
}

/// A WordPiece model as the crate's `WordPieceVisitor` reads it (every field required). libtrie refuses WordPiece
/// vocabularies; reading the model still decides whether the crate would have accepted the file.
#[derive(Deserialize)]
#[allow(dead_code)]
struct WordPiece<'a> {
    #[serde(rename = "type", default)]
    type_again: Option<IgnoredAny>,
    unk_token: String,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    #[serde(borrow)]
    vocab: VocabMap<'a>,
}

/// The `"model"` object: its first key must be `"type"` (as every file the crate writes has it); anything else
/// (a legacy model without a type, WordLevel, the type later in the object) is declined.
enum Model<'a> {
    Bpe(Bpe<'a>),
    Unigram(Unigram<'a>),
    WordPiece(WordPiece<'a>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Model<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Model<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a model object whose first key is \"type\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Model<'de>, A::Error> {
                let key: Option<Text> = map.next_key()?;
                if key.as_ref().map(|k| k.0.as_ref()) != Some("type") {
                    return Err(de::Error::custom("the model's first key is not \"type\""));
                }
                let Text(kind) = map.next_value()?;
                let rest = de::value::MapAccessDeserializer::new(map);
                let model = match kind.as_ref() {
                    "BPE" => Model::Bpe(Bpe::deserialize(rest)?),
                    "Unigram" => Model::Unigram(Unigram::deserialize(rest)?),
                    "WordPiece" => Model::WordPiece(WordPiece::deserialize(rest)?),
                    _ => return Err(de::Error::custom("a model type read by the crate")),
                };
                let again = match &model {
                    Model::Bpe(m) => m.type_again.is_some(),
                    Model::Unigram(m) => m.type_again.is_some(),
                    Model::WordPiece(m) => m.type_again.is_some(),
                };
                if again {
                    return Err(de::Error::custom("\"type\" given twice"));
                }
                Ok(model)
            }
        }
        d.deserialize_map(V)
    }
}

/// An entry of `added_tokens`, as the crate's `AddedTokenWithId`.
#[derive(Deserialize)]
struct AddedTokenWithId {
    #[allow(dead_code)]
    id: u32,
    #[serde(flatten)]
    token: AddedToken,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A crate type read from a parsed `Value`, never from the raw text: the crate's decoder and normalizer
/// deserializers `expect` that their input parses as JSON and panic on a bad escape or syntax inside them (which
/// catch_unwind cannot contain where panics abort); from a `Value` that cannot happen, and a wrong shape is an error.
fn via_value<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => serde_json::from_value::<Option<T>>(v).map_err(serde::de::Error::custom),
    }
}

/// The parts of the file the crate's `TokenizerVisitor` reads, each with the type it reads it as.
#[derive(Deserialize)]
struct File<'a> {
    #[serde(default, deserialize_with = "present")]
    version: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    truncation: Option<TruncationParams>,
    #[serde(default)]
    #[allow(dead_code)]
    padding: Option<PaddingParams>,
    #[serde(default)]
    added_tokens: Vec<AddedTokenWithId>,
    #[serde(default, deserialize_with = "via_value")]
    #[allow(dead_code)]
    normalizer: Option<NormalizerWrapper>,
    #[serde(default, deserialize_with = "via_value")]
    pre_tokenizer: Option<PreTokenizerWrapper>,
    #[serde(default)]
    post_processor: Option<Value>,
    #[serde(default, deserialize_with = "via_value")]
    decoder: Option<DecoderWrapper>,
    #[serde(borrow)]
    model: Model<'a>,
}

impl Bpe<'_> {
    /// Whether the crate's `BpeBuilder::build` accepts this model (dropout in [0, 1]; every merge of two tokens
    /// of the vocabulary whose concatenation is one too; legacy merges of exactly two space-separated parts).
    fn builds(&self, vocab: &Index) -> bool {
        if self.dropout.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return false;
        }
        let prefix_len = self.continuing_subword_prefix.as_ref().map_or(0, String::len);
        let (lines, pairs) = self.merges.iter().fold((0, 0), |(l, p), m| match m {
            Merge::Line(_) => (l + 1, p),
            Merge::Pair(..) => (l, p + 1),
        });
        if lines > 0 && pairs > 0 {
            return false; // neither form of the crate's untagged merges
        }
        // Each lookup misses the cache (the table is megabytes): in parallel pieces, and in batches whose slots are
        // all loaded first, so that the misses of a batch overlap.
        self.merges.par_chunks(1 << 14).all(|merges| {
            let (mut plain, mut joined, mut buf) = (Vec::new(), Vec::new(), String::new());
            merges.chunks(32).all(|batch| {
                plain.clear();
                joined.clear();
                buf.clear();
                for m in batch {
                    let (a, b) = match m {
                        Merge::Pair(a, b) => (a.as_ref(), b.as_ref()),
                        Merge::Line(line) if line.starts_with("#version") => continue,
                        Merge::Line(line) => {
                            let mut parts = line.split(' ');
                            match (parts.next(), parts.next(), parts.next()) {
                                (Some(a), Some(b), None) => (a, b),
                                _ => return false,
                            }
                        }
                    };
                    let Some(rest) = b.get(prefix_len..) else { return false };
                    plain.push((hash(a.as_bytes()), a));
                    plain.push((hash(b.as_bytes()), b));
                    let start = buf.len();
                    buf.push_str(a);
                    buf.push_str(rest);
                    joined.push((hash(&buf.as_bytes()[start..]), start, buf.len()));
                }
                vocab.touch(plain.iter().map(|p| p.0).chain(joined.iter().map(|j| j.0)));
                plain.iter().all(|&(h, t)| vocab.find(h, t.as_bytes()).is_ok())
                    && joined.iter().all(|&(h, s, e)| vocab.find(h, &buf.as_bytes()[s..e]).is_ok())
            })
        })
    }
}

/// The parts of `bytes`, `Some(Err)` for a WordPiece model (refused as the `tokenizers` path refuses it, once the
/// crate would have read the file), or `None` when the `tokenizers` path must read it (see the module).
pub(super) fn read(bytes: &[u8]) -> Option<crate::error::Result<Parts<'_>>> {
    // The crate's deserializers have panicked on odd input before: such a file goes to the guarded path.
    std::panic::catch_unwind(|| read_unguarded(bytes)).ok().flatten()
}

fn read_unguarded(bytes: &[u8]) -> Option<crate::error::Result<Parts<'_>>> {
    let file: File = serde_json::from_slice(bytes).ok()?;
    if file.version.as_ref().is_some_and(|v| v.as_str() != Some("1.0")) {
        return None;
    }
    if let Some(post) = &file.post_processor {
        if !post.is_null() {
            serde_json::from_value::<PostProcessorWrapper>(post.clone()).ok()?;
        }
    }
    // The model: its texts by id, its unknown token, its byte fallback.
    let (model_name, list, unk, byte_fallback) = match &file.model {
        Model::Bpe(m) => ("BPE", &m.vocab.0, None, m.byte_fallback.unwrap_or(false)),
        Model::Unigram(m) => {
            if m.unk_id.is_some_and(|u| u >= m.vocab.0.len()) {
                return None; // the crate's UnkIdNotInVocabulary / EmptyVocabulary
            }
            ("Unigram", &m.vocab.0, m.unk_id.and_then(|u| TokenId::try_from(u).ok()), m.byte_fallback)
        }
        Model::WordPiece(m) => ("WordPiece", &m.vocab.0, None, false),
    };
    let vocab = Index::new(list)?;
    let unk = match &file.model {
        Model::Bpe(m) => {
            if !m.builds(&vocab) {
                return None;
            }
            m.unk_token.as_deref().and_then(|u| vocab.get(u)).map(|id| id as TokenId)
        }
        _ => unk,
    };
    let declared_eos = file.post_processor.as_ref().map(super::declared_eos).unwrap_or_default();
    // AddedVocabulary::add_tokens on an empty added vocabulary; the model's size is its map's (BPE, WordPiece) or
    // its list's (Unigram) length.
    let model_size = match &file.model {
        Model::Unigram(m) => m.vocab.0.len(),
        _ => list.len() - vocab.shadowed.len(),
    };
    let mut next_id = model_size as u32;
    let mut by_content: HashMap<String, u32> = HashMap::new();
    let mut by_id: HashMap<u32, (String, bool)> = HashMap::new();
    let mut existing: HashSet<(String, bool, bool, bool, bool, bool)> = HashSet::new();
    for AddedTokenWithId { token: t, .. } in file.added_tokens {
        let key = (t.content.clone(), t.single_word, t.lstrip, t.rstrip, t.normalized, t.special);
        if t.content.is_empty() || existing.contains(&key) {
            continue;
        }
        let id = match by_content.get(&t.content).copied().or_else(|| vocab.get(t.content.as_str())) {
            Some(id) => id,
            None => {
                next_id = next_id.checked_add(1)?;
                next_id - 1
            }
        };
        by_content.insert(t.content.clone(), id);
        by_id.insert(id, (t.content, t.special));
        existing.insert(key);
    }
    if model_name == "WordPiece" {
        return Some(Err(super::wordpiece_unsupported()));
    }
    Some(Ok(Parts {
        model_name,
        word_level: false,
        vocab: vocab.entries(),
        added: by_id.into_iter().map(|(id, (content, special))| (id, content, special)).collect(),
        unk,
        byte_fallback,
        decoder: match &file.decoder {
            Some(d) => Some(serde_json::to_value(d).ok()?),
            None => None,
        },
        pre_tokenizer: match &file.pre_tokenizer {
            Some(p) => Some(serde_json::to_value(p).ok()?),
            None => None,
        },
        declared_eos,
    }))
}
