//! One "serving process" of the shared compiled directory benchmark (scripts/bench-shared.sh, issue 38 item 3):
//! loads a vocabulary, gets a set file through the request-set front end (`SetCache`, as llama-server and the
//! Python integrations do) with or without a compiled directory, fills masks along random decodes of members, prints
//! one JSON line (timings, whether it compiled, the cache's counters), then sleeps so that the caller can read
//! /proc/PID/smaps_rollup.
//!
//!     cargo run --release --example shared_serve -- VOCAB.gguf SET_DIR SET_NAME COMPILED_DIR|- DECODES SLEEP_S

use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;
use trie::sets::{Options, SetCache};
use trie::{Step, Vocabulary};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [vocab, set_dir, name, compiled, decodes, sleep] = &args[..] else {
        return Err("usage: shared_serve VOCAB.gguf SET_DIR SET_NAME COMPILED_DIR|- DECODES SLEEP_S".into());
    };
    let t = Instant::now();
    let vocab = Arc::new(Vocabulary::from_gguf(vocab)?);
    let vocab_s = t.elapsed().as_secs_f64();
    let options = Options {
        set_dir: Some(set_dir.into()),
        max_file_bytes: 1 << 30,
        cache_dir: (compiled != "-").then(|| compiled.into()),
        ..Options::default()
    };
    let cache = SetCache::new(Some(vocab.clone()), options)?;
    let t = Instant::now();
    let got = cache.get(serde_json::to_string(name)?.as_bytes())?;
    let a = got.automaton;
    let mut row = vec![0u32; a.mask_words()];
    a.fill_bitmask(a.start(), &mut row)?;
    let first_mask_s = t.elapsed().as_secs_f64();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(std::process::id() as u64);
    let (mut masks, t) = (0u64, Instant::now());
    for _ in 0..decodes.parse::<usize>()? {
        let mut s = a.start();
        loop {
            a.fill_bitmask(s, &mut row)?;
            masks += 1;
            let allowed = a.allowed(s);
            match a.advance(s, allowed[rng.gen_range(0..allowed.len())])? {
                Step::Next(next) => s = next,
                Step::Finished => break,
            }
        }
    }
    let masks_s = t.elapsed().as_secs_f64();
    let st = cache.stats();
    println!(
        "{{\"pid\": {}, \"vocab_s\": {vocab_s:.3}, \"first_mask_s\": {first_mask_s:.3}, \"compiled\": {}, \
         \"loaded\": {}, \"mapped\": {}, \"members\": {}, \"states\": {}, \"masks\": {masks}, \"mask_us\": {:.2}}}",
        std::process::id(),
        st.compiles - st.loaded,
        st.loaded,
        a.is_mapped(),
        a.n_members(),
        a.n_states(),
        1e6 * masks_s / masks.max(1) as f64
    );
    std::thread::sleep(std::time::Duration::from_secs_f64(sleep.parse()?));
    Ok(())
}
