//! The tool-call engine (`trie::calls`): for random tool lists (unsorted, near-duplicate and prefix-sharing names,
//! Unicode, characters JSON escapes) × every format (the named ones and one given by markers) × mode (auto,
//! required, a named tool) × parallel on/off, random walks through the engine's masks, with a stand-in argument
//! matcher over one fixed JSON text per tool, write calls that parse back with a small parser of the format, name a
//! tool of the list (the one the engine handed over to) and carry that tool's arguments; rollback at random points
//! gives the masks of a fresh replay; a token outside the mask is refused and changes nothing.

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use trie::calls::{ArgFactory, ArgMatcher, CallsConfig, CallsMatcher, Format, Mode, Phase, ToolCalls, FORMAT_NAMES};
use trie::{CompileOptions, ErrorKind, Render, Result, TokenId, TokenKind, Vocabulary};

const EXTRA: &[&str] = &[
    "<tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    ">\n{",
    "{\"",
    "\"}",
    "}]",
    ", {",
    "}\n</tool_call>",
    "get",
    "_we",
    "ather",
    "\": ",
    "<<<",
    "<<",
    "é",
    "天气",
];

/// 256 byte tokens, the extras, then the stop tokens `</s>` (end of generation) and `<stop>` (control).
fn vocab() -> (Arc<Vocabulary>, [TokenId; 2]) {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend(EXTRA.iter().map(|s| s.as_bytes().to_vec()));
    let eos = tokens.len() as TokenId;
    tokens.push(b"</s>".to_vec());
    tokens.push(b"<stop>".to_vec());
    let mut kinds = vec![TokenKind::Normal; tokens.len()];
    kinds[eos as usize] = TokenKind::Control;
    kinds[eos as usize + 1] = TokenKind::Control;
    (Arc::new(Vocabulary::new(tokens, kinds, &[eos], Some(300)).unwrap()), [eos, eos + 1])
}

/// A format given by markers: a two-byte marker that overlaps itself, raw names.
fn custom() -> Format {
    Format {
        trigger: Some(b"<<".to_vec()),
        prefix: b"(".to_vec(),
        suffix: b") ".to_vec(),
        close: b";".to_vec(),
        more: vec![],
        last: vec![],
        next_prefix: vec![],
        render: Render::Raw,
    }
}

fn formats() -> Vec<(String, Format)> {
    let mut all: Vec<(String, Format)> =
        FORMAT_NAMES.iter().map(|&n| (n.to_string(), Format::named(n).unwrap())).collect();
    all.push(("custom".into(), custom()));
    all
}

/// Random distinct names: near-duplicates, shared prefixes, Unicode, quotes and backslashes (JSON-string formats).
fn random_names(rng: &mut SmallRng, raw: bool) -> Vec<String> {
    let pieces: &[&str] = if raw {
        &["get", "_", "weather", "w", "time", "é", "天气", "🌦", "x", "get_we", "a b", "Get"]
    } else {
        &["get", "_", "weather", "w", "time", "é", "天气", "🌦", "x", "\"", "\\", "\n", "get_we", "a b", "Get", "[", "}"]
    };
    let k = rng.gen_range(1..=7);
    let mut names: Vec<String> = Vec::new();
    while names.len() < k {
        let n: String = (0..rng.gen_range(1..=4)).map(|_| pieces[rng.gen_range(0..pieces.len())]).collect();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

fn args_of(tool: usize) -> String {
    format!("{{\"i\": {tool}, \"s\": \"a}}\\\"]{tool}\", \"l\": [{tool}, {{}}]}}")
}

/// The stand-in argument matcher: one of `texts` (the tool's arguments, the format's close, then the list's end or
/// separator), byte by byte, any text token whose bytes continue it.
struct Stand {
    vocab: Arc<Vocabulary>,
    texts: Vec<Vec<u8>>,
    stack: Vec<Vec<u8>>,
    stops: [TokenId; 2],
    /// Whether `is_completed` answers (else the engine probes with a stop token).
    says: bool,
}

impl Stand {
    fn fits(&self, t: TokenId) -> bool {
        let cur = self.stack.last().unwrap();
        if self.stops.contains(&t) {
            return self.texts.contains(cur);
        }
        let b = self.vocab.token_bytes(t);
        !b.is_empty() && self.vocab.kind(t) == TokenKind::Normal && {
            let next = [cur.as_slice(), b].concat();
            self.texts.iter().any(|x| x.starts_with(&next))
        }
    }
}

impl ArgMatcher for Stand {
    fn accept_token(&mut self, t: TokenId) -> bool {
        if !self.fits(t) {
            return false;
        }
        let cur = self.stack.last().unwrap().clone();
        let next = if self.stops.contains(&t) { cur } else { [cur.as_slice(), self.vocab.token_bytes(t)].concat() };
        self.stack.push(next);
        true
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) -> Result<()> {
        row.fill(0);
        for t in 0..self.vocab.n_vocab() as TokenId {
            if self.fits(t) {
                row[t as usize / 32] |= 1 << (t % 32);
            }
        }
        Ok(())
    }

    fn rollback(&mut self, n: usize) {
        assert!(n < self.stack.len(), "rolled back past the matcher's start");
        self.stack.truncate(self.stack.len() - n);
    }

    fn is_completed(&mut self) -> Option<bool> {
        self.says.then(|| self.texts.contains(self.stack.last().unwrap()))
    }
}

struct Factory {
    vocab: Arc<Vocabulary>,
    format: Format,
    parallel: bool,
    stops: [TokenId; 2],
    says: bool,
    prefetched: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl ArgFactory for Factory {
    fn make(&mut self, tool: usize, last: bool) -> Result<Box<dyn ArgMatcher>> {
        assert_eq!(last, !self.parallel);
        let f = &self.format;
        let base = [args_of(tool).as_bytes(), &f.close].concat();
        let mut texts = vec![[base.as_slice(), &f.last].concat()];
        if f.is_list() && !last {
            texts.push([base.as_slice(), &f.more].concat());
        }
        let stack = vec![vec![]];
        Ok(Box::new(Stand { vocab: self.vocab.clone(), texts, stack, stops: self.stops, says: self.says }))
    }

    fn prefetch(&mut self, tool: usize, _last: bool) {
        self.prefetched.lock().unwrap().push(tool);
    }
}

fn mask(m: &mut CallsMatcher, words: usize) -> Vec<u32> {
    let mut row = vec![0xdead_beef; words];
    m.fill_bitmask(&mut row).unwrap();
    row
}

fn allowed(row: &[u32]) -> Vec<TokenId> {
    (0..row.len() as TokenId * 32).filter(|&t| row[t as usize / 32] >> (t % 32) & 1 == 1).collect()
}

/// A small reader of each format: the calls `(name, arguments text)` in `out`, or why it does not parse.
fn parse(
    f: &Format,
    mode: Mode,
    parallel: bool,
    only_calls: bool,
    out: &[u8],
) -> std::result::Result<Vec<(String, String)>, String> {
    let mut calls = Vec::new();
    let mut pos = 0;
    let eat = |pos: &mut usize, what: &[u8], name: &str| -> std::result::Result<(), String> {
        if out[*pos..].starts_with(what) {
            *pos += what.len();
            Ok(())
        } else {
            Err(format!(
                "expected {name} {:?} at {}: {:?}",
                String::from_utf8_lossy(what),
                *pos,
                String::from_utf8_lossy(&out[*pos..])
            ))
        }
    };
    let mut in_list = false;
    loop {
        if !in_list {
            if let Some(t) = &f.trigger {
                let free = mode == Mode::Auto || !calls.is_empty();
                // after a call: whitespace only, then the next marker or the end (a required answer is its calls;
                // a marker format's parsers read only calls once one is written); Llama 3's `{` keeps free text
                let gap = only_calls && !calls.is_empty() && (mode == Mode::Required || !t.starts_with(b"{"));
                let at = if free {
                    match out[pos..].windows(t.len()).position(|w| w == t.as_slice()) {
                        Some(i) => pos + i,
                        None => {
                            let rest = out[pos..].trim_ascii_start();
                            if gap && !t.starts_with(rest) {
                                return Err(format!("text after a call: {:?}", String::from_utf8_lossy(rest)));
                            }
                            break; // the rest is free text (before any call), or whitespace and a part of a marker
                        }
                    }
                } else {
                    pos
                };
                if gap && !out[pos..at].iter().all(|b| b.is_ascii_whitespace()) {
                    return Err(format!("text between calls: {:?}", String::from_utf8_lossy(&out[pos..at])));
                }
                pos = at;
                eat(&mut pos, t, "trigger")?;
            } else if !calls.is_empty() {
                break;
            }
        }
        eat(&mut pos, if in_list { &f.next_prefix } else { &f.prefix }, "prefix")?;
        let name = match f.render {
            Render::Raw => {
                let n = out[pos..].windows(f.suffix.len()).position(|w| w == f.suffix.as_slice()).ok_or("no suffix")?;
                let s = String::from_utf8(out[pos..pos + n].to_vec()).map_err(|e| e.to_string())?;
                pos += n;
                s
            }
            _ => {
                let mut it = serde_json::Deserializer::from_slice(&out[pos..]).into_iter::<String>();
                let s = it.next().ok_or("no name")?.map_err(|e| e.to_string())?;
                pos += it.byte_offset();
                s
            }
        };
        eat(&mut pos, &f.suffix, "suffix")?;
        let mut it = serde_json::Deserializer::from_slice(&out[pos..]).into_iter::<serde_json::Value>();
        it.next().ok_or("no arguments")?.map_err(|e| e.to_string())?;
        let args = String::from_utf8(out[pos..pos + it.byte_offset()].to_vec()).unwrap();
        pos += it.byte_offset();
        calls.push((name, args));
        eat(&mut pos, &f.close, "close")?;
        if f.is_list() {
            if parallel && out[pos..].starts_with(&f.more) {
                pos += f.more.len();
                in_list = true;
                continue;
            }
            eat(&mut pos, &f.last, "last")?;
            break;
        }
        if !parallel {
            break;
        }
    }
    if (!parallel || f.is_list()) && !calls.is_empty() && pos != out.len() {
        return Err(format!("text after the calls: {:?}", String::from_utf8_lossy(&out[pos..])));
    }
    Ok(calls)
}

struct Case {
    vocab: Arc<Vocabulary>,
    stops: [TokenId; 2],
    format: Format,
    mode: Mode,
    parallel: bool,
    names: Vec<String>,
    /// The tool of a named-tool case.
    named: Option<usize>,
    /// `CallsConfig::only_calls_after_a_call`.
    only_calls: bool,
}

impl Case {
    /// A case over the two tools `get_weather` and `get_time` (no named tool).
    fn two_tools(
        vocab: &Arc<Vocabulary>,
        stops: [TokenId; 2],
        format: &str,
        mode: Mode,
        parallel: bool,
        only_calls: bool,
    ) -> Case {
        Case {
            vocab: vocab.clone(),
            stops,
            format: Format::named(format).unwrap(),
            mode,
            parallel,
            names: vec!["get_weather".into(), "get_time".into()],
            named: None,
            only_calls,
        }
    }

    fn engine(&self) -> Arc<ToolCalls> {
        let config = CallsConfig {
            format: self.format.clone(),
            mode: self.mode,
            parallel: self.parallel,
            stops: self.stops.to_vec(),
            only_calls_after_a_call: self.only_calls,
        };
        let o = CompileOptions::default();
        let v = self.vocab.clone();
        Arc::new(match self.named {
            Some(tool) => ToolCalls::compile_named(v, &self.names, tool, config, &o).unwrap(),
            None => ToolCalls::compile(v, &self.names, config, &o).unwrap(),
        })
    }

    fn matcher(&self, engine: &Arc<ToolCalls>, says: bool) -> (CallsMatcher, Arc<std::sync::Mutex<Vec<usize>>>) {
        let prefetched = Arc::new(std::sync::Mutex::new(Vec::new()));
        let f = Factory {
            vocab: self.vocab.clone(),
            format: self.format.clone(),
            parallel: self.parallel,
            stops: self.stops,
            says,
            prefetched: prefetched.clone(),
        };
        (CallsMatcher::new(engine.clone(), Box::new(f)), prefetched)
    }
}

/// One random walk: every token drawn from the mask; returns the tokens, the mask before each, the tools handed
/// over to.
fn walk(case: &Case, m: &mut CallsMatcher, rng: &mut SmallRng) -> (Vec<TokenId>, Vec<Vec<u32>>, Vec<usize>) {
    let words = case.vocab.mask_words();
    let (mut tokens, mut masks, mut tools) = (vec![], vec![], vec![]);
    let trigger_ids = m.engine().trigger_ids().to_vec();
    while !m.is_terminated() {
        assert!(tokens.len() < 5000, "the walk does not end");
        let row = mask(m, words);
        let ok = allowed(&row);
        assert!(!ok.is_empty(), "a dead end in phase {:?} after {tokens:?}", m.phase());
        let phase = m.phase();
        let pick = |rng: &mut SmallRng| ok[rng.gen_range(0..ok.len())];
        let t = if phase == Phase::Free {
            let trigger = case.format.trigger.clone().unwrap();
            match rng.gen_range(0..10) {
                0..=2 if !trigger_ids.is_empty() => trigger_ids[0],
                0..=3 => trigger[0] as TokenId,
                4 => case.stops[rng.gen_range(0..2)],
                _ => pick(rng),
            }
        } else {
            pick(rng)
        };
        // The marker's token right after its first byte would straddle it ("<" then "<<"): masked, so drawn anew.
        let t = if ok.contains(&t) { t } else { pick(rng) };
        // A token outside the mask is refused and changes nothing.
        let bad = rng.gen_range(0..case.vocab.n_vocab() as TokenId);
        if !ok.contains(&bad) {
            let n = m.n_accepted();
            assert!(!m.accept_token(bad), "token {bad} is outside the mask in phase {phase:?} but accepted");
            assert_eq!(m.n_accepted(), n);
        }
        assert!(m.accept_token(t), "token {t} is in the mask in phase {phase:?} but refused");
        if phase == Phase::Name && m.phase() == Phase::Args {
            tools.push(m.tool().expect("a tool at the hand-over"));
        }
        tokens.push(t);
        masks.push(row);
    }
    (tokens, masks, tools)
}

/// Call walks checked by this process (printed by the campaign).
static WALKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn check_case(case: &Case, seed: u64) {
    let engine = case.engine();
    let mut rng = SmallRng::seed_from_u64(seed);
    let words = case.vocab.mask_words();
    for w in 0..3 {
        let says = w % 2 == 0;
        let (mut m, prefetched) = case.matcher(&engine, says);
        let (tokens, masks, tools) = walk(case, &mut m, &mut rng);
        WALKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out: Vec<u8> = tokens
            .iter()
            .filter(|t| !case.stops.contains(t))
            .flat_map(|&t| case.vocab.token_bytes(t).to_vec())
            .collect();
        let calls = parse(&case.format, case.mode, case.parallel, case.only_calls, &out)
            .unwrap_or_else(|e| panic!("{e}: output {:?}", String::from_utf8_lossy(&out)));
        assert_eq!(calls.len(), m.calls_so_far(), "{:?}", String::from_utf8_lossy(&out));
        assert_eq!(calls.len(), tools.len());
        if case.mode != Mode::Auto {
            assert!(!calls.is_empty(), "required: at least one call");
        }
        if !case.parallel {
            assert!(calls.len() <= 1, "parallel off: one call at most");
        }
        for ((name, args), &tool) in calls.iter().zip(&tools) {
            assert_eq!(name, &case.names[tool], "the call names the tool handed over to");
            assert_eq!(args, &args_of(tool), "the tool's own arguments");
            if let Some(t) = case.named {
                assert_eq!(tool, t, "a named tool only");
            }
        }
        for &t in prefetched.lock().unwrap().iter() {
            assert!(t < case.names.len());
        }
        // Rollback at random points: the masks of a fresh replay; then the rest replayed to the same end.
        for _ in 0..3 {
            let n = rng.gen_range(0..=tokens.len());
            m.rollback(n);
            let at = tokens.len() - n;
            assert_eq!(m.n_accepted(), at);
            if at < tokens.len() {
                assert_eq!(mask(&mut m, words), masks[at], "rollback of {n} at {at}");
            }
            let (mut fresh, _) = case.matcher(&engine, !says);
            assert_eq!(fresh.validate_tokens(&tokens[..at]), at, "validate: the whole prefix");
            assert_eq!(fresh.n_accepted(), 0, "validate changes nothing");
            for &t in &tokens[..at] {
                assert!(fresh.accept_token(t));
            }
            if at < tokens.len() {
                assert_eq!(mask(&mut fresh, words), masks[at], "fresh replay to {at}");
            }
            assert_eq!(m.validate_tokens(&tokens[at..]), tokens.len() - at);
            for &t in &tokens[at..] {
                assert!(m.accept_token(t));
            }
            assert!(m.is_terminated());
            assert_eq!(m.calls_so_far(), calls.len());
        }
    }
}

fn cases(seed: u64) -> Vec<Case> {
    let (vocab, stops) = vocab();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (name, format) in formats() {
        let names = random_names(&mut rng, format.render == Render::Raw);
        for mode in [Mode::Auto, Mode::Required] {
            if mode == Mode::Auto && format.trigger.is_none() {
                continue;
            }
            for parallel in [false, true] {
                let named = [None, Some(rng.gen_range(0..names.len()))];
                for named in named.into_iter().filter(|n| n.is_none() || mode == Mode::Required) {
                    let _ = &name;
                    out.push(Case {
                        vocab: vocab.clone(),
                        stops,
                        format: format.clone(),
                        mode,
                        parallel,
                        names: names.clone(),
                        named,
                        only_calls: rng.gen_bool(0.5),
                    });
                }
            }
        }
    }
    out
}

proptest! {
    // 24 seeds a run (about 2,000 call walks); a campaign sets TRIE_CALLS_SEEDS (each seed: every format x mode x
    // parallel x named configuration, 3 walks each, every walk rolled back and replayed 3 times).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("TRIE_CALLS_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_walks_write_calls_that_parse_back(seed in any::<u64>()) {
        for (i, case) in cases(seed).iter().enumerate() {
            check_case(case, seed.wrapping_add(i as u64));
        }
        if std::env::var_os("TRIE_CALLS_SEEDS").is_some() {
            eprintln!("calls campaign: {} walks so far", WALKS.load(std::sync::atomic::Ordering::Relaxed));
        }
    }
}

#[test]
fn hermes_auto_marker_text_straddlers_and_one_call() {
    let (vocab, stops) = vocab();
    let case = Case::two_tools(&vocab, stops, "hermes", Mode::Auto, false, false);
    let engine = case.engine();
    let (mut m, prefetched) = case.matcher(&engine, true);
    let words = vocab.mask_words();
    let id = |s: &str| (0..vocab.n_vocab() as TokenId).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    for &b in b"Sure <tool_call" {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!(m.phase(), Phase::Free);
    assert!(!allowed(&mask(&mut m, words)).contains(&id(">\n{")), "'>\\n{{' would finish the marker and go on");
    assert!(!m.accept_token(id(">\n{")));
    assert!(m.accept_token(b'>' as TokenId));
    assert_eq!(m.phase(), Phase::Name);
    for &b in b"\n{\"name\": \"get_t" {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!(*prefetched.lock().unwrap(), vec![1], "get_t leaves one tool");
    for &b in b"ime\", \"arguments\": " {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!((m.phase(), m.tool()), (Phase::Args, Some(1)));
    for &b in format!("{}}}\n</tool_call>", args_of(1)).as_bytes() {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!((m.phase(), m.calls_so_far()), (Phase::End, 1));
    assert_eq!(allowed(&mask(&mut m, words)), stops.to_vec());
    assert!(!m.accept_token(id("<tool_call>")), "parallel off: a second call is refused");
    assert!(m.accept_token(stops[1]));
    assert!(m.is_terminated());
}

#[test]
fn configurations_that_cannot_work_are_refused_with_the_field() {
    let (vocab, stops) = vocab();
    let config = |format: Format, mode| CallsConfig {
        format,
        mode,
        parallel: true,
        stops: stops.to_vec(),
        only_calls_after_a_call: false,
    };
    let o = CompileOptions::default();
    let e = ToolCalls::compile(vocab.clone(), &["a", "a"], config(custom(), Mode::Auto), &o).unwrap_err();
    assert!(e.message().contains("names[1]") && e.message().contains("twice"), "{e}");
    let e = ToolCalls::compile(vocab.clone(), &["a", ""], config(custom(), Mode::Auto), &o).unwrap_err();
    assert!(e.message().contains("names[1]"), "{e}");
    let e = ToolCalls::compile::<&str>(vocab.clone(), &[], config(custom(), Mode::Auto), &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EmptySet);
    let e =
        ToolCalls::compile(vocab.clone(), &["a"], config(Format::named("json").unwrap(), Mode::Auto), &o).unwrap_err();
    assert!(e.message().contains("mode: auto"), "{e}");
    let e = Format::named("qwen").unwrap_err();
    assert!(e.message().contains("hermes"), "{e}");
    let mut c = config(custom(), Mode::Auto);
    c.stops = vec![9999];
    let e = ToolCalls::compile(vocab.clone(), &["a"], c, &o).unwrap_err();
    assert!(e.message().contains("stops"), "{e}");
    let e = ToolCalls::compile_named(vocab, &["a"], 3, config(custom(), Mode::Required), &o).unwrap_err();
    assert!(e.message().contains("named_tool"), "{e}");
}

#[test]
fn caller_built_automata_and_their_member_to_tool_maps() {
    // A registry's automaton lists its names in another order than the tools: the map says each member's tool.
    let (vocab, stops) = vocab();
    let format = Format::named("json").unwrap();
    let tools = ["alpha", "beta", "gamma"];
    let order = ["gamma", "alpha", "beta"]; // member i is tool map[i]
    let map: Arc<[u32]> = Arc::from(vec![2u32, 0, 1]);
    let template = |prefix: &[u8]| {
        trie::Template::bare()
            .prefix(prefix.to_vec())
            .suffix(format.suffix.clone())
            .render(Render::JsonString)
            .end(trie::End::Open)
    };
    let compile = |prefix: &[u8]| {
        let a = trie::Automaton::compile_template(vocab.clone(), &order, &template(prefix), &CompileOptions::default());
        trie::calls::Names { automaton: Arc::new(a.unwrap()), tools: Some(map.clone()) }
    };
    let config = CallsConfig {
        format: format.clone(),
        mode: Mode::Required,
        parallel: true,
        stops: stops.to_vec(),
        only_calls_after_a_call: false,
    };
    let engine = ToolCalls::from_names(
        vocab.clone(),
        config.clone(),
        compile(&format.prefix),
        Some(compile(&format.next_prefix)),
        None,
    )
    .unwrap();
    let case = Case {
        vocab: vocab.clone(),
        stops,
        format: format.clone(),
        mode: Mode::Required,
        parallel: true,
        names: vec![],
        named: None,
        only_calls: false,
    };
    let (mut m, _) = case.matcher(&Arc::new(engine), true);
    for (i, name) in ["beta", "gamma", "alpha"].iter().enumerate() {
        let head = if i == 0 { "[{\"name\": " } else { "{\"name\": " };
        for &b in format!("{head}\"{name}\", \"parameters\": ").as_bytes() {
            assert!(m.accept_token(b as TokenId), "{name}");
        }
        let tool = tools.iter().position(|t| t == name).unwrap();
        assert_eq!(m.tool(), Some(tool), "{name} is tool {tool}");
        let close = if i == 2 { "}]" } else { "}, " };
        for &b in format!("{}{close}", args_of(tool)).as_bytes() {
            assert!(m.accept_token(b as TokenId), "the arguments of {name}");
        }
    }
    assert_eq!((m.phase(), m.calls_so_far()), (Phase::End, 3));
    // The following automaton is required for a parallel JSON list; a bare automaton is refused.
    let e = ToolCalls::from_names(vocab.clone(), config.clone(), compile(b"[{\"name\": "), None, None).unwrap_err();
    assert!(e.message().contains("names.following"), "{e}");
    let bare = trie::Automaton::compile(vocab.clone(), &["x"], &CompileOptions::default()).unwrap();
    let e = ToolCalls::from_names(vocab, config, trie::calls::Names::new(Arc::new(bare)), None, None).unwrap_err();
    assert!(e.message().contains("end open"), "{e}");
}

#[test]
fn after_an_auto_call_only_calls_follow_in_marker_formats() {
    // With `only_calls_after_a_call` (llama-server): llama.cpp constrains the rest of an `auto` answer to calls once its marker fired, and vLLM's hermes parser
    // drops text after the first call: whitespace, the next marker or the end. Llama 3 JSON (`{` opens a call)
    // keeps free text between calls, as vLLM's parser reads them.
    let (vocab, stops) = vocab();
    let words = vocab.mask_words();
    for (format, call, gap) in [
        (
            "hermes",
            format!("<tool_call>\n{{\"name\": \"get_time\", \"arguments\": {}}}\n</tool_call>", args_of(1)),
            true,
        ),
        ("llama", format!("{{\"name\": \"get_time\", \"parameters\": {}}}", args_of(1)), false),
    ] {
        let case = Case::two_tools(&vocab, stops, format, Mode::Auto, true, true);
        let engine = case.engine();
        let (mut m, _) = case.matcher(&engine, true);
        for &b in b"Sure. ".iter().chain(call.as_bytes()) {
            assert!(m.accept_token(b as TokenId), "{format}: {}", b as char);
        }
        assert_eq!((m.phase(), m.calls_so_far()), (Phase::Free, 1), "{format}");
        let after = allowed(&mask(&mut m, words));
        for ok in [b'\n' as TokenId, b' ' as TokenId, stops[0]] {
            assert!(after.contains(&ok), "{format}: {ok} may follow a call");
        }
        assert_eq!(!after.contains(&(b'H' as TokenId)), gap, "{format}: text after a call");
        assert_eq!(m.accept_token(b'H' as TokenId), !gap, "{format}: text after a call");
    }
}

#[test]
fn required_parallel_calls_are_separated_by_whitespace_only() {
    let (vocab, stops) = vocab();
    let case = Case::two_tools(&vocab, stops, "hermes", Mode::Required, true, true);
    let engine = case.engine();
    let (mut m, _) = case.matcher(&engine, true);
    let words = vocab.mask_words();
    let id = |s: &str| (0..vocab.n_vocab() as TokenId).find(|&t| vocab.token_bytes(t) == s.as_bytes()).unwrap();
    for &b in format!("<tool_call>\n{{\"name\": \"get_time\", \"arguments\": {}}}\n</tool_call>", args_of(1)).as_bytes()
    {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!((m.phase(), m.calls_so_far()), (Phase::Free, 1));
    let between = allowed(&mask(&mut m, words));
    for ok in [id("<tool_call>"), b'\n' as TokenId, b' ' as TokenId, b'<' as TokenId, stops[0], stops[1]] {
        assert!(between.contains(&ok), "{ok} may follow a required call");
    }
    for no in [b'H' as TokenId, b't' as TokenId, id(">\n{")] {
        assert!(!between.contains(&no) && !m.accept_token(no), "{no}: no free text between required calls");
    }
    for &b in b"\n <tool_c" {
        assert!(m.accept_token(b as TokenId));
    }
    assert!(!m.accept_token(b' ' as TokenId), "no whitespace inside the marker");
    let next = allowed(&mask(&mut m, words));
    assert_eq!(next, vec![b'a' as TokenId, stops[0], stops[1]], "the marker's next byte, or a stop token");
    for &b in b"all>" {
        assert!(m.accept_token(b as TokenId));
    }
    assert_eq!(m.phase(), Phase::Name);
}
