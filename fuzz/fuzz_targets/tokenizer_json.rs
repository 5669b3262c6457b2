//! The tokenizer.json reader on arbitrary bytes: `Vocabulary::from_tokenizer_json_bytes` must return a
//! vocabulary or an error, never panic. A vocabulary it returns must be usable: its invariants hold and a set
//! spelled by its own text tokens compiles.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, Step, TokenId, Vocabulary};

fuzz_target!(|data: &[u8]| {
    let vocab = match Vocabulary::from_tokenizer_json_bytes(data, &trie::hf::HfOptions::default()) {
        Ok(v) => v,
        Err(e) => {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::MalformedFile
                        | ErrorKind::UnsupportedVocabulary
                        | ErrorKind::InvalidArgument
                        | ErrorKind::LimitExceeded
                ),
                "unexpected error kind {:?}: {e}",
                e.kind()
            );
            assert!(!e.message().is_empty());
            return;
        }
    };
    let vocab = Arc::new(vocab);
    assert!(vocab.n_vocab() >= vocab.n_listed() && vocab.n_vocab() > 0);
    assert!(vocab.eog_ids().iter().all(|&e| (e as usize) < vocab.n_vocab()));
    let text: Vec<TokenId> = (0..vocab.n_listed() as TokenId).filter(|&t| vocab.is_text_token(t)).take(64).collect();
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
});
