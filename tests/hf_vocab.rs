//! Loading Hugging Face `tokenizer.json` files into `trie::Vocabulary`.
//!
//! The real-file tests read `<assets>/tokenizers/{qwen3,llama3,mistral-7b-v0.1}.tokenizer.json` (found by
//! `tests/common`: `$TRIE_ASSETS`, filled by `scripts/fetch-assets.sh`); without them they fail, naming the
//! command to run. The synthetic tests need no files.
#![cfg(feature = "hf")]

mod common;

use common::tokenizer_json_path as tokenizer_path;
use std::sync::OnceLock;
use tokenizers::Tokenizer;
use trie::hf::HfOptions;
use trie::{ErrorKind, TokenId, TokenKind, Vocabulary};

struct Loaded {
    tok: Tokenizer,
    vocab: Vocabulary,
}

/// The tokenizer and its vocabulary (default options), loaded once per file (a missing file fails the test).
fn load(name: &'static str) -> &'static Loaded {
    static QWEN3: OnceLock<Loaded> = OnceLock::new();
    static LLAMA3: OnceLock<Loaded> = OnceLock::new();
    static MISTRAL: OnceLock<Loaded> = OnceLock::new();
    let cell = match name {
        "qwen3" => &QWEN3,
        "llama3" => &LLAMA3,
        "mistral-7b-v0.1" => &MISTRAL,
        _ => unreachable!(),
    };
    cell.get_or_init(|| {
        let path = tokenizer_path(name);
        let t0 = std::time::Instant::now();
        let tok = Tokenizer::from_file(&path).expect("tokenizers loads the file");
        eprintln!("{name}: Tokenizer::from_file took {:?}", t0.elapsed());
        let t = std::time::Instant::now();
        let vocab = Vocabulary::from_tokenizer_json(&path, &HfOptions::default()).expect("libtrie loads the file");
        eprintln!("{name}: Vocabulary::from_tokenizer_json took {:?}", t.elapsed());
        Loaded { tok, vocab }
    })
}

const TEXTS: &[&str] = &[
    "Hello, world!",
    "search_flights",
    "The quick brown fox jumps over the lazy dog.",
    "  two leading spaces and trailing  ",
    " one leading space",
    "tabs\tand\ttabs",
    "line one\nline two\n\nline four\r\nwindows",
    "\n\n\n",
    "こんにちは世界、東京タワーへ行きましょう。",
    "¿Dónde está la niña? ¡Qué año tan increíble! pingüino, acción, señor",
    "emoji 😀👍🏽 family 👨\u{200d}👩\u{200d}👧\u{200d}👦 flag 🇯🇵",
    "fn main() {\n    let x: Vec<u8> = vec![0x41, 0xFF];\n    println!(\"{x:?}\");\n}\n",
    "def f(a, b):\n\treturn a ** b  # power\n",
    "中文测试：你好，世界！한국어 텍스트 العربية Ελληνικά Русский",
    "∀x ∈ ℝ: x² ≥ 0 — “quotes” ‘single’ … ©®™ €£¥",
    "\u{1}\u{7f} control \u{b} chars",
    "12345678901234567890 3.14159 1e-9",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}",
];

/// What the tokenizer's normalizer does to `s` before the model sees it, for the strings above.
fn expected_text(name: &str, s: &str) -> String {
    match name {
        // Qwen normalizes to NFC; the strings above are NFC already except the combining one below.
        "qwen3" => s.replace("e\u{301}", "\u{e9}"),
        "llama3" => s.to_string(),
        // Mistral's normalizer prepends "▁" and turns every space into "▁": the tokens spell " " + s.
        "mistral-7b-v0.1" => format!(" {s}"),
        _ => unreachable!(),
    }
}

fn check_encodings(name: &'static str) {
    let l = load(name);
    let mut texts: Vec<&str> = TEXTS.to_vec();
    texts.push("cafe\u{301} decomposed");
    for s in texts {
        let enc = l.tok.encode(s, false).unwrap();
        let mut got = Vec::new();
        for &id in enc.get_ids() {
            assert!(l.vocab.is_text_token(id), "{name}: {s:?}: token {id} ({:?}) is not text", l.vocab.kind(id));
            got.extend_from_slice(l.vocab.token_bytes(id));
        }
        let want = expected_text(name, s);
        assert_eq!(String::from_utf8_lossy(&got), want, "{name}: ids {:?}", enc.get_ids());
        assert_eq!(got, want.as_bytes(), "{name}");
    }
}

