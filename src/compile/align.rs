//! Alignment of the string trie with the vocabulary: for every explicit node `n`, the tokens whose bytes spell
//! a path starting at `n`, and the position (explicit node or chain position) each one reaches. Chain positions
//! are never sources: their tokens are found at decoding time by walking the token trie along the member.
//!
//! Two equivalent methods (they give identical edges; tests check it):
//! - [`align_token_trie`] (default): from every explicit node, walk the string trie and the vocabulary's token
//!   trie together; each token-trie node with a pattern reached at a position is an edge. Nodes are split
//!   across threads and edges come out grouped by source.
//! - [`align_aho_corasick`], the paper's reduction to multi-pattern matching: the vocabulary's Aho-Corasick
//!   automaton over all distinct token byte strings is walked along every member's path (each position once,
//!   by the member that created it, to at most the longest pattern's length past the member's last explicit
//!   node). A match of pattern `p` (length `L`) ending at depth `e` means the token spells the path from the
//!   ancestor at depth `e - L` down to depth `e`: an edge when that ancestor is explicit. Walks are split across
//!   threads by ranges of members; edges are then counting-sorted by source.

use crate::compile::string_trie::{StringTrie, NONE};
use crate::util::budget::Budget;
use crate::vocab::Vocabulary;
use aho_corasick::automaton::Automaton as _;
use aho_corasick::Anchored;
use rayon::prelude::*;

pub(crate) use crate::ids::{Target, TargetKind};

/// Edges grouped by source node (CSR), in pieces of consecutive source nodes (the token-trie method keeps the
/// pieces its threads made rather than concatenating them, so its edges are never held twice): node `n` is in
/// piece `n / piece_nodes`, at local index `i = n % piece_nodes`, and its edges are
/// `code[offsets[i]..offsets[i + 1]]` of that piece (token codes: [`crate::vocab::TokenIndex::code_tokens`]) with the matching `target`s.
/// Every target is a proper descendant of its source: an explicit node (larger id) or a chain position
/// (`CHAIN | index`).
pub(crate) struct Edges {
    pub(crate) piece_nodes: usize,
    pub(crate) pieces: Vec<EdgePiece>,
    /// `Some` when the unary nodes were not walked (their rows are derived, `automaton/derived.rs`): `skipped[n]`
    /// for those nodes, whose edge lists are empty.
    pub(crate) skipped: Option<Vec<bool>>,
}

/// The edges of `piece_nodes` consecutive source nodes (fewer in the last piece).
pub(crate) struct EdgePiece {
    pub(crate) offsets: Vec<u32>,
    pub(crate) code: Vec<u32>,
    pub(crate) target: Vec<Target>,
}

impl Edges {
    #[inline]
    pub(crate) fn edges(&self, node: usize) -> impl Iterator<Item = (u32, Target)> + '_ {
        let p = &self.pieces[node / self.piece_nodes];
        let i = node % self.piece_nodes;
        let r = p.offsets[i] as usize..p.offsets[i + 1] as usize;
        p.code[r.clone()].iter().copied().zip(p.target[r].iter().copied())
    }

    /// Number of edges.
    pub(crate) fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.code.len()).sum()
    }

    /// All targets, in no particular order.
    pub(crate) fn targets(&self) -> impl Iterator<Item = Target> + '_ {
        self.pieces.iter().flat_map(|p| p.target.iter().copied())
    }
}

/// Raw edges of one range of members, in the order found.
struct Found {
    source: Vec<u32>,
    pattern: Vec<u32>,
    target: Vec<Target>,
}

/// Members per parallel work unit.
const CHUNK_MEMBERS: usize = 2048;

/// Explicit nodes per parallel work unit of the token-trie method.
const CHUNK_NODES: usize = 2048;

/// The chain index of member `chain_member[k]` at depth `d`.
#[inline]
fn chain_position(trie: &StringTrie, k: u32, d: usize) -> u32 {
    let m = trie.chain_member[k as usize] as usize;
    trie.chain_base[k as usize] + (d - trie.explicit_depth[m] as usize - 1) as u32
}

