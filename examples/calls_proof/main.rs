//! The generator of the whole-call proof (tests/calls-proof/README.md, scripts/test-calls-proof.sh): tool calls
//! written by libtrie's tool-call engine (`trie::calls`) on real vocabularies, one JSON line each, for the engines'
//! own parsers to read back (llama.cpp's chat parser through tests/calls-proof/llama_chat_driver.cpp, vLLM's tool
//! parsers) and `jsonschema` to check against the tool list the request saw (tests/calls-proof/check.py).
//!
//! `cargo run --release --example calls_proof -- --seed S --walks N --out FILE [--formats hermes,llama,mistral,mistral_v11]
//!  [--max-tools K] [--big K] [--per-request N] [--mutate numbering]`
//!
//! Scenarios, until N call walks are written: inline tool lists (1 to 64 tools; every mode: auto, required, a
//! named tool; parallel on and off) and registries (20 to K tools, `--big` one of K more, names unsorted,
//! near-duplicate, prefix-sharing, Unicode) whose name automata carry each tool's id as the member's value and
//! are updated in place (`with_changes_and_values`: tools added, removed, their schema changed) between requests.
//! Each request draws `--per-request` walks (default 2), random walks and greedy walks (under one random logit
//! vector per walk) in turn, through the engine's
//! masks; the argument matcher of a call follows a valid argument text of the tool the engine handed over to.
//!
//! Lines: `{"kind": "tools", "key", "tools": [{"name", "parameters"}]}` once per tool list or registry version,
//! then `{"kind": "call", "id", "tools" (key), "format", "tool_choice" ("auto" | "required" | "named"), "named",
//! "parallel", "draw", "output", "calls": [{"tool", "name", "arguments"}]}` (`calls`: what the engine handed over).
//!
//! `--mutate numbering` puts defect 1 of issue 36 back, on the harness's side only: the registry's automata carry
//! no values and the harness keeps its own member → tool map, numbered as `python/libtrie/vllm/route.py` did
//! (added tools first, then the old list order; the library numbers kept members by rank). The check must fail.
mod gen;
mod walk;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use trie::calls::{CallsConfig, CallsMatcher, Format, Mode, Names, ToolCalls};
use trie::{Automaton, CompileOptions, End, Template, Vocabulary};
use walk::{Draw, Factory, Vocab};

struct Tool {
    name: String,
    schema: Value,
    args: Vec<String>,
}

/// A tool list as a request sees it: ids in list order, each id's tool.
#[derive(Clone)]
struct Version {
    key: String,
    order: Vec<u64>,
    tools: Arc<HashMap<u64, Arc<Tool>>>,
}

struct Out {
    w: std::io::BufWriter<std::fs::File>,
    walks: usize,
    target: usize,
    next_id: usize,
    /// Walks per request (half random, half greedy).
    per_request: usize,
}

impl Out {
    fn tools(&mut self, v: &Version) {
        let tools: Vec<Value> =
            v.order.iter().map(|id| &v.tools[id]).map(|t| json!({"name": t.name, "parameters": t.schema})).collect();
        writeln!(self.w, "{}", json!({"kind": "tools", "key": v.key, "tools": tools})).unwrap();
    }
    fn done(&self) -> bool {
        self.walks >= self.target
    }
}

fn new_tool(rng: &mut SmallRng, name: String) -> Arc<Tool> {
    let schema = gen::schema(rng);
    let mut args: Vec<String> = Vec::new();
    for _ in 0..3 {
        let value = gen::instance(rng, &schema);
        let text = gen::text(rng, &value);
        if !args.contains(&text) {
            args.push(text);
        }
    }
    Arc::new(Tool { name, schema, args })
}

fn template(f: &Format, prefix: &[u8]) -> Template {
    Template::bare().prefix(prefix.to_vec()).suffix(f.suffix.clone()).render(f.render).end(End::Open)
}

/// What a request asks: its mode, parallel calls, a named tool (its id).
#[derive(Clone, Copy)]
struct Ask {
    mode: Mode,
    parallel: bool,
    named: Option<u64>,
}

