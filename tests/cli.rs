//! The `libtrie` command line (src/bin/libtrie, docs/cli.md) run as operators run it, on real vocabularies: every
//! verb's output agrees with the library, and bad input gives the documented exit code (2 usage, 1 failure) with a
//! message naming the argument or file at fault.

mod common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use trie::sets::recognize::{recognize, Shape};
use trie::{Automaton, End, Render, Vocabulary};

/// Runs `libtrie ARGS` with `stdin` piped in (stderr is a pipe: no progress drawn).
fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_libtrie"))
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the libtrie binary runs");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Runs and asserts exit 0 with nothing on stderr (stderr is not a terminal: no spinner); returns stdout.
fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let o = run(args, stdin);
    assert_eq!(o.status.code(), Some(0), "libtrie {args:?}: {}{}", stdout(&o), stderr(&o));
    assert_eq!(stderr(&o), "", "libtrie {args:?} wrote to stderr");
    stdout(&o)
}

/// Runs and asserts exit `code`, stderr holding every one of `names`; returns stderr.
fn fails(args: &[&str], code: i32, names: &[&str]) -> String {
    let o = run(args, None);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "libtrie {args:?}: stdout {} stderr {err}", stdout(&o));
    for n in names {
        assert!(err.contains(n), "libtrie {args:?}: stderr does not name {n:?}: {err}");
    }
    err
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The value of the `key:` line of a verb's output.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key}: line in {out}"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn compile_inspect_bench_on_a_gguf_vocabulary() {
    let dir = tempdir("cli-gguf");
    let gguf = gguf_path("qwen2");
    let set = write(&dir, "tools.txt", "search_flights\nsearch_hotels\nbook_flight\ncafé au lait\n");
    let out = dir.join("tools.trie");
    let printed = ok(&["compile", s(&set), "--vocab", s(&gguf), "-o", s(&out)], None);

    let vocab = gguf_vocab("qwen2");
    let a = Automaton::load(vocab.clone(), &out).unwrap();
    assert_eq!(a.n_members(), 4);
    assert_eq!(field(&printed, "members"), "4");
    assert_eq!(field(&printed, "dropped"), "0");
    assert_eq!(field(&printed, "states"), format!("{} ({} explicit)", a.n_states(), a.n_explicit()));
    assert_eq!(field(&printed, "size"), format!("{} bytes", std::fs::metadata(&out).unwrap().len()));
    assert!(field(&printed, "time").ends_with(')'), "{printed}");

    // without the vocabulary: the header only; its fingerprint is the vocabulary's
    let header = ok(&["inspect", s(&out)], None);
    assert_eq!(field(&header, "format version"), format!("2 (this libtrie reads 1 to {})", Automaton::FORMAT_VERSION));
    assert_eq!(field(&header, "vocabulary"), format!("fingerprint {:032x}", vocab.fingerprint()));
    assert!(!header.contains("members:"), "{header}");

    let full = ok(&["inspect", s(&out), "--vocab", s(&gguf), "--members", "2"], None);
    assert_eq!(field(&full, "members"), "4");
    assert_eq!(field(&full, "template"), "none (a bare set)");
    assert_eq!(field(&full, "member values"), "no");
    // the first members in byte order, by id
    assert!(full.contains("  0: \"book_flight\"\n  1: \"caf\\xc3\\xa9 au lait\"\n"), "{full}");
    assert!(!full.contains("search_hotels"), "--members 2 lists two: {full}");

    let bench = ok(&["bench", s(&out), "--vocab", s(&gguf), "--decodes", "40", "--seed", "7"], None);
    assert!(field(&bench, "decodes").starts_with("40 random members (40 ended by end-of-generation, 0 handed over)"));
    assert!(field(&bench, "mask fill").starts_with("p50 "), "{bench}");
    assert!(field(&bench, "advance").starts_with("p50 "), "{bench}");
}

#[test]
fn compile_a_tools_file_with_a_template_on_tokenizer_json() {
    let dir = tempdir("cli-hf");
    let tj = tokenizer_json_path("qwen3");
    let tools = write(
        &dir,
        "registry.json",
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "get_time"}}]"#,
    );
    let out = dir.join("tools.trie");
    let printed = ok(
        &[
            "compile",
            s(&tools),
            "--vocab",
            s(&tj),
            "-o",
            s(&out),
            "--template-prefix",
            "{\"name\": ",
            "--render",
            "json_string",
            "--end",
            "open",
        ],
        None,
    );
    assert!(field(&printed, "set").ends_with("(tools, 2 strings)"), "{printed}");
    let vocab = Arc::new(Vocabulary::from_tokenizer_json(&tj, &Default::default()).unwrap());
    let a = Automaton::load(vocab, &out).unwrap();
    let t = a.template().expect("a template");
    assert_eq!((t.prefix.as_slice(), t.render, t.end), (&b"{\"name\": "[..], Render::JsonString, End::Open));
    let inspected = ok(&["inspect", s(&out), "--vocab", s(&tj)], None);
    assert_eq!(field(&inspected, "template"), "prefix \"{\\\"name\\\": \" suffix \"\" render json_string end open");
    assert!(inspected.contains(": \"{\\\"name\\\": \\\"get_time\\\"\"\n"), "{inspected}");
    // an open template hands every decode over at the end of its segment
    let bench = ok(&["bench", s(&out), "--vocab", s(&tj), "--decodes", "10"], None);
    assert!(field(&bench, "decodes").starts_with("10 random members (0 ended by end-of-generation, 10 handed over)"));
}

