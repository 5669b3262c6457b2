//! Shared helpers of the integration tests: where the real vocabularies are, loading them once, reading
//! llama.cpp's tokenizer test pairs, deterministic random sets, and walks over an automaton.
#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use trie::{Automaton, State, Step, TokenId, Vocabulary};

/// How to get the assets, for the message of a test that misses one (CI fetches them first).
const FETCH: &str = "run `scripts/fetch-assets.sh` (it prints the folder it filled) and set TRIE_ASSETS to that folder";

/// The folder of real tokenizer assets: `$TRIE_ASSETS` when set (and nothing else then), else `../shared/assets`
/// beside the checkout, else the cache that `scripts/fetch-assets.sh` fills. Panics with the command to run when
/// none holds them: a test that needs assets fails without them, it never passes untested.
pub fn assets_dir() -> PathBuf {
    let marker = "vocab/ggml-vocab-gpt-2.gguf";
    if let Some(dir) = std::env::var_os("TRIE_ASSETS").map(PathBuf::from) {
        assert!(dir.join(marker).exists(), "TRIE_ASSETS={} holds no {marker}: {FETCH}", dir.display());
        return dir;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for c in [root.join("../shared/assets"), root.join(".cache/assets")] {
        if c.join(marker).exists() {
            return c;
        }
    }
    panic!("real tokenizer assets not found (TRIE_ASSETS is not set): {FETCH}");
}

/// The asset at `relative` (such as `vocab/ggml-vocab-bert-bge.gguf`) in [`assets_dir`]; panics naming it and the
/// command to run when it is missing.
pub fn asset(relative: &str) -> PathBuf {
    let path = assets_dir().join(relative);
    assert!(path.exists(), "asset {} not found: {FETCH}", path.display());
    path
}

/// The Hugging Face tokenizer.json asset `name` (`qwen3`, `llama3`, `mistral-7b-v0.1`).
pub fn tokenizer_json_path(name: &str) -> PathBuf {
    asset(&format!("tokenizers/{name}.tokenizer.json"))
}

pub fn gguf_path(name: &str) -> PathBuf {
    asset(&format!("vocab/ggml-vocab-{name}.gguf"))
}

/// The GGUF vocabularies of the test suite (bert is refused, tested apart).
pub const GGUF_VOCABS: &[&str] =
    &["llama-spm", "phi-3", "gpt-2", "deepseek-llm", "falcon", "llama-bpe", "qwen2", "starcoder", "gemma-4"];

/// Loads a GGUF vocabulary once per test binary.
pub fn gguf_vocab(name: &str) -> Arc<Vocabulary> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Vocabulary>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap().get(name) {
        return v.clone();
    }
    let v = Arc::new(Vocabulary::from_gguf(gguf_path(name)).unwrap_or_else(|e| panic!("{name}: {e}")));
    cache.lock().unwrap().insert(name.to_string(), v.clone());
    v
}

/// llama.cpp's tokenizer test pairs for a vocabulary: (string, expected token ids).
pub fn test_pairs(name: &str) -> Vec<(String, Vec<TokenId>)> {
    let inp = std::fs::read_to_string(gguf_path(name).with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(gguf_path(name).with_extension("gguf.out")).unwrap();
    let strings: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let ids: Vec<Vec<TokenId>> =
        out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    assert!(strings.len() >= ids.len(), "{name}: {} strings, {} id lines", strings.len(), ids.len());
    strings.into_iter().zip(ids).map(|(s, i)| (s.to_string(), i)).collect()
}

/// The bytes a token sequence stands for.
pub fn detokenize(vocab: &Vocabulary, ids: &[TokenId]) -> Vec<u8> {
    ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect()
}

/// Word pieces for random sets: ASCII tool-name parts, Spanish with accents, German, Japanese, emoji,
/// spaces, newlines and quotes.
pub const PIECES: &[&str] = &[
    "search",
    "get",
    "list",
    "create",
    "delete",
    "update",
    "user",
    "flight",
    "hotel",
    "_",
    ".",
    "-",
    " ",
    "a",
    "ab",
    "año",
    "niño",
    "café",
    "acción",
    "Äpfel",
    "Straße",
    "東京",
    "大阪",
    "日本語",
    "こんにちは",
    "ー",
    "🙂",
    "\n",
    "\"",
    "'",
    "\\",
    "{",
    "}",
    "0",
    "42",
    "x",
    "Z",
    "\t",
    "é",
    "ñ",
];

/// `k` random strings (duplicates and prefixes happen on purpose) from `seed`.
pub fn random_set(seed: u64, k: usize, max_pieces: usize) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out: Vec<String> = Vec::with_capacity(k);
    for _ in 0..k {
        if !out.is_empty() && rng.gen_bool(0.1) {
            // A prefix or an extension of an earlier member.
            let base = out[rng.gen_range(0..out.len())].clone();
            if rng.gen_bool(0.5) {
                let cut: Vec<char> = base.chars().collect();
                let n = rng.gen_range(0..=cut.len());
                out.push(cut[..n].iter().collect());
            } else {
                out.push(base + PIECES[rng.gen_range(0..PIECES.len())]);
            }
            continue;
        }
        let n = rng.gen_range(1..=max_pieces);
        out.push((0..n).map(|_| PIECES[rng.gen_range(0..PIECES.len())]).collect());
    }
    out
}

