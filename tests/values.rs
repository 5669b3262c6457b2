//! Members that carry values (`compile_with_values`, `compile_template_with_values`, `with_changes_and_values`):
//! a member's value travels with it through updates and files, on real vocabularies, for random maps and random
//! sequences of additions, removals and re-additions with new values, checked against a fresh compile of the
//! resulting map.
mod common;

use common::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use trie::{Automaton, CompileOptions, End, ErrorKind, Render, State, Template, Vocabulary};

/// The templates: none (a bare compile), raw members in quotes ending with end-of-generation, JSON strings with an
/// open end (the tool-call hand-over).
fn templates() -> Vec<(&'static str, Option<Template>)> {
    vec![
        ("none", None),
        ("raw_quoted", Some(Template::bare().prefix("{\"name\": \"").suffix("\", \"arguments\": "))),
        (
            "json_open",
            Some(
                Template::bare()
                    .prefix("{\"name\": ")
                    .suffix(", \"arguments\": ")
                    .render(Render::JsonString)
                    .end(End::Open),
            ),
        ),
    ]
}

fn compile(v: &Arc<Vocabulary>, t: &Option<Template>, keys: &[Vec<u8>], values: &[u64]) -> trie::Result<Automaton> {
    let o = CompileOptions::new().drop_unreachable(true);
    match t {
        None => Automaton::compile_with_values(v.clone(), keys, values, &o),
        Some(t) => Automaton::compile_template_with_values(v.clone(), keys, values, t, &o),
    }
}

/// The map as a list for a compile: keys and values.
fn list_of(map: &BTreeMap<Vec<u8>, u64>) -> (Vec<Vec<u8>>, Vec<u64>) {
    (map.keys().cloned().collect(), map.values().copied().collect())
}

/// The map after an update: each added key takes the value of its first copy in `add` (also when it was a key),
/// removed keys that are not added go.
fn apply(map: &mut BTreeMap<Vec<u8>, u64>, add: &[(Vec<u8>, u64)], remove: &[Vec<u8>]) {
    let added: BTreeSet<&Vec<u8>> = add.iter().map(|(k, _)| k).collect();
    for r in remove.iter().filter(|r| !added.contains(r)) {
        map.remove(r);
    }
    let mut seen = BTreeSet::new();
    for (k, v) in add {
        if seen.insert(k) {
            map.insert(k.clone(), *v);
        }
    }
}

/// `got` holds the same members as `want` with the same values: by rank, in every state (`member_value`,
/// `possible_values` next to `possible_members`), and the member at each accepting state.
fn same_map(got: &Automaton, want: &Automaton, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(got.has_values(), "{}: no values", what);
    prop_assert_eq!(got.n_members(), want.n_members(), "{}", what);
    prop_assert_eq!(got.n_states(), want.n_states(), "{}", what);
    let mut r = 0;
    while let Some(m) = want.member_bytes(r) {
        prop_assert_eq!(got.member_bytes(r), Some(m.clone()), "{}: rank {}", what, r);
        prop_assert_eq!(
            got.rank_value(r),
            want.rank_value(r),
            "{}: rank {} {:?}",
            what,
            r,
            String::from_utf8_lossy(&m)
        );
        r += 1;
    }
    prop_assert_eq!(got.member_bytes(r), None);
    prop_assert_eq!(got.rank_value(r), None);
    for s in (0..got.n_states() as u32).map(State).chain([State::FINISHED]) {
        prop_assert_eq!(got.member_value(s), want.member_value(s), "{}: state {}", what, s.0);
        let values = got.possible_values(s);
        prop_assert_eq!(&values, &want.possible_values(s), "{}: state {}", what, s.0);
        prop_assert_eq!(values.len(), got.possible_members(s).len(), "{}: state {}", what, s.0);
        prop_assert_eq!(got.member_value(s).is_some(), got.member_at(s).is_some(), "{}: state {}", what, s.0);
    }
    Ok(())
}

/// `a` saved and loaded three ways (bytes, a file eagerly, a file lazily) holds the same map as `want`.
fn same_when_loaded(a: &Automaton, want: &Automaton, dir: &std::path::Path, what: &str) -> Result<(), TestCaseError> {
    let bytes = a.to_bytes();
    prop_assert_eq!(
        u32::from_ne_bytes(bytes[8..12].try_into().unwrap()),
        3,
        "{}: a file with values is version 3",
        what
    );
    let v = a.vocab().clone();
    let path = dir.join("map.trie");
    a.save(&path).unwrap();
    same_map(&Automaton::from_bytes(v.clone(), &bytes).unwrap(), want, &format!("{what}, from bytes"))?;
    same_map(&Automaton::load(v.clone(), &path).unwrap(), want, &format!("{what}, loaded"))?;
    same_map(&Automaton::load_lazy(v.clone(), &path).unwrap(), want, &format!("{what}, loaded lazily"))?;
    Ok(())
}

