//! Saved vocabularies and automata (`save` / `load`, `to_bytes` / `from_bytes`): a loaded automaton behaves
//! exactly as the compiled one on real vocabularies; a file for another vocabulary, a damaged or a truncated file
//! is an error, never a crash.
mod common;

use common::*;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use trie::{Automaton, CompileOptions, ErrorKind, State, TokenKind, Vocabulary};

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
        // Lazily: the same answers, checked on first use; saved as loaded.
        let l = Automaton::load_lazy(v.clone(), &path).unwrap();
        assert!(l.is_lazy() && l.is_mapped());
        same_behaviour(&a, &l, i as u64);
        assert_eq!(a.to_bytes(), l.to_bytes(), "{name}: a lazily loaded automaton saves the file it was");
        let l2 = dir.join(format!("{name}.lazy.trie"));
        l.save(&l2).unwrap();
        assert_eq!(std::fs::read(&l2).unwrap(), a.to_bytes());
        same_behaviour(&a, &Automaton::from_bytes_lazy(v.clone(), &a.to_bytes()).unwrap(), i as u64);
        // Updated after a lazy load: the same automaton as the update of the compiled one.
        let add = ["zz-added"];
        let remove = [set[0].as_str()];
        let opts = CompileOptions::new().drop_unreachable(true);
        assert_eq!(
            l.with_changes(&add, &remove, &opts).unwrap().to_bytes(),
            a.with_changes(&add, &remove, &opts).unwrap().to_bytes(),
            "{name}"
        );
    }
}

