//! Compile a file of strings (one per line) against a GGUF vocabulary, phase by phase, and report what each phase
//! took, where the states and bytes went, the peak resident size, and the saved file's size and load time. One
//! JSON object on stdout. For the large-set figures of `docs/bench/npm.md`:
//!
//! `cargo run --release --example compile_lines -- VOCAB.gguf LINES.txt [K] [--save PATH] [--whole]`
//!
//! `K` keeps the first K lines after a seeded shuffle (seed 42, as the engine bench); `--whole` compiles with
//! `Automaton::compile` instead of the timed phases (the peak RSS of the public call). The peak resident size is
//! the process's `VmHWM` (Linux), read after the input is in memory and again after the compile. With `--save`,
//! the saved file is loaded five times with `Automaton::load` and five times with `Automaton::load_lazy` (medians),
//! and the lazily loaded automaton is then used: the masks of the states of 200 random decodes (first use: rows
//! checked, pages read; then again), and the first member lookup (the whole check). Per state: the masks once every
//! state was used (`mask_us_*`), the first use after a lazy load (`first_use_us_*`), the first use of each distinct
//! state after an eager load (`first_eager_us_*`: the walk of rows derived on use, before the row cache has them),
//! the bytes the row cache then holds, and the steps.
//!
//! `cargo run --release --example compile_lines -- VOCAB.gguf --load FILE.trie`: the load figures of a saved file
//! only (a file of an earlier format version, say). `--byte-rows-max N`: the largest row a branching state derives
//! from its byte children (`CompileOptions::byte_rows_max`, for measuring the choice; 0: none).
#[path = "../benches/workloads/mod.rs"]
mod workloads;

use std::sync::Arc;
use std::time::Instant;
use trie::{Automaton, CompileOptions, Vocabulary};

fn vm(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().position(|a| a == f);
    let save = flag("--save").map(|i| args[i + 1].clone());
    let mut options = CompileOptions::default();
    if let Some(i) = flag("--byte-rows-max") {
        options = options.byte_rows_max(args[i + 1].parse().unwrap());
    }
    let whole = flag("--whole").is_some();
    let pos: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            !a.starts_with("--")
                && flag("--save").map_or(true, |s| i != s + 1)
                && flag("--byte-rows-max").map_or(true, |s| i != s + 1)
        })
        .map(|(_, a)| a)
        .collect();
    let vocab = Arc::new(Vocabulary::from_gguf(pos[0]).unwrap());
    if let Some(i) = flag("--load") {
        println!("{{{}}}", load_figures(&vocab, &args[i + 1]));
        return;
    }
    let text = std::fs::read_to_string(pos[1]).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    if let Some(k) = pos.get(2).map(|k| k.parse::<usize>().unwrap()) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
        for i in (1..lines.len()).rev() {
            lines.swap(i, rng.gen_range(0..=i));
        }
        lines.truncate(k);
    }
    let input_bytes: usize = lines.iter().map(|l| l.len()).sum();
    let rss_before = vm("VmRSS:");
    let hwm_before = vm("VmHWM:");
    let t = Instant::now();
    let (a, phases) = if whole {
        (Automaton::compile(vocab.clone(), &lines, &options).unwrap(), None)
    } else {
        let (a, p) = trie::profile::compile_phases(vocab.clone(), &lines, &options).unwrap();
        (a, Some(p))
    };
    let compile_ms = t.elapsed().as_secs_f64() * 1e3;
    let hwm_after = vm("VmHWM:");
    let mut out = format!(
        "{{\"members\":{},\"input_bytes\":{input_bytes},\"compile_ms\":{compile_ms:.1},\"states\":{},\"explicit_states\":{},\"chain_states\":{},\"transitions\":{},\"automaton_bytes\":{},\"rss_before_compile\":{rss_before},\"peak_rss_before_compile\":{hwm_before},\"peak_rss\":{hwm_after}",
        a.n_members(),
        a.n_states(),
        a.n_explicit(),
        a.n_states() - a.n_explicit(),
        a.allowed_total(),
        a.memory_usage()
    );
    if let Some(p) = phases {
        out.push_str(&format!(
            ",\"trie_ms\":{:.1},\"align_ms\":{:.1},\"freeze_ms\":{:.1},\"explicit_nodes\":{},\"unary_explicit_nodes\":{},\"chains\":{},\"chain_positions\":{},\"edges\":{},\"edges_into_chains\":{},\"edges_from_unary\":{},\"peak_after_trie\":{},\"peak_after_align\":{},\"peak_after_freeze\":{}",
            p.trie_ms,
            p.align_ms,
            p.freeze_ms,
            p.explicit_nodes,
            p.unary_explicit_nodes,
            p.chains,
            p.chain_positions,
            p.edges,
            p.edges_into_chains,
            p.edges_from_unary,
            p.peak_after_trie,
            p.peak_after_align,
            p.peak_after_freeze
        ));
    }
    out.push_str(",\"parts\":{");
    let parts: Vec<String> = a.memory_parts().iter().map(|(n, b)| format!("\"{n}\":{b}")).collect();
    out.push_str(&parts.join(","));
    out.push('}');
    if let Some(path) = save {
        let t = Instant::now();
        a.save(&path).unwrap();
        let save_ms = t.elapsed().as_secs_f64() * 1e3;
        drop(a);
        out.push_str(&format!(",\"save_ms\":{save_ms:.1},{}", load_figures(&vocab, &path)));
    }
    out.push('}');
    println!("{out}");
}

