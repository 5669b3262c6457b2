//! The engine on real tokenizer vocabularies (llama.cpp GGUF files): soundness, completeness, exact masks.
mod common;

use common::*;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::collections::BTreeSet;
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, State, Step, TokenId, Vocabulary};

fn compile(vocab: &Arc<Vocabulary>, set: &[impl AsRef<[u8]> + Sync]) -> Automaton {
    Automaton::compile(vocab.clone(), set, &CompileOptions::default()).unwrap()
}

#[test]
fn gguf_vocabularies_load_with_their_eog_ids() {
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        assert!(v.n_vocab() >= 32_000, "{name}");
        assert!(!v.eog_ids().is_empty(), "{name} has no EOG id");
        for &e in v.eog_ids() {
            assert!(!v.is_text_token(e), "{name}: EOG {e} is a text token");
        }
        // Every byte value can be produced by some single text token or byte token: the trie can spell anything.
        let mut single = [false; 256];
        for id in 0..v.n_vocab() as TokenId {
            if v.is_text_token(id) && v.token_bytes(id).len() == 1 {
                single[v.token_bytes(id)[0] as usize] = true;
            }
        }
        let missing = single.iter().filter(|&&s| !s).count();
        // gpt2-style vocabularies and byte-fallback SentencePiece have all 256; others may lack a few.
        assert!(missing <= 256 - 188, "{name}: {missing} byte values have no single-byte token");
    }
    let qwen = gguf_vocab("qwen2");
    assert_eq!(qwen.n_vocab(), 151_936);
    assert_eq!(qwen.mask_words(), 4748);
    // Qwen2's [PAD...] slots are marked user-defined in the file but are never text.
    assert!((151_646..151_936).all(|id| !qwen.is_text_token(id)));
    let gemma = gguf_vocab("gemma-4");
    assert!(!gemma.token_bytes(gemma.n_vocab() as TokenId - 1).is_empty());
    assert!(!gemma.is_text_token(gemma.n_vocab() as TokenId - 1), "<unusedN> slots are not text");
}

#[test]
fn wordpiece_is_refused_with_a_clear_error() {
    let e = Vocabulary::from_gguf(gguf_path("bert-bge")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnsupportedVocabulary);
    assert!(e.message().contains("WordPiece"), "{e}");
}

/// Token bytes decoded from the GGUF agree with llama.cpp's own tokenizer: the expected ids of every test
/// string spell that string (SentencePiece models add one leading space).
#[test]
fn token_bytes_agree_with_llama_cpp_tokenizations() {
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        let mut checked = 0;
        for (s, ids) in test_pairs(name) {
            let bytes = detokenize(&v, &ids);
            let spaced = format!(" {s}");
            assert!(
                bytes == s.as_bytes() || bytes == spaced.as_bytes(),
                "{name}: {:?} detokenizes to {:?}",
                s,
                String::from_utf8_lossy(&bytes)
            );
            checked += 1;
        }
        assert!(checked >= 30, "{name}: only {checked} pairs");
    }
}

/// Completeness along real tokenizations: every member is accepted along llama.cpp's tokenization of it, and
/// along the byte-by-byte path.
#[test]
fn members_are_accepted_along_real_tokenizations() {
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        let pairs = test_pairs(name);
        let mut set: Vec<Vec<u8>> = pairs.iter().map(|(_, ids)| detokenize(&v, ids)).collect();
        set.extend(random_set(7, 300, 4).into_iter().map(String::into_bytes));
        let a = compile(&v, &set);
        for (s, ids) in &pairs {
            accepts(&a, ids).unwrap_or_else(|e| panic!("{name}: {s:?} along {ids:?}: {e}"));
        }
        let byte_token = single_byte_tokens(&v);
        for member in &set {
            let ids: Option<Vec<TokenId>> = member.iter().map(|&b| byte_token[b as usize]).collect();
            if let Some(ids) = ids {
                accepts(&a, &ids)
                    .unwrap_or_else(|e| panic!("{name}: {:?} byte by byte: {e}", String::from_utf8_lossy(member)));
            }
        }
    }
}