/// How the alignment treats the rows the automaton will derive (`automaton/derived.rs`): the unary nodes are not
/// walked (see [`Edges::skipped`]), and a node whose row allows at most `max` tokens, fewer than `dense` (counting
/// `eog` end-of-generation ids where a member ends) keeps only the edges of its single-byte tokens, its byte
/// children: the automaton keeps no more of such a row (`keep_byte_children`, which finds the same rows from
/// their lengths, whether they were cut here or not).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeriveRule {
    pub(crate) max: usize,
    pub(crate) dense: usize,
    pub(crate) eog: usize,
}

/// `derive`: skip the unary nodes and cut the short rows (see [`DeriveRule`]).
pub(crate) fn align_token_trie(
    trie: &StringTrie,
    vocab: &Vocabulary,
    budget: &Budget,
    derive: Option<DeriveRule>,
) -> crate::Result<Edges> {
    let tt = &vocab.index.trie;
    let idx = &vocab.index;
    let n = trie.n_nodes();
    let skipped: Option<Vec<bool>> = derive.map(|_| (0..n as u32).into_par_iter().map(|u| trie.is_unary(u)).collect());
    let skip = skipped.as_deref();
    // The codes of the single-byte tokens, sorted.
    let mut byte_codes: Vec<u32> =
        (0..=255u8).map(|b| tt.child(0, b)).filter(|&u| u != NONE).map(|u| tt.code(u)).filter(|&c| c != NONE).collect();
    byte_codes.sort_unstable();
    let cut = derive.filter(|r| r.max > 0);
    let blocks: Vec<(usize, usize)> = (0..n).step_by(CHUNK_NODES).map(|a| (a, (a + CHUNK_NODES).min(n))).collect();
    let walk_block = |&(a, b): &(usize, usize)| -> crate::Result<(Vec<u32>, Vec<u32>, Vec<Target>)> {
        if budget.exhausted() {
            return Err(crate::Error::limit("compiling stopped: max_bytes was exceeded"));
        }
        let mut counts = Vec::with_capacity(b - a);
        let mut pattern = Vec::new();
        let mut target = Vec::new();
        // (explicit node, token-trie node after its byte).
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for source in a as u32..b as u32 {
            if skip.is_some_and(|s| s[source as usize]) {
                counts.push(0);
                continue;
            }
            let before = pattern.len();
            stack.push((source, 0));
            while let Some((m, u)) = stack.pop() {
                if m != source {
                    let p = tt.code(u);
                    if p != NONE {
                        pattern.push(p);
                        target.push(Target::node(m));
                    }
                }
                for c in trie.children(m) {
                    let v = tt.child(u, trie.byte[c as usize]);
                    if v != NONE {
                        stack.push((c, v));
                    }
                }
                // The chains below `m`: one member each, walked byte by byte.
                for &k in trie.hanging(m) {
                    let member = trie.chain_member[k as usize] as usize;
                    let s = trie.member(member);
                    let h = trie.explicit_depth[member] as usize;
                    let mut v = u;
                    for (d, &byte) in s.iter().enumerate().skip(h) {
                        v = tt.child(v, byte);
                        if v == NONE {
                            break;
                        }
                        let p = tt.code(v);
                        if p != NONE {
                            pattern.push(p);
                            target.push(Target::chain(chain_position(trie, k, d + 1)));
                        }
                    }
                }
            }
            if let Some(rule) = cut {
                let eog = if trie.end_member[source as usize] != NONE { rule.eog } else { 0 };
                let tokens = eog + pattern[before..].iter().map(|c| idx.code_tokens(c).len()).sum::<usize>();
                if tokens <= rule.max && tokens < rule.dense {
                    let mut kept = before;
                    for j in before..pattern.len() {
                        if byte_codes.binary_search(&pattern[j]).is_ok() {
                            pattern[kept] = pattern[j];
                            target[kept] = target[j];
                            kept += 1;
                        }
                    }
                    pattern.truncate(kept);
                    target.truncate(kept);
                }
            }
            counts.push((pattern.len() - before) as u32);
        }
        // Held until the freeze: without the slack of their growth.
        pattern.shrink_to_fit();
        target.shrink_to_fit();
        budget.charge(counts.len() * 4 + pattern.len() * 8, "the alignment's edges")?;
        Ok((counts, pattern, target))
    };
    let found: Vec<(Vec<u32>, Vec<u32>, Vec<Target>)> = if n > CHUNK_NODES {
        blocks.par_iter().map(walk_block).collect::<crate::Result<_>>()?
    } else {
        blocks.iter().map(walk_block).collect::<crate::Result<_>>()?
    };
    let total: usize = found.iter().map(|f| f.1.len()).sum();
    check_total(total)?;
    let pieces = found
        .into_iter()
        .map(|(counts, code, target)| {
            let mut offsets = Vec::with_capacity(counts.len() + 1);
            offsets.push(0u32);
            for c in counts {
                offsets.push(offsets.last().unwrap() + c);
            }
            EdgePiece { offsets, code, target }
        })
        .collect();
    Ok(Edges { piece_nodes: CHUNK_NODES, pieces, skipped })
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
    let mut target = vec![Target::node(0); total];
    for f in found {
        for i in 0..f.source.len() {
            let c = &mut cursor[f.source[i] as usize];
            pattern[*c as usize] = f.pattern[i];
            target[*c as usize] = f.target[i];
            *c += 1;
        }
    }
    Ok(Edges { piece_nodes: n, pieces: vec![EdgePiece { offsets, code: pattern, target }], skipped: None })
}

