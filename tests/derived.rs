//! The derived-rows layout (`src/automaton/derived.rs`): unary explicit states keep no row and compute it on use,
//! and branching states with short rows keep only their byte children. An automaton compiled with it answers
//! exactly as the one that stores every row (every state's allowed tokens, masks, steps of allowed and refused
//! tokens, forced continuations, members), on every vocabulary; saved, it needs format version 7 (its members
//! front-coded, `src/automaton/front.rs`; its integer arrays at packed widths, `src/util/packed.rs`) and is
//! written as version 8 (its checksum blocks 2 KiB), a file that loads (eagerly and lazily) to the same answers; a
//! crafted file (derived bits, unary bytes, byte-row bits, rows, packed arrays or their widths, member bytes and
//! shared prefix lengths spoiled, block hashes and checksum made valid again) is an error or a harmless automaton,
//! never a panic.
mod common;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, State, TokenKind, Vocabulary};

fn options(derive: bool) -> CompileOptions {
    CompileOptions::new().drop_unreachable(true).derive_rows(derive)
}

/// `same_behaviour`, plus the step of every `stride`-th token id (refused ones included) in every state walked.
fn same_steps(a: &Automaton, b: &Automaton, seed: u64, stride: usize) {
    same_behaviour(a, b, seed);
    let mut rng = SmallRng::seed_from_u64(seed);
    let states: Vec<State> = if a.n_states() <= 4000 {
        (0..a.n_states() as u32).map(State).collect()
    } else {
        (0..20).flat_map(|_| random_walk(a, &mut rng).1.into_iter().map(|(s, _)| s)).collect()
    };
    let n_vocab = a.vocab().n_vocab() as u32;
    for s in states {
        let offset = rng.gen_range(0..stride as u32);
        for t in (offset..n_vocab + 2).step_by(stride) {
            let (x, y) = (a.advance(s, t), b.advance(s, t));
            assert_eq!(x.is_ok(), y.is_ok(), "state {s:?} token {t}");
            match (x, y) {
                (Ok(x), Ok(y)) => assert_eq!(x, y, "state {s:?} token {t}"),
                (Err(x), Err(y)) => assert_eq!(x.kind(), y.kind(), "state {s:?} token {t}"),
                _ => unreachable!(),
            }
        }
    }
}

/// A byte-level vocabulary (every byte a token, some longer ones, an EOG): no assets needed.
fn byte_vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in ["ab", "abc", "bc", "cab", "ca", "tool", "oo", "ol", "_n", "na", "am", "me", "name", "-p", "plug"] {
        tokens.push(t.as_bytes().to_vec());
    }
    tokens.push(b"</s>".to_vec());
    let mut kinds = vec![TokenKind::Normal; tokens.len()];
    let eog = tokens.len() as u32 - 1;
    kinds[eog as usize] = TokenKind::Control;
    Arc::new(Vocabulary::new(tokens, kinds, &[eog], None).unwrap())
}

/// Names with long shared prefixes (unary runs) and tails, as package names have.
fn prefixed_set(seed: u64, n: usize) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let heads = ["eslint-plugin-", "@types/", "gatsby-source-", "tool_name_", "abcabcab", "cab-"];
    (0..n)
        .map(|_| {
            let head = heads[rng.gen_range(0..heads.len())];
            let tail: String = (0..rng.gen_range(0..6)).map(|_| PIECES[rng.gen_range(0..PIECES.len())]).collect();
            format!("{head}{tail}")
        })
        .collect()
}

