//! Loading a Hugging Face `tokenizer.json` into a [`Vocabulary`], recovering the exact bytes every token id
//! stands for. BPE, Unigram and WordPiece models are read directly (only the parts a vocabulary needs,
//! `hf_direct.rs`); WordLevel models, and files the direct reader declines, through the `tokenizers` crate. Both
//! give the same vocabulary (or the same refusal).
//!
//! How token texts become bytes is read from the tokenizer's decoder:
//! - `ByteLevel` (GPT-2, Llama 3, Qwen): each character of a model token is the GPT-2 bytes-to-unicode image of
//!   one byte;
//! - a `Sequence` with `Replace("▁", " ")` and/or `ByteFallback` (SentencePiece BPE converted to Hugging Face:
//!   Llama 2, Mistral), or a `Metaspace` decoder: the replacement character (`▁`, U+2581) is a space, and with
//!   byte fallback `<0xNN>` tokens are the single raw byte `NN` (kind [`TokenKind::Byte`]);
//! - with no decoder, the pre-tokenizer (`ByteLevel` or `Metaspace`) decides the same way.
//!
//! Token bytes are the bytes the token adds to the model's output wherever it occurs: a SentencePiece token
//! `▁Hello` is ` Hello` even though `tokenizer.decode` strips the space when that token comes first (the
//! decoder's `Strip` step acts on the whole decoded text, not on one token).
//!
//! Kinds: added tokens with `special: true` are [`TokenKind::Control`]; other added tokens are
//! [`TokenKind::UserDefined`] and stand for their `content` verbatim; the model's unknown token is
//! [`TokenKind::Unknown`]; ids no token has (gaps) get empty bytes and [`TokenKind::Unused`]; every other model
//! token is [`TokenKind::Normal`].
//!
//! WordPiece models (their `##` pieces depend on word boundaries) and decoders without byte semantics
//! (`WordPiece`, `CTC`, `BPE` with an end-of-word suffix, or no decoder at all) are refused with
//! [`ErrorKind::UnsupportedVocabulary`].

use crate::error::{Error, ErrorKind, Result};
use crate::load::text_schemes::{byte_level_decode, parse_byte_token, EOG_NAMES};
use crate::vocab::{TokenId, TokenKind, Vocabulary};
use rayon::prelude::*;
use serde_json::Value;
use std::borrow::Cow;
use std::path::Path;
use tokenizers::{Model, ModelWrapper, Tokenizer};

#[path = "hf_direct.rs"]
mod direct;

/// Options for [`Vocabulary::from_tokenizer_json`].
///
/// `tokenizer.json` has no end-of-sequence field: Hugging Face keeps the EOS ids in `generation_config.json`
/// (`eos_token_id`, often a list) and `tokenizer_config.json`. Pass those ids in `eog_ids` whenever you can.
#[derive(Clone, Debug, Default)]
pub struct HfOptions {
    /// The end-of-generation ids (for example `eos_token_id` of `generation_config.json`). `None` infers them:
    /// every *special* added token whose content is a well-known end name (`</s>`, `<|endoftext|>`,
    /// `<|end_of_text|>`, `<|eot_id|>`, `<|eom_id|>`, `<|im_end|>`, `<|end|>`, `<end_of_turn>`, ...; llama.cpp's
    /// list, which also holds `<|fim_pad|>`, `<|repo_name|>` and `<|file_sep|>`). Model tokens that merely
    /// spell such a name, and added tokens that are not special (some vocabularies list `</s>` as plain text),
    /// are ordinary text and never inferred. Also inferred: the end-of-sequence token the post-processor
    /// appends (`TemplateProcessing` ending in a special token, `RobertaProcessing`'s `sep`), when it is
    /// special. With no EOG id a finished member can never be ended. `Some(ids)` is used as given (ids must be
    /// listed tokens, `< n_vocab` and not padding).
    pub eog_ids: Option<Vec<TokenId>>,
    /// The model's (padded) vocabulary size, the mask width: for example 151,936 for Qwen2/Qwen3 whose
    /// tokenizer lists 151,669 tokens. Ids past the tokenizer's tokens are padding and never allowed. `None`
    /// means the largest token id + 1. Smaller than that is an [`ErrorKind::InvalidArgument`] error.
    pub n_vocab: Option<usize>,
}

