//! The direct tokenizer.json reader (BPE models read without the `tokenizers` crate) gives exactly the vocabulary
//! of the `tokenizers` path: on every tokenizer.json of the assets (which must be there: the test fails without
//! them), and on synthetic files built to hit each rule the crate applies (how it numbers added tokens, the
//! parts it refuses). Where the direct reader declines a file, both calls go the same way by construction; the
//! tests say which files must be read directly so that they compare two different readers.
#![cfg(feature = "hf")]

mod common;

use trie::hf::HfOptions;
use trie::{TokenId, Vocabulary};

/// Everything a vocabulary is: sizes, every token's bytes and kind, EOG ids, fingerprint.
fn assert_same(a: &Vocabulary, b: &Vocabulary, what: &str) {
    assert_eq!((a.n_vocab(), a.n_listed()), (b.n_vocab(), b.n_listed()), "{what}: sizes");
    for id in 0..a.n_listed() as TokenId {
        assert_eq!(a.token_bytes(id), b.token_bytes(id), "{what}: bytes of token {id}");
        assert_eq!(a.kind(id), b.kind(id), "{what}: kind of token {id}");
    }
    assert_eq!(a.eog_ids(), b.eog_ids(), "{what}: EOG ids");
    assert_eq!(a.fingerprint(), b.fingerprint(), "{what}: fingerprint");
}

/// Both readers on `bytes`: the same vocabulary, or errors of the same kind and message.
fn compare(bytes: &[u8], options: &HfOptions, what: &str) {
    let direct = Vocabulary::from_tokenizer_json_bytes(bytes, options);
    let reference = Vocabulary::from_tokenizer_json_bytes_via_tokenizers(bytes, options);
    match (direct, reference) {
        (Ok(a), Ok(b)) => assert_same(&a, &b, what),
        (Err(a), Err(b)) => assert_eq!((a.kind(), a.message()), (b.kind(), b.message()), "{what}"),
        (a, b) => panic!("{what}: direct {:?} but tokenizers {:?}", a.map(|_| ()), b.map(|_| ())),
    }
}

#[test]
fn every_asset_tokenizer_json_reads_the_same_directly() {
    let dir = common::assets_dir().join("tokenizers");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("tokenizer.json"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "expected the qwen3, llama3 and mistral tokenizer.json in {}", dir.display());
    for path in files {
        let what = path.display().to_string();
        let bytes = std::fs::read(&path).unwrap();
        assert!(Vocabulary::tokenizer_json_reads_directly(&bytes), "{what}: a BPE file the direct reader declines");
        compare(&bytes, &HfOptions::default(), &what);
        let n = Vocabulary::from_tokenizer_json_bytes(&bytes, &HfOptions::default()).unwrap().n_listed();
        compare(&bytes, &HfOptions { eog_ids: Some(vec![1, 2]), n_vocab: Some(n + 100) }, &format!("{what} (options)"));
    }
}

fn file(model: &str, decoder: &str, pre_tokenizer: &str, added: &str, post: &str) -> Vec<u8> {
    format!(
        r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [{added}],
            "normalizer": null, "pre_tokenizer": {pre_tokenizer}, "post_processor": {post},
            "decoder": {decoder}, "model": {model}}}"#
    )
    .into_bytes()
}

fn added(id: u32, content: &str, special: bool) -> String {
    format!(
        r#"{{"id": {id}, "content": "{content}", "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": {special}}}"#
    )
}

const BYTE_LEVEL: &str =
    r#"{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}"#;
const SPM_DECODER: &str = r#"{"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"},
    "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}"#;
const METASPACE: &str = r#"{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}"#;

fn bpe(vocab: &str, merges: &str, extra: &str) -> String {
    format!(
        r#"{{"type": "BPE", "dropout": null, "unk_token": null, {extra} "vocab": {{{vocab}}}, "merges": [{merges}]}}"#
    )
}

