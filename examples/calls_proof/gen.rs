//! Generated tool lists: names (unsorted, near-duplicate, prefix-sharing, Unicode), argument schemas (generated,
//! and a few of BFCL's shapes) and valid argument texts for each schema.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

const PIECES: &[&str] = &[
    "get", "_", "weather", "w", "time", "é", "天气", "🌦", "x", "get_we", "Get", "search", "flight", "s", "book", "ö",
    "-", "v2", "_v", "calc", "área", "тест", "a", "b",
];

/// `k` distinct names: pieces glued at random (prefix-sharing, near-duplicates such as `get_weather`/`get_weathers`),
/// and past a few dozen, numbered variants in a shuffled order.
pub fn names(rng: &mut SmallRng, k: usize, taken: &HashSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(k);
    let mut seen: HashSet<String> = HashSet::new();
    let mut stem = String::new();
    while out.len() < k {
        let n = if k > 40 && rng.gen_bool(0.9) {
            if rng.gen_bool(0.2) || stem.is_empty() {
                stem = (0..rng.gen_range(1..=3)).map(|_| *PIECES.choose(rng).unwrap()).collect();
            }
            format!("{stem}_{}", rng.gen_range(0..(k as u64 * 20)))
        } else {
            let mut s: String = (0..rng.gen_range(1..=4)).map(|_| *PIECES.choose(rng).unwrap()).collect();
            if rng.gen_bool(0.2) {
                s.push('s'); // a near-duplicate of another name
            }
            s
        };
        if !taken.contains(&n) && seen.insert(n.clone()) {
            out.push(n);
        }
    }
    out
}

const PROPS: &[&str] = &[
    "location", "unit", "query", "limit", "date", "city", "name", "id", "count", "verbose", "tags", "options", "lat",
    "lon", "price", "currency", "text", "lang", "mode", "path", "user", "start", "end", "q", "k", "ändern", "名前",
];

const STRINGS: &[&str] = &[
    "Paris",
    "東京",
    "São Paulo",
    "a \"quoted\" word",
    "back\\slash",
    "line\nbreak",
    "",
    "x",
    "2026-12-06",
    "emoji 🌦",
    "tab\there",
    "}",
    "]",
    "{\"not\": \"json\"}",
];

fn leaf(rng: &mut SmallRng) -> Value {
    match rng.gen_range(0..8) {
        0 => json!({"type": "string"}),
        1 => json!({"type": "string", "description": "a string with an enum", "enum": pick_strings(rng, 3)}),
        2 => json!({"type": "integer", "minimum": -5, "maximum": 1000}),
        3 => json!({"type": "number"}),
        4 => json!({"type": "boolean"}),
        5 => json!({"type": "string", "enum": ["celsius", "fahrenheit"]}),
        6 => json!({"type": "integer"}),
        _ => json!({"type": "string", "description": "free text"}),
    }
}

fn pick_strings(rng: &mut SmallRng, n: usize) -> Vec<String> {
    let mut v: Vec<String> = STRINGS.choose_multiple(rng, n).map(|s| s.to_string()).collect();
    v.dedup();
    v
}

fn schema_of(rng: &mut SmallRng, depth: u32) -> Value {
    let n = rng.gen_range(0..=if depth == 0 { 5 } else { 3 });
    let mut props = Map::new();
    for p in PROPS.choose_multiple(rng, n) {
        let v = match rng.gen_range(0..10) {
            0 if depth < 2 => schema_of(rng, depth + 1),
            1 => json!({"type": "array", "items": leaf(rng), "maxItems": 3}),
            _ => leaf(rng),
        };
        props.insert(p.to_string(), v);
    }
    let keys: Vec<String> = props.keys().cloned().collect();
    let required: Vec<String> = keys.into_iter().filter(|_| rng.gen_bool(0.6)).collect();
    let mut s = json!({"type": "object", "properties": props, "required": required});
    if rng.gen_bool(0.8) {
        s["additionalProperties"] = json!(false);
    }
    s
}

/// BFCL-like function parameters (the shapes of its `simple` and `multiple` categories, converted to JSON Schema
/// as `bfcl_eval.model_handler.utils.convert_to_tool` does: `dict` → `object`, `float` → `number`).
fn bfcl(rng: &mut SmallRng) -> Value {
    let all = [
        json!({"type": "object", "properties": {
            "base": {"type": "integer", "description": "The base of the triangle."},
            "height": {"type": "integer", "description": "The height of the triangle."},
            "unit": {"type": "string", "description": "The unit of measure (defaults to 'units' if not specified)"}},
            "required": ["base", "height"]}),
        json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}),
        json!({"type": "object", "properties": {
            "principal": {"type": "number"}, "rate": {"type": "number", "description": "annual rate"},
            "years": {"type": "integer"}, "compound": {"type": "boolean", "default": false}},
            "required": ["principal", "rate", "years"]}),
        json!({"type": "object", "properties": {
            "numbers": {"type": "array", "items": {"type": "number"}, "description": "The list of numbers."}},
            "required": ["numbers"]}),
        json!({"type": "object", "properties": {
            "player_name": {"type": "string"}, "team_name": {"type": "string"},
            "stats_fields": {"type": "array", "items": {"type": "string"}}}, "required": ["player_name"]}),
        json!({"type": "object", "properties": {}, "required": []}),
    ];
    all.choose(rng).unwrap().clone()
}

/// An argument schema: generated, or one of BFCL's shapes.
pub fn schema(rng: &mut SmallRng) -> Value {
    if rng.gen_bool(0.25) {
        bfcl(rng)
    } else {
        schema_of(rng, 0)
    }
}

/// A value valid against `s` (the subset of JSON Schema [`schema`] writes).
pub fn instance(rng: &mut SmallRng, s: &Value) -> Value {
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e.choose(rng).cloned().unwrap_or(Value::Null);
    }
    match s.get("type").and_then(Value::as_str).unwrap_or("object") {
        "string" => json!(STRINGS.choose(rng).unwrap()),
        "integer" => {
            let lo = s.get("minimum").and_then(Value::as_i64).unwrap_or(-1000);
            let hi = s.get("maximum").and_then(Value::as_i64).unwrap_or(1_000_000);
            json!(rng.gen_range(lo..=hi))
        }
        "number" => json!([0.5, -2.25, 3.0, 1e-3, 12345.678][rng.gen_range(0..5)]),
        "boolean" => json!(rng.gen_bool(0.5)),
        "array" => {
            let max = s.get("maxItems").and_then(Value::as_u64).unwrap_or(3);
            let items = s.get("items").cloned().unwrap_or(json!({"type": "string"}));
            Value::Array((0..rng.gen_range(0..=max)).map(|_| instance(rng, &items)).collect())
        }
        _ => {
            let mut out = Map::new();
            let req: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map_or(vec![], |r| r.iter().filter_map(Value::as_str).collect());
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    if req.contains(&k.as_str()) || rng.gen_bool(0.5) {
                        out.insert(k.clone(), instance(rng, v));
                    }
                }
            }
            Value::Object(out)
        }
    }
}

/// The text of an argument value as a model writes it: compact, or Python's `json.dumps` spacing.
pub fn text(rng: &mut SmallRng, v: &Value) -> String {
    if rng.gen_bool(0.5) {
        serde_json::to_string(v).unwrap()
    } else {
        spaced(v)
    }
}

fn spaced(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> =
                m.iter().map(|(k, v)| format!("{}: {}", serde_json::to_string(k).unwrap(), spaced(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(spaced).collect::<Vec<_>>().join(", ")),
        _ => serde_json::to_string(v).unwrap(),
    }
}
