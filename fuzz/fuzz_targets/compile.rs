//! Compiles arbitrary small sets against arbitrary small vocabularies (`Vocabulary::new`), then checks the
//! automaton against a brute-force model of what it must be:
//! - compile fails with `UnreachableString` exactly when some member cannot be spelled by text tokens (or,
//!   with `drop_unreachable`, when none can), and `dropped()` lists exactly the unspellable inputs (every copy);
//! - every reachable state allows exactly {text tokens t : state text + t can still complete a member} plus the
//!   EOG ids when the state's text is a member (sound and complete), ascending, each leading where it should;
//! - `fill_bitmask` and `fill_bitmask_batch` equal the allowed lists; `forced` spells the last member;
//! - the token-trie and Aho-Corasick alignments give the same automaton;
//! - random walks along allowed tokens end on members.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use trie::{AlignmentMethod, Automaton, CompileOptions, ErrorKind, State, Step, TokenId, TokenKind, Vocabulary};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Low 3 bits + 1: alphabet size ('a'..); 0xF8.. : raw bytes.
    alphabet: u8,
    tokens: Vec<(Vec<u8>, u8)>,
    eog: Vec<u8>,
    padding: u8,
    set: Vec<Vec<u8>>,
    drop_unreachable: bool,
    walks: Vec<u16>,
}

fn map(alphabet: u8, bytes: &[u8], max: usize) -> Vec<u8> {
    let raw = alphabet >= 0xF8;
    let n = (alphabet & 7) + 1;
    bytes.iter().take(max).map(|&b| if raw { b } else { b'a' + b % n }).collect()
}

fn kind(k: u8) -> TokenKind {
    // Mostly Normal, so most sets are reachable.
    match k % 10 {
        0 => TokenKind::Control,
        1 => TokenKind::Unknown,
        2 => TokenKind::Unused,
        3 => TokenKind::UserDefined,
        4 => TokenKind::Byte,
        _ => TokenKind::Normal,
    }
}

/// `s` is a concatenation of (non-empty) text tokens.
fn spellable(s: &[u8], texts: &[Vec<u8>]) -> bool {
    let mut ok = vec![false; s.len() + 1];
    ok[0] = true;
    for i in 0..s.len() {
        if ok[i] {
            for t in texts {
                if s[i..].starts_with(t) {
                    ok[i + t.len()] = true;
                }
            }
        }
    }
    ok[s.len()]
}

