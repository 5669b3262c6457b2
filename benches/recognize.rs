//! Recognizing a request vs compiling its set: K tool names (K = 10,000 and 100,000 by default) written as
//! vLLM's choice grammar, llama.cpp's json_schema_to_grammar enum, a JSON schema enum, a choice list and a regex;
//! each is recognized (median of 7) and the recognized members compiled on the qwen2 vocabulary (median of 3).
//! Prints one JSON object per line with `ratio` = recognize / compile (wall-clock medians) and `cpu_ratio` (process
//! CPU time: compile's counts every thread).
//!
//! Then (first, and alone with `--hostile`) hostile request texts of at most 1 MB at the default limits: expansion
//! bombs, deep nesting, million-member lists, huge literals; one JSON row each with the answer, the time (median of
//! 5) and the peak extra heap (a counting global allocator). Target: <= 50 ms and <= 64 MB each.
//!
//! `cargo bench --bench recognize -- [--hostile] [--vocab NAME] [--k 100000]`
mod workloads;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Relaxed) + new - l.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Hostile texts of at most 1 MB (name, shape, text).
fn hostile() -> Vec<(&'static str, Shape, String)> {
    let digits = "d ::= \"0\" | \"1\" | \"2\" | \"3\" | \"4\" | \"5\" | \"6\" | \"7\" | \"8\" | \"9\"";
    let mut square = String::from("root ::= r40\nr0 ::= d\n");
    for i in 1..=40 {
        square.push_str(&format!("r{i} ::= r{} r{}\n", i - 1, i - 1));
    }
    square.push_str(digits);
    let mut wide = String::from("root ::= x");
    while wide.len() < 4000 {
        wide.push_str(" x");
    }
    wide.push_str(&format!("\nx ::= d d\n{digits}"));
    let copies = format!("root ::= {}\nx ::= d d d\n{digits}", vec!["x \"\""; 60_000].join(" | "));
    let mb = 1 << 20;
    let fill = |unit: &str, head: &str, tail: &str| {
        let n = (mb - head.len() - tail.len()) / unit.len();
        format!("{head}{}{tail}", unit.repeat(n))
    };
    let list = |item: &str, head: &str, tail: &str| {
        let n = (mb - head.len() - tail.len()) / (item.len() + 1);
        format!("{head}{}{tail}", vec![item; n].join(","))
    };
    vec![
        ("bomb_90_bytes", Shape::Grammar, format!("root ::= d d d d d d d \"\"\n{digits}")),
        ("bomb_squares", Shape::Grammar, square),
        ("bomb_4kb_wide", Shape::Grammar, wide),
        ("bomb_memo_copies", Shape::Grammar, copies),
        ("bomb_bytes", Shape::Grammar, format!("root ::= w w w\nw ::= \"{0}\" | \"{0}b\"", "a".repeat(300_000))),
        ("json_deep_arrays", Shape::JsonSchema, fill("[", "", "")),
        ("json_deep_anyof", Shape::JsonSchema, fill("{\"anyOf\": [", "", "")),
        ("grammar_deep_parens", Shape::Grammar, fill("(", "root ::= ", "\"a\"")),
        ("grammar_pipes", Shape::Grammar, fill("|", "root ::= \"a\" ", "")),
        ("choices_1m_members", Shape::Choices, list("\"\"", "[", "]")),
        ("enum_1m_members", Shape::JsonSchema, list("0", "{\"enum\": [", "]}")),
        ("tools_1m_members", Shape::Tools, list("{}", "[", "]")),
        (
            "vllm_tools_1m_members",
            Shape::VllmTools,
            list("{}", "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"object\", \"anyOf\": [", "]}}"),
        ),
        ("grammar_1m_alternatives", Shape::Grammar, list("\"\"", "root ::= ", "").replace(',', "|")),
        ("regex_1m_alternatives", Shape::Regex, fill("a|", "", "a")),
        ("grammar_huge_literal", Shape::Grammar, fill("a", "root ::= \"", "\"")),
        ("choices_huge_string", Shape::Choices, fill("a", "[\"", "\"]")),
        ("enum_huge_numbers", Shape::JsonSchema, list("1e999999", "{\"enum\": [", "]}")),
    ]
}