#[test]
fn derived_rows_answer_as_stored_rows_on_every_vocabulary() {
    let mut derived_somewhere = 0;
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let mut set = random_set(700 + i as u64, 200, 5);
        set.extend(prefixed_set(i as u64, 200));
        let stored = Automaton::compile(v.clone(), &set, &options(false)).unwrap();
        let derived = Automaton::compile(v.clone(), &set, &options(true)).unwrap();
        assert!(derived.allowed_total() <= stored.allowed_total(), "{name}");
        if derived.allowed_total() < stored.allowed_total() {
            derived_somewhere += 1;
        }
        same_steps(&stored, &derived, i as u64, 997);
        // Saved and loaded (eagerly, lazily, from the file), the derived layout answers the same.
        let bytes = derived.to_bytes();
        let version = u32::from_ne_bytes(bytes[8..12].try_into().unwrap());
        let byte_rows = derived.memory_parts().iter().any(|&(n, b)| n == "byte_rows" && b > 0);
        // (The layout with derived rows also front-codes its members: version 7.) Written as version 8 (2 KiB
        // checksum blocks) when version 4 or later is needed, or the body is larger than one 64 KiB block.
        let needed = if byte_rows || derived.allowed_total() < stored.allowed_total() { 7 } else { 2 };
        let body = u64::from_ne_bytes(bytes[56..64].try_into().unwrap()) - 64;
        // (And its ascending arrays in blocks where that is smaller: version 9, section 40 their shapes.)
        let blocked = section(&bytes, 40).is_some();
        assert!(!blocked || needed == 7, "{name}: arrays in blocks only in the large layout");
        let want = if blocked {
            9
        } else if needed >= 4 || body > 1 << 16 {
            8
        } else {
            needed
        };
        assert_eq!(version, want, "{name}: derived rows need format version 7 (front-coded members), stored rows 2");
        same_behaviour(&stored, &Automaton::from_bytes(v.clone(), &bytes).unwrap(), i as u64);
        let lazy = Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap();
        assert!(lazy.is_lazy());
        same_steps(&stored, &lazy, i as u64, 4999);
        let dir = tempdir(&format!("derived-{name}"));
        derived.save(dir.join("a.trie")).unwrap();
        same_behaviour(&stored, &Automaton::load_lazy(v.clone(), dir.join("a.trie")).unwrap(), 3);
        // An update of the derived automaton is the compile of the changed list.
        let add = ["eslint-plugin-zz-added", "tool_name_"];
        let remove = [set[1].as_str(), set[250].as_str()];
        let updated = derived.with_changes(&add, &remove, &options(true)).unwrap();
        let mut list: Vec<&str> = set.iter().map(|s| s.as_str()).filter(|s| !remove.contains(s)).collect();
        list.extend(add);
        let recompiled = Automaton::compile(v.clone(), &list, &options(false)).unwrap();
        same_behaviour(&recompiled, &updated, 5);
    }
    assert!(derived_somewhere >= 4, "the byte-level vocabularies derive rows: {derived_somewhere}");
}

#[test]
fn derived_rows_on_a_byte_vocabulary() {
    let v = byte_vocab();
    for seed in 0..6 {
        let mut set = prefixed_set(seed, 60 + 40 * seed as usize);
        set.extend(random_set(seed, 30, 3));
        let stored = Automaton::compile(v.clone(), &set, &options(false)).unwrap();
        let derived = Automaton::compile(v.clone(), &set, &options(true)).unwrap();
        assert!(derived.allowed_total() < stored.allowed_total(), "seed {seed}");
        same_steps(&stored, &derived, seed, 1);
        // The token-trie alignment skips the unary nodes; the Aho-Corasick one walks them and the rows found are
        // dropped afterwards: the same automaton, byte for byte.
        let ac = Automaton::compile(v.clone(), &set, &options(true).alignment(trie::AlignmentMethod::AhoCorasick));
        assert_eq!(ac.unwrap().to_bytes(), derived.to_bytes(), "seed {seed}");
        let lazy = Automaton::from_bytes_lazy(v.clone(), &derived.to_bytes()).unwrap();
        same_steps(&stored, &lazy, seed, 1);
        // The in-place update of the stored layout, its rows then derived: the compile of the changed list.
        let (add, remove) = (["cab-zz", "@types/added"], [set[0].as_str()]);
        let updated = stored.with_changes(&add, &remove, &options(true)).unwrap();
        let mut list: Vec<&str> = set.iter().map(|s| s.as_str()).filter(|s| !remove.contains(s)).collect();
        list.extend(add);
        let want = Automaton::compile(v.clone(), &list, &options(true)).unwrap();
        assert_eq!(updated.to_bytes(), want.to_bytes(), "seed {seed}");
        same_steps(&want, &updated, seed, 1);
    }
    // A vocabulary without a token for every byte keeps every row.
    let mut tokens: Vec<Vec<u8>> = (b'a'..=b'z').map(|b| vec![b]).collect();
    tokens.push(b"</s>".to_vec());
    let mut kinds = vec![TokenKind::Normal; tokens.len()];
    kinds[26] = TokenKind::Control;
    let letters = Arc::new(Vocabulary::new(tokens, kinds, &[26], None).unwrap());
    let set = ["abcdefgh", "abcdefgx", "abcdzzzz", "q"];
    let stored = Automaton::compile(letters.clone(), &set, &options(false)).unwrap();
    let derived = Automaton::compile(letters, &set, &options(true)).unwrap();
    assert_eq!(derived.to_bytes(), stored.to_bytes());
}

