//! `libtrie inspect`: what a compiled automaton file holds.

use crate::args::{Args, Opt};
use crate::compile::{describe, show};
use crate::input::{self, VOCAB_OPTS};
use crate::{failed, progress, Res};
use trie::Automaton;

const SYNOPSIS: &str = "FILE [--vocab MODEL] [--members N]";

fn opts() -> Vec<Opt> {
    let mut v: Vec<Opt> = VOCAB_OPTS.into();
    v.push(Opt { name: "members", value: true, help: "how many members to list (default 10)" });
    v
}

/// Runs `libtrie inspect`.
pub fn run(argv: &[String]) -> Res<()> {
    let opts = opts();
    let Some(a) = Args::parse("inspect", SYNOPSIS, argv, &opts)? else { return Ok(()) };
    let path = a.one_positional("FILE (an automaton file)")?;
    let show_n: usize = a.parsed("members", 10)?;
    let info = Automaton::file_info(path).map_err(|e| failed("FILE", e))?;
    println!("file:           {path}");
    println!("format version: {} (this libtrie reads 1 to {})", info.format_version, Automaton::FORMAT_VERSION);
    println!("vocabulary:     fingerprint {:032x}", info.vocab_fingerprint);
    println!("size:           {} bytes", info.file_bytes);
    if a.get("vocab").is_none() {
        println!("(members, states and template: give --vocab MODEL, the vocabulary the file was compiled for)");
        return Ok(());
    }
    let vocab = progress::with("loading the vocabulary", || input::vocab(&a))?;
    let automaton = progress::with("checking the file", || Automaton::load(vocab.clone(), path))
        .map_err(|e| failed(format!("FILE with --vocab {}", a.get("vocab").unwrap_or("")), e))?;
    println!("members:        {}", automaton.n_members());
    println!("dropped:        {}", automaton.dropped().len());
    println!("states:         {} ({} explicit)", automaton.n_states(), automaton.n_explicit());
    println!("memory:         {} bytes mapped", automaton.memory_usage());
    match automaton.template() {
        Some(t) => println!("template:       {}", describe(t)),
        None => println!("template:       none (a bare set)"),
    }
    println!("member values:  {}", if automaton.has_values() { "yes (a u64 per member)" } else { "no" });
    let listed = (0..).map_while(|rank| automaton.member_bytes(rank).map(|b| (rank, b)));
    let mut shown = 0;
    for (rank, bytes) in listed {
        if shown == show_n {
            break;
        }
        let Some(id) = automaton.member_id(rank) else { continue }; // dropped as unreachable
        if shown == 0 {
            println!("first members (id: segment, in byte order):");
        }
        match automaton.rank_value(rank) {
            Some(value) => println!("  {id}: {} = {value}", show(&bytes)),
            None => println!("  {id}: {}", show(&bytes)),
        }
        shown += 1;
    }
    Ok(())
}