/// Walks of one request through `engine`: random walks and greedy ones in turn (`out.per_request`).
fn request(
    out: &mut Out,
    rng: &mut SmallRng,
    v: &Arc<Vocab>,
    fmt: &str,
    ver: &Version,
    engine: &Arc<ToolCalls>,
    ask: Ask,
) {
    let args: Arc<HashMap<u64, Vec<String>>> =
        Arc::new(ver.tools.iter().map(|(&id, t)| (id, t.args.clone())).collect());
    for i in 0..out.per_request {
        let made = Arc::new(Mutex::new(Vec::new()));
        let factory = Factory {
            v: v.clone(),
            format: engine.config().format.clone(),
            args: args.clone(),
            says: rng.gen_bool(0.5),
            made: made.clone(),
        };
        let mut m = CallsMatcher::new(engine.clone(), Box::new(factory));
        let draw = if i % 2 == 0 { Draw::Random } else { Draw::Greedy };
        let text = walk::walk(v, &mut m, rng, draw).unwrap_or_else(|e| panic!("{fmt} {}: {e}", ver.key));
        let output = String::from_utf8(text).unwrap_or_else(|e| panic!("{fmt}: output not UTF-8: {e}"));
        let calls: Vec<Value> = made
            .lock()
            .unwrap()
            .iter()
            .map(|(id, written)| {
                let w = written.lock().unwrap().clone();
                let tool = ver.tools.get(id);
                let arguments = tool.and_then(|t| t.args.iter().find(|a| w.starts_with(a.as_bytes())));
                json!({"tool": id, "name": tool.map(|t| t.name.clone()), "arguments": arguments})
            })
            .collect();
        let named = ask.named.map(|id| ver.tools[&id].name.clone());
        let choice = match (ask.mode, ask.named) {
            (_, Some(_)) => "named",
            (Mode::Auto, _) => "auto",
            (Mode::Required, _) => "required",
        };
        let draw = if draw == Draw::Random { "random" } else { "greedy" };
        let line = json!({"kind": "call", "id": out.next_id, "tools": ver.key, "format": fmt, "tool_choice": choice,
            "named": named, "parallel": ask.parallel, "draw": draw, "output": output, "calls": calls});
        writeln!(out.w, "{line}").unwrap();
        out.next_id += 1;
        out.walks += 1;
    }
}

fn config(fmt: &str, v: &Vocab, ask: Ask) -> CallsConfig {
    CallsConfig {
        format: Format::named(fmt).unwrap(),
        mode: ask.mode,
        parallel: ask.parallel,
        stops: v.stops.clone(),
        only_calls_after_a_call: false,
    }
}

fn asks(rng: &mut SmallRng, ids: &[u64], named: bool) -> Vec<Ask> {
    let mut out = Vec::new();
    for parallel in [false, true] {
        out.push(Ask { mode: Mode::Auto, parallel, named: None });
        out.push(Ask { mode: Mode::Required, parallel, named: None });
        if named {
            out.push(Ask { mode: Mode::Required, parallel, named: Some(*ids.choose(rng).unwrap()) });
        }
    }
    out
}

/// An inline tool list: compiled per request ([`ToolCalls::compile`], a named tool: [`ToolCalls::compile_named`]).
fn inline(out: &mut Out, rng: &mut SmallRng, v: &Arc<Vocab>, fmt: &str, key: String) {
    let k = if rng.gen_bool(0.9) { rng.gen_range(1..=8) } else { rng.gen_range(9..=64) };
    let names = gen::names(rng, k, &HashSet::new());
    let tools: HashMap<u64, Arc<Tool>> =
        names.iter().enumerate().map(|(i, n)| (i as u64, new_tool(rng, n.clone()))).collect();
    let ver = Version { key, order: (0..k as u64).collect(), tools: Arc::new(tools) };
    out.tools(&ver);
    let o = CompileOptions::default();
    for ask in asks(rng, &ver.order, true) {
        let c = config(fmt, v, ask);
        let e = match ask.named {
            Some(id) => ToolCalls::compile_named(v.vocab.clone(), &names, id as usize, c, &o),
            None => ToolCalls::compile(v.vocab.clone(), &names, c, &o),
        };
        request(out, rng, v, fmt, &ver, &Arc::new(e.unwrap()), ask);
    }
}