/// Branching states keep only their byte children up to a row size: at every limit (none, one token, a few, every
/// row short of a precomputed one) the automaton answers as the one storing every row, on every token of every
/// state, loaded eagerly and lazily; the more rows derived, the fewer transitions stored.
#[test]
fn byte_rows_at_every_limit_answer_as_stored_rows() {
    let v = byte_vocab();
    let mut set = prefixed_set(21, 300);
    set.extend(random_set(21, 60, 3));
    set.extend(["ab", "abc", "abcab", "ca", "cab", "tool", "tools"].map(String::from));
    let stored = Automaton::compile(v.clone(), &set, &options(false)).unwrap();
    let mut totals = Vec::new();
    for max in [0usize, 1, 4, 32, usize::MAX] {
        let a = Automaton::compile(v.clone(), &set, &options(true).byte_rows_max(max)).unwrap();
        totals.push(a.allowed_total());
        same_steps(&stored, &a, max as u64, 1);
        let bytes = a.to_bytes();
        same_steps(&stored, &Automaton::from_bytes(v.clone(), &bytes).unwrap(), 3, 7);
        same_steps(&stored, &Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap(), 4, 1);
    }
    assert!(totals.windows(2).all(|w| w[0] >= w[1]) && totals[0] > totals[4], "{totals:?}");
    // Open templates: no end-of-generation ids where a member ends, in derived rows as in stored ones.
    let t = trie::Template::bare().prefix("<").suffix(">").end(trie::End::Open);
    let stored = Automaton::compile_template(v.clone(), &set, &t, &options(false)).unwrap();
    let a = Automaton::compile_template(v.clone(), &set, &t, &options(true).byte_rows_max(usize::MAX)).unwrap();
    same_steps(&stored, &a, 9, 1);
}

/// The rows derived on use and kept in the row cache answer as stored rows, with the cache off, tight (rows
/// evicted all the time) and at its default budget, on every token of every state, compiled, loaded eagerly and
/// lazily, twice (walked, then from the cache); the cache never holds more than its budget.
#[test]
fn cached_rows_answer_as_stored_rows_at_every_budget() {
    let v = byte_vocab();
    let mut set = prefixed_set(22, 400);
    set.extend(random_set(22, 80, 3));
    let stored = Automaton::compile(v.clone(), &set, &options(false)).unwrap();
    let compiled = Automaton::compile(v.clone(), &set, &options(true).byte_rows_max(usize::MAX)).unwrap();
    let bytes = compiled.to_bytes();
    for budget in [0usize, 24 << 10, compiled.row_cache_budget()] {
        let mut kept = 0;
        let loaded = [
            Automaton::compile(v.clone(), &set, &options(true).byte_rows_max(usize::MAX)).unwrap(),
            Automaton::from_bytes(v.clone(), &bytes).unwrap(),
            Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap(),
        ];
        for mut a in loaded {
            a.set_row_cache_budget(budget);
            assert!(a.row_cache_budget() <= budget);
            for pass in 0..2 {
                same_steps(&stored, &a, pass, 1);
                assert!(a.row_cache_usage() <= a.row_cache_budget(), "budget {budget}: {}", a.row_cache_usage());
            }
            kept = kept.max(a.row_cache_usage());
        }
        assert_eq!(kept > 0, budget > 0, "budget {budget}: rows kept {kept}");
    }
}