/// How model token texts map to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    /// GPT-2 bytes-to-unicode image.
    ByteLevel,
    /// SentencePiece: `space` (if any) stands for ` `; with `byte_fallback`, `<0xNN>` is the raw byte NN.
    SentencePiece { space: Option<char>, byte_fallback: bool },
}

/// What the decoder (or pre-tokenizer) section says, gathered over nested `Sequence`s.
#[derive(Default, Debug)]
struct DecoderFacts {
    byte_level: bool,
    byte_fallback: bool,
    /// The character a `Replace` step or a `Metaspace` step turns into a space.
    space: Option<char>,
    metaspace: bool,
    /// A decoder type without byte semantics, by name.
    unsupported: Option<String>,
}

impl DecoderFacts {
    fn gather(&mut self, v: &Value) {
        match v.get("type").and_then(Value::as_str) {
            Some("ByteLevel") => self.byte_level = true,
            Some("ByteFallback") => self.byte_fallback = true,
            Some("Metaspace") => {
                self.metaspace = true;
                let replacement = v.get("replacement").and_then(Value::as_str).unwrap_or("\u{2581}");
                let mut chars = replacement.chars();
                if let (Some(c), None) = (chars.next(), chars.next()) {
                    self.space.get_or_insert(c);
                }
            }
            Some("Replace") => {
                // Replace(String(c), " ") turns the metaspace character into a space.
                let pattern = v.get("pattern").and_then(|p| p.get("String")).and_then(Value::as_str);
                if let (Some(p), Some(" ")) = (pattern, v.get("content").and_then(Value::as_str)) {
                    let mut chars = p.chars();
                    if let (Some(c), None) = (chars.next(), chars.next()) {
                        self.space.get_or_insert(c);
                    }
                }
            }
            Some("Sequence") => {
                let items = v.get("decoders").or_else(|| v.get("pretokenizers")).and_then(Value::as_array);
                for item in items.into_iter().flatten() {
                    self.gather(item);
                }
            }
            // Fuse and Strip act on the joined text only; Split, Digits, Punctuation, ... are pre-tokenizer
            // steps without effect on token bytes.
            Some("Fuse" | "Strip" | "Split" | "Digits" | "Punctuation" | "Whitespace" | "WhitespaceSplit") => {}
            Some(other) => {
                self.unsupported.get_or_insert_with(|| other.to_string());
            }
            None => {}
        }
    }

    fn scheme(&self, model_byte_fallback: bool) -> Option<Scheme> {
        if self.byte_level {
            Some(Scheme::ByteLevel)
        } else if self.metaspace || self.space.is_some() || self.byte_fallback {
            Some(Scheme::SentencePiece { space: self.space, byte_fallback: self.byte_fallback || model_byte_fallback })
        } else {
            None
        }
    }
}

fn inspect(what: &str, value: serde_json::Result<Value>) -> Result<Value> {
    value.map_err(|e| Error::malformed(format!("cannot inspect the tokenizer's {what}: {e}")))
}

