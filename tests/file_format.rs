//! Saved vocabularies and automata (`save` / `load`, `to_bytes` / `from_bytes`): a loaded automaton behaves
//! exactly as the compiled one on real vocabularies; a file for another vocabulary, a damaged or a truncated file
//! is an error, never a crash.
mod common;

use common::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, State, Vocabulary};

/// Every observable of `a` and `b` agrees on the states random walks visit, and on every state of a small set.
fn same_behaviour(a: &Automaton, b: &Automaton, seed: u64) {
    assert_eq!(a.n_states(), b.n_states());
    assert_eq!(a.n_explicit(), b.n_explicit());
    assert_eq!(a.n_members(), b.n_members());
    assert_eq!(a.dropped(), b.dropped());
    assert_eq!(a.memory_usage(), b.memory_usage());
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
        a.fill_bitmask(s, &mut ra).unwrap();
        b.fill_bitmask(s, &mut rb).unwrap();
        assert_eq!(ra, rb);
        for &t in a.allowed(s).iter() {
            assert_eq!(a.advance(s, t), b.advance(s, t));
        }
    }
}

#[test]
fn saved_automata_load_and_behave_the_same_on_every_vocabulary() {
    let dir = tempdir("round-trip");
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(900 + i as u64, 300, 5);
        let a = Automaton::compile(v.clone(), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
        let path = dir.join(format!("{name}.trie"));
        a.save(&path).unwrap();
        let b = Automaton::load(v.clone(), &path).unwrap();
        assert!(b.is_mapped() && !a.is_mapped());
        same_behaviour(&a, &b, i as u64);
        // The same bytes in memory.
        let c = Automaton::from_bytes(v.clone(), &a.to_bytes()).unwrap();
        same_behaviour(&a, &c, i as u64);
        assert_eq!(a.to_bytes(), b.to_bytes(), "{name}: saving a loaded automaton gives the same file");
    }
}

#[test]
fn saved_vocabularies_load_with_the_same_fingerprint_and_compile_the_same() {
    let dir = tempdir("vocab");
    for &name in GGUF_VOCABS {
        let v = gguf_vocab(name);
        let path = dir.join(format!("{name}.vocab"));
        v.save(&path).unwrap();
        let w = Arc::new(Vocabulary::load(&path).unwrap());
        assert!(w.is_mapped());
        assert_eq!(v.fingerprint(), w.fingerprint());
        assert_eq!((v.n_vocab(), v.n_listed(), v.n_patterns()), (w.n_vocab(), w.n_listed(), w.n_patterns()));
        assert_eq!(v.eog_ids(), w.eog_ids());
        for id in 0..v.n_vocab() as u32 {
            assert_eq!(v.token_bytes(id), w.token_bytes(id));
            assert_eq!(v.kind(id), w.kind(id));
        }
        let set = random_set(77, 200, 4);
        let a = Automaton::compile(v.clone(), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
        let b = Automaton::compile(w.clone(), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
        same_behaviour(&a, &b, 5);
        // An automaton saved with one loads with the other: same fingerprint.
        same_behaviour(&a, &Automaton::from_bytes(w.clone(), &a.to_bytes()).unwrap(), 6);
    }
}

#[test]
fn another_vocabulary_is_refused() {
    let (qwen, gpt2) = (gguf_vocab("qwen2"), gguf_vocab("gpt-2"));
    let a = Automaton::compile(qwen, &["hello", "world"], &CompileOptions::new()).unwrap();
    let e = Automaton::from_bytes(gpt2, &a.to_bytes()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::VocabularyMismatch, "{e}");
    assert!(e.message().contains("another vocabulary"), "{e}");
    // An automaton file is not a vocabulary file and the other way round.
    let e = Vocabulary::from_bytes(&a.to_bytes()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::MalformedFile);
    let e = Automaton::from_bytes(a.vocab().clone(), &a.vocab().to_bytes()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::MalformedFile);
    let e = Automaton::load(a.vocab().clone(), "/nonexistent/dir/x.trie").err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Io);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Damage anywhere (flipped bytes, a truncation) is an error: the checksum covers the whole file.
    #[test]
    fn damaged_files_are_errors(seed in 0u64..1000, flips in 1usize..4, cut in 0usize..100) {
        let v = gguf_vocab("gpt-2");
        let set = random_set(seed, 30, 4);
        let a = Automaton::compile(v.clone(), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
        let bytes = a.to_bytes();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut bad = bytes.clone();
        for _ in 0..flips {
            let i = rng.gen_range(0..bad.len());
            bad[i] ^= 1 << rng.gen_range(0..8);
        }
        if bad != bytes {
            let e = Automaton::from_bytes(v.clone(), &bad).expect_err("damage noticed");
            prop_assert!(matches!(e.kind(), ErrorKind::MalformedFile | ErrorKind::VocabularyMismatch), "{}", e);
        }
        let cut = bytes.len() * cut / 100;
        prop_assert_eq!(Automaton::from_bytes(v, &bytes[..cut]).err().unwrap().kind(), ErrorKind::MalformedFile);
    }
}

/// Writes the seed corpus of the `load` fuzz target (saved files of its vocabulary): run with
/// `FUZZ_SEEDS=fuzz/seeds/load cargo test --test file_format write_fuzz_seeds -- --ignored`.
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let Some(out) = std::env::var_os("FUZZ_SEEDS") else { return };
    let out = std::path::PathBuf::from(out);
    std::fs::create_dir_all(&out).unwrap();
    let texts = ["a", "b", "c", "d", "ab", "abc", "bc", "é", "ab", "</s>"];
    let mut kinds = vec![trie::TokenKind::Normal; texts.len()];
    kinds[9] = trie::TokenKind::Control;
    let tokens = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
    let v = Arc::new(Vocabulary::new(tokens, kinds, &[9], Some(40)).unwrap());
    std::fs::write(out.join("vocab"), v.to_bytes()).unwrap();
    for (i, set) in [&["ab", "abc", "bd"][..], &["abcabc", "é", "", "cab", "dd"][..], &["a"][..]].iter().enumerate() {
        let a = Automaton::compile(v.clone(), set, &CompileOptions::new()).unwrap();
        std::fs::write(out.join(format!("automaton-{i}")), a.to_bytes()).unwrap();
    }
}