/// Masks and allowed lists filled from many threads at once (each state's row walked by several threads, kept,
/// evicted under a tight budget, read from the cache) are the stored rows', and the cache stays within its budget.
#[test]
fn rows_filled_from_many_threads_are_the_stored_rows() {
    let v = gguf_vocab("qwen2");
    let mut set = prefixed_set(23, 600);
    set.extend(random_set(23, 600, 4));
    let stored = Automaton::compile(v.clone(), &set, &options(false)).unwrap();
    let words = stored.mask_words();
    let states: Vec<State> = (0..stored.n_states() as u32).map(State).collect();
    let want: Vec<Vec<u32>> = states
        .iter()
        .map(|&s| {
            let mut row = vec![0u32; words];
            stored.fill_bitmask(s, &mut row).unwrap();
            row
        })
        .collect();
    let bytes = Automaton::compile(v.clone(), &set, &options(true).byte_rows_max(usize::MAX)).unwrap().to_bytes();
    for budget in [16 << 10, 4 << 20] {
        for lazy in [false, true] {
            let mut a = if lazy {
                Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap()
            } else {
                Automaton::from_bytes(v.clone(), &bytes).unwrap()
            };
            a.set_row_cache_budget(budget);
            assert!(a.allowed_total() < stored.allowed_total());
            let a = &a;
            std::thread::scope(|scope| {
                for t in 0..8u64 {
                    let (states, want, stored) = (&states, &want, &stored);
                    scope.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t);
                        let mut row = vec![0u32; words];
                        let mut batch = vec![0u32; words * 3];
                        for _ in 0..3 {
                            for _ in 0..states.len() {
                                let i = rng.gen_range(0..states.len());
                                let s = states[i];
                                a.fill_bitmask(s, &mut row).unwrap();
                                assert_eq!(row, want[i], "state {s:?} (thread {t})");
                                assert_eq!(a.allowed(s), stored.allowed(s), "state {s:?}");
                                let j = rng.gen_range(0..states.len());
                                a.fill_bitmask_batch(&[s, states[j], s], &mut batch, words).unwrap();
                                assert!(batch[..words] == want[i] && batch[words..2 * words] == want[j]);
                                assert!(a.row_cache_usage() <= a.row_cache_budget());
                            }
                        }
                    });
                }
            });
            assert!(a.row_cache_usage() > 0 && a.row_cache_usage() <= budget, "{}", a.row_cache_usage());
        }
    }
}

/// Section `tag` of a saved file: (byte offset, element count).
fn section(file: &[u8], tag: u32) -> Option<(usize, usize)> {
    entry(file, tag).map(|e| {
        let at = u64::from_ne_bytes(file[e + 8..e + 16].try_into().unwrap()) as usize;
        let count = u64::from_ne_bytes(file[e + 16..e + 24].try_into().unwrap()) as usize;
        (at, count)
    })
}

/// The byte offset of section `tag`'s entry in the section table (tag, element size, offset, count).
fn entry(file: &[u8], tag: u32) -> Option<usize> {
    let n = u32::from_ne_bytes(file[20..24].try_into().unwrap()) as usize;
    (0..n).map(|i| 64 + 24 * i).find(|&e| u32::from_ne_bytes(file[e..e + 4].try_into().unwrap()) == tag)
}

/// The element size of section `tag` (the width of a packed array).
fn element_size(file: &[u8], tag: u32) -> usize {
    let e = entry(file, tag).unwrap();
    u32::from_ne_bytes(file[e + 4..e + 8].try_into().unwrap()) as usize
}

/// Recomputes the block hashes and the checksum of a (version 2 or later) file as `src/format.rs` does.
fn reseal(file: &mut Vec<u8>) {
    use xxhash_rust::xxh3::{xxh3_64, Xxh3};
    let version = u32::from_ne_bytes(file[8..12].try_into().unwrap());
    let block = if version >= 8 { 1 << 11 } else { 1 << 16 };
    let body_end = u64::from_ne_bytes(file[56..64].try_into().unwrap()) as usize;
    let blocks: Vec<u8> = file[64..body_end].chunks(block).flat_map(|c| xxh3_64(c).to_ne_bytes()).collect();
    file.truncate(body_end);
    file.extend_from_slice(&blocks);
    let len = file.len() as u64;
    file[24..32].copy_from_slice(&len.to_ne_bytes());
    let mut head = file[..64].to_vec();
    head[32..40].fill(0);
    let mut h = Xxh3::new();
    h.update(&head);
    h.update(&blocks);
    file[32..40].copy_from_slice(&h.digest().to_ne_bytes());
}

