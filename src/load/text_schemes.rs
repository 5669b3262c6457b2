//! Token texts of GGUF tokenizers turned into the bytes a model emits, as llama.cpp's `token_to_piece` does:
//! - `gpt2` (byte-level BPE): each character of a Normal token is the GPT-2 bytes-to-unicode image of a byte;
//! - `llama` (SentencePiece), `gemma4`, `t5` (UGM): `▁` (U+2581) is a space, `<0xNN>` Byte tokens are raw bytes;
//! - `plamo2`: `<0xNN>` Byte tokens are raw bytes, other text verbatim;
//! - `rwkv`: tokens are escaped strings (`\n`, `\xNN`, ...);
//! - UserDefined tokens are verbatim text in every model type.
//!
//! End-of-generation ids are the `eos`/`eot`/`eom` ids plus control tokens with well-known end names, as in
//! llama.cpp's `special_eog_ids`.

use crate::error::{Error, Result};
use crate::load::gguf::{Metadata, StrArray, Value};
use crate::vocab::{TokenId, TokenKind, Vocabulary};
use std::path::Path;

/// How token texts map to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TextScheme {
    ByteLevel,
    SentencePiece,
    Plamo,
    Rwkv,
}

impl Vocabulary {
    /// Reads the tokenizer of a GGUF file (a full model or a vocab-only file). Supports byte-level BPE
    /// (`gpt2`), SentencePiece (`llama`), `gemma4`, `t5`/UGM, `plamo2` and `rwkv`; refuses WordPiece (`bert`)
    /// and files without a vocabulary with [`ErrorKind::UnsupportedVocabulary`](crate::ErrorKind::UnsupportedVocabulary).
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Vocabulary> {
        let meta = Metadata::read_file_keys(path.as_ref(), &is_vocabulary_key)?;
        vocabulary_from_gguf(&meta)
    }

    /// Like [`Vocabulary::from_gguf`], from the bytes of a GGUF file (or its metadata prefix).
    pub fn from_gguf_bytes(bytes: &[u8]) -> Result<Vocabulary> {
        let meta = Metadata::read_bytes_keys(bytes, &is_vocabulary_key)?;
        vocabulary_from_gguf(&meta)
    }
}

/// Control-token texts that end generation in real vocabularies (llama.cpp's list).
pub(crate) const EOG_NAMES: &[&str] = &[
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<|return|>",
    "<|call|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
];

/// The GGUF metadata keys a vocabulary is read from (the rest, merges and scores included, is skipped).
pub(crate) fn is_vocabulary_key(key: &str) -> bool {
    matches!(
        key,
        "tokenizer.ggml.model"
            | "tokenizer.ggml.tokens"
            | "tokenizer.ggml.token_type"
            | "tokenizer.ggml.eos_token_id"
            | "tokenizer.ggml.eot_token_id"
            | "tokenizer.ggml.eom_token_id"
    )
}

pub(crate) fn vocabulary_from_gguf(meta: &Metadata) -> Result<Vocabulary> {
    let model = meta
        .get("tokenizer.ggml.model")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::unsupported("the GGUF file has no tokenizer (no tokenizer.ggml.model key)"))?;
    let model = String::from_utf8_lossy(model).into_owned();
    let scheme = match model.as_str() {
        "gpt2" => TextScheme::ByteLevel,
        "llama" | "gemma4" | "t5" => TextScheme::SentencePiece,
        "plamo2" => TextScheme::Plamo,
        "rwkv" => TextScheme::Rwkv,
        "bert" => {
            return Err(Error::unsupported(
                "WordPiece vocabulary (tokenizer.ggml.model = bert): its \"##\" continuation pieces depend on \
                 word boundaries, so tokens have no fixed bytes and a byte trie cannot be aligned with them; \
                 use a byte-level BPE or SentencePiece model",
            ))
        }
        "no_vocab" | "none" => {
            return Err(Error::unsupported("the GGUF file has no vocabulary (tokenizer.ggml.model = none)"))
        }
        other => {
            return Err(Error::unsupported(format!(
            "tokenizer.ggml.model = {other:?} is not supported (libtrie reads gpt2, llama, gemma4, t5, plamo2, rwkv); \
                 load the tokens through trie_vocab_new / Vocabulary::new instead"
        )))
        }
    };
    let texts = match meta.get("tokenizer.ggml.tokens") {
        Some(Value::StrArray(items)) => items,
        Some(Value::Array(items)) if items.is_empty() => &StrArray::default(),
        _ => return Err(Error::malformed("the GGUF file has no tokenizer.ggml.tokens array of strings")),
    };
    let mut kinds: Vec<TokenKind> = match meta.get("tokenizer.ggml.token_type") {
        Some(Value::IntArray(items)) => {
            if items.len() != texts.len() {
                return Err(Error::malformed(format!(
                    "tokenizer.ggml.token_type has {} entries for {} tokens",
                    items.len(),
                    texts.len()
                )));
            }
            items
                .iter()
                .map(|&t| u32::try_from(t).ok().and_then(TokenKind::from_u32).unwrap_or(TokenKind::Normal))
                .collect()
        }
        None => vec![TokenKind::Normal; texts.len()],
        Some(_) => return Err(Error::malformed("tokenizer.ggml.token_type is not an array of integers")),
    };
    if texts.len() > crate::vocab::MAX_VOCAB {
        return Err(Error::limit(format!(
            "{} tokens exceed the limit of {} ids",
            texts.len(),
            crate::vocab::MAX_VOCAB
        )));
    }
    // Token bytes laid end to end (no allocation per token).
    let mut bytes = Vec::with_capacity(texts.iter().map(<[u8]>::len).sum());
    let mut offsets = Vec::with_capacity(texts.len() + 1);
    offsets.push(0u32);
    for (id, text) in texts.iter().enumerate() {
        kinds[id] = token_bytes(scheme, text, kinds[id], &mut bytes);
        let end = u32::try_from(bytes.len())
            .map_err(|_| Error::limit("the token texts exceed 4 GiB: not a real vocabulary"))?;
        offsets.push(end);
    }
    let eog = eog_ids(meta, &kinds, texts);
    Vocabulary::from_parts(bytes, offsets, kinds, &eog, None)
}