fn single_byte_tokens(v: &Vocabulary) -> [Option<TokenId>; 256] {
    let mut out = [None; 256];
    for id in 0..v.n_vocab() as TokenId {
        let b = v.token_bytes(id);
        if v.is_text_token(id) && b.len() == 1 && out[b[0] as usize].is_none() {
            out[b[0] as usize] = Some(id);
        }
    }
    out
}

/// Soundness: random walks over allowed tokens always end on a member; the bitmask equals the allowed list.
#[test]
fn random_walks_end_on_members() {
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(100 + i as u64, 500, 5);
        let members: BTreeSet<Vec<u8>> = set.iter().map(|s| s.as_bytes().to_vec()).collect();
        let a = compile(&v, &set);
        assert_eq!(a.n_members(), members.len());
        let mut rng = SmallRng::seed_from_u64(i as u64);
        let mut row = vec![0u32; v.mask_words()];
        for _ in 0..300 {
            let (text, visited) = random_walk(&a, &mut rng);
            assert!(members.contains(&text), "{name}: walk produced {:?}", String::from_utf8_lossy(&text));
            for (state, _) in visited.iter().take(3) {
                a.fill_bitmask(*state, &mut row).unwrap();
                let from_mask: Vec<TokenId> =
                    (0..v.n_vocab() as TokenId).filter(|&t| row[(t / 32) as usize] >> (t % 32) & 1 == 1).collect();
                assert_eq!(from_mask, a.allowed(*state), "{name}: mask and allowed list differ");
            }
        }
    }
}

/// The mask equals a brute-force check: token t is allowed after text P iff P + bytes(t) is a prefix of some
/// member (t a text token), or t is EOG and P is a member. (Every vocabulary here can spell every byte, so no
/// prefix is a dead end.)
#[test]
fn masks_equal_brute_force() {
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(200 + i as u64, 40, 4);
        let members: BTreeSet<Vec<u8>> = set.iter().map(|s| s.as_bytes().to_vec()).collect();
        let a = compile(&v, &set);
        let is_prefix = |p: &[u8]| members.range(p.to_vec()..).next().is_some_and(|m| m.starts_with(p));
        let mut rng = SmallRng::seed_from_u64(i as u64);
        for _ in 0..6 {
            let (_, visited) = random_walk(&a, &mut rng);
            for (state, text) in visited {
                let expected: Vec<TokenId> = (0..v.n_vocab() as TokenId)
                    .filter(|&t| {
                        if v.is_eog(t) {
                            return members.contains(&text);
                        }
                        if !v.is_text_token(t) {
                            return false;
                        }
                        let mut p = text.clone();
                        p.extend_from_slice(v.token_bytes(t));
                        is_prefix(&p)
                    })
                    .collect();
                assert_eq!(a.allowed(state), expected, "{name}: state after {:?}", String::from_utf8_lossy(&text));
            }
        }
    }
}

#[test]
fn multilingual_and_awkward_sets() {
    let sets: &[&[&str]] = &[
        &["東京", "大阪", "京都", "名古屋", "札幌", "東京都", "東"],
        &["año", "niño", "acción", "canción", "pingüino", "Málaga", "Córdoba", "Cádiz", "A Coruña"],
        &["a", "ab", "abc", "abcd", ""],
        &[
            "new york",
            "new  york",
            " leading",
            "trailing ",
            "line\nbreak",
            "tab\there",
            "say \"hi\"",
            "it's",
            "back\\slash",
        ],
        &["🙂", "🙂🙂", "👍🏽", "家族👨‍👩‍👧"],
    ];
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        for set in sets {
            let a = compile(&v, set);
            let members: BTreeSet<&[u8]> = set.iter().map(|s| s.as_bytes()).collect();
            assert_eq!(a.n_members(), members.len());
            let mut rng = SmallRng::seed_from_u64(3);
            for _ in 0..200 {
                let (text, _) = random_walk(&a, &mut rng);
                assert!(members.contains(&text[..]), "{name}: {:?}", String::from_utf8_lossy(&text));
            }
            // The empty string is a member only where listed: the start accepts iff "" is in the set.
            assert_eq!(a.is_accepting(a.start()), members.contains(&b""[..]), "{name}");
        }
    }
}

