//! `libtrie check`: what the front door does with a request body, as llama-server or vLLM receives it.
//!
//! The fields each engine routes are the integrations' (integrations/llama-server: `json_schema`,
//! `response_format`, `grammar`, `tools` with `tool_choice`, `trie`; python/libtrie/vllm: `structured_outputs`
//! `choice` / `grammar` / `json` / `regex`, `response_format`, `tools` with `tool_choice="required"`, the
//! processor's `libtrie` extra argument). Which field goes where is read here; whether a field's text is a set is
//! always the library's recognizer ([`recognize_with`]) within the engine's bounds, and a set spec is checked by
//! [`SetCache::check`]: nothing is recognized twice or differently.

use crate::args::{Args, Opt};
use crate::compile::{describe, show};
use crate::input::{self, VOCAB_OPTS};
use crate::{failed, Fail, Res};
use serde_json::{Map, Value};
use std::io::Read;
use std::time::Instant;
use trie::sets::recognize::{json_check_depth, recognize_with, vllm_tool_call_template, Limits, Recognition, Shape};
use trie::sets::{Options, SetCache};
use trie::{Automaton, CompileOptions, ErrorKind};

const SYNOPSIS: &str = "BODY --engine llama-server|vllm [options]   (BODY: a file, or - for stdin)";

fn opts() -> Vec<Opt> {
    let mut v = vec![
        Opt { name: "engine", value: true, help: "llama-server or vllm" },
        Opt { name: "max-inline-strings", value: true, help: "the operator's member bound (default 10000)" },
        Opt { name: "max-inline-bytes", value: true, help: "the operator's bytes bound (default 1048576)" },
        Opt { name: "set-dir", value: true, help: "the operator's set directory (for \"trie\" / libtrie set specs)" },
        Opt { name: "members", value: true, help: "how many members of a served set to list (default 5)" },
    ];
    v.extend(VOCAB_OPTS);
    v
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    LlamaServer,
    Vllm,
}

/// What the front door does with one field of the request.
enum Verdict {
    /// libtrie serves it: the recognized set (or a named set spec).
    Served(Served),
    /// The engine's own backend keeps it, and why.
    Delegated(String),
    /// The request is refused (an HTTP 400), and the message.
    Refused(String),
}

enum Served {
    Set { shape: Shape, members: Vec<Vec<u8>>, template: trie::Template, payloads: bool, trailing_ws: bool },
    Spec(String),
}

/// The engine's recognition bounds from the operator's inline bounds (as the integrations derive them).
struct Bounds {
    limits: Limits,
    options: Options,
}

fn bounds(engine: Engine, a: &Args) -> Res<Bounds> {
    let d = Options::default();
    let strings: u64 = a.parsed("max-inline-strings", d.max_inline_strings)?;
    let bytes: u64 = a.parsed("max-inline-bytes", d.max_inline_bytes)?;
    let (factor, depth) = match engine {
        // llama-libtrie-route.cpp: request_bounds (12x the bytes + 64 KiB; --trie-max-json-depth, default 128)
        Engine::LlamaServer => (12, 128),
        // python/libtrie/front.py: limits (8x the bytes + 64 KiB; the library's default depth)
        Engine::Vllm => (8, Limits::default().max_depth),
    };
    let limits = Limits {
        max_text_bytes: (bytes as usize).saturating_mul(factor).saturating_add(64 << 10),
        max_members: strings as usize,
        max_member_bytes: bytes as usize,
        max_depth: depth,
        // Routing: over the bounds a request the engine serves itself keeps the engine's path (never a 400).
        over_bounds_not_a_set: true,
    };
    let options = Options {
        max_inline_strings: strings,
        max_inline_bytes: bytes,
        set_dir: a.get("set-dir").map(Into::into),
        ..d
    };
    Ok(Bounds { limits, options })
}