/// Where `scripts/fetch-tokenizers.sh` puts the 200K+-token files: `$TRIE_CACHE/tokenizers`, else `.cache/tokenizers`.
fn large_tokenizer_json(name: &str) -> std::path::PathBuf {
    let cache = std::env::var_os("TRIE_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache"));
    let path = cache.join("tokenizers").join(format!("{name}.tokenizer.json"));
    assert!(path.exists(), "{} not found: run `scripts/fetch-tokenizers.sh` first", path.display());
    path
}

/// The 200K+-token files the load-time target is set for: Gemma 3 (262,144 model tokens + 6,415 added,
/// SentencePiece-style BPE with byte fallback, a `Replace` normalizer and a `Split` pre-tokenizer) and gpt-oss
/// (199,998 + 21, byte-level BPE with `ignore_merges`). Required: the test fails without them.
#[test]
fn gemma3_and_gpt_oss_read_the_same_directly() {
    for (name, n_listed) in [("gemma3", 262_145), ("gpt-oss", 200_019)] {
        let path = large_tokenizer_json(name);
        let bytes = std::fs::read(&path).unwrap();
        let what = path.display().to_string();
        assert!(Vocabulary::tokenizer_json_reads_directly(&bytes), "{what}: declined by the direct reader");
        compare(&bytes, &HfOptions::default(), &what);
        let v = Vocabulary::from_tokenizer_json_bytes(&bytes, &HfOptions::default()).unwrap();
        assert_eq!(v.n_listed(), n_listed, "{what}");
    }
}

