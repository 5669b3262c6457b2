//! The GGUF reader on arbitrary bytes: `Vocabulary::from_gguf_bytes` must return a vocabulary or an error,
//! never panic, hang or allocate more than the input justifies. A vocabulary it returns must be usable:
//! its invariants hold and a set spelled by its own text tokens compiles.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, Step, TokenId, Vocabulary};

fuzz_target!(|data: &[u8]| {
    let vocab = match Vocabulary::from_gguf_bytes(data) {
        Ok(v) => v,
        Err(e) => {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::MalformedFile | ErrorKind::UnsupportedVocabulary | ErrorKind::InvalidArgument
                ),
                "unexpected error kind {:?}: {e}",
                e.kind()
            );
            assert!(!e.message().is_empty());
            return;
        }
    };
    check_vocabulary(Arc::new(vocab));
});

fn check_vocabulary(vocab: Arc<Vocabulary>) {
    assert!(vocab.n_vocab() >= vocab.n_listed() && vocab.n_vocab() > 0);
    assert!(vocab.eog_ids().windows(2).all(|w| w[0] < w[1]));
    assert!(vocab.eog_ids().iter().all(|&e| (e as usize) < vocab.n_vocab()));
    let text: Vec<TokenId> = (0..vocab.n_listed() as TokenId).filter(|&t| vocab.is_text_token(t)).take(64).collect();
    let _ = vocab.memory_usage();
    // A set of strings each spelled by one or two text tokens compiles, and each member is accepted along
    // its spelling.
    let mut set: Vec<Vec<u8>> = text.iter().map(|&t| vocab.token_bytes(t).to_vec()).collect();
    for w in text.windows(2).take(16) {
        set.push([vocab.token_bytes(w[0]), vocab.token_bytes(w[1])].concat());
    }
    set.push(Vec::new());
    let a = Automaton::compile(vocab.clone(), &set, &CompileOptions::default()).expect("a spellable set compiles");
    for w in text.windows(2).take(16) {
        let mut s = a.start();
        for &t in w {
            s = match a.advance(s, t).expect("spelling is allowed") {
                Step::Next(n) => n,
                Step::Finished => panic!("text token finished"),
            };
        }
        assert!(a.is_accepting(s));
    }
    let mut row = vec![0u32; a.mask_words()];
    a.fill_bitmask(a.start(), &mut row).unwrap();
    assert_eq!(row.iter().map(|w| w.count_ones() as usize).sum::<usize>(), a.allowed(a.start()).len());
}