#[test]
fn forced_continuation_spells_the_last_member() {
    let v = gguf_vocab("qwen2");
    let a = compile(&v, &["weather.get_forecast_hourly", "weather.get_alerts", "calendar.create_event"]);
    let Step::Next(s) =
        a.advance(a.start(), *a.allowed(a.start()).iter().find(|&&t| v.token_bytes(t) == b"cal").unwrap()).unwrap()
    else {
        panic!()
    };
    let f = a.forced(s).expect("only calendar.create_event remains");
    assert_eq!(f.bytes, b"endar.create_event");
    assert_eq!(detokenize(&v, &f.tokens), f.bytes);
    assert!(f.tokens.len() < f.bytes.len(), "greedy tokens are longer than single bytes");
    assert!(a.forced(a.start()).is_none());
    // Following the forced tokens ends on an accepting state.
    let mut st = s;
    for &t in &f.tokens {
        st = match a.advance(st, t).unwrap() {
            Step::Next(n) => n,
            Step::Finished => panic!(),
        };
    }
    assert!(a.is_accepting(st));
}

#[test]
fn batch_fill_equals_single_fills() {
    let v = gguf_vocab("llama-bpe");
    let a = compile(&v, &random_set(5, 2000, 4));
    let mut rng = SmallRng::seed_from_u64(9);
    let mut states: Vec<State> = Vec::new();
    while states.len() < 64 {
        let (_, visited) = random_walk(&a, &mut rng);
        states.extend(visited.into_iter().map(|(s, _)| s));
    }
    states.push(State::FINISHED);
    let w = a.mask_words() + 3;
    let mut batch = vec![u32::MAX; states.len() * w];
    a.fill_bitmask_batch(&states, &mut batch, w).unwrap();
    let mut row = vec![0u32; w];
    for (i, &s) in states.iter().enumerate() {
        a.fill_bitmask(s, &mut row).unwrap();
        assert_eq!(&batch[i * w..(i + 1) * w], &row[..], "row {i}");
    }
    // A bad state anywhere: nothing written.
    let mut batch2 = vec![7u32; 2 * w];
    let e = a.fill_bitmask_batch(&[a.start(), State(u32::MAX - 1)], &mut batch2, w).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState);
    assert!(batch2.iter().all(|&x| x == 7));
}

#[test]
fn finished_state_allows_only_eog() {
    let v = gguf_vocab("phi-3");
    let a = compile(&v, &["yes", "no"]);
    assert_eq!(a.allowed(State::FINISHED), v.eog_ids());
    assert!(a.is_accepting(State::FINISHED));
    let eog = v.eog_ids()[0];
    assert_eq!(a.advance(State::FINISHED, eog), Ok(Step::Finished));
    let text = (0..v.n_vocab() as TokenId).find(|&t| v.is_text_token(t)).unwrap();
    assert_eq!(a.advance(State::FINISHED, text).unwrap_err().kind(), ErrorKind::TokenRejected);
    assert_eq!(a.advance(State(a.n_states() as u32), text).unwrap_err().kind(), ErrorKind::InvalidState);
    let e = a.advance(a.start(), v.n_vocab() as TokenId).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn automaton_and_vocabulary_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Vocabulary>();
    check::<Automaton>();
}

#[test]
fn one_automaton_from_many_threads_matches_one_thread() {
    let v = gguf_vocab("gpt-2");
    let a = Arc::new(compile(&v, &random_set(11, 1000, 4)));
    let walk = |seed: u64| {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..50).map(|_| random_walk(&a, &mut rng).0).collect::<Vec<_>>()
    };
    let expected: Vec<_> = (0..8).map(walk).collect();
    let got: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|i| s.spawn(move || walk(i))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, expected);
}