fn bench_hostile() {
    for (name, shape, text) in hostile() {
        assert!(text.len() <= 1 << 20, "{name}: {} bytes", text.len());
        let mut runs = Vec::new();
        let mut peak = 0;
        let mut answer = String::new();
        for _ in 0..5 {
            let base = LIVE.load(Relaxed);
            PEAK.store(base, Relaxed);
            let t = Instant::now();
            let got = recognize(shape, text.as_bytes());
            runs.push(t.elapsed().as_secs_f64() * 1e3);
            peak = peak.max(PEAK.load(Relaxed) - base);
            answer = match got {
                Ok(trie::sets::recognize::Recognition::Set(r)) => format!("set of {}", r.members.len()),
                Ok(trie::sets::recognize::Recognition::NotASet(_)) => "not a set".into(),
                Err(e) => format!("{:?}", e.kind()),
            };
        }
        println!(
            "{{\"kind\":\"recognize_hostile\",\"request\":\"{name}\",\"text_bytes\":{},\"answer\":\"{answer}\",\"ms\":{:.2},\"peak_extra_mb\":{:.2}}}",
            text.len(),
            median(runs),
            peak as f64 / (1 << 20) as f64
        );
    }
}

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use trie::sets::recognize::{recognize, Shape};
use trie::{Automaton, CompileOptions, Vocabulary};
use workloads::{assets_vocab, median};

/// Wall-clock and process CPU milliseconds of `f` (CPU time sums every thread: on a shared machine it shows the
/// work done where wall-clock time also counts waiting for a core).
fn ms(f: &mut dyn FnMut()) -> (f64, f64) {
    let cpu = || {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
    };
    let (t, c) = (Instant::now(), cpu());
    f();
    (t.elapsed().as_secs_f64() * 1e3, cpu() - c)
}

fn medians(runs: Vec<(f64, f64)>) -> (f64, f64) {
    (median(runs.iter().map(|r| r.0).collect()), median(runs.iter().map(|r| r.1).collect()))
}

fn gbnf(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    bench_hostile();
    if args.iter().any(|a| a == "--hostile") {
        return;
    }
    let vocab_name = arg("--vocab").unwrap_or_else(|| "qwen2".into());
    let ks: Vec<usize> = match arg("--k") {
        Some(k) => vec![k.parse().unwrap()],
        None => vec![10_000, 100_000],
    };
    let vocab = Arc::new(Vocabulary::from_gguf(assets_vocab(&vocab_name)).unwrap());
    for k in ks {
        let names = workloads::tool_names(k, 42);
        let json = |s: &String| serde_json::to_string(s).unwrap();
        let requests = [
            (
                "vllm_choice_grammar",
                Shape::Grammar,
                format!(
                    "root ::= {}",
                    names.iter().map(|n| format!("\"{}\"", gbnf(n))).collect::<Vec<_>>().join(" | ")
                ),
            ),
            (
                "llama_cpp_enum_grammar",
                Shape::Grammar,
                format!(
                    "root ::= ({})\nspace ::= | \" \" | \"\\n\"{{1,2}} [ \\t]{{0,20}}\n",
                    names.iter().map(|n| format!("\"{}\"", gbnf(&json(n)))).collect::<Vec<_>>().join(" | ")
                ),
            ),
            ("json_schema_enum", Shape::JsonSchema, serde_json::json!({"type": "string", "enum": names}).to_string()),
            ("choices", Shape::Choices, serde_json::to_string(&names).unwrap()),
            (
                "regex",
                Shape::Regex,
                format!("^(?:{})$", names.iter().map(|n| n.replace('.', "\\.")).collect::<Vec<_>>().join("|")),
            ),
        ];
        let mut compile_ms = None;
        for (name, shape, text) in requests {
            // Results are dropped outside the timed closures (freeing 100,000 members is not recognizing them).
            let mut members = Vec::new();
            let mut runs = Vec::new();
            for _ in 0..7 {
                let mut got = None;
                runs.push(ms(&mut || got = Some(recognize(shape, text.as_bytes()).unwrap())));
                members = got.unwrap().set().unwrap().members;
            }
            let (rec_ms, rec_cpu) = medians(runs);
            assert_eq!(members.len(), k, "{name}");
            let (c, c_cpu) = *compile_ms.get_or_insert_with(|| {
                let mut runs = Vec::new();
                for _ in 0..3 {
                    let mut got = None;
                    runs.push(ms(&mut || {
                        got = Some(Automaton::compile(vocab.clone(), &members, &CompileOptions::default()).unwrap())
                    }));
                    black_box(got);
                }
                medians(runs)
            });
            println!(
                "{{\"kind\":\"recognize\",\"vocab\":\"{vocab_name}\",\"k\":{k},\"request\":\"{name}\",\"text_bytes\":{},\"recognize_ms\":{rec_ms:.2},\"compile_ms\":{c:.2},\"ratio\":{:.3},\"recognize_cpu_ms\":{rec_cpu:.2},\"compile_cpu_ms\":{c_cpu:.2},\"cpu_ratio\":{:.3}}}",
                text.len(),
                rec_ms / c,
                rec_cpu / c_cpu
            );
        }
    }
}
