//! Sets inside an output cost what the bare set costs: compile time and mask time of tool names with a 40-byte
//! prefix and the `", "arguments": ` suffix (raw members inside quotes, and members rendered as JSON strings,
//! open end) against the bare set, measured in the same run with interleaved repeats. Prints one JSON object per
//! line; ratios are templated / bare. Then, per variant, one tool added and another removed with `with_changes`
//! (median of interleaved repeats) against the compile of the same variant (`update_speedup` = compile / update),
//! the result checked byte for byte against the full compile of the changed list.
//!
//! `cargo bench --bench template -- [--vocab NAME] [--quick]`
mod workloads;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use trie::{Automaton, CompileOptions, End, Render, State, Step, Template, Vocabulary};
use workloads::{assets_vocab, median};

/// 40 bytes: the tool-call frame before a name.
const PREFIX: &str = "<tool_call>\n{\"type\": \"function\", \"name\":";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let vocab_name = arg("--vocab").unwrap_or_else(|| "qwen2".into());
    let vocab = Arc::new(Vocabulary::from_gguf(assets_vocab(&vocab_name)).unwrap());
    assert_eq!(PREFIX.len(), 40);
    let ks: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    for &k in ks {
        let names = workloads::tool_names(k, 42);
        let variants: [(&str, Template); 3] = [
            ("bare", Template::bare()),
            ("raw_quoted", Template::bare().prefix(format!("{PREFIX} \"")).suffix("\", \"arguments\": ")),
            (
                "json_open",
                Template::bare()
                    .prefix(format!("{PREFIX} "))
                    .suffix(", \"arguments\": ")
                    .render(Render::JsonString)
                    .end(End::Open),
            ),
        ];
        let opts = CompileOptions::default();
        // The baseline is the plain compile; the others go through compile_template.
        let compile = |t: &Template| {
            if t.is_bare() {
                Automaton::compile(vocab.clone(), &names, &opts).unwrap()
            } else {
                Automaton::compile_template(vocab.clone(), &names, t, &opts).unwrap()
            }
        };
        let automata: Vec<Automaton> = variants.iter().map(|(_, t)| compile(t)).collect();
        let repeats = if quick || k >= 100_000 { 5 } else { 11 };
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for _ in 0..repeats {
            for (i, (_, t)) in variants.iter().enumerate() {
                let s = Instant::now();
                black_box(compile(t));
                times[i].push(s.elapsed().as_secs_f64() * 1e3);
            }
        }
        let masks: Vec<f64> = automata.iter().map(|a| mask_mean_us(a, 20_000)).collect();
        let base_ms = median(times[0].clone());
        for (i, (name, _)) in variants.iter().enumerate() {
            let ms = median(times[i].clone());
            let a = &automata[i];
            println!(
                "{{\"kind\":\"template\",\"vocab\":\"{vocab_name}\",\"k\":{k},\"variant\":\"{name}\",\"compile_ms\":{ms:.2},\"compile_ratio\":{:.3},\"mask_mean_us\":{:.3},\"mask_ratio\":{:.3},\"states\":{},\"automaton_bytes\":{}}}",
                ms / base_ms,
                masks[i],
                masks[i] / masks[0],
                a.n_states(),
                a.memory_usage()
            );
        }
        // One tool added and one removed (the registry workload), against the compile of the same variant.
        let new_tool = format!("{}_v2", names[k / 3]);
        let gone = names[k / 2].clone();
        for (i, (name, t)) in variants.iter().enumerate() {
            let a = &automata[i];
            let update = || a.with_changes(&[new_tool.as_str()], &[gone.as_str()], &opts).unwrap();
            let mut ms = Vec::new();
            for _ in 0..repeats {
                let s = Instant::now();
                black_box(update());
                ms.push(s.elapsed().as_secs_f64() * 1e3);
            }
            let got = update();
            // The list the update equals: the added tool, then the remaining members in the order of their
            // segments (the ranks of `a`).
            let mut list = vec![new_tool.clone()];
            if t.is_bare() {
                list.extend(names.iter().filter(|n| **n != gone).cloned());
                assert!(got.to_bytes() == Automaton::compile(vocab.clone(), &list, &opts).unwrap().to_bytes());
            } else {
                let by_id = |r: usize| names[a.member_id(r).unwrap()].clone();
                list.extend((0..a.n_members()).map(by_id).filter(|n| *n != gone));
                let full = Automaton::compile_template(vocab.clone(), &list, t, &opts).unwrap();
                assert!(got.to_bytes() == full.to_bytes(), "{name}: the update differs from compile_template");
            }
            let update_ms = median(ms);
            let compile_ms = median(times[i].clone());
            println!(
                "{{\"kind\":\"template_update\",\"vocab\":\"{vocab_name}\",\"k\":{k},\"variant\":\"{name}\",\"update_ms\":{update_ms:.2},\"compile_ms\":{compile_ms:.2},\"update_speedup\":{:.1}}}",
                compile_ms / update_ms
            );
        }
    }
}

/// Mean bitmask fill time (µs) over the states of random decodes (about `n_steps` states), each state filled
/// once; the same decodes' states for every variant would differ, so each variant walks its own.
fn mask_mean_us(a: &Automaton, n_steps: usize) -> f64 {
    let mut rng = SmallRng::seed_from_u64(1);
    let mut steps: Vec<State> = Vec::new();
    while steps.len() < n_steps {
        let mut s = a.start();
        loop {
            steps.push(s);
            let allowed = a.allowed(s);
            if allowed.is_empty() {
                break; // an open segment's end
            }
            match a.advance(s, allowed[rng.gen_range(0..allowed.len())]).unwrap() {
                Step::Next(n) => s = n,
                Step::Finished => break,
            }
        }
    }
    let mut row = vec![0u32; a.mask_words()];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for &s in &steps {
            a.fill_bitmask(s, &mut row).unwrap();
            black_box(&row);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / steps.len() as f64);
    }
    best
}