fn unigram(vocab: &str, extra: &str) -> String {
    format!(r#"{{"type": "Unigram", {extra} "vocab": [{vocab}]}}"#)
}

const UNIGRAM_VOCAB: &str = r#"["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0], ["▁a", -1.0], ["<0x0A>", -3], ["b", -2.5]"#;

/// Both readers on each case; `direct`: whether the direct reader must take it.
fn check_cases(cases: &[(String, Vec<u8>, bool)]) {
    for (what, bytes, direct) in cases {
        assert_eq!(Vocabulary::tokenizer_json_reads_directly(bytes), *direct, "{what}: read directly");
        compare(bytes, &HfOptions::default(), what);
        compare(bytes, &HfOptions { eog_ids: Some(vec![1]), n_vocab: Some(64) }, what);
    }
}

/// Unigram (SentencePiece `[piece, score]` lists) and WordPiece models, read directly: the same vocabulary or the
/// same refusal as the crate, and each rule of the crate's Unigram and WordPiece visitors.
#[test]
fn unigram_and_wordpiece_read_the_same_directly() {
    let sp_added = [added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)].join(",");
    let u = |vocab: &str, extra: &str| file(&unigram(vocab, extra), METASPACE, "null", "", "null");
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        (
            "unigram, byte fallback",
            file(
                &unigram(UNIGRAM_VOCAB, r#""unk_id": 0, "byte_fallback": true,"#),
                METASPACE,
                METASPACE,
                &sp_added,
                "null",
            ),
            true,
        ),
        ("unigram, no unk_id", u(UNIGRAM_VOCAB, ""), true),
        (
            "unigram, unk_id null",
            file(&unigram(UNIGRAM_VOCAB, r#""unk_id": null,"#), SPM_DECODER, "null", "", "null"),
            true,
        ),
        ("unigram, unknown key", u(UNIGRAM_VOCAB, r#""extra": [1, {}],"#), true),
        // A piece listed twice: the crate's map keeps the last id, its size is still the list's length (the next
        // added token's id).
        (
            "unigram, piece twice",
            file(
                &unigram(r#"["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["a", -2.0]"#, r#""unk_id": 0,"#),
                METASPACE,
                "null",
                &[added(9, "<new>", true), added(9, "a", false)].join(","),
                "null",
            ),
            true,
        ),
        ("unigram, unk_id past the end", u(UNIGRAM_VOCAB, r#""unk_id": 6,"#), false),
        ("unigram, empty with unk_id", u("", r#""unk_id": 0,"#), false),
        ("unigram, empty", u("", ""), true),
        ("unigram, negative unk_id", u(UNIGRAM_VOCAB, r#""unk_id": -1,"#), false),
        ("unigram, byte_fallback null", u(UNIGRAM_VOCAB, r#""byte_fallback": null,"#), false),
        ("unigram, score a string", u(r#"["a", "x"]"#, ""), false),
        ("unigram, triple", u(r#"["a", 0.0, 1]"#, ""), false),
        ("unigram, vocab twice", u(UNIGRAM_VOCAB, r#""vocab": [],"#), false),
        (
            "unigram, type not first",
            file(r#"{"vocab": [["a", 0.0]], "type": "Unigram"}"#, METASPACE, "null", "", "null"),
            false,
        ),
        (
            "unigram, type twice",
            file(r#"{"type": "Unigram", "vocab": [["a", 0.0]], "type": "Unigram"}"#, METASPACE, "null", "", "null"),
            false,
        ),
        (
            "wordpiece, missing prefix",
            file(
                r#"{"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 100, "vocab": {"a": 0}}"#,
                "null",
                "null",
                "",
                "null",
            ),
            false,
        ),
        (
            "wordpiece, bad added token",
            file(
                r###"{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0}}"###,
                "null",
                "null",
                r#"{"id": 5}"#,
                "null",
            ),
            false,
        ),
        (
            "wordlevel",
            file(r#"{"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}"#, BYTE_LEVEL, "null", "", "null"),
            false,
        ),
    ];
    check_cases(&cases.into_iter().map(|(w, b, d)| (w.to_string(), b, d)).collect::<Vec<_>>());
}

/// JSON escapes in texts (escaped and plain texts must index alike), surrogate pairs in `\u` escapes, texts longer
/// than the index keeps inline, SentencePiece byte fallback pieces, normalizer and pre-tokenizer variants.
#[test]
fn escapes_long_texts_and_variants_read_the_same_directly() {
    // Texts of `"`, `\`, `"\`, `é` (a \u escape), an emoji (a surrogate pair), a 20-byte text and its parts.
    let v = r#""a": 0, "\"": 1, "\\": 2, "\"\\": 3, "\u00e9": 4, "\ud83d\ude00": 5, "x\ud83d\ude00": 6, "x": 7,
        "abcdefghijklmnop": 8, "qrst": 9, "abcdefghijklmnopqrst": 10, "\u0120": 11, "\u0120a": 12"#;
    let m = r#"["\"", "\\"], ["x", "😀"], ["abcdefghijklmnop", "qrst"], ["Ġ", "\u0061"]"#;
    let esc_added = [added(13, r"\u003c|end|\u003e", true), added(14, r"tab\there", false)].join(",");
    let normalizers = [
        r#"{"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}"#,
        r#"{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}"#,
        r#"{"type": "Prepend", "prepend": "▁"}"#,
    ];
    let pre_tokenizers = [
        r#"{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"},
            "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}"#,
        r#"{"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}"#,
        r#"{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}"#,
        r#"{"type": "Digits", "individual_digits": true}"#,
    ];
    let spm_added = [
        added(0, "<unk>", true),
        added(9, "<0x0B>", true),
        added(10, "<start_of_turn>", true),
        added(11, "<end_of_turn>", true),
    ]
    .join(",");
    let mut cases: Vec<(String, Vec<u8>, bool)> = vec![
        ("escapes".into(), file(&bpe(v, m, ""), BYTE_LEVEL, "null", &esc_added, "null"), true),
        // A merge whose parts differ from vocabulary texts only past their 16th byte.
        (
            "long merge out of vocabulary".into(),
            file(&bpe(v, r#"["abcdefghijklmnop", "qrsu"]"#, ""), BYTE_LEVEL, "null", "", "null"),
            false,
        ),
        (
            "joined text past 16 bytes out of vocabulary".into(),
            file(
                &bpe(&format!(r#"{v}, "qrsu": 13"#), r#"["abcdefghijklmnop", "qrsu"]"#, ""),
                BYTE_LEVEL,
                "null",
                "",
                "null",
            ),
            false,
        ),
        ("lone surrogate".into(), file(&bpe(r#""\ud83d": 0"#, "", ""), BYTE_LEVEL, "null", "", "null"), false),
        ("bad escape".into(), file(&bpe(r#""\q": 0"#, "", ""), BYTE_LEVEL, "null", "", "null"), false),
        (
            "byte fallback, lower-case and odd pieces".into(),
            file(
                &bpe(
                    r#""<unk>": 0, "<0x0A>": 1, "<0xff>": 2, "<0xFF>": 3, "<0x1>": 4, "<0x100>": 5, "▁▁": 6, "▁": 7"#,
                    r#"["▁", "▁"]"#,
                    r#""byte_fallback": true,"#,
                )
                .replace(r#""unk_token": null"#, r#""unk_token": "<unk>""#),
                SPM_DECODER,
                "null",
                &spm_added,
                "null",
            ),
            true,
        ),
    ];
    for (i, n) in normalizers.iter().enumerate() {
        for (j, p) in pre_tokenizers.iter().enumerate() {
            let bytes = String::from_utf8(file(&bpe(v, m, ""), BYTE_LEVEL, p, &esc_added, "null"))
                .unwrap()
                .replace(r#""normalizer": null"#, &format!(r#""normalizer": {n}"#))
                .into_bytes();
            cases.push((format!("normalizer {i}, pre-tokenizer {j}"), bytes, true));
        }
    }
    check_cases(&cases);
}

#[test]
fn synthetic_files_read_the_same_directly() {
    let v = r#""a": 0, "Ġ": 1, "Ċ": 2, "Ġa": 3, "<|endoftext|>": 4"#;
    let m = r#"["Ġ", "a"]"#;
    let end = added(4, "<|endoftext|>", true);
    let post = r#"{"type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[END]", "type_id": 0}}],
        "pair": [], "special_tokens": {"[END]": {"id": "[END]", "ids": [6], "tokens": ["[END]"]}}}"#;
    // (file, whether the direct reader must take it)
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("byte-level", file(&bpe(v, m, ""), BYTE_LEVEL, "null", &end, "null"), true),
        // Added tokens: the id the file writes is not the id the crate gives (the next past the model's vocabulary,
        // or the model's id of the same text); a token listed twice; an empty one; a special and a plain copy.
        (
            "added ids",
            file(
                &bpe(v, m, ""),
                BYTE_LEVEL,
                "null",
                &[
                    added(40, "<tool>", false),
                    added(3, "Ġa", true),
                    added(9, "<tool>", false),
                    added(8, "<tool>", true),
                    added(9, "", true),
                    added(2, "</s>", true),
                    added(7, "[END]", true),
                ]
                .join(","),
                post,
            ),
            true,
        ),
        ("legacy merges", file(&bpe(v, r##""#version: 0.2", "Ġ a""##, ""), BYTE_LEVEL, "null", &end, "null"), true),
        ("duplicate text", file(&bpe(r#""a": 0, "b": 1, "a": 2"#, "", ""), BYTE_LEVEL, "null", "", "null"), true),
        ("shared id", file(&bpe(r#""a": 0, "b": 0, "c": 1"#, "", ""), BYTE_LEVEL, "null", "", "null"), true),
        (
            "sentencepiece",
            file(
                &bpe(
                    r#""<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "▁": 4, "a": 5, "▁a": 6"#,
                    r#"["▁", "a"]"#,
                    r#""byte_fallback": true, "fuse_unk": true,"#,
                )
                .replace(r#""unk_token": null"#, r#""unk_token": "<unk>""#),
                SPM_DECODER,
                METASPACE,
                &[added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)].join(","),
                "null",
            ),
            true,
        ),
        ("pre-tokenizer only", file(&bpe(v, m, ""), "null", METASPACE, "", "null"), true),
        ("no decoder", file(&bpe(v, m, ""), "null", "null", "", "null"), true),
        (
            "wordpiece decoder",
            file(&bpe(v, m, ""), r###"{"type": "WordPiece", "prefix": "##", "cleanup": true}"###, "null", "", "null"),
            true,
        ),
        (
            "subword prefix",
            file(
                &bpe(
                    r###""a": 0, "##b": 1, "ab": 2"###,
                    r###"["a", "##b"]"###,
                    r###""continuing_subword_prefix": "##","###,
                ),
                BYTE_LEVEL,
                "null",
                "",
                "null",
            ),
            true,
        ),
        // What the crate refuses, the direct reader leaves to it.
        ("merge out of vocabulary", file(&bpe(v, r#"["a", "a"]"#, ""), BYTE_LEVEL, "null", "", "null"), false),
        ("merge of unknown token", file(&bpe(v, r#"["x", "a"]"#, ""), BYTE_LEVEL, "null", "", "null"), false),
        ("bad legacy merge", file(&bpe(v, r#""Ġ a b""#, ""), BYTE_LEVEL, "null", "", "null"), false),
        ("mixed merges", file(&bpe(v, r#"["Ġ", "a"], "Ġ a""#, ""), BYTE_LEVEL, "null", "", "null"), false),
        (
            "prefix past the token",
            file(
                &bpe(r#""a": 0, "b": 1, "ab": 2"#, r#"["a", "b"]"#, r###""continuing_subword_prefix": "##","###),
                BYTE_LEVEL,
                "null",
                "",
                "null",
            ),
            false,
        ),
        (
            "dropout",
            file(&bpe(v, m, "").replace(r#""dropout": null"#, r#""dropout": 1.5"#), BYTE_LEVEL, "null", "", "null"),
            false,
        ),
        ("version", file(&bpe(v, m, ""), BYTE_LEVEL, "null", "", "null").replace_version(), false),
        ("bad post-processor", file(&bpe(v, m, ""), BYTE_LEVEL, "null", "", r#"{"type": "Nope"}"#), false),
        (
            "bad normalizer",
            String::from_utf8(file(&bpe(v, m, ""), BYTE_LEVEL, "null", "", "null"))
                .unwrap()
                .replace(r#""normalizer": null"#, r#""normalizer": {"type": "Nope"}"#)
                .into_bytes(),
            false,
        ),
        (
            "missing field of an added token",
            file(&bpe(v, m, ""), BYTE_LEVEL, "null", r#"{"id": 5, "content": "x"}"#, "null"),
            false,
        ),
        (
            "unigram",
            file(
                r#"{"type": "Unigram", "unk_id": 0, "byte_fallback": true,
            "vocab": [["<unk>", 0.0], ["▁a", -1.0], ["<0x0A>", -3.0], ["</s>", -4.0]]}"#,
                METASPACE,
                METASPACE,
                &added(3, "</s>", true),
                "null",
            ),
            true,
        ),
        (
            "wordpiece",
            file(
                r###"{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}"###,
                "null",
                "null",
                "",
                "null",
            ),
            true,
        ),
        ("untyped model", file(r#"{"vocab": {"a": 0}, "merges": []}"#, BYTE_LEVEL, "null", "", "null"), false),
        (
            "duplicate key",
            String::from_utf8(file(&bpe(v, m, ""), BYTE_LEVEL, "null", "", "null"))
                .unwrap()
                .replacen(r#""padding": null"#, r#""padding": null, "padding": null"#, 1)
                .into_bytes(),
            false,
        ),
        ("truncated", file(&bpe(v, m, ""), BYTE_LEVEL, "null", "", "null")[..100].to_vec(), false),
    ];
    for (what, bytes, direct) in &cases {
        assert_eq!(Vocabulary::tokenizer_json_reads_directly(bytes), *direct, "{what}: read directly");
        compare(bytes, &HfOptions::default(), what);
        compare(bytes, &HfOptions { eog_ids: Some(vec![1]), n_vocab: Some(64) }, what);
    }
}

trait ReplaceVersion {
    fn replace_version(self) -> Vec<u8>;
}

impl ReplaceVersion for Vec<u8> {
    fn replace_version(self) -> Vec<u8> {
        String::from_utf8(self).unwrap().replace(r#""version": "1.0""#, r#""version": "2.0""#).into_bytes()
    }
}