/// The model's unknown-token id and whether it has byte fallback.
fn model_facts(model: &ModelWrapper) -> Result<(Option<TokenId>, bool)> {
    match model {
        ModelWrapper::BPE(bpe) => {
            let unk = bpe.unk_token.as_deref().and_then(|t| bpe.token_to_id(t));
            Ok((unk, bpe.byte_fallback))
        }
        ModelWrapper::Unigram(unigram) => {
            // Unigram keeps its unk id private; its serialized form has it.
            let v = inspect("model", serde_json::to_value(unigram))?;
            let unk = v.get("unk_id").and_then(Value::as_u64).and_then(|id| TokenId::try_from(id).ok());
            Ok((unk, unigram.byte_fallback()))
        }
        ModelWrapper::WordLevel(wl) => {
            let v = inspect("model", serde_json::to_value(wl))?;
            let unk = v.get("unk_token").and_then(Value::as_str).and_then(|t| wl.token_to_id(t));
            Ok((unk, false))
        }
        ModelWrapper::WordPiece(_) => Err(wordpiece_unsupported()),
    }
}

/// The refusal of a WordPiece model (both readers give it).
fn wordpiece_unsupported() -> Error {
    Error::unsupported(
        "WordPiece tokenizer (BERT-style): its \"##\" continuation pieces depend on word boundaries, so \
         tokens have no fixed bytes and a byte trie cannot be aligned with them; use a byte-level BPE or \
         SentencePiece model",
    )
}

fn model_name(model: &ModelWrapper) -> &'static str {
    match model {
        ModelWrapper::BPE(_) => "BPE",
        ModelWrapper::Unigram(_) => "Unigram",
        ModelWrapper::WordLevel(_) => "WordLevel",
        ModelWrapper::WordPiece(_) => "WordPiece",
    }
}

/// Decides how token texts map to bytes from the decoder, or the pre-tokenizer when there is no decoder (both as
/// the `tokenizers` crate serializes them).
fn detect_scheme(parts: &Parts) -> Result<Scheme> {
    let mut facts = DecoderFacts::default();
    let source = if let Some(d) = &parts.decoder {
        facts.gather(d);
        "decoder"
    } else if let Some(p) = &parts.pre_tokenizer {
        facts.gather(p);
        // Pre-tokenizer types other than ByteLevel/Metaspace say nothing about bytes.
        facts.unsupported = None;
        "pre-tokenizer (there is no decoder)"
    } else {
        "decoder (there is none, nor a pre-tokenizer)"
    };
    let model_name = parts.model_name;
    let scheme = facts.scheme(parts.byte_fallback);
    match (scheme, &facts.unsupported) {
        (Some(s), None) => {
            if parts.word_level && s != Scheme::ByteLevel {
                return Err(Error::unsupported(
                    "WordLevel tokenizer without a ByteLevel decoder: its tokens are whole words joined by the \
                     decoder, so they have no fixed bytes; a byte trie cannot be aligned with them",
                ));
            }
            Ok(s)
        }
        (_, Some(bad)) => Err(Error::unsupported(format!(
            "the tokenizer's {source} has a {bad:?} step ({model_name} model): its tokens have no fixed bytes; \
             libtrie reads ByteLevel and SentencePiece-style (Metaspace, Replace \"\u{2581}\" + ByteFallback) \
             tokenizers; load the tokens through Vocabulary::new instead",
        ))),
        (None, None) => Err(Error::unsupported(format!(
            "cannot tell how the tokens of this {model_name} tokenizer map to bytes from its {source}: libtrie \
             reads ByteLevel and SentencePiece-style (Metaspace, Replace \"\u{2581}\" + ByteFallback) tokenizers; \
             load the tokens through Vocabulary::new instead",
        ))),
    }
}

/// Bytes and kind of one model (not added) token.
fn model_token(scheme: Scheme, text: &str) -> (Vec<u8>, TokenKind) {
    match scheme {
        Scheme::ByteLevel => (byte_level_decode(text.as_bytes()), TokenKind::Normal),
        Scheme::SentencePiece { space, byte_fallback } => {
            if byte_fallback {
                if let Some(b) = parse_byte_token(text.as_bytes()) {
                    return (vec![b], TokenKind::Byte);
                }
            }
            let bytes = match space {
                Some(c) => text.replace(c, " ").into_bytes(),
                None => text.as_bytes().to_vec(),
            };
            (bytes, TokenKind::Normal)
        }
    }
}