#[test]
fn qwen3_encodings_concatenate_to_the_text() {
    check_encodings("qwen3");
}

#[test]
fn llama3_encodings_concatenate_to_the_text() {
    check_encodings("llama3");
}

#[test]
fn mistral_encodings_concatenate_to_the_text() {
    check_encodings("mistral-7b-v0.1");
}

/// Every listed token whose bytes are valid UTF-8 decodes (alone, special tokens kept) to exactly its bytes;
/// with `strip_one_space` (a decoder ending in `Strip(" ", 1, 0)`), `decode` drops one leading space.
fn check_single_token_decoding(name: &'static str, strip_one_space: bool) {
    let l = load(name);
    let mut checked = 0usize;
    let mut stripped = 0usize;
    let mut mismatches = Vec::new();
    for id in 0..l.vocab.n_listed() as TokenId {
        if l.vocab.kind(id) == TokenKind::Unused {
            continue;
        }
        let Ok(text) = std::str::from_utf8(l.vocab.token_bytes(id)) else { continue };
        let decoded = l.tok.decode(&[id], false).unwrap();
        checked += 1;
        if decoded == text {
            continue;
        }
        if strip_one_space && text.strip_prefix(' ') == Some(decoded.as_str()) {
            stripped += 1;
            continue;
        }
        mismatches.push((id, text.to_string(), decoded));
    }
    eprintln!("{name}: {checked} tokens decoded, {stripped} with the decoder's leading space stripped");
    assert!(checked > 30_000, "{name}: only {checked} tokens checked");
    assert!(
        mismatches.is_empty(),
        "{name}: {} mismatches, first: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(10)]
    );
    assert_eq!(stripped > 0, strip_one_space, "{name}");
}

#[test]
fn qwen3_tokens_decode_to_their_bytes() {
    check_single_token_decoding("qwen3", false);
}

#[test]
fn llama3_tokens_decode_to_their_bytes() {
    check_single_token_decoding("llama3", false);
}

#[test]
fn mistral_tokens_decode_to_their_bytes() {
    check_single_token_decoding("mistral-7b-v0.1", true);
}

fn id_of(l: &Loaded, text: &str) -> TokenId {
    l.tok.token_to_id(text).unwrap_or_else(|| panic!("no token {text:?}"))
}

fn count(v: &Vocabulary, kind: TokenKind) -> usize {
    (0..v.n_listed() as TokenId).filter(|&id| v.kind(id) == kind).count()
}

#[test]
fn eog_inference_and_kinds_qwen3() {
    let l = load("qwen3");
    let v = &l.vocab;
    // The special added tokens with end names: the two chat ends (generation_config.json's eos_token_id).
    // `<|fim_pad|>`, `<|repo_name|>` and `<|file_sep|>` have end names too but are not special: text.
    let want: Vec<TokenId> = ["<|endoftext|>", "<|im_end|>"].iter().map(|t| id_of(l, t)).collect();
    assert_eq!(want, [151643, 151645]);
    assert_eq!(v.eog_ids(), &want[..]);
    for text in ["<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"] {
        assert!(v.is_text_token(id_of(l, text)), "{text}");
    }
    assert_eq!(v.n_listed(), 151_669);
    assert_eq!(v.n_vocab(), 151_669);
    assert_eq!(count(v, TokenKind::Control), 14);
    assert_eq!(count(v, TokenKind::UserDefined), 12);
    assert_eq!(count(v, TokenKind::Byte), 0);
    assert_eq!(count(v, TokenKind::Unused), 0);
    assert_eq!(count(v, TokenKind::Unknown), 0);
    let think = id_of(l, "<think>");
    assert_eq!(v.kind(think), TokenKind::UserDefined);
    assert_eq!(v.token_bytes(think), b"<think>");
    assert!(v.is_text_token(think));
    assert_eq!(v.kind(id_of(l, "<|im_start|>")), TokenKind::Control);
    // "</s>" is an ordinary model token in Qwen's vocabulary: text, never inferred as an end.
    let s = id_of(l, "</s>");
    assert_eq!(v.kind(s), TokenKind::Normal);
    assert!(!v.is_eog(s));
}

