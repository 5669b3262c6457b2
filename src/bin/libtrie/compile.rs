//! `libtrie compile`: a set file into an automaton file, for one vocabulary.

use crate::args::{Args, Opt};
use crate::input::{self, VOCAB_OPTS};
use crate::{failed, progress, Fail, Res};
use std::time::Instant;
use trie::{Automaton, CompileOptions, End, Render, Template};

const SYNOPSIS: &str = "SET --vocab MODEL -o OUT [options]";

fn opts() -> Vec<Opt> {
    let mut v: Vec<Opt> = VOCAB_OPTS.into();
    v.extend([
        Opt { name: "output", value: true, help: "the automaton file to write (-o)" },
        Opt { name: "set-format", value: true, help: "auto (default), lines, or json (a list or a tools file)" },
        Opt { name: "drop-unreachable", value: false, help: "drop members the vocabulary cannot spell" },
        Opt { name: "max-states", value: true, help: "refuse a set whose trie has more states" },
        Opt { name: "template-prefix", value: true, help: "bytes written before every member" },
        Opt { name: "template-suffix", value: true, help: "bytes written after every member" },
        Opt { name: "render", value: true, help: "raw (default), json_string or json_text" },
        Opt { name: "end", value: true, help: "eog (default: end-of-generation) or open (handed over)" },
    ]);
    v
}

/// The template the options describe (`None`: a bare set).
fn template(a: &Args) -> Res<Option<Template>> {
    let render = match a.get("render").unwrap_or("raw") {
        "raw" => Render::Raw,
        "json_string" => Render::JsonString,
        "json_text" => Render::JsonText,
        other => return Err(Fail::Usage(format!("compile: --render {other:?}: one of raw, json_string, json_text"))),
    };
    let end = match a.get("end").unwrap_or("eog") {
        "eog" => End::Eog,
        "open" => End::Open,
        other => return Err(Fail::Usage(format!("compile: --end {other:?}: one of eog, open"))),
    };
    let t = Template::bare()
        .prefix(a.get("template-prefix").unwrap_or("").as_bytes())
        .suffix(a.get("template-suffix").unwrap_or("").as_bytes())
        .render(render)
        .end(end);
    Ok((!t.is_bare()).then_some(t))
}

/// Bytes shown in a message or a listing: printable ASCII as is, the rest escaped.
pub fn show(bytes: &[u8]) -> String {
    format!("\"{}\"", bytes.escape_ascii())
}

/// One line describing a template.
pub fn describe(t: &Template) -> String {
    let render = match t.render {
        Render::Raw => "raw",
        Render::JsonString => "json_string",
        Render::JsonText => "json_text",
    };
    let end = match t.end {
        End::Eog => "eog",
        End::Open => "open",
    };
    format!("prefix {} suffix {} render {render} end {end}", show(&t.prefix), show(&t.suffix))
}

/// Runs `libtrie compile`.
pub fn run(argv: &[String]) -> Res<()> {
    let opts = opts();
    let Some(a) = Args::parse("compile", SYNOPSIS, argv, &opts)? else { return Ok(()) };
    let set_path = a.one_positional("SET (the set file)")?;
    let out = a.need("output")?;
    let template = template(&a)?;
    let mut options = CompileOptions::default().drop_unreachable(a.flag("drop-unreachable"));
    if a.get("max-states").is_some() {
        options = options.max_states(a.parsed("max-states", 0usize)?);
    }

    let t0 = Instant::now();
    let set = input::set_file(set_path, a.get("set-format").unwrap_or("auto"))?;
    let t_read = t0.elapsed();
    let t1 = Instant::now();
    let vocab = progress::with("loading the vocabulary", || input::vocab(&a))?;
    let t_vocab = t1.elapsed();
    let t2 = Instant::now();
    let what = format!("set file {set_path}");
    let automaton = progress::with(&format!("compiling {} members", set.members.len()), || match &template {
        None => Automaton::compile(vocab.clone(), &set.members, &options),
        Some(t) => Automaton::compile_template(vocab.clone(), &set.members, t, &options),
    })
    .map_err(|e| failed(&what, e))?;
    let t_compile = t2.elapsed();
    let t3 = Instant::now();
    automaton.save(out).map_err(|e| failed(format!("-o {out}"), e))?;
    let t_save = t3.elapsed();
    let size = std::fs::metadata(out).map(|m| m.len()).map_err(|e| failed(format!("-o {out}"), e))?;

    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    println!("wrote {out}");
    println!("set:        {set_path} ({}, {} strings)", set.format, set.members.len());
    println!("members:    {}", automaton.n_members());
    println!("dropped:    {}", automaton.dropped().len());
    println!("states:     {} ({} explicit)", automaton.n_states(), automaton.n_explicit());
    println!("size:       {size} bytes");
    println!("vocabulary: {} tokens, fingerprint {:032x}", vocab.n_vocab(), vocab.fingerprint());
    if let Some(t) = automaton.template() {
        println!("template:   {}", describe(t));
    }
    println!(
        "time:       {:.1} ms (read {:.1}, vocabulary {:.1}, compile {:.1}, save {:.1})",
        ms(t0.elapsed()),
        ms(t_read),
        ms(t_vocab),
        ms(t_compile),
        ms(t_save)
    );
    Ok(())
}