/// Appends the bytes of one token text to `out`; returns its (possibly refined) kind.
fn token_bytes(scheme: TextScheme, text: &[u8], kind: TokenKind, out: &mut Vec<u8>) -> TokenKind {
    match kind {
        TokenKind::UserDefined | TokenKind::Control | TokenKind::Unknown | TokenKind::Unused => {
            out.extend_from_slice(text);
            return kind;
        }
        TokenKind::Byte => {
            return match parse_byte_token(text) {
                Some(b) => {
                    out.push(b);
                    kind
                }
                // A Byte token without the <0xNN> form: take its text as it is.
                None => {
                    out.extend_from_slice(text);
                    TokenKind::Normal
                }
            };
        }
        TokenKind::Normal => {}
    }
    match scheme {
        TextScheme::ByteLevel => byte_level_decode_into(text, out),
        TextScheme::SentencePiece => out.extend_from_slice(&replace_metaspace(text)),
        TextScheme::Plamo => out.extend_from_slice(text),
        TextScheme::Rwkv => out.extend_from_slice(&rwkv_unescape(text)),
    }
    kind
}

/// `<0xNN>` -> the byte NN.
pub(crate) fn parse_byte_token(text: &[u8]) -> Option<u8> {
    if text.len() == 6 && text.starts_with(b"<0x") && text[5] == b'>' {
        let s = std::str::from_utf8(&text[3..5]).ok()?;
        return u8::from_str_radix(s, 16).ok();
    }
    None
}

/// `▁` (U+2581) -> space; everything else unchanged.
pub(crate) fn replace_metaspace(text: &[u8]) -> Vec<u8> {
    const META: &[u8] = "\u{2581}".as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(META) {
            out.push(b' ');
            i += META.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// GPT-2's bytes-to-unicode table inverted: code point -> byte.
pub(crate) fn byte_level_char_to_byte(c: char) -> Option<u8> {
    let c = c as u32;
    match c {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(c as u8),
        0x100..=0x143 => Some(SHIFTED[(c - 0x100) as usize]),
        _ => None,
    }
}

/// The bytes outside the printable ranges, in order: GPT-2 maps the n-th of them to U+0100 + n.
const SHIFTED: [u8; 68] = {
    let mut table = [0u8; 68];
    let mut k = 0;
    let mut b = 0usize;
    while b < 256 {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        if !printable {
            table[k] = b as u8;
            k += 1;
        }
        b += 1;
    }
    table
};

/// Undo the byte-level image; a character outside the table (or invalid UTF-8) is kept as its own bytes,
/// as llama.cpp keeps text it cannot map.
pub(crate) fn byte_level_decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    byte_level_decode_into(text, &mut out);
    out
}

/// [`byte_level_decode`] appending to `out`.
pub(crate) fn byte_level_decode_into(text: &[u8], out: &mut Vec<u8>) {
    // Printable ASCII stands for itself: the common case, byte by byte.
    if text.iter().all(|&b| (0x21..=0x7E).contains(&b)) {
        out.extend_from_slice(text);
        return;
    }
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            match byte_level_char_to_byte(c) {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
}

/// RWKV token texts escape `\t`, `\n`, `\r`, `\\` and `\xNN`.
fn rwkv_unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' && i + 1 < text.len() {
            match text[i + 1] {
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < text.len() => {
                    if let Some(b) =
                        std::str::from_utf8(&text[i + 2..i + 4]).ok().and_then(|s| u8::from_str_radix(s, 16).ok())
                    {
                        out.push(b);
                        i += 4;
                        continue;
                    }
                    out.extend_from_slice(&text[i..i + 2]);
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
            i += 2;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

fn eog_ids(meta: &Metadata, kinds: &[TokenKind], texts: &StrArray) -> Vec<TokenId> {
    let n = texts.len() as i64;
    let mut eog = Vec::new();
    for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
        if let Some(id) = meta.get(key).and_then(Value::as_i64) {
            if (0..n).contains(&id) {
                eog.push(id as TokenId);
            }
        }
    }
    for (id, text) in texts.iter().enumerate() {
        if matches!(kinds[id], TokenKind::Control | TokenKind::UserDefined)
            && EOG_NAMES.iter().any(|name| name.as_bytes() == text)
        {
            eog.push(id as TokenId);
        }
    }
    eog.sort_unstable();
    eog.dedup();
    eog
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_is_a_bijection() {
        let mut seen = [false; 256];
        for c in (0u32..0x200).filter_map(char::from_u32) {
            if let Some(b) = byte_level_char_to_byte(c) {
                assert!(!seen[b as usize], "byte {b} twice");
                seen[b as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(byte_level_decode("Ġhello".as_bytes()), b" hello");
        assert_eq!(byte_level_decode("Ċ".as_bytes()), b"\n");
    }

    #[test]
    fn sentencepiece_pieces() {
        assert_eq!(replace_metaspace("▁Hello▁world".as_bytes()), b" Hello world");
        assert_eq!(parse_byte_token(b"<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token(b"<0xZZ>"), None);
        assert_eq!(rwkv_unescape(br"a\nb\x41\\"), b"a\nbA\\");
    }
}