#[test]
fn eog_inference_and_kinds_llama3() {
    let l = load("llama3");
    let v = &l.vocab;
    assert_eq!(v.eog_ids(), &[id_of(l, "<|end_of_text|>"), id_of(l, "<|eot_id|>")]);
    assert_eq!(v.eog_ids(), &[128001, 128009]);
    assert_eq!(v.n_listed(), 128_256);
    assert_eq!(count(v, TokenKind::Control), 256);
    assert_eq!(count(v, TokenKind::Normal), 128_000);
    assert_eq!(v.token_bytes(id_of(l, "Ġhello")), b" hello");
    assert_eq!(v.token_bytes(id_of(l, "ĊĊ")), b"\n\n");
}

#[test]
fn eog_inference_and_kinds_mistral() {
    let l = load("mistral-7b-v0.1");
    let v = &l.vocab;
    assert_eq!(v.eog_ids(), &[2]);
    assert_eq!(id_of(l, "</s>"), 2);
    assert_eq!(v.n_listed(), 32_000);
    assert_eq!(v.kind(0), TokenKind::Unknown);
    assert_eq!(v.kind(1), TokenKind::Control);
    assert_eq!(v.kind(2), TokenKind::Control);
    assert_eq!(count(v, TokenKind::Byte), 256);
    let nl = id_of(l, "<0x0A>");
    assert_eq!((v.kind(nl), v.token_bytes(nl)), (TokenKind::Byte, &b"\n"[..]));
    let ff = id_of(l, "<0xFF>");
    assert_eq!(v.token_bytes(ff), &[0xFF]);
    assert_eq!(v.token_bytes(id_of(l, "▁Hello")), b" Hello");
    assert!(v.is_text_token(ff) && !v.is_text_token(0) && !v.is_text_token(1) && !v.is_text_token(2));
}

#[test]
fn qwen3_padded_vocabulary() {
    let path = tokenizer_path("qwen3");
    let v = Vocabulary::from_tokenizer_json(&path, &HfOptions { eog_ids: None, n_vocab: Some(151_936) }).unwrap();
    assert_eq!(v.n_vocab(), 151_936);
    assert_eq!(v.n_listed(), 151_669);
    assert_eq!(v.mask_words(), 4748);
    for id in 151_669..151_936 {
        assert!(!v.is_text_token(id), "padding id {id}");
        assert_eq!(v.kind(id), TokenKind::Unused);
        assert!(v.token_bytes(id).is_empty());
    }
    // The caller's EOG ids replace the inference.
    let v = Vocabulary::from_tokenizer_json(
        &path,
        &HfOptions { eog_ids: Some(vec![151645, 151643]), n_vocab: Some(151_936) },
    )
    .unwrap();
    assert_eq!(v.eog_ids(), &[151643, 151645]);
    assert!(v.is_text_token(151662), "<|fim_pad|> is a user-defined text token when not an EOG id");
    // Too small a model vocabulary, or an EOG id past it, is the caller's error.
    let e = Vocabulary::from_tokenizer_json(&path, &HfOptions { eog_ids: None, n_vocab: Some(151_000) }).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = Vocabulary::from_tokenizer_json(&path, &HfOptions { eog_ids: Some(vec![151_936]), n_vocab: Some(151_936) })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn garbage_and_truncated_json_are_malformed() {
    let opts = HfOptions::default();
    for bytes in [&b""[..], b"not json", b"{", b"{}", b"[1, 2, 3]", b"\xff\xfe\x00garbage", b"{\"model\": 3}"] {
        let e = Vocabulary::from_tokenizer_json_bytes(bytes, &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MalformedFile, "{:?}: {e}", String::from_utf8_lossy(bytes));
        assert!(!e.message().is_empty());
    }
    let full = std::fs::read(tokenizer_path("mistral-7b-v0.1")).unwrap();
    for cut in [1, 100, full.len() / 3, full.len() / 2, full.len() - 2] {
        let e = Vocabulary::from_tokenizer_json_bytes(&full[..cut], &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MalformedFile, "cut at {cut}: {e}");
    }
}

#[test]
fn missing_file_is_io() {
    let e = Vocabulary::from_tokenizer_json("/nonexistent/dir/tokenizer.json", &HfOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.message().contains("/nonexistent/dir/tokenizer.json"), "{e}");
}

/// A minimal tokenizer.json with the given model, decoder and added tokens.
fn synthetic(model: &str, decoder: &str, pre_tokenizer: &str, added: &str) -> Vec<u8> {
    synthetic_with_post(model, decoder, pre_tokenizer, added, "null")
}

fn synthetic_with_post(model: &str, decoder: &str, pre_tokenizer: &str, added: &str, post: &str) -> Vec<u8> {
    format!(
        r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [{added}],
            "normalizer": null, "pre_tokenizer": {pre_tokenizer}, "post_processor": {post},
            "decoder": {decoder}, "model": {model}}}"#
    )
    .into_bytes()
}

