//! Recognizing a request vs compiling its set: K tool names (K = 10,000 and 100,000 by default) written as
//! vLLM's choice grammar, llama.cpp's json_schema_to_grammar enum, a JSON schema enum, a choice list and a regex;
//! each is recognized (median of 7) and the recognized members compiled on the qwen2 vocabulary (median of 3).
//! Prints one JSON object per line with `ratio` = recognize / compile (wall-clock medians) and `cpu_ratio` (process
//! CPU time: compile's counts every thread).
//!
//! `cargo bench --bench recognize -- [--vocab NAME] [--k 100000]`
mod workloads;

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
