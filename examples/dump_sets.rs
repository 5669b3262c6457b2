//! Dump the deterministic benchmark sets to text files, one string per line (UTF-8, `\n`-terminated), so that every
//! engine of the side-by-side benchmark (`scripts/bench-peers.sh`) reads exactly the same strings.
//!
//! `cargo run --release --example dump_sets -- OUT_DIR [MAX_K]` writes `OUT_DIR/{tools,words,cities}-{K}.txt` for
//! K = 10, 100, ..., MAX_K (default 1,000,000). `tools` and `words` come from `benches/workloads` (the generator of the
//! engine bench, seed 42); `cities` is a multi-byte UTF-8 workload generated here: made-up place names built from
//! syllables of ten scripts (Latin with diacritics, Cyrillic, Greek, Arabic, Devanagari, Hangul, kana, Han, Thai,
//! Hebrew), one script per name, some with a second word. `geonames` (when `scripts/fetch-cities.sh` has fetched
//! it) is real: GeoNames city names ("Name, CC" and non-Latin-script alternate names), the first K of the file
//! shuffled with seed 42, as in the engine bench; K up to 100,000.
#[path = "../benches/workloads/mod.rs"]
mod workloads;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::io::Write;

const SCRIPTS: &[&[&str]] = &[
    &[
        "São", "Zü", "rich", "Mün", "chen", "Kraków", "Łódź", "é", "ñu", "Ål", "borg", "Ís", "fjör", "ður", "çe",
        "şehir", "ğa", "Brně", "Ørsted", "Ñan",
    ],
    &[
        "Мо",
        "ск",
        "ва",
        "Пе",
        "тер",
        "бург",
        "Ки",
        "ев",
        "Но",
        "во",
        "си",
        "бирск",
        "Ка",
        "зань",
        "Ом",
        "ск",
        "Ту",
        "ла",
        "Яр",
        "слав",
    ],
    &[
        "Αθ", "ή", "να", "Θεσ", "σα", "λο", "νί", "κη", "Πά", "τρα", "Ηρά", "κλει", "ο", "Βό", "λος", "Χα", "νιά",
        "Ρό", "δος", "Κέρ",
    ],
    &[
        "ال", "قا", "هرة", "دبي", "بغ", "داد", "دمش", "ق", "الر", "ياض", "عمّ", "ان", "بي", "روت", "تو", "نس", "مر",
        "اكش", "جدة", "حلب",
    ],
    &[
        "मुं",
        "बई",
        "दि",
        "ल्ली",
        "को",
        "लका",
        "ता",
        "चे",
        "न्नई",
        "पु",
        "णे",
        "जय",
        "पुर",
        "ल",
        "खन",
        "ऊ",
        "कान",
        "पुर",
        "ना",
        "गपुर",
    ],
    &[
        "서", "울", "부", "산", "대", "구", "인", "천", "광", "주", "대", "전", "울", "산", "수", "원", "창", "원",
        "고", "양",
    ],
    &[
        "とう",
        "きょう",
        "おお",
        "さか",
        "きょう",
        "と",
        "よこ",
        "はま",
        "なご",
        "や",
        "さっ",
        "ぽろ",
        "コウ",
        "ベ",
        "フク",
        "オカ",
        "セン",
        "ダイ",
        "ヒロ",
        "シマ",
    ],
    &[
        "東", "京", "大", "阪", "北", "上", "海", "广", "州", "深", "圳", "成", "都", "重", "庆", "杭", "武", "汉",
        "西", "安",
    ],
    &[
        "กรุง",
        "เทพ",
        "เชียง",
        "ใหม่",
        "ภู",
        "เก็ต",
        "พัท",
        "ยา",
        "ขอน",
        "แก่น",
        "อุดร",
        "ธานี",
        "หาด",
        "ใหญ่",
        "นคร",
        "ราช",
        "สีมา",
        "ลำ",
        "ปาง",
        "ตรัง",
    ],
    &[
        "ירו", "שלים", "תל", "אביב", "חי", "פה", "באר", "שבע", "אי", "לת", "נת", "ניה", "עכו", "צפת", "רמת", "גן",
        "חו", "לון", "יפו", "לוד",
    ],
];

/// `k` distinct made-up place names, each from one script, 2 to 4 syllables, 15% with a second word.
pub fn cities(k: usize, seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut set = BTreeSet::new();
    while set.len() < k {
        let script = SCRIPTS[rng.gen_range(0..SCRIPTS.len())];
        let extra = (k > 10_000) as usize + (k > 100_000) as usize * 2;
        let word = |rng: &mut SmallRng| -> String {
            let n = rng.gen_range(2..=4 + extra);
            (0..n).map(|_| script[rng.gen_range(0..script.len())]).collect()
        };
        let mut name = word(&mut rng);
        if rng.gen_bool(0.15) {
            name.push(' ');
            name.push_str(&word(&mut rng));
        }
        set.insert(name);
    }
    let mut v: Vec<String> = set.into_iter().collect();
    for i in (1..v.len()).rev() {
        v.swap(i, rng.gen_range(0..=i));
    }
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = std::path::PathBuf::from(args.get(1).expect("usage: dump_sets OUT_DIR [MAX_K]"));
    let max_k: usize = args.get(2).map(|s| s.parse().expect("MAX_K")).unwrap_or(1_000_000);
    std::fs::create_dir_all(&out).unwrap();
    let geonames = workloads::geonames_all(42);
    if geonames.is_none() {
        eprintln!("dump_sets: no GeoNames file (scripts/fetch-cities.sh): no geonames sets");
    }
    for workload in ["tools", "words", "cities", "geonames"] {
        let mut k = 10;
        while k <= max_k {
            if workload == "geonames" && (k > 100_000 || geonames.as_ref().map_or(true, |g| g.len() < k)) {
                break;
            }
            let path = out.join(format!("{workload}-{k}.txt"));
            if !path.exists() {
                let set = match workload {
                    "tools" => workloads::tool_names(k, 42),
                    "words" => workloads::words(k, 42),
                    "geonames" => geonames.as_ref().unwrap()[..k].to_vec(),
                    _ => cities(k, 42),
                };
                let tmp = path.with_extension("tmp");
                let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).unwrap());
                for s in &set {
                    assert!(!s.contains('\n'));
                    writeln!(f, "{s}").unwrap();
                }
                f.flush().unwrap();
                drop(f);
                std::fs::rename(&tmp, &path).unwrap();
            }
            println!("{}", path.display());
            k *= 10;
        }
    }
}
