use super::*;
use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::symlink;

struct Dir {
    tmp: PathBuf,
    root: PathBuf,
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
{"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]"#;

/// A set directory with a registry, links out and in, a fifo, a directory, a big file, bad files.
fn dir(tag: &str) -> Dir {
    let tmp = std::env::temp_dir().join(format!("libtrie-registry-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let root = tmp.join("sets");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(tmp.join("secret.json"), TOOLS).unwrap();
    std::fs::write(root.join("tools.json"), TOOLS).unwrap();
    std::fs::write(root.join("sub/x.json"), TOOLS).unwrap();
    symlink(tmp.join("secret.json"), root.join("escape.json")).unwrap();
    symlink(root.join("tools.json"), root.join("alias.json")).unwrap();
    std::fs::create_dir(root.join("adir.json")).unwrap();
    let fifo = CString::new(root.join("fifo.json").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(root.join("big.json"), " ".repeat(5000)).unwrap();
    std::fs::write(root.join("notutf8.json"), b"[\"\xff\"]").unwrap();
    std::fs::write(root.join("notools.json"), "{\"a\": 1}").unwrap();
    std::fs::write(root.join("dup.json"), r#"[{"name": "a"}, {"name": "a"}]"#).unwrap();
    let root = root.canonicalize().unwrap();
    Dir { tmp, root }
}

fn cache(d: &Dir) -> RegistryCache {
    RegistryCache::new(Some(&d.root), 4096, 0, 8).unwrap()
}

fn refused(c: &RegistryCache, name: &str, reason: &str, d: &Dir) -> Error {
    let e = c.get(name).err().unwrap_or_else(|| panic!("{name}: served"));
    assert!(e.message().contains(reason), "{name}: {e}");
    assert!(!e.message().contains(d.root.to_str().unwrap()), "the set directory's location is not disclosed: {e}");
    e
}

#[test]
fn a_registry_is_read_once_and_served_from_the_cache() {
    let d = dir("once");
    let c = cache(&d);
    let first = c.get("tools").unwrap();
    assert!(first.read);
    assert_eq!(first.registry.names(), ["get_time", "add"]);
    assert_eq!(first.registry.parameters().len(), 2);
    assert!(first.registry.parameters()[1].contains("integer"));
    let again = c.get("tools").unwrap();
    assert!(!again.read, "looked up by identity, not read again");
    assert!(Arc::ptr_eq(&first.registry, &again.registry));
    assert_eq!(first.registry.identity(), again.registry.identity());
}

#[test]
fn names_that_are_paths_are_refused() {
    let d = dir("names");
    let c = cache(&d);
    for name in ["../secret", "..", ".hidden", "/etc/passwd", "sub/x", "a\\b", "", "x y", "nul\0"] {
        refused(&c, name, "a registry name is 1 to 128 characters", &d);
    }
    refused(&c, &"x".repeat(129), "a registry name is 1 to 128 characters", &d);
    let abs = d.root.join("tools").to_str().unwrap().to_string();
    let e = c.get(&abs).unwrap_err();
    assert!(e.message().contains("a registry name"), "{e}");
}

#[test]
fn links_fifos_directories_and_big_files_are_refused() {
    let d = dir("kinds");
    let c = cache(&d);
    refused(&c, "escape", "a symbolic link", &d);
    refused(&c, "alias", "a symbolic link", &d); // even one that stays inside
    refused(&c, "adir", "not a regular file", &d);
    let t = std::time::Instant::now();
    refused(&c, "fifo", "not a regular file", &d); // never opened: no hang
    assert!(t.elapsed().as_secs() < 5);
    refused(&c, "big", "5000 bytes, more than this server reads (4096", &d);
    refused(&c, "nope", "does not exist in the set directory", &d);
    refused(&c, "notutf8", "not valid UTF-8", &d);
    refused(&c, "notools", "the registry 'notools'", &d);
    refused(&c, "dup", "the registry 'dup'", &d);
    let none = RegistryCache::new(None, 4096, 0, 8).unwrap();
    let e = none.get("tools").unwrap_err();
    assert!(e.message().contains("no set directory"), "{e}");
}

#[test]
fn the_tool_bound_applies() {
    let d = dir("bound");
    let c = RegistryCache::new(Some(&d.root), 4096, 1, 8).unwrap();
    let e = c.get("tools").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{e}");
}

#[test]
fn a_file_that_changes_while_it_is_read_is_refused_and_not_cached() {
    let d = dir("grow");
    let confinement = Confinement { root: Some(&d.root), allow_any_path: false, max_file_bytes: 1 << 20 };
    let opened = confinement.open("tools.json", "the registry 'tools'").unwrap();
    // the file grows after it was opened (its identity taken), before it is read
    std::fs::OpenOptions::new().append(true).open(d.root.join("tools.json")).unwrap().write_all(b"  ").unwrap();
    let e = read_unchanged(opened.file, &opened.key, "the registry 'tools'").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.message().contains("changed while it was read"), "{e}");
    // shrunk: fewer bytes than the identity's size
    let opened = confinement.open("tools.json", "r").unwrap();
    std::fs::write(d.root.join("tools.json"), "[]").unwrap();
    assert!(read_unchanged(opened.file, &opened.key, "r").unwrap_err().message().contains("changed"));
}

#[test]
fn a_registry_replaced_while_requests_run_is_read_again() {
    let d = dir("replace");
    let c = cache(&d);
    let held = c.get("tools").unwrap().registry; // a running request holds it
    std::fs::write(d.root.join("new.tmp"), r#"[{"name": "only", "parameters": {"type": "object"}}]"#).unwrap();
    std::fs::rename(d.root.join("new.tmp"), d.root.join("tools.json")).unwrap();
    let now = c.get("tools").unwrap();
    assert!(now.read, "a new identity: read again");
    assert_eq!(now.registry.names(), ["only"]);
    assert_ne!(now.registry.identity(), held.identity());
    assert_eq!(held.names(), ["get_time", "add"], "the running request keeps its registry");
    // rewritten in place with the same size: the nanosecond modification time changes the identity
    let same_size = r#"[{"name": "othr", "parameters": {"type": "object"}}]"#;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(d.root.join("tools.json"), same_size).unwrap();
    let rewritten = c.get("tools").unwrap();
    assert!(rewritten.read);
    assert_eq!(rewritten.registry.names(), ["othr"]);
    // replaced by a link: refused, not followed
    std::fs::remove_file(d.root.join("tools.json")).unwrap();
    symlink(d.tmp.join("secret.json"), d.root.join("tools.json")).unwrap();
    refused(&c, "tools", "a symbolic link", &d);
}

#[test]
fn concurrent_requests_read_a_registry_once() {
    let d = dir("threads");
    let c = cache(&d);
    let reads: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| c.get("tools").unwrap().read as usize)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(reads, 1);
}

#[test]
fn a_registry_is_searched_by_descriptions() {
    let d = dir("search");
    std::fs::write(
        d.root.join("described.json"),
        r#"[{"type": "function", "function": {"name": "get_time", "description": "The time in a zone"}},
            {"name": "add", "description": "Add two numbers", "parameters": {"type": "object",
             "properties": {"a": {"type": "integer", "description": "first summand"}}}}]"#,
    )
    .unwrap();
    let cache = RegistryCache::new(Some(&d.root), 1 << 20, 0, 4).unwrap();
    let r = cache.get("described").unwrap().registry;
    let s = r.search().unwrap();
    assert!(Arc::ptr_eq(&s, &r.search().unwrap()), "built once");
    assert_eq!(s.names(), r.names());
    let top = |q: &str| s.search(super::super::search::Mode::Bm25, q, 1).unwrap()[0].tool;
    assert_eq!(top("what time is it in Tokyo"), 0);
    assert_eq!(top("sum of numbers"), 1);
    assert_eq!(top("summand"), 1, "a parameter's description");
}