/// The load figures of a saved file (JSON fields): its size and version, the median of five eager and five lazy
/// loads, then the costs of first use of the lazily loaded automaton.
fn load_figures(vocab: &Arc<Vocabulary>, path: &str) -> String {
    use rand::{Rng, SeedableRng};
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let file_bytes = std::fs::metadata(path).unwrap().len();
    let head = std::fs::read(path).map(|b| b[8..12].to_vec()).unwrap();
    let version = u32::from_ne_bytes(head.try_into().unwrap());
    let (mut eager, mut lazy) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(Automaton::load(vocab.clone(), path).unwrap());
        eager.push(ms(t));
        let t = Instant::now();
        std::hint::black_box(Automaton::load_lazy(vocab.clone(), path).unwrap());
        lazy.push(ms(t));
    }
    let a = Automaton::load_lazy(vocab.clone(), path).unwrap();
    let is_lazy = a.is_lazy();
    // The states of 200 random decodes (random allowed tokens until FINISHED).
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut states = Vec::new();
    for _ in 0..200 {
        let mut s = a.start();
        loop {
            states.push(s);
            let allowed = a.allowed(s);
            let t = allowed[rng.gen_range(0..allowed.len())];
            match a.advance(s, t).unwrap() {
                trie::Step::Next(n) => s = n,
                trie::Step::Finished => break,
            }
        }
    }
    let mut row = vec![0u32; a.mask_words()];
    let mut masks = |a: &Automaton| {
        let t = Instant::now();
        for &s in &states {
            a.fill_bitmask(s, &mut row).unwrap();
        }
        ms(t)
    };
    let fresh = Automaton::load_lazy(vocab.clone(), path).unwrap();
    let (first, again) = (masks(&fresh), masks(&fresh));
    // Steady state, interleaved: the masks of an eagerly loaded automaton against the lazily loaded one (medians
    // of 5 passes each).
    let eager_a = Automaton::load(vocab.clone(), path).unwrap();
    let (mut e_ms, mut l_ms) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        e_ms.push(masks(&eager_a));
        l_ms.push(masks(&fresh));
    }
    // Per state (the issue 38 targets): masks of the eagerly loaded automaton once every state was used, the
    // first use of each state after a lazy load, and the steps of the decodes (Instant's own cost included).
    let per_state = |a: &Automaton, row: &mut Vec<u32>| -> Vec<f64> {
        let mut v: Vec<f64> = states
            .iter()
            .map(|&s| {
                let t = Instant::now();
                a.fill_bitmask(s, row).unwrap();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let pct = |v: &[f64], p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let steady = per_state(&eager_a, &mut row);
    let first_use = per_state(&Automaton::load_lazy(vocab.clone(), path).unwrap(), &mut row);
    // The first mask of each distinct state of the decodes on a fresh, eagerly loaded automaton: rows derived on
    // use are walked (not yet cached), nothing else is checked.
    let fresh_eager = Automaton::load(vocab.clone(), path).unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut first_walk: Vec<f64> = states
        .iter()
        .filter(|&&s| seen.insert(s))
        .map(|&s| {
            let t = Instant::now();
            fresh_eager.fill_bitmask(s, &mut row).unwrap();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    first_walk.sort_by(f64::total_cmp);
    let mut steps: Vec<f64> = Vec::new();
    for w in states.windows(2) {
        if let Some(&t) =
            eager_a.allowed(w[0]).iter().find(|&&t| eager_a.advance(w[0], t) == Ok(trie::Step::Next(w[1])))
        {
            let t0 = Instant::now();
            std::hint::black_box(eager_a.advance(w[0], t).unwrap());
            steps.push(t0.elapsed().as_secs_f64() * 1e9);
        }
    }
    steps.sort_by(f64::total_cmp);
    let per = format!(
        "\"mask_us_p50\":{:.2},\"mask_us_p99\":{:.2},\"mask_us_max\":{:.2},\"first_use_us_p50\":{:.2},\"first_use_us_p99\":{:.2},\"first_eager_us_p50\":{:.2},\"first_eager_us_p99\":{:.2},\"first_eager_us_max\":{:.2},\"row_cache_bytes\":{},\"advance_ns_p50\":{:.0},\"advance_ns_p99\":{:.0}",
        pct(&steady, 0.5),
        pct(&steady, 0.99),
        pct(&steady, 1.0),
        pct(&first_use, 0.5),
        pct(&first_use, 0.99),
        pct(&first_walk, 0.5),
        pct(&first_walk, 0.99),
        pct(&first_walk, 1.0),
        eager_a.row_cache_usage(),
        pct(&steps, 0.5),
        pct(&steps, 0.99)
    );
    let t = Instant::now();
    assert!(a.member_bytes(0).is_some());
    let whole_ms = ms(t);
    format!(
        "\"file_bytes\":{file_bytes},\"file_version\":{version},\"load_ms\":{:.1},\"load_lazy_ms\":{:.2},\"lazy\":{is_lazy},\"decode_states\":{},\"lazy_masks_first_ms\":{first:.2},\"lazy_masks_again_ms\":{again:.2},\"masks_eager_ms\":{:.2},\"masks_lazy_ms\":{:.2},\"lazy_whole_check_ms\":{whole_ms:.1},{per}",
        workloads::median(eager),
        workloads::median(lazy),
        states.len(),
        workloads::median(e_ms),
        workloads::median(l_ms)
    )
}
