//! The front end end to end: specs in, compiled sets (or 400-grade errors) out, against a small vocabulary.

use super::{Options, SetCache, Stats};
use crate::error::ErrorKind;
use crate::vocab::{TokenKind, Vocabulary};
use std::path::PathBuf;
use std::sync::Arc;

/// Every ASCII byte as a token, "ab" and "red", and an end-of-generation token: non-ASCII text is unreachable.
fn ascii() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
    toks.push(b"ab".to_vec());
    toks.push(b"red".to_vec());
    toks.push(b"</s>".to_vec());
    let mut kinds = vec![TokenKind::Normal; toks.len()];
    kinds[toks.len() - 1] = TokenKind::Control;
    Arc::new(Vocabulary::new(toks, kinds, &[130], None).unwrap())
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("libtrie-sets-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sets/sub")).unwrap();
        std::fs::write(d.join("sets/colors.txt"), "red\ngreen\n").unwrap();
        std::fs::write(d.join("sets/sub/pets.txt"), "cat\ndog\nfish\n").unwrap();
        std::fs::write(d.join("secret.txt"), "secret\n").unwrap();
        std::os::unix::fs::symlink(d.join("secret.txt"), d.join("sets/escape.txt")).unwrap();
        Dir(d)
    }

    fn sets(&self) -> PathBuf {
        self.0.join("sets")
    }

    fn cache(&self, f: impl FnOnce(&mut Options)) -> SetCache {
        let mut o = Options { set_dir: Some(self.sets()), ..Options::default() };
        f(&mut o);
        SetCache::new(Some(ascii()), o).unwrap()
    }
}

fn members(c: &SetCache, json: &str) -> usize {
    c.get(json.as_bytes()).unwrap_or_else(|e| panic!("{json}: {e}")).automaton.n_members()
}

fn refused(c: &SetCache, json: &str, reason: &str) -> ErrorKind {
    let e = c.get(json.as_bytes()).err().unwrap_or_else(|| panic!("{json} was accepted"));
    assert!(e.message().contains(reason), "{json}: {e}");
    let dir = c.set_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|| "/nonexistent".into());
    assert!(!e.message().contains(&dir), "{json}: the set directory is not disclosed: {e}");
    e.kind()
}

