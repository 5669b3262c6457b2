//! The compiled directory (`trie::sets::CompiledDir`, issue 38 item 3) against a real vocabulary (qwen2): a
//! second get maps the file without compiling, a damaged file is compiled again and replaced, another vocabulary
//! or template is another file, and concurrent threads and processes compiling one key end with one valid file.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use trie::sets::{CompiledDir, CompiledSource, Options, SetCache};
use trie::{Automaton, CompileOptions, End, Render, Step, Template, Vocabulary};

fn names() -> Vec<String> {
    (0..3_000).map(|i| format!("@scope{}/pkg-{i}-{}", i % 37, ["util", "core", "cli", "ジ"][i % 4])).collect()
}

/// The masks of `a` and `b` along random walks of `a`: equal answers (the walks advance both).
fn same_masks(a: &Automaton, b: &Automaton) {
    use rand::{Rng, SeedableRng};
    assert_eq!((a.n_members(), a.n_states()), (b.n_members(), b.n_states()));
    let words = a.mask_words();
    let (mut ra, mut rb) = (vec![0u32; words], vec![0u32; words]);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for _ in 0..40 {
        let (mut sa, mut sb) = (a.start(), b.start());
        loop {
            a.fill_bitmask(sa, &mut ra).unwrap();
            b.fill_bitmask(sb, &mut rb).unwrap();
            assert_eq!(ra, rb);
            let allowed = a.allowed(sa);
            let t = allowed[rng.gen_range(0..allowed.len())];
            match (a.advance(sa, t).unwrap(), b.advance(sb, t).unwrap()) {
                (Step::Next(x), Step::Next(y)) => (sa, sb) = (x, y),
                (Step::Finished, Step::Finished) => break,
                other => panic!("{other:?}"),
            }
        }
    }
}

fn trie_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn compile(vocab: &Arc<Vocabulary>, members: &[String], runs: &AtomicUsize) -> trie::Result<Automaton> {
    runs.fetch_add(1, Ordering::SeqCst);
    Automaton::compile(vocab.clone(), members, &CompileOptions::new())
}