/// What a vocabulary is made of, read from a `tokenizer.json` by the `tokenizers` crate or by the direct reader.
pub(crate) struct Parts<'a> {
    /// The model type, for messages.
    model_name: &'static str,
    /// A WordLevel model.
    word_level: bool,
    /// The model's tokens: (text, id).
    vocab: Vec<(Cow<'a, str>, TokenId)>,
    /// The added tokens as the crate numbers them: (id, content, special), one per id.
    added: Vec<(TokenId, String, bool)>,
    /// The model's unknown token.
    unk: Option<TokenId>,
    /// The model's byte fallback.
    byte_fallback: bool,
    /// The decoder and the pre-tokenizer as the crate serializes them.
    decoder: Option<Value>,
    pre_tokenizer: Option<Value>,
    /// [`declared_eos`] of the post-processor.
    declared_eos: Vec<TokenId>,
}

/// The parts of a tokenizer the `tokenizers` crate has read.
fn parts_of_tokenizer(tok: &Tokenizer, declared_eos: Vec<TokenId>) -> Result<Parts<'static>> {
    let model = tok.get_model();
    let (unk, byte_fallback) = model_facts(model)?;
    let decoder = tok.get_decoder().map(|d| inspect("decoder", serde_json::to_value(d))).transpose()?;
    // The pre-tokenizer only matters (and is only inspected) when there is no decoder.
    let pre_tokenizer = match (&decoder, tok.get_pre_tokenizer()) {
        (None, Some(p)) => Some(inspect("pre-tokenizer", serde_json::to_value(p))?),
        _ => None,
    };
    Ok(Parts {
        model_name: model_name(model),
        word_level: matches!(model, ModelWrapper::WordLevel(_)),
        vocab: model.get_vocab().into_iter().map(|(text, id)| (Cow::Owned(text), id)).collect(),
        added: tok.get_added_tokens_decoder().into_iter().map(|(id, t)| (id, t.content, t.special)).collect(),
        unk,
        byte_fallback,
        decoder,
        pre_tokenizer,
        declared_eos,
    })
}

fn vocabulary_from_parts(parts: &Parts, options: &HfOptions) -> Result<Vocabulary> {
    let scheme = detect_scheme(parts)?;
    let (model_vocab, added, unk) = (&parts.vocab, &parts.added, parts.unk);
    let max_id = model_vocab.iter().map(|t| t.1).chain(added.iter().map(|t| t.0)).max();
    let Some(max_id) = max_id else {
        return Err(Error::unsupported("the tokenizer has no tokens"));
    };
    let n_listed = max_id as usize + 1;
    if n_listed > crate::vocab::MAX_VOCAB {
        return Err(Error::limit(format!("token id {max_id} exceeds the limit of {} ids", crate::vocab::MAX_VOCAB)));
    }
    // Ids far sparser than any real vocabulary would only allocate empty slots: refuse them as corrupt.
    let n_tokens = model_vocab.len() + added.len();
    if n_listed > 4 * n_tokens + 65_536 {
        return Err(Error::malformed(format!(
            "token id {max_id} is far past the {n_tokens} tokens of the file: the ids are corrupt"
        )));
    }
    let mut tokens: Vec<Vec<u8>> = vec![Vec::new(); n_listed];
    let mut kinds = vec![TokenKind::Unused; n_listed];
    // The model's texts by id; if a broken file gives one id two texts, the smallest text wins (deterministic).
    let mut texts: Vec<Option<&str>> = vec![None; n_listed];
    for (text, id) in model_vocab {
        let slot = &mut texts[*id as usize];
        if slot.map_or(true, |old| text.as_ref() < old) {
            *slot = Some(text.as_ref());
        }
    }
    tokens.par_iter_mut().zip(kinds.par_iter_mut()).zip(texts.par_iter()).with_min_len(1 << 12).for_each(
        |((bytes, kind), text)| {
            if let Some(text) = text {
                (*bytes, *kind) = model_token(scheme, text);
            }
        },
    );
    // Added tokens override the model's entry for their id.
    for (id, content, special) in added {
        tokens[*id as usize] = content.as_bytes().to_vec();
        kinds[*id as usize] = if *special { TokenKind::Control } else { TokenKind::UserDefined };
    }
    if let Some(unk) = unk.filter(|&u| (u as usize) < n_listed) {
        // Mistral and Llama 2 list <unk> as a special added token too: it stays the unknown token.
        kinds[unk as usize] = TokenKind::Unknown;
    }

    let eog: Vec<TokenId> = match &options.eog_ids {
        Some(ids) => ids.clone(),
        None => {
            // Only special added tokens: an added token that is not special is text the model may write (some
            // vocabularies list `</s>` as plain text), and ending on it would cut outputs at that text.
            let mut ids: Vec<TokenId> = added
                .iter()
                .filter(|(_, content, special)| *special && EOG_NAMES.contains(&content.as_str()))
                .map(|t| t.0)
                .collect();
            // The end-of-sequence token the post-processor appends, if it is a control token.
            ids.extend(parts.declared_eos.iter().filter(|&&id| kinds.get(id as usize) == Some(&TokenKind::Control)));
            ids.sort_unstable();
            ids.dedup();
            ids
        }
    };
    Vocabulary::new(tokens, kinds, &eog, Some(options.n_vocab.unwrap_or(n_listed)))
}