const METASPACE: &str = r#"{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}"#;
const UNIGRAM: &str = r#"{"type": "Unigram", "unk_id": 0, "byte_fallback": true,
    "vocab": [["<unk>", 0.0], ["▁a", -1.0], ["b", -2.0], ["<0x0A>", -3.0], ["</s>", -4.0], ["[END]", -5.0]]}"#;

fn added_token(id: u32, content: &str, special: bool) -> String {
    format!(
        r#"{{"id": {id}, "content": "{content}", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": {special}}}"#
    )
}

#[test]
fn end_names_that_are_not_special_are_text_not_eog() {
    // `</s>` is an added token but not special: the model may write it as text, so it must not end generation.
    let json = synthetic(UNIGRAM, METASPACE, METASPACE, &added_token(4, "</s>", false));
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap();
    assert!(v.eog_ids().is_empty(), "{:?}", v.eog_ids());
    assert_eq!((v.kind(4), v.token_bytes(4)), (TokenKind::UserDefined, &b"</s>"[..]));
    assert!(v.is_text_token(4));
    // The same token marked special is the end of generation.
    let json = synthetic(UNIGRAM, METASPACE, METASPACE, &added_token(4, "</s>", true));
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap();
    assert_eq!(v.eog_ids(), &[4]);
}

#[test]
fn the_post_processors_end_token_is_eog() {
    // A T5-style template `$A [END]`: the token it appends ends generation, whatever its name.
    let post = r#"{"type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[END]", "type_id": 0}}],
        "pair": [], "special_tokens": {"[END]": {"id": "[END]", "ids": [5], "tokens": ["[END]"]}}}"#;
    let added = format!("{},{}", added_token(4, "</s>", false), added_token(5, "[END]", true));
    let json = synthetic_with_post(UNIGRAM, METASPACE, METASPACE, &added, post);
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap();
    assert_eq!(v.eog_ids(), &[5]);
    // Inside a Sequence of processors too; a template that appends nothing declares nothing.
    let seq = format!(
        r#"{{"type": "Sequence", "processors": [{{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}}, {post}]}}"#
    );
    let json = synthetic_with_post(UNIGRAM, METASPACE, METASPACE, &added, &seq);
    assert_eq!(Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap().eog_ids(), &[5]);
    let prefix_only = r#"{"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[END]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {"[END]": {"id": "[END]", "ids": [5], "tokens": ["[END]"]}}}"#;
    let json = synthetic_with_post(UNIGRAM, METASPACE, METASPACE, &added, prefix_only);
    assert!(Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap().eog_ids().is_empty());
}

const BYTE_LEVEL_DECODER: &str =
    r#"{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}"#;

#[test]
fn wordpiece_is_unsupported() {
    let json = synthetic(
        r###"{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}"###,
        r###"{"type": "WordPiece", "prefix": "##", "cleanup": true}"###,
        r#"{"type": "Whitespace"}"#,
        "",
    );
    let e = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVocabulary, "{e}");
    assert!(e.message().contains("WordPiece"), "{e}");
}