#[test]
fn sets_are_compiled_once_and_shared() {
    let d = Dir::new("once");
    let c = d.cache(|_| {});
    let first = c.get(br#"{"set": "colors"}"#).unwrap();
    assert!(first.compiled && first.seconds > 0.0);
    assert_eq!((first.automaton.n_members(), first.what.as_str()), (2, "the set 'colors'"));
    for same in [r#""colors""#, r#"{"file": "colors.txt"}"#, r#""./colors.txt""#] {
        let again = c.get(same.as_bytes()).unwrap();
        assert!(!again.compiled && Arc::ptr_eq(&again.automaton, &first.automaton), "{same}");
    }
    assert_eq!(members(&c, r#""sub/pets.txt""#), 3);
    assert_eq!(members(&c, r#"["a", "ab", "b"]"#), 3);
    assert_eq!(members(&c, r#"{"strings": ["b", "a", "ab"]}"#), 3); // another order: another key
    assert_eq!(c.stats(), Stats { compiles: 4, hits: 3, entries: 4, loaded: 0, rejected: 0 });
}

#[test]
fn a_replaced_file_is_a_new_set() {
    let d = Dir::new("replace");
    let c = d.cache(|_| {});
    assert_eq!(members(&c, r#""colors""#), 2);
    // Replaced by rename (a new inode), then rewritten in place (a new size and time): each is compiled anew.
    std::fs::write(d.sets().join("colors.tmp"), "red\ngreen\nblue\n").unwrap();
    std::fs::rename(d.sets().join("colors.tmp"), d.sets().join("colors.txt")).unwrap();
    assert_eq!(members(&c, r#""colors""#), 3);
    std::fs::write(d.sets().join("colors.txt"), "red\n").unwrap();
    assert_eq!(members(&c, r#""colors""#), 1);
    assert_eq!(c.stats().compiles, 3);
    // Replaced by a link to a file outside: refused, never read.
    std::fs::remove_file(d.sets().join("colors.txt")).unwrap();
    std::os::unix::fs::symlink(d.0.join("secret.txt"), d.sets().join("colors.txt")).unwrap();
    refused(&c, r#""colors""#, "a symbolic link");
}

#[test]
fn requests_cannot_leave_the_set_directory() {
    let d = Dir::new("confined");
    let c = d.cache(|o| o.max_file_bytes = 100);
    std::fs::write(d.sets().join("big.txt"), "x\n".repeat(60)).unwrap();
    let fifo = std::ffi::CString::new(d.sets().join("fifo.txt").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for (json, reason) in [
        (r#""/etc/passwd""#, "absolute paths are not allowed"),
        (r#"{"file": "../secret.txt"}"#, "'..' is not allowed"),
        (r#""escape""#, "a symbolic link"),
        (r#""fifo""#, "not a regular file"),
        (r#""sub/""#, "not a regular file"),
        (r#""big""#, "120 bytes, more than this server reads (100"),
        (r#""nope""#, "does not exist in the set directory"),
    ] {
        assert_eq!(refused(&c, json, reason), ErrorKind::InvalidArgument, "{json}");
        let e = c.check(json.as_bytes()).unwrap_err(); // admission says the same
        assert!(e.message().contains(reason), "{json}: {e}");
    }
    c.check(br#""colors""#).unwrap();
    assert_eq!(c.stats().compiles, 0, "refusals compile nothing");
    // Without a set directory, only inline sets.
    let inline_only = SetCache::new(Some(ascii()), Options::default()).unwrap();
    refused(&inline_only, r#""colors""#, "does not read sets from files");
    assert_eq!(members(&inline_only, r#"["red"]"#), 1);
}

#[test]
fn bad_sets_fail_with_the_reason_and_are_not_compiled_again() {
    let d = Dir::new("bad");
    std::fs::write(d.sets().join("latin1.txt"), b"ok\ncaf\xe9\n").unwrap();
    std::fs::write(d.sets().join("empty.txt"), b"").unwrap();
    std::fs::write(d.sets().join("japanese.txt"), "東京\nred\n").unwrap();
    let c = d.cache(|_| {});
    for _ in 0..2 {
        assert_eq!(
            refused(&c, r#""latin1""#, "the set 'latin1' is not valid UTF-8 (line 2)"),
            ErrorKind::InvalidArgument
        );
        assert_eq!(refused(&c, r#""empty""#, "the set 'empty' is empty"), ErrorKind::EmptySet);
        let k = refused(&c, r#""japanese""#, "cannot be compiled: unreachable string");
        assert_eq!(k, ErrorKind::UnreachableString);
        refused(&c, r#""japanese""#, "\"drop_unreachable\": true drops such members");
    }
    assert_eq!(c.stats().compiles, 3, "a failing set is not compiled again");
    assert_eq!(members(&c, r#"{"set": "japanese", "drop_unreachable": true}"#), 1);
    std::fs::write(d.sets().join("empty.txt"), "now\nfixed\n").unwrap(); // a new key: compiled, and it works
    assert_eq!(members(&c, r#""empty""#), 2);
    // Beyond the operator's compile bounds.
    let small = d.cache(|o| o.max_states = 3);
    let k = refused(&small, r#""colors""#, "limit exceeded");
    assert_eq!(k, ErrorKind::LimitExceeded);
    refused(&small, r#""colors""#, "LIBTRIE_MAX_STATES");
    assert_eq!(members(&small, r#"["a"]"#), 1);
}

#[test]
fn changes_are_built_from_the_cached_base() {
    let d = Dir::new("changes");
    let c = d.cache(|_| {});
    let changed = c.get(br#"{"set": "colors", "add": ["blue", "red"], "remove": ["green", "nope"]}"#).unwrap();
    assert_eq!(changed.automaton.n_members(), 2); // red, blue
    assert_eq!(c.stats().compiles, 2, "the base, then the changed set from it");
    assert!(!c.get(br#""colors""#).unwrap().compiled, "the base is cached");
    let again = c.get(br#"{"set": "colors", "add": ["blue", "red"], "remove": ["green", "nope"]}"#).unwrap();
    assert!(Arc::ptr_eq(&again.automaton, &changed.automaton));
    assert_ne!(members(&c, r#"{"set": "colors", "add": ["green"]}"#), 0);
    assert_eq!(c.stats().compiles, 3);
    let e = c.get(br#"{"strings": ["a"], "remove": ["a"]}"#).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::EmptySet);
}

#[test]
fn concurrent_requests_for_one_set_compile_it_once() {
    let d = Dir::new("concurrent");
    let big: String = (0..20_000).map(|i| format!("tool_{i:05}_{}\n", i * 7919 % 10007)).collect();
    std::fs::write(d.sets().join("tools.txt"), big).unwrap();
    let c = Arc::new(d.cache(|_| {}));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let c = c.clone();
            let json = if i % 2 == 0 { r#""tools""# } else { r#"{"file": "tools.txt"}"# };
            std::thread::spawn(move || c.get(json.as_bytes()).unwrap())
        })
        .collect();
    let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(c.stats().compiles, 1);
    assert_eq!(got.iter().filter(|g| g.compiled).count(), 1);
    assert!(got.iter().all(|g| Arc::ptr_eq(&g.automaton, &got[0].automaton)));
    assert_eq!(got[0].automaton.n_members(), 20_000);
}

#[test]
fn the_operator_settings_are_checked() {
    let d = Dir::new("settings");
    let e = SetCache::new(None, Options { set_dir: Some(d.0.join("secret.txt")), ..Options::default() }).err().unwrap();
    assert!(e.message().contains("is not a directory"), "{e}");
    let check_only = SetCache::new(None, Options { set_dir: Some(d.sets()), ..Options::default() }).unwrap();
    check_only.check(br#""colors""#).unwrap();
    assert!(check_only.get(br#""colors""#).err().unwrap().message().contains("no vocabulary"));
    let trusted = d.cache(|o| o.allow_any_path = true);
    let secret = serde_json::to_string(d.0.join("secret.txt").to_str().unwrap()).unwrap();
    assert_eq!(members(&trusted, &secret), 1);
}

#[test]
fn set_files_are_saved_to_and_loaded_from_the_cache_dir() {
    let d = Dir::new("saved");
    let saved = d.0.join("saved");
    std::fs::create_dir(&saved).unwrap();
    let with_dir = |o: &mut Options| o.cache_dir = Some(saved.clone());
    let files = || std::fs::read_dir(&saved).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    let first = d.cache(with_dir);
    let got = first.get(br#""colors""#).unwrap();
    assert!(got.compiled && !got.loaded, "the first to ask compiles");
    let a = got.automaton;
    assert!(!first.get(br#"["red", "ab"]"#).unwrap().loaded);
    assert_eq!(first.stats().loaded, 0);
    assert_eq!(files().len(), 1, "the set file's compiled set is saved; the inline one (a client's) is not");
    // Another process (a fresh cache): loaded, not compiled, and the same automaton.
    let second = d.cache(with_dir);
    let got = second.get(br#""colors""#).unwrap();
    assert!(got.compiled && got.loaded, "new to this cache, mapped from the file");
    assert!(!second.get(br#""colors""#).unwrap().loaded, "then from the LRU: neither compiled nor mapped");
    let b = got.automaton;
    assert_eq!(second.stats().loaded, 1);
    assert_eq!((b.n_members(), b.n_states()), (a.n_members(), a.n_states()));
    // A damaged file is compiled again and replaced; a changed set file is another file.
    let path = files().pop().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 9]).unwrap();
    let third = d.cache(with_dir);
    let got = third.get(br#""colors""#).unwrap();
    assert_eq!((got.automaton.n_members(), got.loaded), (2, false), "compiled again, not mapped");
    assert_eq!((third.stats().loaded, third.stats().rejected), (0, 1), "the damaged file was rejected");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "replaced by a good file");
    std::fs::write(d.sets().join("colors.txt"), "red\ngreen\nblue\n").unwrap();
    assert_eq!(d.cache(with_dir).get(br#""colors""#).unwrap().automaton.n_members(), 3);
    assert_eq!(files().len(), 2);
}