/// The ids of the end-of-sequence token a post-processor appends to every encoding: the last special token of
/// a `TemplateProcessing` single template (T5: `$A </s>`), or the `sep` token of `RobertaProcessing`, also
/// inside a `Sequence`. Empty when the post-processor declares none (Llama: `<s> $A`).
fn declared_eos(post: &Value) -> Vec<TokenId> {
    let ids_of = |v: Option<&Value>| -> Vec<TokenId> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).filter_map(|id| TokenId::try_from(id).ok()).collect())
            .unwrap_or_default()
    };
    match post.get("type").and_then(Value::as_str) {
        Some("TemplateProcessing") => {
            let last = post.get("single").and_then(Value::as_array).and_then(|t| t.last());
            let Some(name) = last.and_then(|p| p.get("SpecialToken")).and_then(|s| s.get("id")).and_then(Value::as_str)
            else {
                return Vec::new();
            };
            ids_of(post.get("special_tokens").and_then(|t| t.get(name)).and_then(|t| t.get("ids")))
        }
        Some("RobertaProcessing") => post
            .get("sep")
            .and_then(|s| s.get(1))
            .and_then(Value::as_u64)
            .and_then(|id| TokenId::try_from(id).ok())
            .into_iter()
            .collect(),
        Some("Sequence") => {
            post.get("processors").and_then(Value::as_array).into_iter().flatten().flat_map(declared_eos).collect()
        }
        _ => Vec::new(),
    }
}

