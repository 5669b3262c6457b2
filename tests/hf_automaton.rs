//! The engine on Hugging Face tokenizer.json vocabularies: property tests over real vocabularies, with the
//! tokenizer's own encodings as the real tokenizations.
#![cfg(feature = "hf")]
mod common;

use common::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use tokenizers::Tokenizer;
use trie::hf::HfOptions;
use trie::{Automaton, CompileOptions, TokenId, Vocabulary};

struct Hf {
    name: &'static str,
    tokenizer: Tokenizer,
    vocab: Arc<Vocabulary>,
}

fn load(name: &'static str, n_vocab: Option<usize>) -> Hf {
    let path = assets_dir().join(format!("tokenizers/{name}.tokenizer.json"));
    let tokenizer = Tokenizer::from_file(&path).unwrap();
    let vocab = Vocabulary::from_tokenizer_json(&path, &HfOptions { eog_ids: None, n_vocab }).unwrap();
    Hf { name, tokenizer, vocab: Arc::new(vocab) }
}

fn all() -> &'static [Hf] {
    static ALL: OnceLock<Vec<Hf>> = OnceLock::new();
    ALL.get_or_init(|| vec![load("qwen3", Some(151_936)), load("llama3", None), load("mistral-7b-v0.1", None)])
}

fn encode(hf: &Hf, s: &str) -> Vec<TokenId> {
    hf.tokenizer.encode(s, false).unwrap().get_ids().to_vec()
}

/// Compiles the set as the model would write it (the bytes of the tokenizer's encoding of each string), checks
/// every member is accepted along its encoding, and random walks end on members.
fn check_set(hf: &Hf, set: &[String], walks: usize, seed: u64) -> Result<(), TestCaseError> {
    let encoded: Vec<Vec<TokenId>> = set.iter().map(|s| encode(hf, s)).collect();
    let members: Vec<Vec<u8>> = encoded.iter().map(|ids| detokenize(&hf.vocab, ids)).collect();
    for (s, m) in set.iter().zip(&members) {
        let spaced = format!(" {s}");
        // NFC normalisation (Qwen3) may change the bytes of decomposed input; our PIECES are NFC already.
        prop_assert!(
            m == s.as_bytes() || m == spaced.as_bytes(),
            "{}: {:?} -> {:?}",
            hf.name,
            s,
            String::from_utf8_lossy(m)
        );
    }
    let a = Automaton::compile(hf.vocab.clone(), &members, &CompileOptions::default()).unwrap();
    for (ids, s) in encoded.iter().zip(set) {
        if let Err(e) = accepts(&a, ids) {
            return Err(TestCaseError::fail(format!("{}: {s:?} along {ids:?}: {e}", hf.name)));
        }
    }
    let set_bytes: BTreeSet<&[u8]> = members.iter().map(|m| &m[..]).collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    for _ in 0..walks {
        let (text, _) = random_walk(&a, &mut rng);
        prop_assert!(set_bytes.contains(&text[..]), "{}: walk produced {:?}", hf.name, String::from_utf8_lossy(&text));
    }
    Ok(())
}

#[test]
fn multilingual_sets_on_tokenizer_json_vocabularies() {
    let sets: Vec<Vec<String>> = vec![
        ["東京", "大阪", "京都", "名古屋", "札幌", "東京都"].map(String::from).to_vec(),
        ["año", "niño", "acción", "canción", "pingüino", "Málaga", "A Coruña"].map(String::from).to_vec(),
        ["a", "ab", "abc", "new york", "line\nbreak", "say \"hi\"", "tab\tstop", "🙂", "家族👨‍👩‍👧"]
            .map(String::from)
            .to_vec(),
        random_set(1, 2000, 5),
    ];
    for hf in all() {
        for set in &sets {
            check_set(hf, set, 200, 5).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Property: for random sets (prefix-closed pieces, multi-byte UTF-8, spaces, quotes, newlines), on every
    /// real tokenizer.json vocabulary, members are accepted along the tokenizer's encodings and random walks
    /// end on members.
    #[test]
    fn random_sets_are_sound_and_complete(seed in any::<u64>(), k in 1usize..200, pieces in 1usize..6) {
        let set = random_set(seed, k, pieces);
        for hf in all() {
            check_set(hf, &set, 30, seed)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Canonical mode (`compile_tokens` with the tokenizer's own encodings): every member is accepted along its
    /// encoding, every walk ends on a member along exactly one member's encoding, and every state allows a subset
    /// of what the full compile allows after the same text.
    #[test]
    fn canonical_tokenizations_are_a_subset_of_all_tokenizations(seed in 0u64..1000, k in 1usize..300) {
        for hf in all() {
            let set = random_set(seed, k, 4);
            let encoded: Vec<Vec<TokenId>> = set.iter().map(|s| encode(hf, s)).collect();
            let members: Vec<Vec<u8>> = encoded.iter().map(|ids| detokenize(&hf.vocab, ids)).collect();
            let canonical = Automaton::compile_tokens(hf.vocab.clone(), &encoded, &CompileOptions::new()).unwrap();
            let full = Automaton::compile(hf.vocab.clone(), &members, &CompileOptions::new()).unwrap();
            prop_assert_eq!(canonical.n_members(), full.n_members());
            for ids in &encoded {
                prop_assert!(accepts(&canonical, ids).is_ok(), "{}: {:?}", hf.name, ids);
            }
            let encodings: BTreeSet<&[TokenId]> = encoded.iter().map(|e| &e[..]).collect();
            let mut rng = SmallRng::seed_from_u64(seed);
            for _ in 0..20 {
                let mut state = canonical.start();
                let mut path: Vec<TokenId> = Vec::new();
                let mut full_state = full.start();
                loop {
                    let allowed = canonical.allowed(state);
                    let full_allowed = full.allowed(full_state);
                    prop_assert!(allowed.iter().all(|t| full_allowed.binary_search(t).is_ok()), "{}: not a subset", hf.name);
                    let t = allowed[rand::Rng::gen_range(&mut rng, 0..allowed.len())];
                    match (canonical.advance(state, t).unwrap(), full.advance(full_state, t).unwrap()) {
                        (trie::Step::Finished, trie::Step::Finished) => break,
                        (trie::Step::Next(a), trie::Step::Next(b)) => {
                            state = a;
                            full_state = b;
                            path.push(t);
                        }
                        other => prop_assert!(false, "{}: the two automata disagree: {:?}", hf.name, other),
                    }
                }
                prop_assert!(encodings.contains(&path[..]), "{}: walked a path that is no encoding: {:?}", hf.name, path);
            }
        }
    }
}
