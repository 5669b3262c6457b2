//! The engine benchmark: vocabulary index build, compile time per K, per-step lookup/mask/advance cost over full
//! decodes of members, batch mask fill, and automaton size. Prints one JSON object per line.
//!
//! `cargo bench --bench engine -- [--vocab NAME|PATH.gguf] [--min-k N] [--max-k N] [--quick] [--workloads tools,words,geonames]`
//! (`TRIE_BENCH_COMPILE_ONLY=N`: only compile each set N times and print the median, for profilers.)
//! `--vocab-load`: only vocabulary load times (GGUF, tokenizer.json, and the saved-vocabulary file of each); for
//! tokenizer.json also the direct reader (`direct_ms`) against the `tokenizers`-crate path it replaced
//! (`tokenizers_ms`), wall and process CPU time, from the bytes in memory, same run.
//!
//! `geonames` (real GeoNames city names, multi-byte UTF-8) needs `scripts/fetch-cities.sh` first; it is skipped
//! with a note when its file is absent. Its largest K is 100,000 (the file has 179,347 names).
//! `npm` (every public npm package name, 4,499,322; `scripts/fetch-npm-names.sh` first, else skipped with a note)
//! has rows at K = 100,000, 1,000,000 and all (those up to `--max-k` when it is given; none with `--quick`), each
//! followed by a `file` row: the automaton saved, then loaded (memory map + checks), median times.
mod workloads;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use trie::{Automaton, CompileOptions, State, Step, Vocabulary};
use workloads::{assets_vocab, median};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let vocab_name = arg("--vocab").unwrap_or_else(|| "qwen2".into());
    let max_k: usize = arg("--max-k").map(|s| s.parse().unwrap()).unwrap_or(if quick { 10_000 } else { 1_000_000 });

    if args.iter().any(|a| a == "--vocab-load") {
        return vocab_load(if quick { 3 } else { 7 });
    }
    let path = assets_vocab(&vocab_name);
    let meta_t = Instant::now();
    let vocab = Arc::new(Vocabulary::from_gguf(&path).unwrap());
    let load_ms = meta_t.elapsed().as_secs_f64() * 1e3;
    // Index build alone: rebuild from the decoded tokens several times.
    let tokens: Vec<Vec<u8>> = (0..vocab.n_listed() as u32).map(|t| vocab.token_bytes(t).to_vec()).collect();
    let kinds: Vec<_> = (0..vocab.n_listed() as u32).map(|t| vocab.kind(t)).collect();
    let index_ms = median(
        (0..if quick { 3 } else { 7 })
            .map(|_| {
                let (t, k) = (tokens.clone(), kinds.clone());
                let s = Instant::now();
                black_box(Vocabulary::new(t, k, vocab.eog_ids(), Some(vocab.n_vocab())).unwrap());
                s.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );
    println!(
        "{{\"kind\":\"vocab\",\"vocab\":\"{vocab_name}\",\"n_vocab\":{},\"patterns\":{},\"gguf_load_ms\":{load_ms:.2},\"index_build_ms\":{index_ms:.2},\"vocab_bytes\":{}}}",
        vocab.n_vocab(),
        vocab.n_patterns(),
        vocab.memory_usage()
    );

    let names = arg("--workloads").unwrap_or_else(|| "tools,words,geonames,npm".into());
    for workload in names.split(',') {
        if workload == "npm" {
            bench_npm(&vocab, &vocab_name, arg("--max-k").map(|s| s.parse().unwrap()), quick);
            continue;
        }
        let geonames = if workload == "geonames" {
            match workloads::geonames_all(42) {
                Some(all) => Some(all),
                None => {
                    eprintln!("engine bench: no GeoNames file (run scripts/fetch-cities.sh): skipping geonames");
                    continue;
                }
            }
        } else {
            None
        };
        let mut k = arg("--min-k").map(|s| s.parse().unwrap()).unwrap_or(10);
        while k <= max_k {
            let set = match workload {
                "tools" => workloads::tool_names(k, 42),
                "words" => workloads::words(k, 42),
                "geonames" => match &geonames {
                    Some(all) if k <= all.len() => all[..k].to_vec(),
                    _ => break,
                },
                other => panic!("unknown workload {other}"),
            };
            bench_set(&vocab, &vocab_name, workload, &set, quick);
            k *= 10;
        }
    }
}

/// The npm package-name rows: K = 100,000, 1,000,000 and all 4,499,322 (first K of a seeded shuffle), each with
/// its saved file's size, save and load times.
fn bench_npm(vocab: &Arc<Vocabulary>, vocab_name: &str, max_k: Option<usize>, quick: bool) {
    let max_k = max_k.unwrap_or(if quick { 10_000 } else { usize::MAX });
    if max_k < 100_000 {
        return; // no row to make: do not read the 95 MB file
    }
    let Some(all) = workloads::npm_all(42) else {
        eprintln!("engine bench: no npm names file (run scripts/fetch-npm-names.sh): skipping npm");
        return;
    };
    for k in [100_000, 1_000_000, all.len()] {
        if k > max_k.min(all.len()) {
            break;
        }
        let set = &all[..k];
        bench_set(vocab, vocab_name, "npm", set, quick);
        if std::env::var_os("TRIE_BENCH_COMPILE_ONLY").is_some() {
            continue;
        }
        let a = Automaton::compile(vocab.clone(), set, &CompileOptions::default()).unwrap();
        let tmp = std::env::temp_dir().join(format!("trie-bench-npm-{}.bin", std::process::id()));
        let reps = if quick { 3 } else { 7 };
        let save_ms = median(
            (0..reps.min(3))
                .map(|_| {
                    let s = Instant::now();
                    a.save(&tmp).unwrap();
                    s.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        let load_ms = median(
            (0..reps)
                .map(|_| {
                    let s = Instant::now();
                    black_box(Automaton::load(vocab.clone(), &tmp).unwrap());
                    s.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        println!(
            "{{\"kind\":\"file\",\"vocab\":\"{vocab_name}\",\"workload\":\"npm\",\"k\":{k},\"explicit_states\":{},\"chain_states\":{},\"file_bytes\":{},\"save_ms\":{save_ms:.2},\"load_ms\":{load_ms:.2}}}",
            a.n_explicit(),
            a.n_states() - a.n_explicit(),
            std::fs::metadata(&tmp).unwrap().len()
        );
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Vocabulary load times (median of `reps`): GGUF (qwen2, gemma-4) and tokenizer.json (qwen3, llama3, mistral,
/// gemma3, gpt-oss) parsed and indexed, against loading the same vocabulary from libtrie's saved-vocabulary file
/// (memory map + checks).
fn vocab_load(reps: usize) {
    let dir = assets_vocab("qwen2").parent().unwrap().parent().unwrap().to_path_buf();
    let tmp = std::env::temp_dir().join(format!("trie-bench-vocab-{}.bin", std::process::id()));
    let cases: Vec<(&str, &str, PathBuf)> = vec![
        ("gguf", "qwen2", dir.join("vocab/ggml-vocab-qwen2.gguf")),
        ("gguf", "gemma-4", dir.join("vocab/ggml-vocab-gemma-4.gguf")),
        ("tokenizer.json", "qwen3", dir.join("tokenizers/qwen3.tokenizer.json")),
        ("tokenizer.json", "llama3", dir.join("tokenizers/llama3.tokenizer.json")),
        ("tokenizer.json", "mistral-7b-v0.1", dir.join("tokenizers/mistral-7b-v0.1.tokenizer.json")),
        // The 200K+-token files of scripts/fetch-tokenizers.sh (required: it must have run).
        ("tokenizer.json", "gemma3", large_tokenizer_json("gemma3")),
        ("tokenizer.json", "gpt-oss", large_tokenizer_json("gpt-oss")),
    ];
    for (format, name, path) in cases {
        let load = || match format {
            "gguf" => Vocabulary::from_gguf(&path).unwrap(),
            _ => Vocabulary::from_tokenizer_json(&path, &trie::hf::HfOptions { eog_ids: None, n_vocab: None }).unwrap(),
        };
        let ms = median(
            (0..reps)
                .map(|_| {
                    let s = Instant::now();
                    black_box(load());
                    s.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        // tokenizer.json: the direct reader (above) against the `tokenizers` crate path it replaces, same run, from
        // the bytes in memory; wall and CPU time (process CPU, all threads: what a loaded machine distorts least).
        let via_tokenizers = if format == "tokenizer.json" {
            let bytes = std::fs::read(&path).unwrap();
            let opts = trie::hf::HfOptions::default();
            let time = |f: &dyn Fn()| -> (f64, f64) {
                let (wall, cpu): (Vec<f64>, Vec<f64>) = (0..reps)
                    .map(|_| {
                        let (s, c) = (Instant::now(), cpu_ms());
                        f();
                        (s.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
                    })
                    .unzip();
                (median(wall), median(cpu))
            };
            let (direct_ms, direct_cpu) =
                time(&|| drop(black_box(Vocabulary::from_tokenizer_json_bytes(&bytes, &opts).unwrap())));
            let (old_ms, old_cpu) =
                time(&|| drop(black_box(Vocabulary::from_tokenizer_json_bytes_via_tokenizers(&bytes, &opts).unwrap())));
            format!(
                ",\"direct\":{},\"direct_ms\":{direct_ms:.2},\"direct_cpu_ms\":{direct_cpu:.2},\"tokenizers_ms\":{old_ms:.2},\"tokenizers_cpu_ms\":{old_cpu:.2},\"ratio_wall\":{:.2},\"ratio_cpu\":{:.2}",
                Vocabulary::tokenizer_json_reads_directly(&bytes),
                old_ms / direct_ms,
                old_cpu / direct_cpu
            )
        } else {
            String::new()
        };
        let v = load();
        v.save(&tmp).unwrap();
        let saved_ms = median(
            (0..reps)
                .map(|_| {
                    let s = Instant::now();
                    black_box(Vocabulary::load(&tmp).unwrap());
                    s.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        println!(
            "{{\"kind\":\"vocab_load\",\"format\":\"{format}\",\"vocab\":\"{name}\",\"n_vocab\":{},\"load_ms\":{ms:.2}{via_tokenizers},\"saved_load_ms\":{saved_ms:.2},\"saved_bytes\":{}}}",
            v.n_vocab(),
            std::fs::metadata(&tmp).unwrap().len()
        );
    }
    let _ = std::fs::remove_file(&tmp);
}

/// `$TRIE_CACHE/tokenizers/NAME.tokenizer.json` (default `.cache/`), which `scripts/fetch-tokenizers.sh` writes.
fn large_tokenizer_json(name: &str) -> PathBuf {
    let cache = std::env::var_os("TRIE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache"));
    let path = cache.join("tokenizers").join(format!("{name}.tokenizer.json"));
    assert!(path.exists(), "{} not found: run scripts/fetch-tokenizers.sh first", path.display());
    path
}

/// CPU time of the process so far (user + system, all threads), milliseconds.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    (u.ru_utime.tv_sec + u.ru_stime.tv_sec) as f64 * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) as f64 / 1e3
}

fn bench_set(vocab: &Arc<Vocabulary>, vocab_name: &str, workload: &str, set: &[String], quick: bool) {
    let k = set.len();
    let opts = CompileOptions::default();
    if let Some(n) = std::env::var("TRIE_BENCH_COMPILE_ONLY").ok().and_then(|v| v.parse::<usize>().ok()) {
        // Compile `n` times and report the median only (for profilers).
        let ms = median(
            (0..n)
                .map(|_| {
                    let s = Instant::now();
                    black_box(Automaton::compile(vocab.clone(), set, &opts).unwrap());
                    s.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        println!("{{\"kind\":\"compile\",\"workload\":\"{workload}\",\"k\":{k},\"compile_ms\":{ms:.2}}}");
        return;
    }
    let first_t = Instant::now();
    let automaton = Automaton::compile(vocab.clone(), set, &opts).unwrap();
    let first_ms = first_t.elapsed().as_secs_f64() * 1e3;
    let repeats = if k >= 1_000_000 || quick {
        3
    } else if k >= 100_000 {
        5
    } else {
        11
    };
    let compile_ms = median(
        (0..repeats)
            .map(|_| {
                let s = Instant::now();
                black_box(Automaton::compile(vocab.clone(), set, &opts).unwrap());
                s.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );

    // Full decodes of random members along random token paths: record the states of every step.
    let mut rng = SmallRng::seed_from_u64(1);
    let mut steps: Vec<State> = Vec::new();
    let mut decodes = 0;
    while steps.len() < 20_000 && decodes < 2_000 {
        let mut s = automaton.start();
        loop {
            steps.push(s);
            let allowed = automaton.allowed(s);
            // Prefer text tokens so decodes run to the end of a member, as a model mostly does.
            let t = allowed[rng.gen_range(0..allowed.len())];
            match automaton.advance(s, t).unwrap() {
                Step::Next(n) => s = n,
                Step::Finished => break,
            }
        }
        decodes += 1;
    }
    let first_steps = decodes;
    let words = automaton.mask_words();
    let mut row = vec![0u32; words];

    // Allowed-list lookup (ns per step).
    let reps = 5;
    let t = Instant::now();
    let mut acc = 0usize;
    for _ in 0..reps {
        for &s in &steps {
            acc += black_box(automaton.allowed(black_box(s))).len();
        }
    }
    black_box(acc);
    let lookup_ns = t.elapsed().as_secs_f64() * 1e9 / (reps * steps.len()) as f64;

    // Bitmask fill per step: timings of each step to report mean, median, p99 and the first step.
    let mut per_step: Vec<f64> = Vec::with_capacity(steps.len());
    for &s in &steps {
        let t = Instant::now();
        automaton.fill_bitmask(s, &mut row).unwrap();
        black_box(&row);
        per_step.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let mean_us = per_step.iter().sum::<f64>() / per_step.len() as f64;
    let first_us = {
        let t = Instant::now();
        for _ in 0..100 {
            automaton.fill_bitmask(automaton.start(), &mut row).unwrap();
            black_box(&row);
        }
        t.elapsed().as_secs_f64() * 1e6 / 100.0
    };
    let mut sorted = per_step.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = sorted[sorted.len() / 2];
    let p99 = sorted[sorted.len() * 99 / 100];

    // Advance per step (ns).
    let t = Instant::now();
    let mut rng2 = SmallRng::seed_from_u64(2);
    let mut n_adv = 0;
    for &s in &steps {
        let allowed = automaton.allowed(s);
        let tok = allowed[rng2.gen_range(0..allowed.len())];
        black_box(automaton.advance(s, tok).unwrap());
        n_adv += 1;
    }
    let advance_ns = t.elapsed().as_secs_f64() * 1e9 / n_adv as f64;

    // Batch fill.
    let mut batch = String::new();
    for b in [1usize, 16, 256] {
        let states: Vec<State> = (0..b).map(|i| steps[(i * 7919) % steps.len()]).collect();
        let mut out = vec![0u32; b * words];
        let iters = (2_000 / b).max(20);
        let t = Instant::now();
        for _ in 0..iters {
            automaton.fill_bitmask_batch(&states, &mut out, words).unwrap();
            black_box(&out);
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        batch.push_str(&format!(",\"batch{b}_us\":{us:.2}"));
    }
    println!(
        "{{\"kind\":\"set\",\"vocab\":\"{vocab_name}\",\"workload\":\"{workload}\",\"k\":{k},\"first_compile_ms\":{first_ms:.2},\"compile_ms\":{compile_ms:.2},\"states\":{},\"transitions\":{},\"automaton_bytes\":{},\"decodes\":{first_steps},\"steps\":{},\"lookup_ns\":{lookup_ns:.1},\"advance_ns\":{advance_ns:.1},\"mask_mean_us\":{mean_us:.3},\"mask_p50_us\":{p50:.3},\"mask_p99_us\":{p99:.3},\"mask_first_step_us\":{first_us:.3}{batch}}}",
        automaton.n_states(),
        automaton.allowed_total(),
        automaton.memory_usage(),
        steps.len(),
    );
}