/// A registry's name automata (the first call's, a further list call's, the opener's), each member's value its
/// tool's id; or, under `--mutate numbering`, no values and the harness's own member → tool map.
struct Reg {
    autos: Vec<Arc<Automaton>>,
    map: Option<Vec<u32>>,
}

fn prefixes(f: &Format) -> Vec<Vec<u8>> {
    let mut p = vec![f.prefix.clone(), f.next_prefix.clone()];
    p.push([f.trigger.clone().unwrap_or_default(), f.prefix.clone()].concat());
    p
}

/// A registry: compiled once, then updated in place between requests.
fn registry(out: &mut Out, rng: &mut SmallRng, v: &Arc<Vocab>, fmt: &str, key: &str, k: usize, mutate: bool) {
    let f = Format::named(fmt).unwrap();
    let o = CompileOptions::default();
    let names = gen::names(rng, k, &HashSet::new());
    let mut tools: HashMap<u64, Arc<Tool>> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        tools.insert(i as u64, new_tool(rng, n.clone()));
        order.push(i as u64);
    }
    let mut next = k as u64;
    let ids: Vec<u64> = order.clone();
    let compile = |p: &Vec<u8>| {
        let t = template(&f, p);
        let a = if mutate {
            Automaton::compile_template(v.vocab.clone(), &names, &t, &o)
        } else {
            Automaton::compile_template_with_values(v.vocab.clone(), &names, &ids, &t, &o)
        };
        Arc::new(a.unwrap())
    };
    let mut reg =
        Reg { autos: prefixes(&f).iter().map(compile).collect(), map: mutate.then(|| (0..k as u32).collect()) };
    for round in 0..rng.gen_range(3..=5) {
        if round > 0 {
            update(rng, &mut reg, &mut tools, &mut order, &mut next);
        }
        let ver = Version { key: format!("{key}v{round}"), order: order.clone(), tools: Arc::new(tools.clone()) };
        out.tools(&ver);
        for ask in asks(rng, &order, false) {
            let names_of = |a: &Arc<Automaton>| Names {
                automaton: a.clone(),
                tools: reg.map.as_ref().map(|m| Arc::from(m.as_slice())),
            };
            let (first, following, opener) =
                (names_of(&reg.autos[0]), names_of(&reg.autos[1]), names_of(&reg.autos[2]));
            let e = ToolCalls::from_names(v.vocab.clone(), config(fmt, v, ask), first, Some(following), Some(opener));
            request(out, rng, v, fmt, &ver, &Arc::new(e.unwrap()), ask);
            if out.done() {
                return;
            }
        }
    }
}