/// A field's text recognized as `shape`: served, delegated ("not a set", or a text the engine judges itself when
/// `engine_judges_malformed`, or over the operator's bounds), or refused (a malformed text the client listed on
/// purpose).
fn recognized(shape: Shape, text: &str, b: &Bounds, engine_judges_malformed: bool) -> Verdict {
    match recognize_with(shape, text.as_bytes(), &b.limits) {
        Ok(Recognition::Set(r)) => Verdict::Served(Served::Set {
            shape,
            members: r.members,
            template: r.template,
            payloads: r.payloads.is_some(),
            trailing_ws: r.trailing_whitespace,
        }),
        Ok(Recognition::NotASet(why)) => Verdict::Delegated(format!("not a set: {why}")),
        Err(e) if e.kind() == ErrorKind::LimitExceeded => Verdict::Delegated(format!(
            "{} (over the operator's bounds --max-inline-strings / --max-inline-bytes: the engine serves it)",
            e.message()
        )),
        Err(e) if engine_judges_malformed => {
            Verdict::Delegated(format!("libtrie cannot read it ({}); the engine's backend judges it", e.message()))
        }
        Err(e) => Verdict::Refused(e.message().to_string()),
    }
}

/// A JSON value's text: a string as it is (a grammar, a schema sent as text), anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A set spec (llama-server's `"trie"`, vLLM's `libtrie` extra argument) checked as the engine would.
fn spec(value: &Value, b: &Bounds) -> Verdict {
    let text = value.to_string();
    let cache = match SetCache::new(None, b.options.clone()) {
        Ok(c) => c,
        Err(e) => return Verdict::Refused(e.message().to_string()),
    };
    match cache.check(text.as_bytes()) {
        Ok(()) => Verdict::Served(Served::Spec(text)),
        Err(e) => Verdict::Refused(e.message().to_string()),
    }
}

/// The schema of a `response_format`: `json_schema.schema` (OpenAI), or llama-server's `schema` of a
/// `json_object`; `Err` with the reason when there is none.
fn response_schema(rf: &Value) -> Result<Value, String> {
    match rf.get("type").and_then(Value::as_str) {
        Some("json_schema") => rf
            .get("json_schema")
            .and_then(|j| j.get("schema"))
            .cloned()
            .ok_or_else(|| "\"response_format\": json_schema without json_schema.schema".to_string()),
        Some("json_object") => rf.get("schema").cloned().ok_or_else(|| "any JSON object: not a set".to_string()),
        Some("text") | None => Err("text: no constraint".to_string()),
        Some(other) => Err(format!("\"response_format\" type {other:?}: not a set")),
    }
}

/// The tool set of `tools` with `tool_choice`, as the engine serves it.
fn tools(engine: Engine, body: &Map<String, Value>, b: &Bounds) -> Option<(String, Verdict)> {
    let tools = body.get("tools").filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))?;
    let choice = body.get("tool_choice");
    let named = choice.and_then(|c| c.get("function")).and_then(|f| f.get("name")).and_then(Value::as_str);
    let field = "tools".to_string();
    let verdict = match (choice.and_then(Value::as_str), named) {
        (Some("none"), _) => Verdict::Delegated("\"tool_choice\": \"none\": no tool call".into()),
        (Some("required"), _) | (_, Some(_)) if engine == Engine::Vllm && named.is_some() => Verdict::Delegated(
            "a named tool_choice: vLLM constrains the call with that tool's parameters schema (one tool, no set)".into(),
        ),
        (Some("required"), _) | (_, Some(_)) => {
            let mut v = recognized(Shape::Tools, &tools.to_string(), b, false);
            if let (Verdict::Served(Served::Set { members, .. }), Some(name)) = (&v, named) {
                if !members.iter().any(|m| m == name.as_bytes()) {
                    v = Verdict::Refused(format!("\"tool_choice\" names the tool '{name}', which is not one of the \"tools\""));
                }
            }
            if let (Verdict::Served(Served::Set { template, .. }), Engine::Vllm) = (&mut v, engine) {
                *template = vllm_tool_call_template(); // vLLM writes the call as its tool_choice="required" schema
            }
            v
        }
        _ if engine == Engine::LlamaServer => Verdict::Delegated(
            "\"tool_choice\" auto: served lazily (after the template's tool-call marker) when the model's chat template \
             has a JSON-native tool-call format, else llama.cpp's own tool grammar"
                .into(),
        ),
        _ => Verdict::Delegated("\"tool_choice\" auto: vLLM's tool parser, unconstrained".into()),
    };
    Some((field, verdict))
}

