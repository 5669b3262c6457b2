//! Saved automata: file size, save time, load time (memory map + checks) against compile time, and the memory of
//! several processes that load the same file (their pages are shared). Prints one JSON object per line.
//!
//! `cargo bench --bench files -- [--vocab NAME|PATH.gguf] [--max-k N] [--procs N]`
mod workloads;

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;
use trie::{Automaton, CompileOptions, State, Vocabulary};
use workloads::{assets_vocab, median};

/// Rss and Pss of this process in kB (Linux; zeros elsewhere).
fn rss_pss_kb() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("Rss:"), field("Pss:"))
}

/// Child mode: load `vocab` and `set`, touch every page by filling the masks of many states, report memory,
/// then wait for a line on stdin (so that every child holds its mapping while the others report).
fn child(vocab: &str, set: &str) {
    let v = Arc::new(Vocabulary::load(vocab).unwrap());
    let a = Automaton::load(v, set).unwrap();
    let mut row = vec![0u32; a.mask_words()];
    let step = (a.n_states() / 20_000).max(1);
    for s in (0..a.n_states()).step_by(step) {
        a.fill_bitmask(State(s as u32), &mut row).unwrap();
    }
    let (rss, pss) = rss_pss_kb();
    println!("{rss} {pss}");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        return child(&args[2], &args[3]);
    }
    let arg = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let vocab_name = arg("--vocab").unwrap_or_else(|| "qwen2".into());
    let max_k: usize = arg("--max-k").map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let procs: usize = arg("--procs").map(|s| s.parse().unwrap()).unwrap_or(4);
    let dir = std::env::temp_dir().join(format!("libtrie-bench-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let gguf = assets_vocab(&vocab_name);
    let t = Instant::now();
    let vocab = Arc::new(Vocabulary::from_gguf(&gguf).unwrap());
    let gguf_ms = t.elapsed().as_secs_f64() * 1e3;
    let vocab_path = dir.join("vocab.trie-vocab");
    vocab.save(&vocab_path).unwrap();
    let vocab_load_ms = median(
        (0..9)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(Vocabulary::load(&vocab_path).unwrap());
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );
    println!(
        "{{\"kind\":\"vocab_file\",\"vocab\":\"{vocab_name}\",\"gguf_load_ms\":{gguf_ms:.2},\"file_load_ms\":{vocab_load_ms:.3},\"file_bytes\":{}}}",
        std::fs::metadata(&vocab_path).unwrap().len()
    );

    let mut k = 10_000;
    while k <= max_k {
        let set = workloads::tool_names(k, 42);
        let t = Instant::now();
        let a = Automaton::compile(vocab.clone(), &set, &CompileOptions::new()).unwrap();
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let path = dir.join(format!("tools-{k}.trie"));
        let t = Instant::now();
        a.save(&path).unwrap();
        let save_ms = t.elapsed().as_secs_f64() * 1e3;
        let load_ms = median(
            (0..9)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(Automaton::load(vocab.clone(), &path).unwrap());
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        // Several processes loading the same files: their resident memory and proportional share.
        let mut children: Vec<_> = (0..procs)
            .map(|_| {
                Command::new(&args[0])
                    .args(["--child", vocab_path.to_str().unwrap(), path.to_str().unwrap()])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut reports = Vec::new();
        for c in &mut children {
            use std::io::BufRead;
            let mut line = String::new();
            std::io::BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
            let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            reports.push((v[0], v[1]));
        }
        for c in &mut children {
            drop(c.stdin.take());
            c.wait().unwrap();
        }
        let rss: u64 = reports.iter().map(|r| r.0).sum::<u64>() / procs as u64;
        let pss: u64 = reports.iter().map(|r| r.1).sum::<u64>() / procs as u64;
        println!(
            "{{\"kind\":\"set_file\",\"vocab\":\"{vocab_name}\",\"workload\":\"tools\",\"k\":{k},\"compile_ms\":{compile_ms:.2},\"save_ms\":{save_ms:.2},\"load_ms\":{load_ms:.3},\"file_bytes\":{},\"automaton_bytes\":{},\"procs\":{procs},\"rss_kb_each\":{rss},\"pss_kb_each\":{pss}}}",
            std::fs::metadata(&path).unwrap().len(),
            a.memory_usage()
        );
        k *= 10;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
