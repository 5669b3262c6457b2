//! Time `Vocabulary::from_tokenizer_json_bytes` (the direct reader where it applies) against the `tokenizers`
//! crate path, same run, on each file given, from the bytes in memory: median of REPS (default 5) wall and process
//! CPU times, the floor `Vocabulary::new` on the finished token list, and whether the file was read directly.
//! One JSON object per file on stdout. For the figures of `docs/bench/npm.md`:
//!
//! `cargo run --release --example load_tokenizer_json -- FILE... [--reps N] [--no-crate]`
use std::time::Instant;
use trie::hf::HfOptions;
use trie::{TokenId, Vocabulary};

fn cpu_ms() -> f64 {
    let mut t = libc::rusage { ..unsafe { std::mem::zeroed() } };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut t) };
    let ms = |v: libc::timeval| v.tv_sec as f64 * 1e3 + v.tv_usec as f64 / 1e3;
    ms(t.ru_utime) + ms(t.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time(reps: usize, f: &dyn Fn()) -> (f64, f64) {
    let (wall, cpu): (Vec<f64>, Vec<f64>) = (0..reps)
        .map(|_| {
            let (s, c) = (Instant::now(), cpu_ms());
            f();
            (s.elapsed().as_secs_f64() * 1e3, cpu_ms() - c)
        })
        .unzip();
    (median(wall), median(cpu))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps = args.iter().position(|a| a == "--reps").map_or(5, |i| args[i + 1].parse().unwrap());
    let no_crate = args.iter().any(|a| a == "--no-crate");
    let files: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--reps"))
        .map(|(_, a)| a)
        .collect();
    let opts = HfOptions::default();
    for path in files {
        let bytes = std::fs::read(path).unwrap();
        let v = Vocabulary::from_tokenizer_json_bytes(&bytes, &opts).unwrap();
        let (direct_ms, direct_cpu) =
            time(reps, &|| drop(std::hint::black_box(Vocabulary::from_tokenizer_json_bytes(&bytes, &opts).unwrap())));
        let tokens: Vec<Vec<u8>> = (0..v.n_listed() as TokenId).map(|t| v.token_bytes(t).to_vec()).collect();
        let kinds: Vec<_> = (0..v.n_listed() as TokenId).map(|t| v.kind(t)).collect();
        let (new_ms, new_cpu) = time(reps, &|| {
            drop(std::hint::black_box(Vocabulary::new(tokens.clone(), kinds.clone(), v.eog_ids(), None).unwrap()))
        });
        let crate_part = if no_crate {
            String::new()
        } else {
            let (ms, cpu) = time(reps, &|| {
                drop(std::hint::black_box(Vocabulary::from_tokenizer_json_bytes_via_tokenizers(&bytes, &opts).unwrap()))
            });
            format!(
                ",\"tokenizers_ms\":{ms:.1},\"tokenizers_cpu_ms\":{cpu:.1},\"ratio_wall\":{:.2},\"ratio_cpu\":{:.2}",
                ms / direct_ms,
                cpu / direct_cpu
            )
        };
        println!(
            "{{\"file\":\"{path}\",\"bytes\":{},\"n_listed\":{},\"direct\":{},\"direct_ms\":{direct_ms:.1},\"direct_cpu_ms\":{direct_cpu:.1},\"vocabulary_new_ms\":{new_ms:.1},\"vocabulary_new_cpu_ms\":{new_cpu:.1}{crate_part},\"load\":\"{}\"}}",
            bytes.len(),
            v.n_listed(),
            Vocabulary::tokenizer_json_reads_directly(&bytes),
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?"),
        );
    }
}
