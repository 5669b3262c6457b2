//! The direct reader of `tokenizer.json` for BPE models: serde on just the parts a [`Vocabulary`](crate::Vocabulary) needs, with the
//! vocabulary's texts borrowed from the file, instead of building a whole `tokenizers::Tokenizer` (its merge
//! table, its added-token matchers and its regexes), which takes 1.6 s for 200K-token files.
//!
//! It gives exactly what the `tokenizers` path gives, or nothing (`None`: the caller then takes that path, which
//! also makes its errors): every part the `tokenizers` crate would refuse is checked the same way here
//! (`version`, `truncation`, `padding`, `normalizer`, `pre_tokenizer`, `post_processor` and `decoder` are read
//! with the crate's own types; the BPE model's `dropout` range and merges are checked as its builder checks
//! them), and the added tokens get their ids as the crate gives them (`AddedVocabulary::add_tokens`: the id of
//! an earlier added token or model token of the same content, else the next id past the model's vocabulary,
//! whatever id the file writes). Anything else goes to the `tokenizers` path: models other than `BPE` with a
//! `"type"` (Unigram, WordLevel, WordPiece, or a legacy model without one), a key given twice in an object the
//! reader parses into a structure, or a panic inside the crate's deserializers.

use super::Parts;
use crate::vocab::TokenId;
use rayon::prelude::*;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PaddingParams, PostProcessorWrapper, PreTokenizerWrapper,
    TruncationParams,
};

/// Hashes token texts with xxh3 (the map holds 100K+ texts and is probed once per merge: SipHash was most of
/// the time).
#[derive(Default, Clone, Copy)]
struct Xxh3Build;

impl BuildHasher for Xxh3Build {
    type Hasher = Xxh3Hasher;
    fn build_hasher(&self) -> Xxh3Hasher {
        Xxh3Hasher(0)
    }
}

struct Xxh3Hasher(u64);

impl Hasher for Xxh3Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
    fn write_u8(&mut self, b: u8) {
        // `str` hashes end with 0xff: mix it in cheaply.
        self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type TextMap<'a> = HashMap<Cow<'a, str>, u32, Xxh3Build>;

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

/// The model's vocabulary: text -> id (a text given twice keeps its last id, as the crate's map does).
struct VocabMap<'a>(TextMap<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for VocabMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VocabMap<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of token texts to ids")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VocabMap<'de>, A::Error> {
                let mut m = TextMap::with_capacity_and_hasher(1 << 17, Xxh3Build);
                while let Some((Text(k), v)) = map.next_entry::<Text, u32>()? {
                    m.insert(k, v);
                }
                Ok(VocabMap(m))
            }
        }
        d.deserialize_map(V)
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

#[derive(Deserialize)]
enum BpeType {
    #[allow(clippy::upper_case_acronyms)]
    BPE,
}

/// A BPE model as the crate's `BPEVisitor` reads it.
#[derive(Deserialize)]
struct Bpe<'a> {
    #[serde(rename = "type")]
    _type: BpeType,
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
    model: Bpe<'a>,
}

impl Bpe<'_> {
    /// Whether the crate's `BpeBuilder::build` accepts this model (dropout in [0, 1]; every merge of two tokens
    /// of the vocabulary whose concatenation is one too; legacy merges of exactly two space-separated parts).
    fn builds(&self) -> bool {
        if self.dropout.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return false;
        }
        let prefix_len = self.continuing_subword_prefix.as_ref().map_or(0, String::len);
        let vocab = &self.vocab.0;
        let (lines, pairs) = self.merges.iter().fold((0, 0), |(l, p), m| match m {
            Merge::Line(_) => (l + 1, p),
            Merge::Pair(..) => (l, p + 1),
        });
        if lines > 0 && pairs > 0 {
            return false; // neither form of the crate's untagged merges
        }
        // The lookups miss the cache (the map and the texts are megabytes): in parallel pieces.
        self.merges.par_chunks(1 << 14).all(|merges| {
            let mut joined = String::new();
            let mut ok = |a: &str, b: &str| -> bool {
                if !vocab.contains_key(a) || !vocab.contains_key(b) {
                    return false;
                }
                let Some(rest) = b.get(prefix_len..) else { return false };
                joined.clear();
                joined.push_str(a);
                joined.push_str(rest);
                vocab.contains_key(joined.as_str())
            };
            merges.iter().all(|m| match m {
                Merge::Pair(a, b) => ok(a, b),
                Merge::Line(line) if line.starts_with("#version") => true,
                Merge::Line(line) => {
                    let mut parts = line.split(' ');
                    match (parts.next(), parts.next(), parts.next()) {
                        (Some(a), Some(b), None) => ok(a, b),
                        _ => false,
                    }
                }
            })
        })
    }
}

/// The parts of `bytes` for a BPE tokenizer, or `None` when the `tokenizers` path must read it (see the module).
pub(super) fn read(bytes: &[u8]) -> Option<Parts<'_>> {
    // The crate's deserializers have panicked on odd input before: such a file goes to the guarded path.
    std::panic::catch_unwind(|| read_unguarded(bytes)).ok().flatten()
}

fn read_unguarded(bytes: &[u8]) -> Option<Parts<'_>> {
    let file: File = serde_json::from_slice(bytes).ok()?;
    if file.version.as_ref().is_some_and(|v| v.as_str() != Some("1.0")) || !file.model.builds() {
        return None;
    }
    if let Some(post) = &file.post_processor {
        if !post.is_null() {
            serde_json::from_value::<PostProcessorWrapper>(post.clone()).ok()?;
        }
    }
    let declared_eos = file.post_processor.as_ref().map(super::declared_eos).unwrap_or_default();
    let model = file.model;
    let vocab = model.vocab.0;
    // AddedVocabulary::add_tokens on an empty added vocabulary.
    let mut next_id = vocab.len() as u32;
    let mut by_content: HashMap<String, u32> = HashMap::new();
    let mut by_id: HashMap<u32, (String, bool)> = HashMap::new();
    let mut existing: HashSet<(String, bool, bool, bool, bool, bool)> = HashSet::new();
    for AddedTokenWithId { token: t, .. } in file.added_tokens {
        let key = (t.content.clone(), t.single_word, t.lstrip, t.rstrip, t.normalized, t.special);
        if t.content.is_empty() || existing.contains(&key) {
            continue;
        }
        let id = match by_content.get(&t.content).copied().or_else(|| vocab.get(t.content.as_str()).copied()) {
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
    let unk = model.unk_token.as_deref().and_then(|u| vocab.get(u).copied());
    Some(Parts {
        model_name: "BPE",
        word_level: false,
        vocab: vocab.into_iter().map(|(k, v)| (k, v as TokenId)).collect(),
        added: by_id.into_iter().map(|(id, (content, special))| (id, content, special)).collect(),
        unk,
        byte_fallback: model.byte_fallback.unwrap_or(false),
        decoder: match &file.decoder {
            Some(d) => Some(serde_json::to_value(d).ok()?),
            None => None,
        },
        pre_tokenizer: match &file.pre_tokenizer {
            Some(p) => Some(serde_json::to_value(p).ok()?),
            None => None,
        },
        declared_eos,
    })
}