/// The two alignment methods (token trie, Aho-Corasick) build the same automaton.
#[test]
fn token_trie_and_aho_corasick_alignments_agree() {
    use trie::AlignmentMethod;
    for (i, &name) in ["llama-spm", "qwen2", "gemma-4"].iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(300 + i as u64, 3000, 5);
        let a = compile(&v, &set);
        let opts = CompileOptions::new().alignment(AlignmentMethod::AhoCorasick);
        let b = Automaton::compile(v.clone(), &set, &opts).unwrap();
        assert_eq!(a.n_states(), b.n_states(), "{name}");
        assert_eq!(a.allowed_total(), b.allowed_total(), "{name}");
        for s in 0..a.n_states() as u32 {
            let s = State(s);
            assert_eq!(a.allowed(s), b.allowed(s), "{name}: state {s:?}");
            for &t in a.allowed(s).iter() {
                assert_eq!(a.advance(s, t), b.advance(s, t), "{name}: state {s:?} token {t}");
            }
            assert_eq!(a.is_accepting(s), b.is_accepting(s));
        }
    }
}

/// Every GGUF vocabulary in the assets folder (also those this suite does not name, such as the extra ones
/// `scripts/fetch-assets.sh` unpacks): either refused as unsupported, or its token bytes agree with llama.cpp's
/// tokenizations and every test string is accepted along them.
#[test]
fn every_gguf_in_the_assets_folder() {
    let dir = assets_dir().join("vocab");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| Some(f.strip_prefix("ggml-vocab-")?.strip_suffix(".gguf")?.to_string()))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    let mut served = 0;
    let mut without_pairs = Vec::new();
    for name in &names {
        let v = match Vocabulary::from_gguf(gguf_path(name)) {
            Ok(v) => Arc::new(v),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::UnsupportedVocabulary, "{name}: {e}");
                continue;
            }
        };
        served += 1;
        // llama.cpp ships test pairs (.inp/.out) for most of its vocabularies, not all (aquila, baichuan,
        // gpt-neox, nomic-bert-moe have none): without pairs, the vocabulary is still loaded and a set of its
        // own text tokens compiled, each member accepted along its token.
        if !gguf_path(name).with_extension("gguf.inp").exists() {
            without_pairs.push(name.clone());
            compiles_its_own_tokens(name, &v);
            continue;
        }
        let pairs = test_pairs(name);
        let set: Vec<Vec<u8>> = pairs.iter().map(|(_, ids)| detokenize(&v, ids)).collect();
        for ((s, ids), bytes) in pairs.iter().zip(&set) {
            let spaced = format!(" {s}");
            assert!(
                bytes == s.as_bytes() || bytes == spaced.as_bytes(),
                "{name}: {s:?} along {ids:?} detokenizes to {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let a = Automaton::compile(v.clone(), &set, &CompileOptions::default()).unwrap();
        for (s, ids) in &pairs {
            accepts(&a, ids).unwrap_or_else(|e| panic!("{name}: {s:?}: {e}"));
        }
    }
    assert!(served >= 9, "only {served} vocabularies served");
    // The pinned files (scripts/fetch-assets.sh) all have pairs; the sdist's other files may not.
    let with_pairs = served - without_pairs.len();
    assert!(with_pairs >= 9, "only {with_pairs} vocabularies with pairs ({without_pairs:?} without)");
}

/// Compiles up to 2,000 distinct text tokens of `v` (every 7th id) as a set, and checks each one is accepted
/// along its own single token, then ended.
fn compiles_its_own_tokens(name: &str, v: &Arc<Vocabulary>) {
    let mut seen = BTreeSet::new();
    let mut pairs: Vec<(Vec<u8>, TokenId)> = Vec::new();
    for id in (0..v.n_vocab() as TokenId).step_by(7) {
        let b = v.token_bytes(id);
        if v.is_text_token(id) && !v.is_eog(id) && !b.is_empty() && seen.insert(b.to_vec()) {
            pairs.push((b.to_vec(), id));
        }
        if pairs.len() == 2_000 {
            break;
        }
    }
    assert!(pairs.len() >= 100, "{name}: only {} text tokens", pairs.len());
    let set: Vec<Vec<u8>> = pairs.iter().map(|(b, _)| b.clone()).collect();
    let a = Automaton::compile(v.clone(), &set, &CompileOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (b, id) in &pairs {
        accepts(&a, &[*id]).unwrap_or_else(|e| panic!("{name}: {:?}: {e}", String::from_utf8_lossy(b)));
    }
}