/// One update: a few tools added, removed, their schema changed (the name kept, so the automata too).
fn update(
    rng: &mut SmallRng,
    reg: &mut Reg,
    tools: &mut HashMap<u64, Arc<Tool>>,
    order: &mut Vec<u64>,
    next: &mut u64,
) {
    let o = CompileOptions::default();
    let taken: HashSet<String> = tools.values().map(|t| t.name.clone()).collect();
    let n_add = rng.gen_range(0..=3);
    let add_names = gen::names(rng, n_add, &taken);
    let n_remove = rng.gen_range(0..=2.min(order.len().saturating_sub(1)));
    let removed: Vec<u64> = order.choose_multiple(rng, n_remove).copied().collect();
    let remove_names: Vec<String> = removed.iter().map(|id| tools[id].name.clone()).collect();
    for _ in 0..rng.gen_range(0..=2) {
        let id = *order.choose(rng).unwrap();
        let name = tools[&id].name.clone();
        tools.insert(id, new_tool(rng, name)); // a changed schema
    }
    let add_ids: Vec<u64> = (0..add_names.len() as u64).map(|i| *next + i).collect();
    *next += add_names.len() as u64;
    for (id, n) in add_ids.iter().zip(&add_names) {
        tools.insert(*id, new_tool(rng, n.clone()));
    }
    for id in &removed {
        tools.remove(id);
    }
    order.retain(|id| !removed.contains(id));
    order.extend(&add_ids);
    for a in reg.autos.iter_mut() {
        let b = match reg.map {
            Some(_) => a.with_changes(&add_names, &remove_names, &o),
            None => a.with_changes_and_values(&add_names, &add_ids, &remove_names, &o),
        };
        *a = Arc::new(b.unwrap());
    }
    if let Some(map) = reg.map.as_mut() {
        // defect 1 (the mutation): added tools first, then the old list order (the library numbers kept members
        // by the byte order of their segments)
        let kept: Vec<u32> = map.iter().copied().filter(|&t| !removed.contains(&(t as u64))).collect();
        *map = add_ids.iter().map(|&i| i as u32).chain(kept).collect();
    }
}

fn load(fmt: &str) -> Arc<Vocab> {
    let name = match fmt {
        "hermes" => "qwen2",
        "llama" => "llama-bpe",
        _ => "llama-spm",
    };
    let dir = std::env::var("TRIE_ASSETS").unwrap_or_else(|_| "../shared/assets".into());
    let path = format!("{dir}/vocab/ggml-vocab-{name}.gguf");
    let vocab = Vocabulary::from_gguf(&path).unwrap_or_else(|e| panic!("{path}: {e} (set TRIE_ASSETS)"));
    Arc::new(Vocab::new(Arc::new(vocab)))
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let (mut seed, mut walks, mut path, mut max_tools, mut big, mut mutate) =
        (1u64, 1000usize, None, 2000usize, 0usize, false);
    let mut per_request = 2;
    let mut formats = "hermes,llama,mistral,mistral_v11".to_string();
    while let Some(a) = argv.next() {
        let mut val = || argv.next().unwrap_or_else(|| panic!("{a}: a value is missing"));
        match a.as_str() {
            "--seed" => seed = val().parse().unwrap(),
            "--walks" => walks = val().parse().unwrap(),
            "--out" => path = Some(val()),
            "--formats" => formats = val(),
            "--max-tools" => max_tools = val().parse().unwrap(),
            "--big" => big = val().parse().unwrap(),
            "--per-request" => per_request = val().parse().unwrap(),
            "--mutate" => mutate = val() == "numbering",
            _ => panic!("unknown argument {a} (see the top of examples/calls_proof/main.rs)"),
        }
    }
    let path = path.expect("--out FILE");
    let file = std::fs::File::create(&path).unwrap();
    let mut out = Out { w: std::io::BufWriter::new(file), walks: 0, target: walks, next_id: 0, per_request };
    let mut rng = SmallRng::seed_from_u64(seed);
    let formats: Vec<String> = formats.split(',').map(str::to_string).collect();
    let vocabs: HashMap<String, Arc<Vocab>> = formats.iter().map(|f| (f.clone(), load(f))).collect();
    let mut n = 0;
    if big > 0 {
        let fmt = formats.choose(&mut rng).unwrap().clone();
        registry(&mut out, &mut rng, &vocabs[&fmt], &fmt, "big", big, mutate);
    }
    while !out.done() {
        let fmt = formats[n % formats.len()].clone();
        let v = &vocabs[&fmt];
        if mutate || rng.gen_bool(0.4) {
            let k = [20, 200, max_tools][rng.gen_range(0..3)].min(max_tools);
            registry(&mut out, &mut rng, v, &fmt, &format!("r{n}"), k, mutate);
        } else {
            inline(&mut out, &mut rng, v, &fmt, format!("i{n}"));
        }
        n += 1;
    }
    out.w.flush().unwrap();
    eprintln!("calls_proof: {} call walks, {n} tool lists and registries, seed {seed}, into {path}", out.walks);
}