/// Every query on every state (and a few past the end) of a loaded automaton: answers or errors, never a panic.
fn exercise(a: &Automaton) {
    let words = a.mask_words();
    let mut row = vec![0u32; words];
    let n = a.n_states().min(3000) as u32;
    for s in (0..n).map(State).chain([State(n), State(a.n_states() as u32), State::FINISHED]) {
        let allowed: Vec<u32> = a.allowed(s).to_vec();
        let _ = a.fill_bitmask(s, &mut row);
        let _ = (a.is_accepting(s), a.depth(s), a.forced(s), a.draft(s, 8), a.member_at(s), a.forced_bytes(s));
        for t in allowed.iter().copied().chain([0, 1, 97, 255, 256, a.vocab().n_vocab() as u32]) {
            let _ = a.advance(s, t);
        }
    }
    let _ = a.possible_members(a.start());
    for r in 0..a.n_members() + 1 {
        let _ = (a.member_bytes(r), a.member_id(r));
    }
}

/// Crafted derived files: spoiled derived bits, unary bytes, offsets, tokens, targets and the packed arrays
/// (depths, single members, chains, member offsets), with valid block hashes and checksum. Loading refuses them
/// (`MalformedFile`) or gives an automaton whose every query answers.
#[test]
fn crafted_derived_files_are_errors_never_crashes() {
    const OFFSETS: u32 = 2;
    const TOKENS: u32 = 3;
    const TARGETS: u32 = 4;
    const ACCEPTING: u32 = 5;
    const DEPTH: u32 = 6;
    const SINGLE: u32 = 7;
    const CHAIN_BASE: u32 = 10;
    const CHAIN_MEMBER: u32 = 11;
    const CHAIN_DEPTH: u32 = 12;
    const MEMBER_OFFSETS: u32 = 13;
    const MEMBER_BYTES: u32 = 14;
    const DERIVED: u32 = 24;
    const UNARY_BYTE: u32 = 25;
    const BYTE_ROWS: u32 = 26;
    const MEMBER_LCP: u32 = 27;
    // The ascending arrays in blocks (format version 9): the shapes, then bases and values of the row offsets,
    // chain bases, chain members and member offsets.
    const BLOCKED: [u32; 9] = [40, 41, 42, 43, 44, 45, 46, 47, 48];
    const TAGS: [u32; 15] = [
        DERIVED,
        UNARY_BYTE,
        BYTE_ROWS,
        OFFSETS,
        TOKENS,
        TARGETS,
        ACCEPTING,
        DEPTH,
        SINGLE,
        CHAIN_BASE,
        CHAIN_MEMBER,
        CHAIN_DEPTH,
        MEMBER_OFFSETS,
        MEMBER_BYTES,
        MEMBER_LCP,
    ];
    let v = byte_vocab();
    let set = prefixed_set(9, 120);
    let a = Automaton::compile(v.clone(), &set, &options(true)).unwrap();
    let good = a.to_bytes();
    // The sections of this file (the plain ones of the arrays in blocks absent).
    let tags: Vec<u32> = TAGS.iter().chain(&BLOCKED).copied().filter(|&t| section(&good, t).is_some()).collect();
    assert!(section(&good, 40).is_some(), "arrays in blocks");
    let (at, count) = section(&good, DERIVED).expect("a derived section");
    assert!(count >= 1 && good[at..at + 8 * count].iter().any(|&b| b != 0));
    let (br_at, br_count) = section(&good, BYTE_ROWS).expect("a byte-rows section");
    assert!(br_count == count && good[br_at..br_at + 8 * br_count].iter().any(|&b| b != 0));
    let mut rng = SmallRng::seed_from_u64(38);
    let (mut refused, mut loaded) = (0, 0);
    // Every state a byte row (bits all ones, over unary and stored rows alike): the walks read whatever rows are
    // stored; every query answers, eagerly and lazily.
    let mut all_rows = good.clone();
    all_rows[br_at..br_at + 8 * br_count].fill(0xff);
    reseal(&mut all_rows);
    match Automaton::from_bytes(v.clone(), &all_rows) {
        Ok(x) => exercise(&x),
        Err(e) => assert_eq!(e.kind(), ErrorKind::MalformedFile, "{e}"),
    }
    exercise(&Automaton::from_bytes_lazy(v.clone(), &all_rows).unwrap());
    // The packed widths of this set: one byte a depth and a single member (under 255 members), two a member
    // offset (under 65,535 bytes of members), one a token id (the rows kept hold the byte children of ASCII names,
    // ids under 255); a target as the states need.
    assert_eq!((element_size(&good, DEPTH), element_size(&good, SINGLE)), (1, 1));
    assert_eq!((element_size(&good, TOKENS), element_size(&good, 48)), (1, 1));
    assert!(a.n_states() < 65_535, "{}", a.n_states());
    assert_eq!(element_size(&good, TARGETS), if a.n_states() < 255 { 1 } else { 2 });
    for round in 0..1000 {
        let mut bad = good.clone();
        let tag = tags[round % tags.len()];
        let (at, count) = section(&bad, tag).unwrap();
        let len = count * element_size(&bad, tag);
        if len == 0 {
            continue;
        }
        for _ in 0..rng.gen_range(1..4) {
            let i = at + rng.gen_range(0..len);
            match rng.gen_range(0..3) {
                0 => bad[i] ^= 1 << rng.gen_range(0..8),
                1 => bad[i] = rng.gen(),
                _ => bad[i] = 0xff,
            }
        }
        reseal(&mut bad);
        match Automaton::from_bytes(v.clone(), &bad) {
            Ok(x) => {
                loaded += 1;
                exercise(&x);
            }
            Err(e) => {
                refused += 1;
                assert_eq!(e.kind(), ErrorKind::MalformedFile, "round {round}: {e}");
            }
        }
        if let Ok(x) = Automaton::from_bytes_lazy(v.clone(), &bad) {
            exercise(&x);
        }
    }
    assert!(refused > 100 && loaded > 20, "refused {refused}, loaded {loaded}");
    // Another element size for a packed array: refused (no such width, or wider than the type, or the array past
    // its place), or read at that width (the bytes then mean other numbers) and answering without a panic.
    let packed =
        [TOKENS, TARGETS, DEPTH, SINGLE, CHAIN_DEPTH, MEMBER_LCP, OFFSETS, CHAIN_BASE, CHAIN_MEMBER, MEMBER_OFFSETS];
    for tag in packed.into_iter().chain(41..=48).filter(|&t| section(&good, t).is_some()) {
        for size in [1u32, 2, 3, 4, 5, 8, 0] {
            let mut bad = good.clone();
            let e = entry(&bad, tag).unwrap();
            bad[e + 4..e + 8].copy_from_slice(&size.to_ne_bytes());
            reseal(&mut bad);
            match Automaton::from_bytes(v.clone(), &bad) {
                Ok(x) => exercise(&x),
                Err(e) => assert_eq!(e.kind(), ErrorKind::MalformedFile, "section {tag} at {size} bytes: {e}"),
            }
            if let Ok(x) = Automaton::from_bytes_lazy(v.clone(), &bad) {
                exercise(&x);
            }
            // (The bases, 41, 43, 45 and 47, are of `u64`: 8 bytes is a width.)
            if size == 5 || size == 0 || (size == 8 && (tag < 40 && tag != MEMBER_OFFSETS || tag > 40 && tag % 2 == 0))
            {
                let e = Automaton::from_bytes(v.clone(), &bad).expect_err("no such width");
                // (or its elements would reach past the body)
                assert!(e.message().contains(&format!("section {tag} ")), "{e}");
            }
        }
    }
    // Every state derived (bits all ones): refused eagerly (states with rows, the last state); lazily, those
    // states are malformed and the others answer.
    let mut all = good.clone();
    all[at..at + 8 * count].fill(0xff);
    reseal(&mut all);
    let e = Automaton::from_bytes(v.clone(), &all).expect_err("refused");
    assert!(e.message().contains("derived state"), "{e}");
    let lazy = Automaton::from_bytes_lazy(v.clone(), &all).unwrap();
    assert_eq!(lazy.advance(lazy.start(), 0).unwrap_err().kind(), ErrorKind::MalformedFile);
    exercise(&lazy);
    // Shared prefix lengths spoiled one at a time (each member's, at one byte): longer than the member before, or
    // reaching into a chain, or a restart point's not 0, is refused eagerly; lazily, the states reading that member
    // are malformed or answer (the whole check refuses the member lookups); never a panic.
    let (lcp_at, lcp_count) = section(&good, MEMBER_LCP).expect("front-coded members");
    assert_eq!((element_size(&good, MEMBER_LCP), lcp_count), (1, a.n_members()));
    let mut refused_lcp = 0;
    for m in 0..lcp_count.min(40) {
        for value in [good[lcp_at + m].wrapping_add(1), 0xfe] {
            let mut bad = good.clone();
            bad[lcp_at + m] = value;
            reseal(&mut bad);
            match Automaton::from_bytes(v.clone(), &bad) {
                Ok(x) => exercise(&x),
                Err(e) => {
                    refused_lcp += 1;
                    assert_eq!(e.kind(), ErrorKind::MalformedFile, "member {m}: {e}");
                }
            }
            let lazy = Automaton::from_bytes_lazy(v.clone(), &bad).unwrap();
            exercise(&lazy);
        }
    }
    assert!(refused_lcp >= 60, "{refused_lcp} of 80 spoiled lengths refused");
    // Front-coded members in a file that says version 6, derived rows in one that says version 3, byte rows in one
    // that says version 5, packed arrays in one that says version 4: refused by their version.
    let mut old = good.clone();
    assert_eq!(u32::from_ne_bytes(old[8..12].try_into().unwrap()), 9, "arrays in blocks: version 9");
    // Arrays in blocks in a file that says version 8: refused by its version.
    old[8..12].copy_from_slice(&8u32.to_ne_bytes());
    reseal(&mut old);
    for lazy in [false, true] {
        let r = if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
        let e = r.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("section 40) in a format version 8 file (they need version 9)"), "{e}");
    }
    old[8..12].copy_from_slice(&6u32.to_ne_bytes());
    reseal(&mut old);
    for lazy in [false, true] {
        let r = if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
        let e = r.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("section 27) in a format version 6 file (they need version 7)"), "{e}");
    }
    let mut old = good.clone();
    old[8..12].copy_from_slice(&3u32.to_ne_bytes());
    reseal(&mut old);
    let e = Automaton::from_bytes(v.clone(), &old).expect_err("refused");
    assert!(e.message().contains("need version 4"), "{e}");
    old[8..12].copy_from_slice(&5u32.to_ne_bytes());
    reseal(&mut old);
    for lazy in [false, true] {
        let r = if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
        let e = r.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("section 26) in a format version 5 file (they need version 6)"), "{e}");
    }
    let no_byte_rows = Automaton::compile(v.clone(), &set, &options(true).byte_rows_max(0)).unwrap();
    let mut old = no_byte_rows.to_bytes();
    assert!(section(&old, BYTE_ROWS).is_none());
    assert_eq!(u32::from_ne_bytes(old[8..12].try_into().unwrap()), 9, "arrays in blocks: version 9");
    old[8..12].copy_from_slice(&4u32.to_ne_bytes());
    reseal(&mut old);
    for lazy in [false, true] {
        let r = if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
        let e = r.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        // (The front-coded members, read first, are refused before the packed widths.)
        assert!(e.message().contains("in a format version 4 file (they need version 7)"), "{e}");
    }
}

/// Templated automata (closed, and open: crossings out of the last segment) answer alike in both layouts, crossings
/// included (`path` of a templated automaton walks down derived states).
#[test]
fn templated_derived_rows_answer_as_stored_rows() {
    let v = byte_vocab();
    let names = prefixed_set(4, 150);
    for end in [trie::End::Eog, trie::End::Open] {
        let t = trie::Template::bare().prefix("<tool>").suffix("</tool>").end(end);
        let stored = Automaton::compile_template(v.clone(), &names, &t, &options(false)).unwrap();
        let derived = Automaton::compile_template(v.clone(), &names, &t, &options(true)).unwrap();
        assert!(derived.allowed_total() < stored.allowed_total());
        same_steps(&stored, &derived, 11, 1);
        let lazy = Automaton::from_bytes_lazy(v.clone(), &derived.to_bytes()).unwrap();
        for s in (0..stored.n_states() as u32).map(State) {
            assert_eq!(stored.crossing(s), derived.crossing(s), "state {s:?}");
            assert_eq!(stored.crossing(s), lazy.crossing(s), "state {s:?}");
        }
    }
}