#[test]
fn check_reports_what_each_engine_does() {
    let gguf = gguf_path("llama-bpe");
    let schema = r#"{"json_schema": {"enum": ["red", "green", "blue"]}}"#;
    let out = ok(&["check", "-", "--engine", "llama-server", "--vocab", s(&gguf)], Some(schema));
    let expect = recognize(Shape::JsonSchema, br#"{"enum": ["red", "green", "blue"]}"#).unwrap().set().unwrap();
    assert!(out.starts_with(&format!(
        "json_schema: served by libtrie as a set of {} members (recognized as json_schema)\n",
        expect.members.len()
    )));
    assert!(out.contains("  member: \"red\"\n"), "{out}");
    assert!(out.contains("  compiled: "), "{out}");

    // vLLM: a choice list served, a regex that is no set delegated, a required tool call served with vLLM's form
    let body = r#"{"structured_outputs": {"choice": ["yes", "no"], "regex": "[a-z]+"},
                   "tools": [{"type": "function", "function": {"name": "f"}},
                             {"type": "function", "function": {"name": "g"}}], "tool_choice": "required"}"#;
    let out = ok(&["check", "-", "--engine", "vllm"], Some(body));
    assert!(out.contains("structured_outputs.choice: served by libtrie as a set of 2 members"), "{out}");
    assert!(out.contains("structured_outputs.regex: delegated to the engine's backend: not a set"), "{out}");
    assert!(out.contains("tools: served by libtrie as a set of 2 members (recognized as tools)"), "{out}");
    assert!(out.contains("  template: prefix \"[{\\\"name\\\": \""), "vLLM's required-call form: {out}");

    // over the operator's bounds: the engine's path, as the server does (never a 400 for its size), naming the bound
    let out = ok(&["check", "-", "--engine", "llama-server", "--max-inline-strings", "2"], Some(schema));
    assert!(out.starts_with("json_schema: delegated to the engine's backend: not a set: "), "{out}");
    assert!(out.contains("max_members") && out.contains("the engine serves it"), "{out}");
    // a named tool that is not among the tools
    let body = r#"{"tools": [{"type": "function", "function": {"name": "f"}}],
                   "tool_choice": {"type": "function", "function": {"name": "nope"}}}"#;
    let out = ok(&["check", "-", "--engine", "llama-server"], Some(body));
    assert!(out.contains("tools: refused (HTTP 400): \"tool_choice\" names the tool 'nope'"), "{out}");
    // no constraint at all, from a file
    let dir = tempdir("cli-check");
    let plain = write(&dir, "plain.json", r#"{"messages": [{"role": "user", "content": "hi"}]}"#);
    let out = ok(&["check", s(&plain), "--engine", "vllm"], None);
    assert!(out.starts_with("no constrained field"), "{out}");
}

#[test]
fn bad_input_names_the_culprit_with_the_documented_exit_code() {
    let dir = tempdir("cli-bad");
    let gguf = gguf_path("gpt-2");
    let set = write(&dir, "set.txt", "a\nb\n");
    let out = dir.join("out.trie");
    // usage: exit 2
    fails(&["frobnicate"], 2, &["unknown verb 'frobnicate'"]);
    fails(&[], 2, &["no verb given"]);
    fails(&["compile", s(&set), "-o", s(&out)], 2, &["missing option --vocab"]);
    fails(&["compile", s(&set), "--vocab", s(&gguf), "-o", s(&out), "--colour"], 2, &["unknown option '--colour'"]);
    fails(&["compile", s(&set), "--vocab", s(&gguf), "-o", s(&out), "--render", "xml"], 2, &["--render \"xml\""]);
    fails(&["check", s(&set), "--engine", "sglang"], 2, &["--engine \"sglang\""]);
    fails(&["bench", s(&out), "--vocab", s(&gguf), "--decodes", "many"], 2, &["--decodes \"many\""]);
    fails(&["inspect"], 2, &["missing argument FILE"]);
    // failures: exit 1, naming the file
    let missing = dir.join("missing.txt");
    fails(&["compile", s(&missing), "--vocab", s(&gguf), "-o", s(&out)], 1, &["set file", s(&missing)]);
    let bad_gguf = dir.join("cut.gguf");
    std::fs::write(&bad_gguf, &std::fs::read(&gguf).unwrap()[..4096]).unwrap();
    fails(&["compile", s(&set), "--vocab", s(&bad_gguf), "-o", s(&out)], 1, &["--vocab", s(&bad_gguf)]);
    let bad_json = write(&dir, "set.json", "[\"a\", ");
    fails(&["compile", s(&bad_json), "--vocab", s(&gguf), "-o", s(&out)], 1, &["set file", "not JSON"]);
    let dup = write(&dir, "dup.json", "[\"a\", \"a\"]");
    fails(&["compile", s(&dup), "--vocab", s(&gguf), "-o", s(&out)], 1, &["set file", "dup.json"]);
    let body = write(&dir, "body.json", "{\"grammar\": ");
    fails(&["check", s(&body), "--engine", "vllm"], 1, &["BODY", "body.json", "not JSON"]);
    fails(&["check", s(&missing), "--engine", "vllm"], 1, &["BODY", s(&missing)]);
    fails(&["inspect", s(&set)], 1, &["FILE", s(&set), "not a libtrie file"]);
    // a file compiled for another vocabulary
    ok(&["compile", s(&set), "--vocab", s(&gguf), "-o", s(&out)], None);
    let other = gguf_path("qwen2");
    fails(&["inspect", s(&out), "--vocab", s(&other)], 1, &["--vocab", "another vocabulary"]);
    fails(&["bench", s(&out), "--vocab", s(&other)], 1, &["another vocabulary"]);
}