/// An update: the added strings with their values, and the strings removed.
type Update = (Vec<(Vec<u8>, u64)>, Vec<Vec<u8>>);

/// A random update of `map`: new keys, members re-added with new values, duplicates (first copy wins), and
/// removals of members and non-members.
fn random_update(rng: &mut SmallRng, map: &BTreeMap<Vec<u8>, u64>, fresh: &[String]) -> Update {
    let keys: Vec<&Vec<u8>> = map.keys().collect();
    let mut add: Vec<(Vec<u8>, u64)> = Vec::new();
    for _ in 0..rng.gen_range(0..6) {
        let key = match rng.gen_range(0..4) {
            0 if !keys.is_empty() => keys[rng.gen_range(0..keys.len())].clone(),
            1 if !add.is_empty() => add[rng.gen_range(0..add.len())].0.clone(),
            _ => fresh[rng.gen_range(0..fresh.len())].as_bytes().to_vec(),
        };
        add.push((key, rng.gen()));
    }
    let mut remove: Vec<Vec<u8>> = Vec::new();
    for _ in 0..rng.gen_range(0..5) {
        remove.push(match rng.gen_range(0..3) {
            0 => fresh[rng.gen_range(0..fresh.len())].as_bytes().to_vec(),
            _ if !keys.is_empty() => keys[rng.gen_range(0..keys.len())].clone(),
            _ => Vec::new(),
        });
    }
    (add, remove)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Property: random maps (values random, keys with duplicates and prefixes) compiled with and without a
    /// template, on a byte-level vocabulary (the in-place update) and SentencePiece ones (full compiles, dropped
    /// strings), then three random updates in a row (add, remove, re-add with a new value): after each, every
    /// member's value equals a fresh compile of the resulting map, also saved and loaded (bytes, file, lazily);
    /// the updated automaton is byte for byte the compile with values of `add ++ (members − remove)`.
    #[test]
    fn values_travel_with_their_members(seed in any::<u64>(), k in 1usize..80) {
        let keys = random_set(seed, k, 4);
        let fresh = random_set(seed ^ 0x7a11, 30, 3);
        let mut rng = SmallRng::seed_from_u64(seed);
        let dir = tempdir(&format!("values-{seed}"));
        for name in ["qwen2", "llama-spm", "phi-3"] {
            let vocab = gguf_vocab(name);
            for (tname, t) in templates() {
                let what = format!("{name}/{tname}");
                let values: Vec<u64> = keys.iter().map(|_| rng.gen_range(0..1000)).collect();
                let bytes: Vec<Vec<u8>> = keys.iter().map(|s| s.as_bytes().to_vec()).collect();
                let Ok(mut a) = compile(&vocab, &t, &bytes, &values) else { continue };
                let mut map = BTreeMap::new();
                apply(&mut map, &bytes.iter().cloned().zip(values.iter().copied()).collect::<Vec<_>>(), &[]);
                let (ks, vs) = list_of(&map);
                same_map(&a, &compile(&vocab, &t, &ks, &vs).unwrap(), &what)?;
                for step in 0..3 {
                    let what = format!("{what}, update {step}");
                    let (add, remove) = random_update(&mut rng, &map, &fresh);
                    let add_keys: Vec<Vec<u8>> = add.iter().map(|(k, _)| k.clone()).collect();
                    let add_values: Vec<u64> = add.iter().map(|(_, v)| *v).collect();
                    let got = a.with_changes_and_values(&add_keys, &add_values, &remove, &CompileOptions::new().drop_unreachable(true));
                    apply(&mut map, &add, &remove);
                    let (ks, vs) = list_of(&map);
                    let want = compile(&vocab, &t, &ks, &vs);
                    match (got, want) {
                        (Ok(g), Ok(w)) => {
                            same_map(&g, &w, &what)?;
                            same_when_loaded(&g, &w, &dir, &what)?;
                            a = g;
                        }
                        (Err(g), Err(w)) => {
                            prop_assert_eq!(g.kind(), w.kind(), "{}: {} / {}", what, g, w);
                            break;
                        }
                        (g, w) => return Err(TestCaseError::fail(format!("{what}: {:?} vs {:?}", g.err(), w.err()))),
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Property: the update is byte for byte the compile with values of `add ++ (members − remove)` with
    /// `add_values ++ (their values)` (the documented list), with and without a template.
    #[test]
    fn valued_updates_equal_the_compile_of_their_list(seed in any::<u64>(), k in 1usize..120) {
        let keys: Vec<Vec<u8>> = random_set(seed, k, 4).into_iter().map(String::into_bytes).collect();
        let fresh = random_set(seed ^ 0x5eed, 30, 3);
        let mut rng = SmallRng::seed_from_u64(seed);
        let vocab = gguf_vocab("qwen2");
        for (tname, t) in templates() {
            let values: Vec<u64> = keys.iter().map(|_| rng.gen()).collect();
            let Ok(a) = compile(&vocab, &t, &keys, &values) else { continue };
            let mut map = BTreeMap::new();
            apply(&mut map, &keys.iter().cloned().zip(values.iter().copied()).collect::<Vec<_>>(), &[]);
            let (add, remove) = random_update(&mut rng, &map, &fresh);
            let add_keys: Vec<Vec<u8>> = add.iter().map(|(k, _)| k.clone()).collect();
            let add_values: Vec<u64> = add.iter().map(|(_, v)| *v).collect();
            let Ok(got) = a.with_changes_and_values(&add_keys, &add_values, &remove, &CompileOptions::new()) else { continue };
            // The members in rank order (segments' byte order), less the removed ones, after the added list.
            let gone: BTreeSet<&Vec<u8>> = remove.iter().filter(|r| !add_keys.contains(r)).collect();
            let mut rest: Vec<(Vec<u8>, Vec<u8>, u64)> = map
                .iter()
                .filter(|(k, _)| !gone.contains(k))
                .map(|(k, v)| (t.as_ref().map_or(k.clone(), |t| t.segment(k).unwrap()), k.clone(), *v))
                .collect();
            rest.sort();
            let mut list = add_keys.clone();
            let mut list_values = add_values.clone();
            list.extend(rest.iter().map(|r| r.1.clone()));
            list_values.extend(rest.iter().map(|r| r.2));
            let want = compile(&vocab, &t, &list, &list_values).unwrap();
            prop_assert!(got.to_bytes() == want.to_bytes(), "{}: differs from the compile of its list", tname);
        }
    }
}

/// The value of a duplicated string is its first copy's, at compile and in an update (as member ids name the
/// first copy); re-adding a member changes its value; the other members keep theirs.
#[test]
fn first_copy_wins_and_readding_replaces() {
    let v = gguf_vocab("qwen2");
    for (tname, t) in templates() {
        let a = compile(&v, &t, &[b"b".to_vec(), b"a".to_vec(), b"b".to_vec()], &[1, 2, 3]).unwrap();
        let value = |a: &Automaton, key: &str| {
            (0..a.n_members())
                .find(|&r| {
                    let m = a.member_bytes(r).unwrap();
                    m == key.as_bytes() || t.as_ref().is_some_and(|t| t.segment(key.as_bytes()).unwrap() == *m)
                })
                .and_then(|r| a.rank_value(r))
        };
        assert_eq!((value(&a, "a"), value(&a, "b")), (Some(2), Some(1)), "{tname}");
        let b = a
            .with_changes_and_values(&["b", "c", "b", "c"], &[10, 20, 30, 40], &["a"], &CompileOptions::new())
            .unwrap();
        assert_eq!((value(&b, "a"), value(&b, "b"), value(&b, "c")), (None, Some(10), Some(20)), "{tname}");
        let c = b.with_changes_and_values(&["a"], &[5], &[] as &[&str], &CompileOptions::new()).unwrap();
        assert_eq!((value(&c, "a"), value(&c, "b"), value(&c, "c")), (Some(5), Some(10), Some(20)), "{tname}");
    }
}

/// Values and their absence do not mix: the wrong number of values, an update without values of a valued
/// automaton and with values of an unvalued one are refused with a message naming what to do; automata
/// compiled without values answer `None` and store nothing more.
#[test]
fn values_are_all_or_nothing() {
    let v = gguf_vocab("qwen2");
    let o = CompileOptions::new();
    let e = Automaton::compile_with_values(v.clone(), &["a", "b"], &[1], &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("1 values for 2 strings"), "{e}");
    let t = Template::bare().prefix("<").suffix(">");
    let e = Automaton::compile_template_with_values(v.clone(), &["a"], &[1, 2], &t, &o).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message().contains("2 values for 1 members"), "{e}");
    let valued = Automaton::compile_with_values(v.clone(), &["a", "b"], &[1, 2], &o).unwrap();
    let e = valued.with_changes(&["c"], &[] as &[&str], &o).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message().contains("with_changes_and_values"), "{e}");
    let e = valued.with_changes_and_values(&["c", "d"], &[3], &[] as &[&str], &o).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message().contains("1 values for 2 added strings"), "{e}");
    let plain = Automaton::compile(v.clone(), &["a", "b"], &o).unwrap();
    let e = plain.with_changes_and_values(&["c"], &[3], &[] as &[&str], &o).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message().contains("compiled without values"), "{e}");
    assert!(!plain.has_values() && valued.has_values());
    assert_eq!(plain.rank_value(0), None);
    assert!(plain.possible_values(plain.start()).is_empty());
    assert_eq!(valued.possible_values(valued.start()), [1, 2]);
    assert_eq!(valued.memory_usage(), plain.memory_usage() + 2 * 8, "the values, one u64 per member");
    // A file without values is still version 2 (older libtries read it), one with values version 3.
    assert_eq!(u32::from_ne_bytes(plain.to_bytes()[8..12].try_into().unwrap()), 2);
    assert_eq!(u32::from_ne_bytes(valued.to_bytes()[8..12].try_into().unwrap()), 3);
}