/// A random walk choosing uniformly among allowed tokens until an end-of-generation token; returns the bytes
/// produced and the states visited with the bytes before each.
pub fn random_walk(a: &Automaton, rng: &mut SmallRng) -> (Vec<u8>, Vec<(State, Vec<u8>)>) {
    let vocab = a.vocab();
    let mut state = a.start();
    let mut text = Vec::new();
    let mut visited = Vec::new();
    for _ in 0..100_000 {
        visited.push((state, text.clone()));
        let allowed = a.allowed(state);
        assert!(!allowed.is_empty(), "dead state {state:?} after {:?}", String::from_utf8_lossy(&text));
        let t = allowed[rng.gen_range(0..allowed.len())];
        match a.advance(state, t).unwrap() {
            Step::Finished => {
                assert!(vocab.is_eog(t));
                return (text, visited);
            }
            Step::Next(next) => {
                assert!(!vocab.is_eog(t));
                text.extend_from_slice(vocab.token_bytes(t));
                state = next;
            }
        }
    }
    panic!("walk did not end");
}

/// Walks `ids` then an EOG token; panics naming the first rejected token.
pub fn accepts(a: &Automaton, ids: &[TokenId]) -> Result<(), String> {
    let mut state = a.start();
    for (i, &t) in ids.iter().enumerate() {
        match a.advance(state, t) {
            Ok(Step::Next(s)) => state = s,
            Ok(Step::Finished) => return Err(format!("token {i} ({t}) finished early")),
            Err(e) => return Err(format!("token {i}: {e}")),
        }
    }
    if !a.is_accepting(state) {
        return Err("the walk does not end on an accepting state".into());
    }
    if let Some(&eog) = a.vocab().eog_ids().first() {
        if a.advance(state, eog) != Ok(Step::Finished) {
            return Err("EOG not allowed at the end".into());
        }
    }
    Ok(())
}

/// A fresh empty directory under the system's temporary directory, for files a test writes.
pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("libtrie-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every observable of `a` and `b` agrees on the states random walks visit, and on every state of a small set.
pub fn same_behaviour(a: &Automaton, b: &Automaton, seed: u64) {
    assert_eq!(a.n_states(), b.n_states());
    assert_eq!(a.n_explicit(), b.n_explicit());
    assert_eq!(a.n_members(), b.n_members());
    assert_eq!(a.dropped(), b.dropped());
    assert_eq!(a.has_values(), b.has_values());
    assert_eq!(a.template(), b.template());
    for r in 0..=a.n_members() + a.dropped().len() {
        assert_eq!(a.member_bytes(r), b.member_bytes(r), "rank {r}");
        assert_eq!(a.member_id(r), b.member_id(r), "rank {r}");
        assert_eq!(a.rank_value(r), b.rank_value(r), "rank {r}");
    }
    // (The same layout: a derived-rows automaton and one storing every row differ in memory.)
    if !b.is_lazy() && a.allowed_total() == b.allowed_total() {
        assert_eq!(a.memory_usage(), b.memory_usage());
    }
    let mut states: Vec<State> = if a.n_states() <= 4000 {
        (0..a.n_states() as u32).map(State).collect()
    } else {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..40).flat_map(|_| random_walk(a, &mut rng).1.into_iter().map(|(s, _)| s)).collect()
    };
    states.push(State::FINISHED);
    let words = a.mask_words();
    let (mut ra, mut rb) = (vec![0u32; words], vec![0u32; words]);
    for s in states {
        assert_eq!(a.allowed(s), b.allowed(s), "state {s:?}");
        assert_eq!(a.is_accepting(s), b.is_accepting(s));
        assert_eq!(a.depth(s), b.depth(s));
        assert_eq!(a.forced(s), b.forced(s));
        assert_eq!(a.member_at(s), b.member_at(s));
        assert_eq!(a.member_range(s), b.member_range(s));
        assert_eq!(a.member_value(s), b.member_value(s));
        assert_eq!(a.possible_members(s), b.possible_members(s));
        assert_eq!(a.possible_values(s), b.possible_values(s));
        a.fill_bitmask(s, &mut ra).unwrap();
        b.fill_bitmask(s, &mut rb).unwrap();
        assert_eq!(ra, rb);
        for &t in a.allowed(s).iter() {
            assert_eq!(a.advance(s, t), b.advance(s, t));
        }
    }
}
