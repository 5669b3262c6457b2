//! Opening a set file a request names, confined to the operator's set directory.
//!
//! Invariants: the file is opened once, and its identity ([`FileKey`]), size and content all come from that
//! open file, so a file replaced after the checks cannot be read under the old identity. Under the set
//! directory no symbolic link is followed, in any component (each directory is opened relative to its parent
//! with `O_NOFOLLOW`), `..` and absolute paths are refused, and only regular files within the size bound are
//! opened (a fifo or a device is refused before it is opened, then the open file is checked again).

use crate::error::{Error, ErrorKind, Result};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The identity of an opened set file: a changed file (content replaced, rewritten, touched) has another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
}

/// A set file, open, checked, with its identity taken from the open file.
#[derive(Debug)]
pub(crate) struct Opened {
    pub file: File,
    pub key: FileKey,
}

/// Where set files may come from (the operator's settings).
pub(crate) struct Confinement<'a> {
    /// The real path of the set directory (no symbolic link in it); `None`: no set files.
    pub root: Option<&'a Path>,
    /// Trusted callers only: any readable regular file, absolute or relative to the set directory.
    pub allow_any_path: bool,
    pub max_file_bytes: u64,
}

fn refuse(msg: String) -> Error {
    Error::invalid(msg)
}

fn io_error(what: &str, e: &io::Error) -> Error {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    Error::new(ErrorKind::Io, format!("{what} cannot be read: {text}"))
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| refuse(format!("{what} is not a valid path")))
}

/// `openat(dir, name, flags)` as a `File`.
fn open_at(dir: &File, name: &CString, flags: libc::c_int) -> io::Result<File> {
    // SAFETY: a valid directory fd and a NUL-terminated name; the fd returned is owned by the File.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`'s file type bits, or the error.
fn type_at(dir: &File, name: &CString) -> io::Result<libc::mode_t> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: valid fd, NUL-terminated name, a stat buffer to fill.
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { st.assume_init() }.st_mode & libc::S_IFMT)
}

impl Confinement<'_> {
    /// Opens the set file `raw` (as the request gave it; `what` names it in messages) under these rules.
    pub fn open(&self, raw: &str, what: &str) -> Result<Opened> {
        if raw.contains('\0') {
            return Err(refuse(format!("{what} is not a valid path")));
        }
        let file = if self.allow_any_path { self.open_trusted(raw, what)? } else { self.open_confined(raw, what)? };
        self.checked(file, what)
    }

    fn open_trusted(&self, raw: &str, what: &str) -> Result<File> {
        let path = match self.root {
            Some(root) if !Path::new(raw).is_absolute() => root.join(raw),
            _ => Path::new(raw).to_path_buf(),
        };
        let meta = std::fs::metadata(&path).map_err(|e| self.not_found(what, &e))?;
        if !meta.file_type().is_file() {
            return Err(refuse(format!("{what} is refused: not a regular file")));
        }
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| self.not_found(what, &e))
    }

    fn not_found(&self, what: &str, e: &io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound {
            let where_ = if self.allow_any_path { "" } else { " in the set directory" };
            refuse(format!("{what} does not exist{where_}"))
        } else {
            io_error(what, e)
        }
    }

    fn open_confined(&self, raw: &str, what: &str) -> Result<File> {
        let Some(root) = self.root else {
            return Err(refuse(format!(
                "{what} is refused: this server does not read sets from files (the operator has not configured \
                 LIBTRIE_SET_DIR / --trie-set-dir); pass the members inline ({{\"strings\": [...]}})"
            )));
        };
        if raw.starts_with(['/', '\\', '~']) {
            return Err(refuse(format!(
                "{what} is refused: absolute paths are not allowed; name a set of the set directory or a path \
                 relative to it"
            )));
        }
        let parts: Vec<&str> = raw.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        if raw.split(['/', '\\']).any(|p| p == "..") {
            return Err(refuse(format!("{what} is refused: '..' is not allowed in a set path")));
        }
        let Some((last, dirs)) = parts.split_last() else {
            return Err(refuse(format!("{what} is refused: not a regular file")));
        };
        let mut dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(root)
            .map_err(|e| io_error(what, &e))?;
        for part in dirs {
            let name = cstring(part, what)?;
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            dir = open_at(&dir, &name, flags).map_err(|e| self.refusal(&dir, &name, what, &e))?;
        }
        let name = cstring(last, what)?;
        // The type first, so that a fifo or a device is never opened; then the open file is checked again.
        match type_at(&dir, &name) {
            Ok(libc::S_IFREG) => {}
            Ok(libc::S_IFLNK) => return Err(link_refused(what)),
            Ok(_) => return Err(refuse(format!("{what} is refused: not a regular file"))),
            Err(e) => return Err(self.not_found(what, &e)),
        }
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
        open_at(&dir, &name, flags).map_err(|e| self.refusal(&dir, &name, what, &e))
    }

    /// The message for a failed `openat` of `name` in `dir`: a symbolic link, a missing file, or the error.
    fn refusal(&self, dir: &File, name: &CString, what: &str, e: &io::Error) -> Error {
        match type_at(dir, name) {
            Ok(libc::S_IFLNK) => link_refused(what),
            _ if e.raw_os_error() == Some(libc::ENOTDIR) => {
                refuse(format!("{what} does not exist in the set directory"))
            }
            _ => self.not_found(what, e),
        }
    }

    /// Checks the open file itself (type and size) and takes its identity.
    fn checked(&self, file: File, what: &str) -> Result<Opened> {
        let meta = file.metadata().map_err(|e| io_error(what, &e))?;
        if !meta.file_type().is_file() {
            return Err(refuse(format!("{what} is refused: not a regular file")));
        }
        if meta.size() > self.max_file_bytes {
            return Err(refuse(format!(
                "{what} is refused: {} bytes, more than this server reads ({}, LIBTRIE_MAX_FILE_BYTES / \
                 --trie-max-file-bytes)",
                meta.size(),
                self.max_file_bytes
            )));
        }
        let key = FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        };
        Ok(Opened { file, key })
    }
}

