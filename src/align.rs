//! Alignment of the string trie with the vocabulary: for every trie node `n`, the tokens whose bytes spell a
//! path starting at `n`, and the node each one reaches.
//!
//! Two equivalent methods (they give identical edges; tests check it):
//! - [`align_token_trie`] (default): from every node, walk the string trie and the vocabulary's token trie
//!   together; each token-trie node with a pattern reached at string node `m` is an edge. Nodes are split
//!   across threads and edges come out grouped by source.
//! - [`align_aho_corasick`], the paper's reduction to multi-pattern matching: the vocabulary's Aho-Corasick
//!   automaton over all distinct token byte strings is walked along every root-to-node path of the trie (each
//!   node is visited once, with the automaton state of its parent). A match of pattern `p` (length `L`) ending
//!   at node `m` means the token bytes spell the path from `m`'s ancestor at depth `depth(m) - L` down to `m`:
//!   an edge `ancestor --p--> m`. Walks are split across threads by ranges of members; each node is visited by
//!   the member that created it; edges are then counting-sorted by source.

use crate::budget::Budget;
use crate::string_trie::{StringTrie, NONE};
use crate::vocab::Vocabulary;
use aho_corasick::automaton::Automaton as _;
use aho_corasick::Anchored;
use rayon::prelude::*;

/// Edges grouped by source node (CSR): node `n`'s edges are `pattern[offsets[n]..offsets[n + 1]]` with the
/// matching `target`s. Every target is a proper descendant of its source.
pub(crate) struct Edges {
    pub(crate) offsets: Vec<u32>,
    pub(crate) pattern: Vec<u32>,
    pub(crate) target: Vec<u32>,
}

impl Edges {
    #[inline]
    pub(crate) fn edges(&self, node: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let r = self.offsets[node] as usize..self.offsets[node + 1] as usize;
        self.pattern[r.clone()].iter().copied().zip(self.target[r].iter().copied())
    }
}

/// Raw edges of one range of members, in the order found.
struct Found {
    source: Vec<u32>,
    pattern: Vec<u32>,
    target: Vec<u32>,
}

/// Members per parallel work unit.
const CHUNK_MEMBERS: usize = 2048;

/// Nodes per parallel work unit of the token-trie method.
const CHUNK_NODES: usize = 4096;

pub(crate) fn align_token_trie(trie: &StringTrie, vocab: &Vocabulary, budget: &Budget) -> crate::Result<Edges> {
    let tt = &vocab.index.trie;
    let n = trie.n_nodes();
    let blocks: Vec<(usize, usize)> = (0..n).step_by(CHUNK_NODES).map(|a| (a, (a + CHUNK_NODES).min(n))).collect();
    let walk_block = |&(a, b): &(usize, usize)| -> crate::Result<(Vec<u32>, Vec<u32>, Vec<u32>)> {
        if budget.exhausted() {
            return Err(crate::Error::limit("compiling stopped: max_bytes was exceeded"));
        }
        let mut counts = Vec::with_capacity(b - a);
        let mut pattern = Vec::new();
        let mut target = Vec::new();
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for source in a as u32..b as u32 {
            let before = pattern.len();
            for c in trie.children(source) {
                let u = tt.root[trie.byte[c as usize] as usize];
                if u != NONE {
                    stack.push((c, u));
                }
            }
            while let Some((m, u)) = stack.pop() {
                let p = tt.pattern_at[u as usize];
                if p != NONE {
                    pattern.push(p);
                    target.push(m);
                }
                for c in trie.children(m) {
                    let v = tt.child(u, trie.byte[c as usize]);
                    if v != NONE {
                        stack.push((c, v));
                    }
                }
            }
            counts.push((pattern.len() - before) as u32);
        }
        budget.charge(counts.len() * 4 + pattern.len() * 8, "the alignment's edges")?;
        Ok((counts, pattern, target))
    };
    let found: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = if n > CHUNK_NODES {
        blocks.par_iter().map(walk_block).collect::<crate::Result<_>>()?
    } else {
        blocks.iter().map(walk_block).collect::<crate::Result<_>>()?
    };
    let total: usize = found.iter().map(|f| f.1.len()).sum();
    check_total(total)?;
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0u32);
    let mut pattern = Vec::with_capacity(total);
    let mut target = Vec::with_capacity(total);
    for (counts, p, t) in found {
        for c in counts {
            offsets.push(offsets.last().unwrap() + c);
        }
        pattern.extend_from_slice(&p);
        target.extend_from_slice(&t);
    }
    Ok(Edges { offsets, pattern, target })
}