#[test]
fn the_second_get_maps_the_file_without_compiling() {
    let vocab = common::gguf_vocab("qwen2");
    let dir = common::tempdir("compiled-second");
    let members = names();
    let runs = AtomicUsize::new(0);
    let first = CompiledDir::new(dir.join("made/here")).unwrap();
    let (a, how) = first.get_or_compile(&vocab, &[b"k"], || compile(&vocab, &members, &runs)).unwrap();
    assert_eq!((how, runs.load(Ordering::SeqCst)), (CompiledSource::Compiled, 1));
    assert!(a.is_mapped(), "the compiling process gets the mapped file too");
    let files = trie_files(first.path());
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.len() == 37 && name.ends_with(".trie") && name[..32].bytes().all(|b| b.is_ascii_hexdigit()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(first.path()).unwrap().permissions().mode() & 0o777, 0o700);
    // Another process (a fresh directory object): mapped, not compiled.
    let second = CompiledDir::new(dir.join("made/here")).unwrap();
    let (b, how) = second.get_or_compile(&vocab, &[b"k"], || compile(&vocab, &members, &runs)).unwrap();
    assert_eq!((how, runs.load(Ordering::SeqCst)), (CompiledSource::Loaded, 1));
    assert!(b.is_mapped() && b.is_lazy());
    let fresh = Automaton::compile(vocab.clone(), &members, &CompileOptions::new()).unwrap();
    same_masks(&b, &fresh);
    assert_eq!(second.counters().loaded, 1);
    assert_eq!(second.counters().compiled, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_file_is_compiled_again_and_replaced() {
    let vocab = common::gguf_vocab("qwen2");
    let dir = common::tempdir("compiled-damaged");
    let members = names();
    let runs = AtomicUsize::new(0);
    let d = CompiledDir::new(&dir).unwrap();
    d.get_or_compile(&vocab, &[b"k"], || compile(&vocab, &members, &runs)).unwrap();
    let path = trie_files(&dir).pop().unwrap();
    let good = std::fs::read(&path).unwrap();
    let fresh = Automaton::compile(vocab.clone(), &members, &CompileOptions::new()).unwrap();
    let damaged: [(&str, Vec<u8>); 4] = [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("header", {
            let mut b = good.clone();
            b[0] ^= 0xff;
            b
        }),
        ("another vocabulary's", {
            let v = common::gguf_vocab("gpt-2");
            Automaton::compile(v, &["red", "green"], &CompileOptions::new()).unwrap().to_bytes()
        }),
    ];
    for (i, (what, bytes)) in damaged.iter().enumerate() {
        std::fs::write(&path, bytes).unwrap();
        let d = CompiledDir::new(&dir).unwrap();
        let (a, how) = d.get_or_compile(&vocab, &[b"k"], || compile(&vocab, &members, &runs)).unwrap();
        assert_eq!(how, CompiledSource::Compiled, "{what} file: compiled again");
        assert_eq!(runs.load(Ordering::SeqCst), 2 + i);
        assert_eq!(d.counters().rejected, 1, "{what}");
        assert_eq!(std::fs::read(&path).unwrap(), good, "{what} file replaced by a good one");
        same_masks(&a, &fresh);
    }
    // A compile that fails leaves no file behind (the damaged one was removed first) and is an error.
    std::fs::write(&path, &good[..100]).unwrap();
    let e = d
        .get_or_compile(&vocab, &[b"k"], || Err(trie::Error::new(trie::ErrorKind::InvalidArgument, "no")))
        .err()
        .unwrap();
    assert_eq!(e.message(), "no");
    assert!(trie_files(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_key_separates_vocabularies_templates_members_and_options() {
    let (qwen, gpt2) = (common::gguf_vocab("qwen2"), common::gguf_vocab("gpt-2"));
    let dir = common::tempdir("compiled-keys");
    let d = CompiledDir::new(&dir).unwrap();
    let members = ["get_weather", "get_time", "send_mail"];
    let bare = Template::bare();
    let tool = Template::bare().prefix("{\"name\": ").render(Render::JsonString).end(End::Open);
    let opts = CompileOptions::new();
    let mut files = std::collections::HashSet::new();
    let cases: [(&Arc<Vocabulary>, &[&str], &Template, CompileOptions); 6] = [
        (&qwen, &members, &bare, opts.clone()),
        (&gpt2, &members, &bare, opts.clone()),
        (&qwen, &members, &tool, opts.clone()),
        (&qwen, &members[..2], &bare, opts.clone()),
        (&qwen, &members, &bare, opts.clone().drop_unreachable(true)),
        (&qwen, &members, &bare, opts.clone().max_states(10_000)),
    ];
    for (i, (v, m, t, o)) in cases.iter().enumerate() {
        let (a, how) = d.compile_template(v, m, t, o).unwrap();
        assert_eq!(how, CompiledSource::Compiled, "case {i} is a new key");
        assert_eq!(a.n_members(), m.len());
        assert!(files.insert(trie_files(&dir).len()), "case {i} wrote another file");
        let (again, how) = d.compile_template(v, m, t, o).unwrap();
        assert_eq!(how, CompiledSource::Loaded, "case {i} mapped the second time");
        assert_eq!(again.n_states(), a.n_states());
        assert_eq!(again.template(), a.template());
    }
    assert_eq!(trie_files(&dir).len(), cases.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_threads_compiling_one_key_end_with_one_valid_file() {
    let vocab = common::gguf_vocab("qwen2");
    let dir = common::tempdir("compiled-threads");
    let members = names();
    let runs = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (vocab, dir, members, runs, start) =
                (vocab.clone(), dir.clone(), members.clone(), runs.clone(), start.clone());
            std::thread::spawn(move || {
                let d = CompiledDir::new(&dir).unwrap(); // one object per thread: as separate processes
                start.wait();
                d.get_or_compile(&vocab, &[b"k"], || compile(&vocab, &members, &runs)).unwrap().0.n_states()
            })
        })
        .collect();
    let states: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(states.iter().all(|&s| s == states[0]));
    assert!(runs.load(Ordering::SeqCst) >= 1);
    let files = trie_files(&dir);
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let loaded = Automaton::load(vocab.clone(), &files[0]).unwrap(); // checked whole
    same_masks(&loaded, &Automaton::compile(vocab, &members, &CompileOptions::new()).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child's part of [`concurrent_processes_compiling_one_key_end_with_one_valid_file`]: with
/// `LIBTRIE_TEST_COMPILED_DIR` set (the parent spawns this test binary), compile the key there and print how it got
/// it; alone, the same in a directory of its own (and it must compile, then load).
#[test]
fn compiled_dir_process_child() {
    let vocab = common::gguf_vocab("qwen2");
    let members = names();
    let runs = AtomicUsize::new(0);
    let (dir, alone) = match std::env::var_os("LIBTRIE_TEST_COMPILED_DIR") {
        Some(d) => (PathBuf::from(d), false),
        None => (common::tempdir("compiled-child"), true),
    };
    let d = CompiledDir::new(&dir).unwrap();
    let (a, how) = d.get_or_compile(&vocab, &[b"processes"], || compile(&vocab, &members, &runs)).unwrap();
    assert_eq!(a.n_members(), members.len());
    println!("CHILD-RESULT {how:?} {}", a.n_states());
    if alone {
        assert_eq!(how, CompiledSource::Compiled);
        let (_, how) = d.get_or_compile(&vocab, &[b"processes"], || compile(&vocab, &members, &runs)).unwrap();
        assert_eq!(how, CompiledSource::Loaded);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn concurrent_processes_compiling_one_key_end_with_one_valid_file() {
    let dir = common::tempdir("compiled-processes");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "compiled_dir::compiled_dir_process_child", "--nocapture", "--test-threads=1"])
                .env("LIBTRIE_TEST_COMPILED_DIR", &dir)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap()
        })
        .collect();
    let results: Vec<&str> = outputs
        .iter()
        .map(|o| o.split("CHILD-RESULT ").nth(1).expect("the child ran").lines().next().unwrap())
        .collect();
    let n_states = |r: &str| r.rsplit(' ').next().unwrap().to_string();
    assert!(results.iter().all(|r| n_states(r) == n_states(results[0])), "{results:?}");
    let files = trie_files(&dir);
    assert_eq!(files.len(), 1, "one file, no temporary left: {files:?}");
    let vocab = common::gguf_vocab("qwen2");
    Automaton::load(vocab.clone(), &files[0]).unwrap(); // checked whole
                                                        // A process started afterwards maps it.
    let out = Command::new(&exe)
        .args(["--exact", "compiled_dir::compiled_dir_process_child", "--nocapture", "--test-threads=1"])
        .env("LIBTRIE_TEST_COMPILED_DIR", &dir)
        .output()
        .unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("CHILD-RESULT Loaded"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_set_cache_maps_a_set_file_compiled_by_another_process() {
    let vocab = common::gguf_vocab("qwen2");
    let dir = common::tempdir("compiled-setcache");
    let (sets, compiled) = (dir.join("sets"), dir.join("compiled"));
    std::fs::create_dir_all(&sets).unwrap();
    let members = names();
    std::fs::write(sets.join("names.txt"), members.join("\n") + "\n").unwrap();
    let options = || Options { set_dir: Some(sets.clone()), cache_dir: Some(compiled.clone()), ..Options::default() };
    let first = SetCache::new(Some(vocab.clone()), options()).unwrap();
    let a = first.get(br#""names""#).unwrap().automaton;
    assert!(a.is_mapped(), "served from the saved file");
    assert_eq!((first.stats().loaded, first.stats().compiles), (0, 1));
    let second = SetCache::new(Some(vocab.clone()), options()).unwrap();
    let got = second.get(br#"{"set": "names"}"#).unwrap();
    assert!(got.loaded, "this call mapped the file");
    let b = got.automaton;
    assert_eq!(second.stats().loaded, 1, "mapped, not compiled");
    same_masks(&a, &b);
    // The key is the content: the same names under another file name, touched, map the same file.
    std::fs::write(sets.join("copy.txt"), members.join("\n") + "\n").unwrap();
    second.get(br#""copy""#).unwrap();
    assert_eq!(second.stats().loaded, 2);
    assert_eq!(trie_files(&compiled).len(), 1);
    // Another option (drop_unreachable) is another file.
    second.get(br#"{"set": "names", "drop_unreachable": true}"#).unwrap();
    assert_eq!((second.stats().loaded, trie_files(&compiled).len()), (2, 2));
    let _ = std::fs::remove_dir_all(&dir);
}