fn link_refused(what: &str) -> Error {
    refuse(format!(
        "{what} is refused: a symbolic link (links are not followed in the set directory, so that no path resolves \
         outside the set directory)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    struct Dir {
        tmp: std::path::PathBuf,
        root: std::path::PathBuf,
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }

    /// A set directory: colors.txt, sub/pets.txt, links out and in, a directory, a fifo, a big file.
    fn dir(tag: &str) -> Dir {
        let tmp = std::env::temp_dir().join(format!("libtrie-confine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let root = tmp.join("sets");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(tmp.join("secret.txt"), "root:x:0:0\n").unwrap();
        std::fs::create_dir_all(tmp.join("outdir")).unwrap();
        std::fs::write(tmp.join("outdir/x.txt"), "x\n").unwrap();
        std::fs::write(root.join("colors.txt"), "red\ngreen\n").unwrap();
        std::fs::write(root.join("sub/pets.txt"), "cat\ndog\n").unwrap();
        symlink(tmp.join("secret.txt"), root.join("escape.txt")).unwrap();
        symlink(root.join("colors.txt"), root.join("alias.txt")).unwrap();
        symlink(tmp.join("outdir"), root.join("linkdir")).unwrap();
        symlink(root.join("sub"), root.join("sublink")).unwrap();
        std::fs::create_dir(root.join("dir.txt")).unwrap();
        let fifo = CString::new(root.join("fifo.txt").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(root.join("big.txt"), "x\n".repeat(600)).unwrap();
        let root = root.canonicalize().unwrap();
        Dir { tmp, root }
    }

    fn conf(root: &Path) -> Confinement<'_> {
        Confinement { root: Some(root), allow_any_path: false, max_file_bytes: 1000 }
    }

    fn refused(c: &Confinement, raw: &str, reason: &str, root: &Path) -> String {
        let e = c.open(raw, &format!("the set file {}", super::super::spec::shown(raw))).expect_err(raw);
        assert!(e.message().contains(reason), "{raw}: {e}");
        if !raw.contains(root.to_str().unwrap()) {
            assert!(!e.message().contains(root.to_str().unwrap()), "the set directory's location is not disclosed");
        }
        e.message().to_string()
    }

    fn content(o: Opened) -> String {
        let mut s = String::new();
        { o.file }.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn files_inside_open() {
        let d = dir("inside");
        let c = conf(&d.root);
        assert_eq!(content(c.open("colors.txt", "x").unwrap()), "red\ngreen\n");
        assert_eq!(content(c.open("./sub//pets.txt", "x").unwrap()), "cat\ndog\n");
        let a = c.open("colors.txt", "x").unwrap().key;
        assert_eq!(a, c.open("./colors.txt", "x").unwrap().key, "one file, one key");
        assert_eq!(a.size, 10);
    }

    #[test]
    fn paths_leaving_the_directory_are_refused() {
        let d = dir("leave");
        let (c, r) = (conf(&d.root), d.root.as_path());
        refused(&c, "/etc/passwd", "absolute paths are not allowed", r);
        refused(&c, d.root.join("colors.txt").to_str().unwrap(), "absolute paths are not allowed", r);
        refused(&c, "~root/.bashrc", "absolute paths are not allowed", r);
        refused(&c, "../secret.txt", "'..' is not allowed", r);
        refused(&c, "sub/../colors.txt", "'..' is not allowed", r);
        refused(&c, "sub\\..\\colors.txt", "'..' is not allowed", r);
        refused(&c, "../../../../../../etc/passwd", "'..' is not allowed", r);
        refused(&c, "escape.txt", "a symbolic link", r);
        refused(&c, "escape.txt", "resolves outside the set directory", r);
        refused(&c, "alias.txt", "a symbolic link", r); // even a link that stays inside: no link is followed
        refused(&c, "linkdir/x.txt", "a symbolic link", r); // an intermediate component
        refused(&c, "sublink/pets.txt", "a symbolic link", r);
        refused(&c, "nul\0.txt", "not a valid path", r);
        refused(&c, "colors.txt/x", "does not exist in the set directory", r);
    }

    #[test]
    fn only_regular_files_within_the_bound() {
        let d = dir("kinds");
        let (c, r) = (conf(&d.root), d.root.as_path());
        refused(&c, "dir.txt", "not a regular file", r);
        refused(&c, "sub/", "not a regular file", r);
        refused(&c, ".", "not a regular file", r);
        refused(&c, "fifo.txt", "not a regular file", r); // never opened: no hang
        refused(&c, "big.txt", "1200 bytes, more than this server reads (1000, LIBTRIE_MAX_FILE_BYTES", r);
        refused(&c, "nope.txt", "does not exist in the set directory", r);
        refused(&c, "nope/x.txt", "does not exist in the set directory", r);
        let m = refused(&c, &"x".repeat(100_000), "cannot be read: File name too long", r);
        assert!(m.len() < 400, "{m}");
        let dev = Confinement { root: Some(Path::new("/dev")), allow_any_path: false, max_file_bytes: 1 << 20 };
        refused(&dev, "null", "not a regular file", Path::new("/nonexistent"));
        refused(&dev, "zero", "not a regular file", Path::new("/nonexistent"));
    }

    #[test]
    fn without_a_set_directory_no_file_is_read() {
        let c = Confinement { root: None, allow_any_path: false, max_file_bytes: 1000 };
        for raw in ["colors.txt", "/etc/passwd", "sub/pets.txt"] {
            refused(&c, raw, "does not read sets from files", Path::new("/nonexistent"));
        }
    }

    #[test]
    fn the_trusted_mode_opens_any_regular_file() {
        let d = dir("trusted");
        let c = Confinement { root: Some(&d.root), allow_any_path: true, max_file_bytes: 1000 };
        let secret = d.tmp.join("secret.txt");
        assert_eq!(content(c.open(secret.to_str().unwrap(), "x").unwrap()), "root:x:0:0\n");
        assert_eq!(content(c.open("alias.txt", "x").unwrap()), "red\ngreen\n");
        refused(&c, "fifo.txt", "not a regular file", Path::new("/nonexistent"));
        refused(&c, "nope.txt", "does not exist", Path::new("/nonexistent"));
    }

    #[test]
    fn a_replaced_file_has_another_key_and_the_open_file_keeps_its_content() {
        let d = dir("replace");
        let c = conf(&d.root);
        let first = c.open("colors.txt", "x").unwrap();
        // Replaced by rename after the open (a new inode): the open file still reads the old content, under the
        // old key; the next open sees the new file under a new key.
        std::fs::write(d.root.join("new.tmp"), "blue\n").unwrap();
        std::fs::rename(d.root.join("new.tmp"), d.root.join("colors.txt")).unwrap();
        let second = c.open("colors.txt", "x").unwrap();
        assert_ne!(first.key, second.key);
        assert_eq!((first.key.size, second.key.size), (10, 5));
        assert_eq!(content(first), "red\ngreen\n");
        assert_eq!(content(second), "blue\n");
        // Replaced by a symbolic link: refused, not followed.
        std::fs::remove_file(d.root.join("colors.txt")).unwrap();
        symlink(d.tmp.join("secret.txt"), d.root.join("colors.txt")).unwrap();
        refused(&c, "colors.txt", "a symbolic link", &d.root);
        // Rewritten in place with the same size: the modification time (with nanoseconds) changes the key.
        let before = c.open("sub/pets.txt", "x").unwrap().key;
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(d.root.join("sub/pets.txt"), "cow\npig\n").unwrap();
        let after = c.open("sub/pets.txt", "x").unwrap().key;
        assert_eq!((before.size, before.ino), (after.size, after.ino));
        assert_ne!(before, after);
    }
}