fuzz_target!(|input: Input| {
    let a = input.alphabet;
    let tokens: Vec<Vec<u8>> = input.tokens.iter().take(48).map(|(b, _)| map(a, b, 4)).collect();
    let kinds: Vec<TokenKind> = input.tokens.iter().take(48).map(|(_, k)| kind(*k)).collect();
    let n_vocab = tokens.len() + (input.padding % 8) as usize;
    let eog: Vec<TokenId> = input.eog.iter().take(4).map(|&e| e as TokenId % (n_vocab as TokenId + 2)).collect();
    let vocab = match Vocabulary::new(tokens.clone(), kinds.clone(), &eog, Some(n_vocab)) {
        Ok(v) => Arc::new(v),
        Err(e) => {
            let bad_eog = eog.iter().any(|&e| e as usize >= tokens.len());
            assert!(n_vocab == 0 || bad_eog, "unexpected vocabulary error: {e}");
            assert!(matches!(e.kind(), ErrorKind::InvalidArgument), "{e}");
            return;
        }
    };
    let eog: BTreeSet<TokenId> = eog.into_iter().collect();
    let is_text = |id: usize| {
        id < tokens.len() && kinds[id].is_text() && !tokens[id].is_empty() && !eog.contains(&(id as TokenId))
    };
    let texts: Vec<Vec<u8>> = (0..tokens.len()).filter(|&i| is_text(i)).map(|i| tokens[i].clone()).collect();
    // Padding-looking texts ([PAD1], <unused1>) are Unused in the vocabulary: use its own view of text tokens.
    let texts: Vec<Vec<u8>> = texts
        .into_iter()
        .filter(|t| {
            (0..vocab.n_listed() as TokenId).any(|id| vocab.is_text_token(id) && vocab.token_bytes(id) == &t[..])
        })
        .collect();

    let set: Vec<Vec<u8>> = input.set.iter().take(24).map(|s| map(a, s, 10)).collect();
    let options = CompileOptions::new().drop_unreachable(input.drop_unreachable);
    let result = Automaton::compile(vocab.clone(), &set, &options);
    if set.is_empty() {
        assert_eq!(result.unwrap_err().kind(), ErrorKind::EmptySet);
        return;
    }
    // Expected: every input index of an unspellable string (each copy of a duplicate).
    let mut first: HashMap<&[u8], usize> = HashMap::new();
    for (i, s) in set.iter().enumerate() {
        first.entry(&s[..]).or_insert(i);
    }
    let unreachable: Vec<usize> = (0..set.len()).filter(|&i| !spellable(&set[i], &texts)).collect();
    let members: BTreeSet<Vec<u8>> = first.keys().filter(|s| spellable(s, &texts)).map(|s| s.to_vec()).collect();
    let auto = match result {
        Ok(auto) => auto,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::UnreachableString, "{e}");
            assert!(!unreachable.is_empty(), "compile refused a spellable set: {e}");
            assert!(!input.drop_unreachable || members.is_empty(), "drop_unreachable still failed: {e}");
            return;
        }
    };
    assert!(unreachable.is_empty() || input.drop_unreachable);
    assert_eq!(auto.dropped(), &unreachable[..]);
    assert_eq!(auto.n_members(), members.len());

    // live(q): some member extends q and the rest is spellable.
    let live = |q: &[u8]| members.iter().any(|m| m.starts_with(q) && spellable(&m[q.len()..], &texts));
    let words = auto.mask_words();
    assert_eq!(words, n_vocab.div_ceil(32));
    let mut text_of: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut queue = VecDeque::from([(auto.start(), Vec::new())]);
    text_of.insert(0, Vec::new());
    let mut row = vec![0u32; words + 1];
    while let Some((s, text)) = queue.pop_front() {
        let allowed = auto.allowed(s);
        assert!(allowed.windows(2).all(|w| w[0] < w[1]), "not ascending");
        assert_eq!(auto.is_accepting(s), members.contains(&text));
        assert_eq!(auto.depth(s), Some(text.len()));
        let mut expected: Vec<TokenId> = (0..n_vocab as TokenId)
            .filter(|&t| {
                let t = t as usize;
                is_text(t) && vocab.is_text_token(t as TokenId) && live(&[&text[..], &tokens[t][..]].concat())
            })
            .collect();
        if members.contains(&text) {
            expected.extend(eog.iter().copied());
        }
        expected.sort_unstable();
        assert_eq!(allowed, &expected[..], "state {} text {:?}", s.0, text);
        row.fill(0xDEAD_BEEF);
        auto.fill_bitmask(s, &mut row).unwrap();
        for t in 0..(words + 1) * 32 {
            let bit = row[t / 32] >> (t % 32) & 1 == 1;
            assert_eq!(bit, allowed.binary_search(&(t as TokenId)).is_ok(), "mask bit {t} of state {}", s.0);
        }
        for &t in allowed.iter() {
            match auto.advance(s, t).unwrap() {
                Step::Finished => assert!(eog.contains(&t)),
                Step::Next(n) => {
                    let next_text = [&text[..], vocab.token_bytes(t)].concat();
                    match text_of.get(&n.0) {
                        Some(prev) => assert_eq!(prev, &next_text, "state {} reached with two texts", n.0),
                        None => {
                            text_of.insert(n.0, next_text.clone());
                            queue.push_back((n, next_text));
                        }
                    }
                }
            }
        }
        if let Some(f) = auto.forced(s) {
            let rest = [&text[..], &f.bytes[..]].concat();
            assert!(members.contains(&rest));
            assert_eq!(members.iter().filter(|m| m.starts_with(&text)).count(), 1);
            let mut st = s;
            for &t in &f.tokens {
                st = match auto.advance(st, t).unwrap() {
                    Step::Next(n) => n,
                    Step::Finished => panic!("forced path holds an EOG"),
                };
            }
            assert!(auto.is_accepting(st));
            assert_eq!(auto.depth(st), Some(rest.len()));
        } else {
            assert_ne!(members.iter().filter(|m| m.starts_with(&text)).count(), 1);
        }
    }
    // Every explicit state is reachable; chain positions a token never lands on (or the chains of dropped members)
    // may not be.
    assert!(text_of.len() <= auto.n_states());
    assert!(
        text_of.keys().filter(|&&s| (s as usize) < auto.n_explicit()).count() == auto.n_explicit(),
        "unreachable explicit states"
    );
    // Bad states and ids.
    let bad = State(auto.n_states() as u32);
    assert_eq!(auto.advance(bad, 0).unwrap_err().kind(), ErrorKind::InvalidState);
    assert_eq!(auto.fill_bitmask(bad, &mut row).unwrap_err().kind(), ErrorKind::InvalidState);
    assert_eq!(auto.advance(auto.start(), n_vocab as TokenId).unwrap_err().kind(), ErrorKind::InvalidArgument);
    if words > 0 {
        assert_eq!(
            auto.fill_bitmask(auto.start(), &mut row[..words - 1]).unwrap_err().kind(),
            ErrorKind::BufferTooSmall
        );
    }
    for t in 0..n_vocab as TokenId {
        let r = auto.advance(State::FINISHED, t);
        assert_eq!(r.is_ok(), eog.contains(&t));
    }

    // Batch fill (parallel from 64 rows) equals single fills.
    let mut states: Vec<State> = (0..auto.n_states() as u32).map(State).collect();
    states.push(State::FINISHED);
    while states.len() < 70 {
        states.extend_from_within(..states.len().min(70 - states.len()));
    }
    let mut batch = vec![0u32; states.len() * (words + 1)];
    auto.fill_bitmask_batch(&states, &mut batch, words + 1).unwrap();
    for (i, &s) in states.iter().enumerate() {
        auto.fill_bitmask(s, &mut row).unwrap();
        assert_eq!(&batch[i * (words + 1)..(i + 1) * (words + 1)], &row[..]);
    }

    // The Aho-Corasick alignment gives the same automaton.
    let ac = Automaton::compile(vocab.clone(), &set, &options.clone().alignment(AlignmentMethod::AhoCorasick)).unwrap();
    assert_eq!(ac.n_states(), auto.n_states());
    for s in 0..auto.n_states() as u32 {
        assert_eq!(ac.allowed(State(s)), auto.allowed(State(s)));
        for &t in auto.allowed(State(s)).iter() {
            assert_eq!(ac.advance(State(s), t).unwrap(), auto.advance(State(s), t).unwrap());
        }
    }

    // Random walks end on members.
    for chunk in input.walks.chunks(16).take(8) {
        let mut s = auto.start();
        let mut text = Vec::new();
        let mut ended = false;
        for &c in chunk {
            let allowed = auto.allowed(s);
            if allowed.is_empty() {
                break;
            }
            let t = allowed[c as usize % allowed.len()];
            match auto.advance(s, t).unwrap() {
                Step::Finished => {
                    assert!(members.contains(&text), "a walk ended on {:?}, not a member", text);
                    ended = true;
                    break;
                }
                Step::Next(n) => {
                    text.extend_from_slice(vocab.token_bytes(t));
                    s = n;
                }
            }
        }
        if !ended {
            assert!(members.iter().any(|m| m.starts_with(&text)), "a walk left the set: {:?}", text);
            if auto.allowed(s).is_empty() {
                assert!(members.contains(&text));
            }
        }
    }
});