/// Walks members `a..b`, emitting the edges that end at positions these members created.
fn walk(trie: &StringTrie, vocab: &Vocabulary, ac: &aho_corasick::nfa::contiguous::NFA, a: usize, b: usize) -> Found {
    let plen = &vocab.index.pattern_len;
    let max_len = vocab.index.max_pattern_len as usize;
    let start = ac.start_state(Anchored::No).expect("unanchored search is supported");
    let mut out = Found { source: Vec::new(), pattern: Vec::new(), target: Vec::new() };
    // path[d]: the explicit node at depth d of the current member (depths 0..=explicit_depth); states[d]: the
    // automaton state after d bytes.
    let first = trie.member(a);
    let h = trie.explicit_depth[a] as usize;
    let mut path: Vec<u32> = (0..=h).map(|d| trie.explicit_node(a, d)).collect();
    let mut states = Vec::with_capacity(first.len() + 1);
    states.push(start);
    let l = trie.lcp[a] as usize;
    for &byte in &first[..l] {
        let s = ac.next_state(Anchored::No, *states.last().unwrap(), byte);
        states.push(s);
    }
    // The chain index of each member's first chain position, found by walking the chains in order.
    let mut k = trie.chain_member.partition_point(|&m| (m as usize) < a);
    for m in a..b {
        let s = trie.member(m);
        let l = trie.lcp[m] as usize;
        let h = trie.explicit_depth[m] as usize;
        if m > a {
            path.truncate(l + 1);
            let first = trie.first_new[m];
            path.extend(first..first + (h.max(l) - l) as u32);
        }
        let chain = (h < s.len()).then(|| {
            debug_assert_eq!(trie.chain_member[k] as usize, m);
            k += 1;
            trie.chain_base[k - 1]
        });
        states.truncate(l + 1);
        for d in l..s.len().min(h + max_len) {
            let st = ac.next_state(Anchored::No, states[d], s[d]);
            states.push(st);
            if !ac.is_match(st) {
                continue;
            }
            let end = d + 1;
            let target =
                if end <= h { Target::node(path[end]) } else { Target::chain(chain.unwrap() + (end - h - 1) as u32) };
            for i in 0..ac.match_len(st) {
                let p = ac.match_pattern(st, i).as_u32();
                let len = plen[p as usize] as usize;
                if end - len <= h {
                    out.source.push(path[end - len]);
                    out.pattern.push(vocab.index.pattern_code[p as usize]);
                    out.target.push(target);
                }
            }
        }
    }
    out
}