/// Every constrained field of a llama-server request and what happens to it.
fn llama_server(body: &Map<String, Value>, b: &Bounds) -> Vec<(String, Verdict)> {
    let mut out = Vec::new();
    if let Some(t) = body.get("trie") {
        let v = if body.contains_key("grammar") {
            Verdict::Refused("\"trie\" with a \"grammar\": send one of them".into())
        } else if let Some(name) = t.get("registry") {
            Verdict::Served(Served::Spec(format!("the tool registry {name} of the set directory")))
        } else {
            spec(t, b)
        };
        out.push(("trie".into(), v));
    }
    out.extend(tools(Engine::LlamaServer, body, b));
    if body.contains_key("json_schema") && body.contains_key("grammar") {
        out.push(("json_schema".into(), Verdict::Refused("both \"json_schema\" and \"grammar\": send one".into())));
        return out;
    }
    if let Some(s) = body.get("json_schema") {
        out.push(("json_schema".into(), recognized(Shape::JsonSchema, &text_of(s), b, false)));
    } else if let Some(rf) = body.get("response_format") {
        let v = match response_schema(rf) {
            Ok(schema) => recognized(Shape::JsonSchema, &text_of(&schema), b, false),
            Err(why) => Verdict::Delegated(why),
        };
        out.push(("response_format".into(), v));
    }
    if let Some(g) = body.get("grammar").filter(|g| !g.is_null()) {
        out.push(("grammar".into(), recognized(Shape::Grammar, &text_of(g), b, false)));
    }
    out
}

/// Every constrained field of a vLLM request and what happens to it.
fn vllm(body: &Map<String, Value>, b: &Bounds) -> Vec<(String, Verdict)> {
    let mut out = Vec::new();
    for holder in ["vllm_xargs", "extra_args"] {
        if let Some(s) = body.get(holder).and_then(|x| x.get("libtrie")) {
            out.push((format!("{holder}.libtrie"), spec(s, b)));
        }
    }
    if let Some(so) = body.get("structured_outputs").and_then(Value::as_object) {
        for (key, shape) in [
            ("choice", Shape::Choices),
            ("grammar", Shape::XgrammarGrammar),
            ("json", Shape::JsonSchema),
            ("regex", Shape::Regex),
        ] {
            if let Some(v) = so.get(key).filter(|v| !v.is_null()) {
                // a choice list is the client's on purpose: malformed is refused; the others are vLLM's to judge
                let text = if shape == Shape::Choices { v.to_string() } else { text_of(v) };
                out.push((format!("structured_outputs.{key}"), recognized(shape, &text, b, shape != Shape::Choices)));
            }
        }
        for key in ["json_object", "structural_tag"] {
            if so.get(key).is_some_and(|v| !v.is_null() && v != &Value::Bool(false)) {
                out.push((format!("structured_outputs.{key}"), Verdict::Delegated(format!("{key}: not a set"))));
            }
        }
    }
    if let Some(rf) = body.get("response_format") {
        let v = match response_schema(rf) {
            Ok(schema) => recognized(Shape::JsonSchema, &text_of(&schema), b, true),
            Err(why) => Verdict::Delegated(why),
        };
        out.push(("response_format".into(), v));
    }
    out.extend(tools(Engine::Vllm, body, b));
    out
}

