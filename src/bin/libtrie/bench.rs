//! `libtrie bench`: random member decodes on a compiled file, timing every mask fill and every advance. The
//! numbers are reported, never asserted (they depend on the machine and its load).

use crate::args::{Args, Opt};
use crate::input::{self, VOCAB_OPTS};
use crate::{failed, progress, Fail, Res};
use std::time::Instant;
use trie::{Automaton, Step};

const SYNOPSIS: &str = "FILE --vocab MODEL [--decodes N] [--seed S]";

fn opts() -> Vec<Opt> {
    let mut v: Vec<Opt> = VOCAB_OPTS.into();
    v.push(Opt { name: "decodes", value: true, help: "random member decodes to run (default 1000)" });
    v.push(Opt { name: "seed", value: true, help: "the random seed (default 1)" });
    v
}

/// A small deterministic generator (xorshift64*), enough to pick tokens.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % n
    }
}

/// The `q` quantile of sorted nanoseconds, in microseconds.
fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64 / 1e3
}

/// Timings of `decodes` random decodes: each step fills the mask of the state, picks a random allowed token
/// (an end-of-generation token among them ends the member) and advances.
struct Timings {
    fill_ns: Vec<u64>,
    advance_ns: Vec<u64>,
    finished: usize,
    handed_over: usize,
}

fn decode(automaton: &Automaton, decodes: usize, seed: u64) -> trie::Result<Timings> {
    let mut rng = Rng(seed.max(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut row = vec![0u32; automaton.mask_words()];
    let mut t = Timings { fill_ns: Vec::new(), advance_ns: Vec::new(), finished: 0, handed_over: 0 };
    for _ in 0..decodes {
        let mut state = automaton.start();
        loop {
            let t0 = Instant::now();
            automaton.fill_bitmask(state, &mut row)?;
            t.fill_ns.push(t0.elapsed().as_nanos() as u64);
            let allowed = automaton.allowed(state);
            if allowed.is_empty() {
                t.handed_over += 1; // a complete segment of an open template: handed over
                break;
            }
            let token = allowed[rng.below(allowed.len())];
            let t1 = Instant::now();
            let step = automaton.advance(state, token)?;
            t.advance_ns.push(t1.elapsed().as_nanos() as u64);
            match step {
                Step::Next(next) => state = next,
                Step::Finished => {
                    t.finished += 1;
                    break;
                }
            }
        }
    }
    Ok(t)
}

/// Runs `libtrie bench`.
pub fn run(argv: &[String]) -> Res<()> {
    let opts = opts();
    let Some(a) = Args::parse("bench", SYNOPSIS, argv, &opts)? else { return Ok(()) };
    let path = a.one_positional("FILE (an automaton file)")?;
    let decodes: usize = a.parsed("decodes", 1000)?;
    if decodes == 0 {
        return Err(Fail::Usage("bench: --decodes must be at least 1".into()));
    }
    let seed: u64 = a.parsed("seed", 1)?;
    let vocab = progress::with("loading the vocabulary", || input::vocab(&a))?;
    let automaton = progress::with("loading the file", || Automaton::load(vocab.clone(), path))
        .map_err(|e| failed(format!("FILE with --vocab {}", a.get("vocab").unwrap_or("")), e))?;
    let t0 = Instant::now();
    let mut t = progress::with(&format!("{decodes} decodes"), || decode(&automaton, decodes, seed))
        .map_err(|e| failed("FILE", e))?;
    let wall = t0.elapsed();
    t.fill_ns.sort_unstable();
    t.advance_ns.sort_unstable();
    println!("file:      {path} ({} members, {} states)", automaton.n_members(), automaton.n_states());
    println!(
        "decodes:   {decodes} random members ({} ended by end-of-generation, {} handed over), {} steps, {:.1} ms",
        t.finished,
        t.handed_over,
        t.advance_ns.len(),
        wall.as_secs_f64() * 1e3
    );
    println!(
        "mask fill: p50 {:.2} us, p99 {:.2} us ({} words a row, {} fills)",
        quantile(&t.fill_ns, 0.5),
        quantile(&t.fill_ns, 0.99),
        automaton.mask_words(),
        t.fill_ns.len()
    );
    println!("advance:   p50 {:.3} us", quantile(&t.advance_ns, 0.5));
    Ok(())
}