#[test]
fn wordlevel_and_decoderless_bpe_are_unsupported() {
    let json = synthetic(
        r#"{"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1}, "unk_token": "[UNK]"}"#,
        "null",
        r#"{"type": "Whitespace"}"#,
        "",
    );
    let e = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVocabulary, "{e}");
    let json = synthetic(r#"{"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}"#, "null", "null", "");
    let e = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVocabulary, "{e}");
}

#[test]
fn byte_level_gaps_are_unused() {
    // Id 2 has no token: empty bytes, Unused. "Ġ" is a space, "Ċ" a newline.
    let json = synthetic(
        r#"{"type": "BPE", "vocab": {"a": 0, "Ġ": 1, "Ċ": 3, "Ġa": 4}, "merges": [["Ġ", "a"]]}"#,
        BYTE_LEVEL_DECODER,
        r#"{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true}"#,
        "",
    );
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions { eog_ids: None, n_vocab: Some(64) }).unwrap();
    assert_eq!(v.n_listed(), 5);
    let bytes: Vec<&[u8]> = (0..5).map(|id| v.token_bytes(id)).collect();
    assert_eq!(bytes, [&b"a"[..], b" ", b"", b"\n", b" a"]);
    let kinds: Vec<TokenKind> = (0..5).map(|id| v.kind(id)).collect();
    use TokenKind::*;
    assert_eq!(kinds, [Normal, Normal, Unused, Normal, Normal]);
    // With no end name among the added tokens, nothing is inferred.
    assert!(v.eog_ids().is_empty());
    assert_eq!((v.n_vocab(), v.mask_words()), (64, 2));
}

#[test]
fn absurdly_sparse_ids_are_malformed() {
    let json = synthetic(
        r#"{"type": "BPE", "vocab": {"a": 0, "b": 100000000}, "merges": []}"#,
        BYTE_LEVEL_DECODER,
        "null",
        "",
    );
    let e = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MalformedFile, "{e}");
}

#[test]
fn byte_level_added_tokens() {
    // The tokenizers crate numbers added tokens from the model's vocabulary size on, as the file says here.
    let json = synthetic(
        r#"{"type": "BPE", "vocab": {"a": 0, "Ġ": 1, "Ċ": 2, "Ġa": 3}, "merges": [["Ġ", "a"]]}"#,
        BYTE_LEVEL_DECODER,
        "null",
        r#"{"id": 4, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true},
           {"id": 5, "content": "<tool call>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": false}"#,
    );
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap();
    assert_eq!(v.n_listed(), 6);
    let bytes: Vec<&[u8]> = (0..6).map(|id| v.token_bytes(id)).collect();
    assert_eq!(bytes, [&b"a"[..], b" ", b"\n", b" a", b"<|endoftext|>", b"<tool call>"]);
    let kinds: Vec<TokenKind> = (0..6).map(|id| v.kind(id)).collect();
    use TokenKind::*;
    assert_eq!(kinds, [Normal, Normal, Normal, Normal, Control, UserDefined]);
    assert_eq!(v.eog_ids(), &[4]);
    assert!(v.is_text_token(5) && !v.is_text_token(4));
}

#[test]
fn metaspace_unigram() {
    let json = synthetic(
        r#"{"type": "Unigram", "unk_id": 0, "byte_fallback": true,
            "vocab": [["<unk>", 0.0], ["▁a", -1.0], ["b", -2.0], ["<0x0A>", -3.0], ["</s>", -4.0]]}"#,
        r#"{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}"#,
        r#"{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}"#,
        r#"{"id": 4, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true}"#,
    );
    let v = Vocabulary::from_tokenizer_json_bytes(&json, &HfOptions::default()).unwrap();
    let bytes: Vec<&[u8]> = (0..5).map(|id| v.token_bytes(id)).collect();
    assert_eq!(bytes, [&b"<unk>"[..], b" a", b"b", b"\n", b"</s>"]);
    let kinds: Vec<TokenKind> = (0..5).map(|id| v.kind(id)).collect();
    use TokenKind::*;
    assert_eq!(kinds, [Unknown, Normal, Normal, Byte, Control]);
    assert_eq!(v.eog_ids(), &[4]);
}