/// Reads the body: a file, or stdin for `-`.
fn read_body(path: &str) -> Res<Vec<u8>> {
    if path == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).map_err(|e| failed("BODY (stdin)", e))?;
        return Ok(v);
    }
    std::fs::read(path).map_err(|e| failed(format!("BODY {path}"), e))
}

/// Prints one field's verdict (and, with a vocabulary, compiles a served set).
fn report(field: &str, v: &Verdict, show_n: usize, vocab: Option<&std::sync::Arc<trie::Vocabulary>>) -> Res<()> {
    match v {
        Verdict::Delegated(why) => println!("{field}: delegated to the engine's backend: {why}"),
        Verdict::Refused(why) => println!("{field}: refused (HTTP 400): {why}"),
        Verdict::Served(Served::Spec(what)) => println!("{field}: served by libtrie: the set spec {what}"),
        Verdict::Served(Served::Set { shape, members, template, payloads, trailing_ws }) => {
            println!(
                "{field}: served by libtrie as a set of {} members (recognized as {})",
                members.len(),
                shape.name()
            );
            println!("  template: {}", describe(template));
            if *payloads {
                println!("  payloads: each member's parameters schema constrains the arguments after it");
            }
            if *trailing_ws {
                println!("  note: the request also allows whitespace after the value, which libtrie does not emit");
            }
            for m in members.iter().take(show_n) {
                println!("  member: {}", show(m));
            }
            if members.len() > show_n {
                println!("  ... {} more", members.len() - show_n);
            }
            if let Some(vocab) = vocab {
                let t0 = Instant::now();
                match Automaton::compile_template(vocab.clone(), members, template, &CompileOptions::default()) {
                    Ok(a) => println!(
                        "  compiled: {} states, {} members, {:.1} ms",
                        a.n_states(),
                        a.n_members(),
                        t0.elapsed().as_secs_f64() * 1e3
                    ),
                    Err(e) if e.kind() == ErrorKind::LimitExceeded => {
                        println!("  over the compile bounds: the engine serves it ({})", e.message())
                    }
                    Err(e) => println!("  compile refused (HTTP 400): {}", e.message()),
                }
            }
        }
    }
    Ok(())
}

/// Runs `libtrie check`.
pub fn run(argv: &[String]) -> Res<()> {
    let opts = opts();
    let Some(a) = Args::parse("check", SYNOPSIS, argv, &opts)? else { return Ok(()) };
    let path = a.one_positional("BODY (a request body file, or - for stdin)")?;
    let engine = match a.need("engine")? {
        "llama-server" => Engine::LlamaServer,
        "vllm" => Engine::Vllm,
        other => return Err(Fail::Usage(format!("check: --engine {other:?}: one of llama-server, vllm"))),
    };
    let b = bounds(engine, &a)?;
    let show_n: usize = a.parsed("members", 5)?;
    let vocab = match a.get("vocab") {
        Some(_) => Some(input::vocab(&a)?),
        None => None,
    };
    let bytes = read_body(path)?;
    let what = if path == "-" { "BODY (stdin)".to_string() } else { format!("BODY {path}") };
    if engine == Engine::LlamaServer {
        if let Err(e) = json_check_depth(&bytes, b.limits.max_depth) {
            println!("body: refused before it is parsed (HTTP 400): {}", e.message());
            return Ok(());
        }
    }
    let body: Value = serde_json::from_slice(&bytes).map_err(|e| failed(&what, format!("not JSON: {e}")))?;
    let Some(body) = body.as_object() else {
        return Err(failed(&what, "not a JSON object (a request body is one)"));
    };
    let verdicts = match engine {
        Engine::LlamaServer => llama_server(body, &b),
        Engine::Vllm => vllm(body, &b),
    };
    if verdicts.is_empty() {
        println!("no constrained field: the engine decodes unconstrained (libtrie is not involved)");
    }
    for (field, v) in &verdicts {
        report(field, v, show_n, vocab.as_ref())?;
    }
    Ok(())
}
