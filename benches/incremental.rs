//! Incremental updates against full compiles: for sets of K strings (tool names; multi-byte UTF-8 names), the
//! median time of `with_changes` adding or removing n strings, and of a full compile of the same resulting set.
//! Prints one JSON object per line (and checks once per case that both automata are identical).
//!
//! `cargo bench --bench incremental -- [--vocab NAME|PATH.gguf] [--quick]`
mod workloads;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use trie::{Automaton, CompileOptions, Vocabulary};
use workloads::{assets_vocab, median};

/// Median wall time of `f` in ms: building the result, not dropping it (the caller keeps the automaton it builds,
/// whichever way it was built; freeing is timed by neither).
fn time_ms<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let out = black_box(f());
                let ms = t.elapsed().as_secs_f64() * 1e3;
                drop(out);
                ms
            })
            .collect(),
    )
}

/// Multi-byte names: a city of data/cities-utf8.txt, then a word spelled in Cyrillic, Greek and CJK letters.
fn utf8_names(k: usize, seed: u64) -> Vec<String> {
    const LETTERS: &[&str] = &[
        "а", "б", "в", "г", "д", "е", "ж", "з", "и", "к", "л", "м", "н", "о", "п", "р", "с", "т", "у", "ф", "х", "ц",
        "ч", "ш", "α", "β",
    ];
    let cities: Vec<String> = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/cities-utf8.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    workloads::words(k, seed)
        .into_iter()
        .enumerate()
        .map(|(i, w)| {
            let word: String = w
                .bytes()
                .map(|b| match b {
                    b'a'..=b'z' => LETTERS[(b - b'a') as usize],
                    b'A'..=b'Z' => "日",
                    _ => "本",
                })
                .collect();
            format!("{}・{word}", cities[(i * 7 + w.len()) % cities.len()])
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let vocab_name = arg("--vocab").unwrap_or_else(|| "qwen2".into());
    let vocab = Arc::new(Vocabulary::from_gguf(assets_vocab(&vocab_name)).unwrap());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{{\"kind\":\"machine\",\"cpus\":{},\"loadavg\":\"{}\"}}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let options = CompileOptions::new();
    if let Some(spec) = arg("--profile") {
        // `--profile K,N`: only with_changes adding N tool names to K, in a loop (for a profiler).
        let (k, n) = spec.split_once(',').unwrap();
        let (k, n): (usize, usize) = (k.parse().unwrap(), n.parse().unwrap());
        let pool = workloads::tool_names(k + n, 42);
        let old = Automaton::compile(vocab.clone(), &pool[..k], &options).unwrap();
        let ms = time_ms(200, || old.with_changes(&pool[k..], &[] as &[&str], &options).unwrap());
        println!("{{\"kind\":\"profile\",\"k\":{k},\"n\":{n},\"incremental_ms\":{ms:.3}}}");
        return;
    }
    let ks: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    for workload in ["tools", "utf8"] {
        for &k in ks {
            let pool = match workload {
                "tools" => workloads::tool_names(k + 1000, 42),
                _ => utf8_names(k + 1000, 42),
            };
            let (base, extra) = pool.split_at(k);
            let old = Automaton::compile(vocab.clone(), base, &options).unwrap();
            let reps = if k >= 100_000 { 5 } else { 11 };
            for n in [1usize, 100, 1000] {
                for op in ["add", "remove"] {
                    let (add, remove): (&[String], Vec<String>) = match op {
                        "add" => (&extra[..n], Vec::new()),
                        _ => (&[], (0..n).map(|i| base[i * (k / n)].clone()).collect()),
                    };
                    let result: Vec<String> =
                        add.iter().cloned().chain(base.iter().filter(|s| !remove.contains(s)).cloned()).collect();
                    let inc = old.with_changes(add, &remove, &options).unwrap();
                    let full = Automaton::compile(vocab.clone(), &result, &options).unwrap();
                    assert!(inc.to_bytes() == full.to_bytes(), "{workload} k={k} n={n} {op}: differs");
                    let full_ms = time_ms(reps, || Automaton::compile(vocab.clone(), &result, &options).unwrap());
                    let inc_ms = time_ms(reps, || old.with_changes(add, &remove, &options).unwrap());
                    println!(
                        "{{\"kind\":\"update\",\"vocab\":\"{vocab_name}\",\"workload\":\"{workload}\",\"k\":{k},\"n\":{n},\"op\":\"{op}\",\"states\":{},\"full_ms\":{full_ms:.3},\"incremental_ms\":{inc_ms:.3},\"speedup\":{:.1}}}",
                        full.n_states(),
                        full_ms / inc_ms
                    );
                }
            }
        }
    }
}
