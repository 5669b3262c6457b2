//! The integration tests, in one test binary: each file of tests/ is a module here (its own name, its own
//! `mod common;`), so that `cargo test` compiles and links one binary instead of one per file (each linked the
//! library and its dependencies; the eleven took twice the CPU time of this one). tests/real_vocab.rs stays a binary
//! of its own, because the test stage without default features runs it alone (`cargo test --no-default-features
//! --test real_vocab`).
//!
//! One suite: `cargo test --release --test integration ffi::` (the module name, then `::`); one test:
//! `cargo test --release --test integration ffi::version_and_status_strings`. A new file in tests/ must be added
//! below (`every_test_file_is_compiled` fails otherwise).
// Each file keeps its `mod common;` (tests/common/mod.rs), so each module has its own copy of the helpers, as when
// each file was a binary: the files are unchanged and still compile alone.
#![allow(clippy::duplicate_mod)]

#[path = "calls.rs"]
mod calls;
#[path = "calls_ffi.rs"]
mod calls_ffi;
#[path = "cli.rs"]
mod cli;
#[path = "compiled_dir.rs"]
mod compiled_dir;
#[path = "derived.rs"]
mod derived;
#[path = "draft.rs"]
mod draft;
#[path = "ffi.rs"]
mod ffi;
#[path = "file_format.rs"]
mod file_format;
#[path = "hf_automaton.rs"]
mod hf_automaton;
#[path = "hf_direct.rs"]
mod hf_direct;
#[path = "hf_vocab.rs"]
mod hf_vocab;
#[path = "hostile.rs"]
mod hostile;
#[path = "incremental.rs"]
mod incremental;
#[path = "recognize.rs"]
mod recognize;
#[path = "robustness.rs"]
mod robustness;
#[path = "search.rs"]
mod search;
#[path = "template.rs"]
mod template;
#[path = "values.rs"]
mod values;

/// Every `tests/*.rs` file is either a module above or a `[[test]]` target of Cargo.toml (`autotests = false`
/// there: cargo no longer finds test files by itself, so a forgotten one would silently not run).
#[test]
fn every_test_file_is_compiled() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let this = include_str!("integration.rs");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(root.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    for f in &files {
        let module = format!("#[path = \"{f}\"]");
        let target = format!("path = \"tests/{f}\"");
        assert!(
            this.contains(&module) || manifest.contains(&target),
            "tests/{f} is neither a module of tests/integration.rs nor a [[test]] of Cargo.toml: it would not run"
        );
    }
}