impl Vocabulary {
    /// Reads a Hugging Face `tokenizer.json` and recovers the exact bytes of every token id (see the
    /// [`hf`](crate::hf) module for the rules). `tokenizer.json` has no EOS field: pass the ids of
    /// `generation_config.json` in [`HfOptions::eog_ids`] when you can, or they are inferred from the added
    /// tokens' names.
    ///
    /// Errors: [`ErrorKind::Io`] if the file cannot be read; [`ErrorKind::MalformedFile`] if it is not a valid
    /// tokenizer.json (the parser's message); [`ErrorKind::UnsupportedVocabulary`] for WordPiece models and
    /// decoders without byte semantics; [`ErrorKind::InvalidArgument`] for an `n_vocab` below the listed ids or
    /// an EOG id out of range.
    pub fn from_tokenizer_json(path: impl AsRef<Path>, options: &HfOptions) -> Result<Vocabulary> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot read {}: {e}", path.display())))?;
        Self::from_tokenizer_json_bytes(&bytes, options)
            .map_err(|e| Error::new(e.kind(), format!("{}: {}", path.display(), e.message())))
    }

    /// Like [`Vocabulary::from_tokenizer_json`], from the bytes of a `tokenizer.json` file.
    ///
    /// BPE models (every tokenizer.json of Llama 3, Qwen, Mistral, Gemma, gpt-oss, ...), Unigram and WordPiece
    /// models are read directly, only the parts the vocabulary needs; WordLevel models and files the direct
    /// reader does not accept whole go through the `tokenizers` crate. Both give the same vocabulary.
    pub fn from_tokenizer_json_bytes(bytes: &[u8], options: &HfOptions) -> Result<Vocabulary> {
        match direct::read(bytes) {
            Some(Ok(parts)) => vocabulary_from_parts(&parts, options),
            Some(Err(e)) => Err(e),
            None => Self::from_tokenizer_json_bytes_via_tokenizers(bytes, options),
        }
    }

    /// Whether [`Vocabulary::from_tokenizer_json_bytes`] reads `bytes` directly, without the `tokenizers` crate
    /// (for the tests and benchmarks of the direct reader).
    #[doc(hidden)]
    pub fn tokenizer_json_reads_directly(bytes: &[u8]) -> bool {
        direct::read(bytes).is_some()
    }

    /// [`Vocabulary::from_tokenizer_json_bytes`] always through the `tokenizers` crate (the reference the direct
    /// reader is tested and benchmarked against).
    #[doc(hidden)]
    pub fn from_tokenizer_json_bytes_via_tokenizers(bytes: &[u8], options: &HfOptions) -> Result<Vocabulary> {
        // tokenizers 0.22 panics (`expect`) on some syntax errors inside the "decoder" object: parse the JSON once
        // here, hand the tree to the crate, and contain any other panic of the crate as a malformed file.
        let json = serde_json::from_slice::<serde_json::Value>(bytes)
            .map_err(|e| Error::malformed(format!("not a valid tokenizer.json: {e}")))?;
        let declared_eos = json.get("post_processor").map(declared_eos).unwrap_or_default();
        let tok = std::panic::catch_unwind(move || serde_json::from_value::<Tokenizer>(json))
            .map_err(|_| {
                Error::malformed("not a valid tokenizer.json: the tokenizers crate panicked while reading it")
            })?
            .map_err(|e| Error::malformed(format!("not a valid tokenizer.json: {e}")))?;
        vocabulary_from_parts(&parts_of_tokenizer(&tok, declared_eos)?, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_facts() {
        let seq: Value = serde_json::json!({"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]});
        let mut f = DecoderFacts::default();
        f.gather(&seq);
        assert_eq!(f.scheme(false), Some(Scheme::SentencePiece { space: Some('\u{2581}'), byte_fallback: true }));
        let mut f = DecoderFacts::default();
        f.gather(&serde_json::json!({"type": "WordPiece", "prefix": "##"}));
        assert_eq!(f.unsupported.as_deref(), Some("WordPiece"));
    }

    #[test]
    fn model_tokens() {
        let sp = Scheme::SentencePiece { space: Some('\u{2581}'), byte_fallback: true };
        assert_eq!(model_token(sp, "\u{2581}Hello"), (b" Hello".to_vec(), TokenKind::Normal));
        assert_eq!(model_token(sp, "<0x0A>"), (b"\n".to_vec(), TokenKind::Byte));
        let no_fb = Scheme::SentencePiece { space: Some('\u{2581}'), byte_fallback: false };
        assert_eq!(model_token(no_fb, "<0x0A>"), (b"<0x0A>".to_vec(), TokenKind::Normal));
        assert_eq!(model_token(Scheme::ByteLevel, "\u{120}hi\u{10a}"), (b" hi\n".to_vec(), TokenKind::Normal));
    }
}
