//! Compilation split into its phases, timed, for the size and speed benchmarks (not a stable API).

use crate::automaton::{AlignmentMethod, Automaton, CompileOptions};
use crate::compile::align::{align_aho_corasick, align_token_trie};
use crate::compile::freeze::freeze;
use crate::compile::string_trie::StringTrie;
use crate::util::budget::Budget;
use crate::vocab::Vocabulary;
use crate::Result;
use std::sync::Arc;
use std::time::Instant;

/// What each phase of [`compile_phases`] took and made.
#[derive(Clone, Debug, Default)]
pub struct Phases {
    /// Sorting the strings and building the byte trie (explicit nodes and chains), milliseconds.
    pub trie_ms: f64,
    /// Aligning the trie with the vocabulary (the edges of every explicit node), milliseconds.
    pub align_ms: f64,
    /// Pruning, numbering and laying out the arrays, milliseconds.
    pub freeze_ms: f64,
    /// Distinct members.
    pub members: usize,
    /// Explicit trie nodes (before pruning).
    pub explicit_nodes: usize,
    /// Explicit nodes with exactly one explicit child and no member ending there.
    pub unary_explicit_nodes: usize,
    /// Chains (members whose tail is implicit) and their positions.
    pub chains: usize,
    /// Chain positions.
    pub chain_positions: usize,
    /// Alignment edges (token codes; each stands for one or more tokens of equal bytes).
    pub edges: usize,
    /// Alignment edges that end in a chain position.
    pub edges_into_chains: usize,
    /// Alignment edges from unary explicit nodes (see `unary_explicit_nodes`).
    pub edges_from_unary: usize,
    /// The process's peak resident bytes (Linux `VmHWM`; 0 elsewhere) at the end of the trie build.
    pub peak_after_trie: u64,
    /// The same at the end of the alignment.
    pub peak_after_align: u64,
    /// The same at the end of the freeze (the compile's peak).
    pub peak_after_freeze: u64,
}

/// The process's peak resident size so far (`VmHWM` of `/proc/self/status`), bytes; 0 where there is none.
pub fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// [`Automaton::compile`], one phase after the other, timed.
pub fn compile_phases<S: AsRef<[u8]> + Sync>(
    vocab: Arc<Vocabulary>,
    strings: &[S],
    options: &CompileOptions,
) -> Result<(Automaton, Phases)> {
    let budget = Budget::new(options.max_bytes);
    let mut p = Phases::default();
    let t = Instant::now();
    let trie = StringTrie::build(strings, &vocab.index.single_byte, &budget, options.max_states)?;
    p.trie_ms = t.elapsed().as_secs_f64() * 1e3;
    p.members = trie.n_members();
    p.explicit_nodes = trie.n_nodes();
    // Counted, not listed (a list would be held through the alignment and add to its peak).
    p.unary_explicit_nodes = (0..trie.n_nodes() as u32).filter(|&n| trie.is_unary(n)).count();
    p.chains = trie.chain_member.len();
    p.chain_positions = trie.n_chain_positions();
    p.peak_after_trie = peak_rss();
    let t = Instant::now();
    let edges = match options.alignment {
        AlignmentMethod::TokenTrie => {
            align_token_trie(&trie, &vocab, &budget, crate::compile::freeze::derives(&trie, &vocab, options, false))?
        }
        AlignmentMethod::AhoCorasick => align_aho_corasick(&trie, &vocab, &budget)?,
    };
    p.align_ms = t.elapsed().as_secs_f64() * 1e3;
    p.edges = edges.len();
    p.edges_into_chains = edges.targets().filter(|t| t.is_chain()).count();
    // (0 when the unary nodes' rows are derived: the alignment skips them.)
    p.edges_from_unary =
        (0..trie.n_nodes() as u32).filter(|&n| trie.is_unary(n)).map(|n| edges.edges(n as usize).count()).sum();
    p.peak_after_align = peak_rss();
    let t = Instant::now();
    let a = freeze(vocab, trie, edges, options, &budget, false)?;
    p.freeze_ms = t.elapsed().as_secs_f64() * 1e3;
    p.peak_after_freeze = peak_rss();
    Ok((a, p))
}