fn check_total(total: usize) -> crate::Result<()> {
    if total >= u32::MAX as usize {
        return Err(crate::Error::limit(format!(
            "the set aligns to {total} token edges, over the limit of {}; split the set",
            u32::MAX - 1
        )));
    }
    Ok(())
}

pub(crate) fn align_aho_corasick(trie: &StringTrie, vocab: &Vocabulary, budget: &Budget) -> crate::Result<Edges> {
    let ac = vocab.aho_corasick()?;
    let n_members = trie.n_members();
    let chunks: Vec<(usize, usize)> =
        (0..n_members).step_by(CHUNK_MEMBERS).map(|a| (a, (a + CHUNK_MEMBERS).min(n_members))).collect();
    let found: Vec<Found> = chunks.par_iter().map(|&(a, b)| walk(trie, vocab, ac, a, b)).collect();
    let total: usize = found.iter().map(|f| f.source.len()).sum();
    check_total(total)?;
    budget.charge(total * 20 + trie.n_nodes() * 8, "the alignment's edges")?;
    // Counting sort by source node.
    let n = trie.n_nodes();
    let mut offsets = vec![0u32; n + 1];
    for f in &found {
        for &s in &f.source {
            offsets[s as usize + 1] += 1;
        }
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut cursor = offsets.clone();
    let mut pattern = vec![0u32; total];
    let mut target = vec![0u32; total];
    for f in found {
        for i in 0..f.source.len() {
            let c = &mut cursor[f.source[i] as usize];
            pattern[*c as usize] = f.pattern[i];
            target[*c as usize] = f.target[i];
            *c += 1;
        }
    }
    Ok(Edges { offsets, pattern, target })
}

/// Walks members `a..b`, emitting the edges that end at nodes these members created.
fn walk(trie: &StringTrie, vocab: &Vocabulary, ac: &aho_corasick::nfa::contiguous::NFA, a: usize, b: usize) -> Found {
    let plen = &vocab.index.pattern_len;
    let start = ac.start_state(Anchored::No).expect("unanchored search is supported");
    let mut out = Found { source: Vec::new(), pattern: Vec::new(), target: Vec::new() };
    // path[d] and states[d]: node and automaton state after d bytes of the current member.
    let mut path = trie.path_of(a);
    let mut states = Vec::with_capacity(path.len());
    states.push(start);
    let first = trie.member(a);
    let l = trie.lcp[a] as usize;
    for &byte in &first[..l] {
        let s = ac.next_state(Anchored::No, *states.last().unwrap(), byte);
        states.push(s);
    }
    for m in a..b {
        let s = trie.member(m);
        let l = trie.lcp[m] as usize;
        if m > a {
            path.truncate(l + 1);
            let first = trie.first_new[m];
            path.extend(first..first + (s.len() - l) as u32);
        }
        states.truncate(l + 1);
        for d in l..s.len() {
            let st = ac.next_state(Anchored::No, states[d], s[d]);
            states.push(st);
            if ac.is_match(st) {
                let node = path[d + 1];
                for k in 0..ac.match_len(st) {
                    let p = ac.match_pattern(st, k).as_u32();
                    let len = plen[p as usize] as usize;
                    out.source.push(path[d + 1 - len]);
                    out.pattern.push(p);
                    out.target.push(node);
                }
            }
        }
    }
    out
}