/// Automata whose members carry values (bare and templated, on every vocabulary): compiled, loaded, loaded
/// lazily and from bytes answer alike, values included; the file is format version 3, and a lazily loaded one
/// updates with values as the compiled one does.
#[test]
fn automata_with_values_load_and_behave_the_same() {
    let dir = tempdir("values");
    let template = trie::Template::bare().prefix("<tool>").suffix("</tool>");
    for (i, &name) in GGUF_VOCABS.iter().enumerate() {
        let v = gguf_vocab(name);
        let set = random_set(700 + i as u64, 200, 4);
        let values: Vec<u64> = (0..set.len() as u64).map(|j| j.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let opts = CompileOptions::new().drop_unreachable(true);
        let bare = Automaton::compile_with_values(v.clone(), &set, &values, &opts).unwrap();
        let templated = Automaton::compile_template_with_values(v.clone(), &set, &values, &template, &opts).unwrap();
        for (what, a) in [("bare", bare), ("templated", templated)] {
            assert!(a.has_values());
            let bytes = a.to_bytes();
            assert_eq!(u32::from_ne_bytes(bytes[8..12].try_into().unwrap()), 3, "{name} {what}");
            let path = dir.join(format!("{name}-{what}.trie"));
            a.save(&path).unwrap();
            same_behaviour(&a, &Automaton::load(v.clone(), &path).unwrap(), i as u64);
            same_behaviour(&a, &Automaton::from_bytes(v.clone(), &bytes).unwrap(), i as u64);
            let l = Automaton::load_lazy(v.clone(), &path).unwrap();
            same_behaviour(&a, &l, i as u64);
            assert_eq!(l.to_bytes(), bytes, "{name} {what}");
            let (add, add_values, remove) = (["zz-added", set[1].as_str()], [7u64, 8], [set[0].as_str()]);
            assert_eq!(
                l.with_changes_and_values(&add, &add_values, &remove, &opts).unwrap().to_bytes(),
                a.with_changes_and_values(&add, &add_values, &remove, &opts).unwrap().to_bytes(),
                "{name} {what}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A values section is refused where it cannot be right: in a file of format version 2 (a libtrie that writes
/// version 2 never wrote one), and with one value too few (eagerly, and lazily at load).
#[test]
fn values_sections_are_checked() {
    const VALUES: u32 = 19;
    let v = byte_vocab();
    let a = Automaton::compile_with_values(v.clone(), &["aa", "bb", "cc"], &[1, 2, 3], &CompileOptions::new()).unwrap();
    let good = a.to_bytes();
    let (at, count) = section(&good, VALUES);
    assert_eq!(count, 3);
    assert_eq!(&good[at..at + 24], bytemuck_u64s(&[1, 2, 3]), "the values by rank");
    let mut old = good.clone();
    old[8..12].copy_from_slice(&2u32.to_ne_bytes());
    fix_checksum(&mut old);
    for lazy in [false, true] {
        let r = if lazy { Automaton::from_bytes_lazy(v.clone(), &old) } else { Automaton::from_bytes(v.clone(), &old) };
        let e = r.expect_err("values in a version 2 file");
        assert_eq!(e.kind(), ErrorKind::MalformedFile);
        assert!(e.message().contains("member values in a format version 2 file"), "{e}");
    }
    // One value fewer: the section's count says 2.
    let mut short = good.clone();
    let n = u32::from_ne_bytes(short[20..24].try_into().unwrap()) as usize;
    let e = (0..n).map(|i| 64 + 24 * i).find(|&e| u32::from_ne_bytes(short[e..e + 4].try_into().unwrap()) == VALUES);
    let e = e.unwrap();
    short[e + 16..e + 24].copy_from_slice(&2u64.to_ne_bytes());
    fix_checksum(&mut short);
    for lazy in [false, true] {
        let r =
            if lazy { Automaton::from_bytes_lazy(v.clone(), &short) } else { Automaton::from_bytes(v.clone(), &short) };
        let e = r.expect_err("two values for three members");
        assert!(e.message().contains("2 member values for 3 members"), "{e}");
    }
    // Without values: version 2, no values section, byte for byte the file an older libtrie wrote.
    let plain = Automaton::compile(v.clone(), &["aa", "bb", "cc"], &CompileOptions::new()).unwrap().to_bytes();
    assert_eq!(u32::from_ne_bytes(plain[8..12].try_into().unwrap()), 2);
    assert!(plain.len() < good.len());
}

/// The packed layout (automata with derived rows store row offsets, depths, single members, chains and member
/// offsets at the width their values need; format version 5, 6 with branching states keeping only their byte
/// children, 7 with front-coded members, 9 with the ascending arrays in blocks, as here; its 2 KiB checksum blocks
/// those of version 8): compiled, saved and loaded (mapped, lazily, from bytes, lazily from bytes) the automaton
/// answers alike, takes the same memory, saves the same file, and updates to the same automaton; with values
/// and a template too.
#[test]
fn packed_arrays_load_and_behave_the_same() {
    let v = byte_vocab();
    let dir = tempdir("packed");
    let opts = CompileOptions::new().derive_rows(true);
    let set = tools(7, 3000);
    let values: Vec<u64> = (0..set.len() as u64).map(|j| j * 3 + 1).collect();
    let template = trie::Template::bare().prefix("<tool>").suffix("</tool>");
    let automata = [
        ("bare", Automaton::compile(v.clone(), &set, &opts).unwrap()),
        ("values", Automaton::compile_with_values(v.clone(), &set, &values, &opts).unwrap()),
        ("templated", Automaton::compile_template(v.clone(), &set, &template, &opts).unwrap()),
    ];
    for (what, a) in &automata {
        let bytes = a.to_bytes();
        assert_eq!(u32::from_ne_bytes(bytes[8..12].try_into().unwrap()), 9, "{what}: arrays in blocks, version 9");
        // The widths: depths under 255 (one byte), shared prefix lengths under 255 (one byte).
        let depth_w = element_size(&bytes, 6);
        let stored_members = a.n_members() + a.dropped().len();
        let member_bytes: usize = (0..stored_members).map(|r| a.member_bytes(r).unwrap().len()).sum();
        let max_depth = (0..a.n_explicit() as u32).filter_map(|s| a.depth(State(s))).max().unwrap();
        assert_eq!(depth_w, width_of(max_depth as u64), "{what}");
        let parts: std::collections::HashMap<&str, usize> = a.memory_parts().into_iter().collect();
        let stored = parts["member_bytes"];
        assert!(stored * 2 < member_bytes, "{what}: {stored} of {member_bytes} bytes of members stored");
        assert_eq!(element_size(&bytes, 27), 1, "{what}: shared prefix lengths");
        assert_eq!(parts["member_lcp"], stored_members, "{what}");
        assert_eq!(parts["depth"], depth_w * a.n_explicit(), "{what}");
        // The ascending arrays in blocks (their shapes in section 40), in the file as in memory: each its block
        // bases and one narrow value per element, instead of its plain section; front-coded member offsets in
        // blocks of the 16-member restart interval, one suffix length per member (under 255: one byte).
        let shapes = u64s(&bytes, 40);
        assert_eq!(shapes.len(), 12, "{what}");
        for (i, (name, plain, bases)) in
            [("offsets", 2, 41), ("chain_base", 10, 43), ("chain_member", 11, 45), ("member_offsets", 13, 47)]
                .into_iter()
                .enumerate()
        {
            assert_ne!(shapes[3 * i + 2], 0, "{what}: {name} in blocks");
            assert!(find_section(&bytes, plain).is_none(), "{what}: {name} has no plain section");
            let in_file = section_bytes(&bytes, bases) + section_bytes(&bytes, bases + 1);
            assert_eq!(parts[name], in_file, "{what}: {name}");
            assert_eq!(
                section(&bytes, bases).1,
                (shapes[3 * i] as usize).div_ceil(shapes[3 * i + 1] as usize),
                "{what}: {name}, a base per block"
            );
        }
        assert_eq!(shapes[9] as usize, stored_members + 1, "{what}");
        assert_eq!(element_size(&bytes, 48), 1, "{what}: member offsets, one byte a member");
        assert!(parts["member_offsets"] < stored_members * 3 / 2, "{what}: {}", parts["member_offsets"]);
        let path = dir.join(format!("{what}.trie"));
        a.save(&path).unwrap();
        let mapped = Automaton::load(v.clone(), &path).unwrap();
        assert!(mapped.is_mapped());
        same_behaviour(a, &mapped, 3);
        // Mapped and checked whole, or lazily, the arrays are the file's blocks, at the same widths.
        assert_eq!(mapped.memory_usage(), a.memory_usage(), "{what}: mapped at the same widths");
        let eager = Automaton::from_bytes(v.clone(), &bytes).unwrap();
        assert_eq!(eager.memory_usage(), a.memory_usage(), "{what}: loaded eagerly, the same blocks");
        same_behaviour(a, &Automaton::from_bytes(v.clone(), &bytes).unwrap(), 4);
        let lazy = Automaton::load_lazy(v.clone(), &path).unwrap();
        same_behaviour(a, &lazy, 5);
        same_behaviour(a, &Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap(), 6);
        assert_eq!(mapped.to_bytes(), bytes, "{what}");
        assert_eq!(lazy.to_bytes(), bytes, "{what}");
        let (add, remove) = (["zz-added", "tool7.00001.x"], [set[0].as_str(), set[2999].as_str()]);
        let update = |x: &Automaton| {
            if a.has_values() {
                x.with_changes_and_values(&add, &[5, 6], &remove, &opts).unwrap().to_bytes()
            } else {
                x.with_changes(&add, &remove, &opts).unwrap().to_bytes()
            }
        };
        let updated = update(a);
        assert_eq!(u32::from_ne_bytes(updated[8..12].try_into().unwrap()), 9, "{what}: updated, version 9");
        assert_eq!(element_size(&updated, 6), depth_w, "{what}: updated, still packed");
        assert_eq!(update(&lazy), updated, "{what}");
        assert_eq!(update(&mapped), updated, "{what}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The large layout on a vocabulary of over 65,535 tokens (qwen2: 151,936) with over 65,535 states stores token
/// ids and targets at 3 bytes each (issue 38); the layout storing every row keeps them at 4 (files byte for byte as
/// before). Compiled, saved and loaded (mapped, lazily, from bytes, lazily from bytes) it answers as the automaton
/// storing every row, saves the same file and updates to the same automaton.
#[test]
fn three_byte_tokens_and_targets_load_and_behave_the_same() {
    let v = gguf_vocab("qwen2");
    assert!(v.n_vocab() > 65_535 && v.n_vocab() < 0xFF_FFFF, "{}", v.n_vocab());
    let set = random_set(38, 30_000, 4);
    let opts = CompileOptions::new().drop_unreachable(true);
    let a = Automaton::compile(v.clone(), &set, &opts.clone().derive_rows(true)).unwrap();
    let stored = Automaton::compile(v.clone(), &set, &opts.clone().derive_rows(false)).unwrap();
    assert!(a.n_states() > 65_535 && a.n_states() < 0xFF_FFFF, "{} states", a.n_states());
    let bytes = a.to_bytes();
    assert_eq!((element_size(&bytes, TOKENS), element_size(&bytes, TARGETS)), (3, 3));
    let plain = stored.to_bytes();
    assert_eq!((element_size(&plain, TOKENS), element_size(&plain, TARGETS)), (4, 4));
    let parts: std::collections::HashMap<&str, usize> = a.memory_parts().into_iter().collect();
    assert_eq!((parts["tokens"], parts["targets"]), (3 * a.allowed_total(), 3 * a.allowed_total()));
    same_behaviour(&stored, &a, 11);
    let dir = tempdir("three-bytes");
    let path = dir.join("a.trie");
    a.save(&path).unwrap();
    let mapped = Automaton::load(v.clone(), &path).unwrap();
    assert!(mapped.is_mapped());
    assert_eq!(mapped.memory_usage(), a.memory_usage(), "mapped at the same widths");
    let lazy = Automaton::load_lazy(v.clone(), &path).unwrap();
    for (i, b) in [
        &mapped,
        &lazy,
        &Automaton::from_bytes(v.clone(), &bytes).unwrap(),
        &Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap(),
    ]
    .into_iter()
    .enumerate()
    {
        same_behaviour(&a, b, 12 + i as u64);
        same_behaviour(&stored, b, 20 + i as u64);
        assert_eq!(b.to_bytes(), bytes);
    }
    let (add, remove) = (["zz-added", "searchzz"], [set[0].as_str(), set[1].as_str()]);
    let opts = opts.derive_rows(true);
    let updated = a.with_changes(&add, &remove, &opts).unwrap().to_bytes();
    assert_eq!((element_size(&updated, TOKENS), element_size(&updated, TARGETS)), (3, 3), "updated, still packed");
    assert_eq!(lazy.with_changes(&add, &remove, &opts).unwrap().to_bytes(), updated);
    assert_eq!(mapped.with_changes(&add, &remove, &opts).unwrap().to_bytes(), updated);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 3-byte token id at or past the vocabulary's size, or a 3-byte target at or past the number of states (block
/// hashes and checksum resealed), is refused eagerly; lazily the file loads and the state whose row holds it is
/// malformed (its mask and steps), the others answer.
#[test]
fn three_byte_ids_out_of_range_are_refused() {
    let v = gguf_vocab("qwen2");
    let set = random_set(39, 30_000, 4);
    let opts = CompileOptions::new().drop_unreachable(true).derive_rows(true);
    let a = Automaton::compile(v.clone(), &set, &opts).unwrap();
    let good = a.to_bytes();
    assert_eq!((element_size(&good, TOKENS), element_size(&good, TARGETS)), (3, 3));
    // The last transition, and the explicit state whose row holds it (the last with a row).
    let (count, n_explicit) = (section(&good, TOKENS).1, a.n_explicit());
    let offset = |s: usize| packed_at(&good, OFFSETS, s);
    let s = (0..n_explicit).rev().find(|&s| offset(s) < count as u64).unwrap();
    assert_eq!(offset(s + 1), count as u64);
    let token = packed_at(&good, TOKENS, count - 1) as u32;
    let (n_vocab, n_states) = (v.n_vocab() as u64, a.n_states() as u64);
    let cases = [(TOKENS, n_vocab, "token"), (TOKENS, 0xFF_FFFE, "token"), (TOKENS, 0xFF_FFFF, "token")]
        .into_iter()
        .chain([(TARGETS, n_states, "target"), (TARGETS, 0xFF_FFFE, "target")]);
    for (tag, value, what) in cases {
        let mut bad = good.clone();
        set_packed(&mut bad, tag, count - 1, value);
        fix_checksum(&mut bad);
        let e = Automaton::from_bytes(v.clone(), &bad).expect_err(what);
        assert_eq!(e.kind(), ErrorKind::MalformedFile, "{what} {value}: {e}");
        assert!(e.message().contains("tokens are not ascending ids of the vocabulary, or lead outside"), "{e}");
        let l = Automaton::from_bytes_lazy(v.clone(), &bad).unwrap();
        let mut row = vec![0u32; l.mask_words()];
        assert_eq!(l.fill_bitmask(State(s as u32), &mut row).unwrap_err().kind(), ErrorKind::MalformedFile);
        assert_eq!(l.advance(State(s as u32), token).unwrap_err().kind(), ErrorKind::MalformedFile);
        assert!(l.allowed(State(s as u32)).is_empty(), "{what} {value}");
        l.fill_bitmask(l.start(), &mut row).unwrap();
        assert!(l.allowed(l.start()).len() > 10);
    }
    // Unspoiled: the same state answers.
    let l = Automaton::from_bytes_lazy(v.clone(), &good).unwrap();
    assert!(l.advance(State(s as u32), token).is_ok());
}

// Section tags of an automaton file (`src/automaton/persist.rs`).
const OFFSETS: u32 = 2;
const TOKENS: u32 = 3;
const TARGETS: u32 = 4;

/// Element `i` of the packed array of section `tag` (at its element size, in native byte order; width 3: a `u16`,
/// then the high byte: `src/util/packed.rs`).
fn packed_at(file: &[u8], tag: u32, i: usize) -> u64 {
    let (at, w) = (section(file, tag).0, element_size(file, tag));
    let c = &file[at + i * w..at + (i + 1) * w];
    match w {
        1 => c[0] as u64,
        2 => u16::from_ne_bytes([c[0], c[1]]) as u64,
        3 => u16::from_ne_bytes([c[0], c[1]]) as u64 | (c[2] as u64) << 16,
        4 => u32::from_ne_bytes(c.try_into().unwrap()) as u64,
        _ => u64::from_ne_bytes(c.try_into().unwrap()),
    }
}

/// Sets element `i` of the packed array of section `tag` to `value` (which fits its width).
fn set_packed(file: &mut [u8], tag: u32, i: usize, value: u64) {
    let (at, w) = (section(file, tag).0, element_size(file, tag));
    let bytes = match w {
        1 => vec![value as u8],
        2 => (value as u16).to_ne_bytes().to_vec(),
        3 => [&(value as u16).to_ne_bytes()[..], &[(value >> 16) as u8]].concat(),
        4 => (value as u32).to_ne_bytes().to_vec(),
        _ => value.to_ne_bytes().to_vec(),
    };
    file[at + i * w..at + (i + 1) * w].copy_from_slice(&bytes);
}

/// The width of the depths is chosen by the deepest explicit state: 254 bytes of shared prefix take one byte a
/// depth, 255 two (all-ones stands for the sentinel); 65,534 and 65,535 likewise two and three. Each layout saves
/// and loads to the same answers.
#[test]
fn depth_widths_at_their_boundaries() {
    let v = byte_vocab();
    let opts = CompileOptions::new().derive_rows(true);
    for (shared, width) in [(254, 1), (255, 2), (65_534, 2), (65_535, 3)] {
        let prefix = "a".repeat(shared);
        let set = [format!("{prefix}xq"), format!("{prefix}yq"), "b".to_string()];
        let a = Automaton::compile(v.clone(), &set, &opts).unwrap();
        let parts: std::collections::HashMap<&str, usize> = a.memory_parts().into_iter().collect();
        assert_eq!(parts["depth"], width * a.n_explicit(), "{shared} shared bytes");
        let bytes = a.to_bytes();
        assert_eq!(element_size(&bytes, 6), width, "{shared}");
        let b = Automaton::from_bytes(v.clone(), &bytes).unwrap();
        let l = Automaton::from_bytes_lazy(v.clone(), &bytes).unwrap();
        for s in (0..a.n_states() as u32).step_by(97).chain([a.n_explicit() as u32 - 1]).map(State) {
            assert_eq!(a.depth(s), b.depth(s), "{shared} {s:?}");
            assert_eq!(a.depth(s), l.depth(s), "{shared} {s:?}");
            assert_eq!(a.allowed(s), l.allowed(s), "{shared} {s:?}");
        }
        let deepest = (0..a.n_explicit() as u32).filter_map(|s| l.depth(State(s))).max();
        assert_eq!(deepest, Some(shared), "the branching state is the deepest explicit one");
        assert!(accepts_string(&l, set[1].as_bytes()) && accepts_string(&b, set[0].as_bytes()), "{shared}");
    }
}

/// The narrowest packed width for values up to `max` (`src/util/packed.rs`: all-ones is the sentinel).
fn width_of(max: u64) -> usize {
    [1, 2, 3, 4, 8].into_iter().find(|&w| w == 8 || max < (1u64 << (8 * w)) - 1).unwrap()
}

/// The element size of section `tag` of a saved file (the width of a packed array).
fn element_size(file: &[u8], tag: u32) -> usize {
    let n = u32::from_ne_bytes(file[20..24].try_into().unwrap()) as usize;
    let e = (0..n).map(|i| 64 + 24 * i).find(|&e| u32::from_ne_bytes(file[e..e + 4].try_into().unwrap()) == tag);
    let e = e.unwrap();
    u32::from_ne_bytes(file[e + 4..e + 8].try_into().unwrap()) as usize
}

/// The entry of section `tag` of a saved file in its section table (`None` when absent).
fn find_section(file: &[u8], tag: u32) -> Option<usize> {
    let n = u32::from_ne_bytes(file[20..24].try_into().unwrap()) as usize;
    (0..n).map(|i| 64 + 24 * i).find(|&e| u32::from_ne_bytes(file[e..e + 4].try_into().unwrap()) == tag)
}

/// The bytes section `tag` of a saved file holds (its element count times its element size).
fn section_bytes(file: &[u8], tag: u32) -> usize {
    section(file, tag).1 * element_size(file, tag)
}

/// The values of section `tag` (of `u64`s).
fn u64s(file: &[u8], tag: u32) -> Vec<u64> {
    let (at, count) = section(file, tag);
    (0..count).map(|i| u64::from_ne_bytes(file[at + 8 * i..at + 8 * i + 8].try_into().unwrap())).collect()
}

fn bytemuck_u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// A version 1 file (before the stored block hashes) still loads, eagerly and lazily (checked whole), with the
/// same behaviour; saving it again writes the current version.
#[test]
fn version_1_files_still_load() {
    let v = gguf_vocab("gpt-2");
    let set = random_set(5, 400, 4);
    let a = Automaton::compile(v.clone(), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
    let old = as_version_1(&a.to_bytes());
    assert_eq!(u32::from_ne_bytes(old[8..12].try_into().unwrap()), 1);
    let b = Automaton::from_bytes(v.clone(), &old).unwrap();
    same_behaviour(&a, &b, 1);
    assert_eq!(b.to_bytes(), a.to_bytes());
    let dir = tempdir("version-1");
    let path = dir.join("old.trie");
    std::fs::write(&path, &old).unwrap();
    // the header without a vocabulary: both versions
    let info = Automaton::file_info(&path).unwrap();
    assert_eq!((info.format_version, info.vocab_fingerprint, info.file_bytes), (1, v.fingerprint(), old.len() as u64));
    let new = dir.join("new.trie");
    a.save(&new).unwrap();
    let info = Automaton::file_info(&new).unwrap();
    assert_eq!(info.format_version, 2, "a file without member values is version 2 (read by older libtries)");
    assert_eq!((info.vocab_fingerprint, info.file_bytes), (v.fingerprint(), std::fs::metadata(&new).unwrap().len()));
    let vocab_file = dir.join("vocab.bin");
    v.save(&vocab_file).unwrap();
    let e = Automaton::file_info(&vocab_file).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MalformedFile);
    assert!(e.message().contains("vocab.bin") && e.message().contains("not an automaton"), "{e}");
    let l = Automaton::load_lazy(v.clone(), &path).unwrap();
    assert!(!l.is_lazy(), "a version 1 file has no block hashes: checked whole at load");
    same_behaviour(&a, &l, 2);
    let mut bad = old.clone();
    let at = bad.len() - 5;
    bad[at] ^= 4;
    std::fs::write(&path, &bad).unwrap();
    let e = Automaton::load_lazy(v.clone(), &path).err().unwrap();
    assert!(e.message().contains("checksum"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
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
        prop_assert_eq!(Automaton::from_bytes(v.clone(), &bytes[..cut]).err().unwrap().kind(), ErrorKind::MalformedFile);
        prop_assert_eq!(Automaton::from_bytes_lazy(v, &bytes[..cut]).err().unwrap().kind(), ErrorKind::MalformedFile);
    }

    /// Damage anywhere, loaded lazily: an error at load (header, section table, block hashes, the arrays' ends),
    /// or states that answer exactly as before or report the damage (`MalformedFile`, empty), never a crash; the
    /// damage is always found by the first whole check (`with_changes`, the member lookups). A file of many
    /// blocks, so that damage in one block leaves the states of the others answering.
    #[test]
    fn damaged_files_loaded_lazily_answer_right_or_report_it(seed in 0u64..1000, flips in 1usize..4) {
        let (a, bytes) = large();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut bad = bytes.clone();
        for _ in 0..flips {
            let i = rng.gen_range(0..bad.len());
            bad[i] ^= 1 << rng.gen_range(0..8);
        }
        prop_assume!(&bad != bytes);
        let Ok(b) = Automaton::from_bytes_lazy(a.vocab().clone(), &bad) else { return Ok(()) };
        prop_assert!(b.is_lazy());
        prop_assert_eq!(b.n_states(), a.n_states());
        let words = a.mask_words();
        let (mut ra, mut rb) = (vec![0u32; words], vec![0u32; words]);
        let mut states: Vec<State> = (0..2000).map(|_| State(rng.gen_range(0..a.n_states() as u32))).collect();
        states.extend((0..20).flat_map(|_| random_walk(a, &mut rng).1.into_iter().map(|(s, _)| s)));
        let mut answered = 0;
        for s in states {
            a.fill_bitmask(s, &mut ra).unwrap();
            match b.fill_bitmask(s, &mut rb) {
                Ok(()) => {
                    answered += 1;
                    prop_assert_eq!(&ra, &rb);
                    prop_assert_eq!(a.allowed(s), b.allowed(s));
                    prop_assert_eq!(a.is_accepting(s), b.is_accepting(s));
                    prop_assert_eq!(a.depth(s), b.depth(s));
                    prop_assert_eq!(a.forced(s), b.forced(s));
                    for &t in a.allowed(s).iter().take(50) {
                        prop_assert_eq!(a.advance(s, t), b.advance(s, t));
                    }
                }
                Err(e) => {
                    prop_assert_eq!(e.kind(), ErrorKind::MalformedFile);
                    prop_assert!(b.allowed(s).is_empty() && b.depth(s).is_none() && b.forced(s).is_none());
                    prop_assert!(!b.is_accepting(s));
                    prop_assert_eq!(b.advance(s, 0).unwrap_err().kind(), ErrorKind::MalformedFile);
                }
            }
        }
        // One damaged block leaves the states of the others answering; two or three can hit both the blocks every
        // explicit state reads (its small arrays) and the chain index (seed 139, flips 3: no state answers, and
        // each reports the damage, which is right).
        prop_assert!(flips > 1 || answered > 0, "damage in one block of {} bytes left no state answering", bad.len());
        let e = b.with_changes(&["x"], &[] as &[&str], &CompileOptions::new()).expect_err("damage found whole");
        prop_assert_eq!(e.kind(), ErrorKind::MalformedFile);
        prop_assert_eq!(b.member_at(a.start()), None);
        prop_assert!(b.possible_members(a.start()).is_empty());
        prop_assert_eq!(b.member_bytes(0), None);
    }
}

/// An automaton whose file spans many 64 KiB blocks (many more of version 8's 2 KiB), and the file (compiled once).
fn large() -> &'static (Automaton, Vec<u8>) {
    static LARGE: std::sync::OnceLock<(Automaton, Vec<u8>)> = std::sync::OnceLock::new();
    LARGE.get_or_init(|| {
        let set = random_set(31, 60_000, 4);
        let a = Automaton::compile(gguf_vocab("gpt-2"), &set, &CompileOptions::new().drop_unreachable(true)).unwrap();
        let bytes = a.to_bytes();
        assert!(bytes.len() > 1 << 20, "{} bytes: 16 blocks or more", bytes.len());
        (a, bytes)
    })
}

/// The same file in version 1's layout (no block hashes, bytes 56..64 zero, the checksum over the whole body).
fn as_version_1(v2: &[u8]) -> Vec<u8> {
    use xxhash_rust::xxh3::{xxh3_64, Xxh3};
    let body_end = u64::from_ne_bytes(v2[56..64].try_into().unwrap()) as usize;
    let mut b = v2[..body_end].to_vec();
    b[8..12].copy_from_slice(&1u32.to_ne_bytes());
    b[24..32].copy_from_slice(&(body_end as u64).to_ne_bytes());
    b[56..64].fill(0);
    let blocks: Vec<u8> = b[64..].chunks(1 << 20).flat_map(|c| xxh3_64(c).to_ne_bytes()).collect();
    let mut head = b[..64].to_vec();
    head[32..40].fill(0);
    let mut h = Xxh3::new();
    h.update(&head);
    h.update(&blocks);
    b[32..40].copy_from_slice(&h.digest().to_ne_bytes());
    b
}

/// Writes the seed corpus of the `load` and `update` fuzz targets (saved files of their vocabulary, and one with
/// two members swapped, a valid checksum, which the loader must refuse): run with (and `.../update`)
/// `FUZZ_SEEDS=fuzz/seeds/load cargo test --test integration file_format::write_fuzz_seeds -- --ignored`.
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
    let mut swapped = Automaton::compile(v.clone(), &["aa", "bb", "cc"], &CompileOptions::new()).unwrap().to_bytes();
    let (at, _) = section(&swapped, 14);
    swapped[at..at + 4].copy_from_slice(b"bbaa");
    fix_checksum(&mut swapped);
    std::fs::write(out.join("regression-members-swapped"), swapped).unwrap();
    // The derived-rows layout over the byte-level vocabulary: unary states without rows, branching states of short
    // rows keeping only their byte children, arrays at packed widths (token ids and targets too), members
    // front-coded, the ascending arrays in blocks (format version 9: `blocked-*`). (The `derived-*` seeds are the
    // same sets in format version 4, every array at its full width; `packed-*` in version 5, arrays at packed
    // widths; `byterows-*` in version 6, with byte rows; `v8-packed-*` and `v8-byterows-*` the packed and byte-row
    // sets in version 8; `front-*` the front-coded sets in version 8, token ids and targets packed, the ascending
    // arrays plain; `v8-front-*` the same with token ids and targets at 4 bytes: written by the libtries before
    // them, kept as they are.)
    let bv = byte_vocab();
    let opts = CompileOptions::new().derive_rows(true);
    let small: Vec<String> = ["tool_a", "tool_b", "toolbox"].iter().map(|s| s.to_string()).collect();
    for (i, set) in [small, tools(5, 40), tools(6, 300)].iter().enumerate() {
        let a = Automaton::compile(bv.clone(), set, &opts).unwrap();
        std::fs::write(out.join(format!("blocked-{i}")), a.to_bytes()).unwrap();
    }
}

/// A byte-level vocabulary (every byte a token, a few longer ones, an EOG): no assets needed.
fn byte_vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([b"ab".to_vec(), b"abc".to_vec(), b"tool".to_vec(), b"</s>".to_vec()]);
    let mut kinds = vec![TokenKind::Normal; tokens.len()];
    kinds[259] = TokenKind::Control;
    Arc::new(Vocabulary::new(tokens, kinds, &[259], None).unwrap())
}

/// A set of `n` tool names, different for each `seed`.
fn tools(seed: u64, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tool{seed}.{i:05}.{}", i * 7919 % 1000)).collect()
}

/// Files of the directory `dir` but the ones named in `keep`: temporary files left behind.
fn leftovers(dir: &std::path::Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

/// Threads saving different automata to one path at once: every save succeeds, and the file is then exactly one
/// of them (complete, loadable), never a mixture; no temporary file is left (B3).
#[test]
fn concurrent_saves_to_one_path_leave_one_complete_file() {
    let v = byte_vocab();
    let automata: Vec<Automaton> = (0..4)
        .map(|i| Automaton::compile(v.clone(), &tools(i, 3000 + 500 * i as usize), &CompileOptions::new()).unwrap())
        .collect();
    let files: Vec<Vec<u8>> = automata.iter().map(|a| a.to_bytes()).collect();
    let dir = tempdir("concurrent-saves");
    let path = dir.join("set.trie");
    for round in 0..8 {
        let barrier = std::sync::Barrier::new(automata.len());
        let results: Vec<trie::Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = automata
                .iter()
                .map(|a| {
                    let (barrier, path) = (&barrier, &path);
                    s.spawn(move || {
                        barrier.wait();
                        a.save(path)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, r) in results.iter().enumerate() {
            assert!(r.is_ok(), "round {round}: save {i} failed: {:?}", r.as_ref().err());
        }
        let on_disk = std::fs::read(&path).unwrap();
        let which = files.iter().position(|f| *f == on_disk);
        assert!(which.is_some(), "round {round}: the file is none of the saved automata ({} bytes)", on_disk.len());
        let loaded = Automaton::load(v.clone(), &path).unwrap();
        assert_eq!(loaded.n_members(), automata[which.unwrap()].n_members());
        assert_eq!(leftovers(&dir, &["set.trie"]), Vec::<String>::new(), "round {round}: temporary files left");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Saving to the path of a mapped automaton replaces the file (a new inode renamed over it), never rewrites it:
/// the mapped automaton keeps its members and masks, and a new load sees the new set (B4).
#[test]
fn a_mapped_automaton_survives_another_save_to_its_path() {
    use std::os::unix::fs::MetadataExt;
    let v = byte_vocab();
    let (first, second) = (tools(1, 2000), tools(2, 50));
    let a = Automaton::compile(v.clone(), &first, &CompileOptions::new()).unwrap();
    let b = Automaton::compile(v.clone(), &second, &CompileOptions::new()).unwrap();
    let dir = tempdir("mapped-resave");
    let path = dir.join("set.trie");
    a.save(&path).unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    let mapped = Automaton::load(v.clone(), &path).unwrap();
    assert!(mapped.is_mapped());
    b.save(&path).unwrap();
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode, "save rewrote the mapped file in place");
    same_behaviour(&a, &mapped, 1);
    for m in &first {
        assert!(accepts_string(&mapped, m.as_bytes()), "{m} is no longer accepted by the mapped automaton");
    }
    let reloaded = Automaton::load(v.clone(), &path).unwrap();
    assert_eq!(reloaded.n_members(), second.len());
    same_behaviour(&b, &reloaded, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `a` produces `s` spelled one byte token at a time, then an end-of-generation token.
fn accepts_string(a: &Automaton, s: &[u8]) -> bool {
    let mut state = a.start();
    for &b in s {
        match a.advance(state, b as u32) {
            Ok(trie::Step::Next(n)) => state = n,
            _ => return false,
        }
    }
    matches!(a.advance(state, 259), Ok(trie::Step::Finished))
}

/// The block hashes and checksum of a saved (version 2 or later) file as `src/format.rs` computes them (the
/// xxh3-64 of each 64 KiB block of the body, 2 KiB from version 8 on, bytes 64 to the body end, stored past the
/// body, the file's length with them; the checksum the xxh3-64 of the header with its checksum field zeroed and of
/// the block hashes), so a test can craft a file with valid ones (also one whose version field was changed).
fn fix_checksum(file: &mut Vec<u8>) {
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

/// Section `tag` of a saved file: (byte offset, element count).
fn section(file: &[u8], tag: u32) -> (usize, usize) {
    let n = u32::from_ne_bytes(file[20..24].try_into().unwrap()) as usize;
    (0..n)
        .map(|i| 64 + 24 * i)
        .find(|&e| u32::from_ne_bytes(file[e..e + 4].try_into().unwrap()) == tag)
        .map(|e| {
            let at = u64::from_ne_bytes(file[e + 8..e + 16].try_into().unwrap()) as usize;
            let count = u64::from_ne_bytes(file[e + 16..e + 24].try_into().unwrap()) as usize;
            (at, count)
        })
        .unwrap()
}

/// A file whose member list is out of order (two members swapped) or repeats a member, with a valid checksum,
/// is refused as malformed: `with_changes` relies on that order (B5).
#[test]
fn members_out_of_order_are_malformed() {
    const MEMBER_BYTES: u32 = 14;
    let v = byte_vocab();
    let a = Automaton::compile(v.clone(), &["aa", "bb", "cc"], &CompileOptions::new()).unwrap();
    let good = a.to_bytes();
    let (at, count) = section(&good, MEMBER_BYTES);
    assert_eq!(&good[at..at + count], b"aabbcc", "the members, sorted, in the member bytes section");
    assert!(Automaton::from_bytes(v.clone(), &good).is_ok());
    for (crafted, what) in [(&b"bbaacc"[..], "swapped"), (b"aaaacc", "repeated"), (b"aaccbb", "swapped at the end")] {
        let mut bad = good.clone();
        bad[at..at + count].copy_from_slice(crafted);
        fix_checksum(&mut bad);
        let e = Automaton::from_bytes(v.clone(), &bad).err().unwrap_or_else(|| panic!("{what} members were accepted"));
        assert_eq!(e.kind(), ErrorKind::MalformedFile, "{what}: {e}");
        assert!(e.message().contains("members"), "{what}: {e}");
        // Lazily: loaded (the member order is checked whole, on first use), then refused where it matters.
        let l = Automaton::from_bytes_lazy(v.clone(), &bad).unwrap();
        let e = l.with_changes(&["dd"], &[] as &[&str], &CompileOptions::new()).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::MalformedFile, "{what}: {e}");
        assert!(e.message().contains("members"), "{what}: {e}");
        assert_eq!(l.member_bytes(0), None, "{what}");
    }
}

/// The ascending arrays in blocks (format version 9: their shapes in section 40, then the bases and per-element
/// values of the row offsets in 41 and 42, of the chain bases in 43 and 44, of the chain members in 45 and 46, of
/// the member offsets in 47 and 48): a spoiled base, delta or length in a middle block, the block hashes and
/// checksum resealed, is refused by an eager load with the array and block named; lazily, the file loads (only
/// the first and last blocks are checked at load), some states (those reading that block) are malformed
/// (`MalformedFile`), every state answers without a panic, and the member lookups (which check the whole file)
/// refuse it. The same spoil in the first block is refused by the lazy load.
#[test]
fn spoiled_blocks_are_refused_eagerly_and_lazily() {
    let v = byte_vocab();
    let a = Automaton::compile(v.clone(), &tools(8, 2500), &CompileOptions::new().derive_rows(true)).unwrap();
    let good = a.to_bytes();
    assert_eq!(u32::from_ne_bytes(good[8..12].try_into().unwrap()), 9);
    let shapes = u64s(&good, 40);
    let arrays = [("row offsets", 41), ("chain bases", 43), ("chain members", 45), ("member offsets", 47)];
    for (i, &(name, bases_tag)) in arrays.iter().enumerate() {
        let (len, block, layout) = (shapes[3 * i] as usize, shapes[3 * i + 1] as usize, shapes[3 * i + 2]);
        assert!(layout == 1 || layout == 2, "{name} in blocks");
        let n_blocks = len.div_ceil(block);
        assert!(n_blocks >= 8, "{name}: {n_blocks} blocks");
        let (bw, dw) = (element_size(&good, bases_tag), element_size(&good, bases_tag + 1));
        let (bases_at, deltas_at) = (section(&good, bases_tag).0, section(&good, bases_tag + 1).0);
        // (The spoiled block, the byte offset, the new bytes): a base set to 0 (below the block before it, which
        // then fails); a block's first delta 1 (deltas: it is 0, the base itself) or a length one more (lengths:
        // the block's sum then misses the next base); a value set to all ones (the sentinel, never a value).
        for mid in [n_blocks / 2, 0] {
            let (first, third) = (deltas_at + mid * block * dw, deltas_at + (mid * block + 3) * dw);
            let mut changed = good[first..first + dw].to_vec();
            changed[0] = if layout == 1 { 1 } else { changed[0].wrapping_add(1) & 0x7f };
            let spoils: [(usize, usize, Vec<u8>); 3] = [
                (mid.saturating_sub(1), bases_at + mid.max(1) * bw, vec![0; bw]),
                (mid, first, changed),
                (mid, third, vec![0xff; dw]),
            ];
            for (k, at, new) in spoils {
                let mut bad = good.clone();
                assert_ne!(bad[at..at + new.len()], new[..], "{name} block {k}: a change");
                bad[at..at + new.len()].copy_from_slice(&new);
                fix_checksum(&mut bad);
                let e = Automaton::from_bytes(v.clone(), &bad).expect_err("refused eagerly");
                assert_eq!(e.kind(), ErrorKind::MalformedFile, "{name}: {e}");
                // (A first element not 0 is named by the check of the arrays' first elements.)
                let named = format!("{name} in blocks: block {k} does not ascend");
                assert!(e.message().contains(&named) || k == 0 && e.message().contains(name), "{name}: {e}");
                let lazy = match Automaton::from_bytes_lazy(v.clone(), &bad) {
                    Ok(lazy) => lazy,
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::MalformedFile, "{name}: {e}");
                        assert!(k == 0 || k + 1 == n_blocks, "{name} block {k}: refused at load ({e})");
                        assert!(e.message().contains(&name.replace("row ", "")), "{name}: {e}");
                        continue;
                    }
                };
                assert!(k > 0 || name == "chain members", "{name}: the first block is checked at load");
                let malformed = lazily_malformed(&a, &lazy);
                assert!(malformed > 0, "{name} block {k}: some state reads it");
                assert!(malformed < a.n_states(), "{name} block {k}: others answer");
                assert_eq!(lazy.member_bytes(0), None, "{name}: the whole check refuses it");
            }
        }
    }
}

/// The states of `lazy` (loaded from a spoiled file of `a`) whose mask fill is `MalformedFile`; every other one
/// answers (a mask, a step along a token `a` allows there), never a panic.
fn lazily_malformed(a: &Automaton, lazy: &Automaton) -> usize {
    let mut got = vec![0u32; a.mask_words()];
    let mut malformed = 0;
    for s in (0..a.n_states() as u32).map(State) {
        match lazy.fill_bitmask(s, &mut got) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::MalformedFile, "{s:?}: {e}");
                malformed += 1;
            }
            Ok(()) => {
                let _ = lazy.advance(s, a.allowed(s)[0]);
            }
        }
    }
    malformed
}
