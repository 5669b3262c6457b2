//! The compile's last step: prune the alignment, number the states, lay out the flat arrays.

use crate::automaton::{
    dense_threshold, derive_by_default, AlignmentMethod, Automaton, ByteTokens, Chains, CompileOptions, Derive,
    Explicit, State,
};
use crate::compile::align::{align_aho_corasick, align_token_trie, DeriveRule, Edges, Target, TargetKind};
use crate::compile::string_trie::{StringTrie, NONE};
use crate::error::{Error, ErrorKind, Result};
use crate::util::budget::Budget;
use crate::vocab::{TokenId, Vocabulary};
use rayon::prelude::*;
use std::sync::Arc;

impl Automaton {
    /// Compiles `strings` (arbitrary bytes; duplicates and prefixes allowed; the empty string allowed) against
    /// `vocab`. Errors: an empty set ([`ErrorKind::EmptySet`]); a string no token sequence can produce
    /// ([`ErrorKind::UnreachableString`], naming it, unless `options.drop_unreachable`); sizes over the 32-bit
    /// limits or the options' bounds ([`ErrorKind::LimitExceeded`]).
    pub fn compile<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        strings: &[S],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        Self::compile_valued(vocab, strings, None, options)
    }

    /// [`Automaton::compile`] of a map: `values[i]` is the value of `strings[i]`, and each member carries the
    /// value of its first copy in `strings` ([`Automaton::member_value`], [`Automaton::rank_value`],
    /// [`Automaton::possible_values`]; kept by [`Automaton::with_changes_and_values`], saved with the automaton).
    /// Errors: those of [`Automaton::compile`]; [`ErrorKind::InvalidArgument`] when `values` and `strings`
    /// differ in length.
    pub fn compile_with_values<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        strings: &[S],
        values: &[u64],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        check_values_len(values.len(), strings.len(), "strings")?;
        Self::compile_valued(vocab, strings, Some(values), options)
    }

    /// [`Automaton::compile`], with the members' values when `values` is given (one per string).
    pub(crate) fn compile_valued<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        strings: &[S],
        values: Option<&[u64]>,
        options: &CompileOptions,
    ) -> Result<Automaton> {
        let budget = Budget::new(options.max_bytes);
        let trie = StringTrie::build(strings, &vocab.index.single_byte, &budget, options.max_states)?;
        let by_rank = values.map(|v| first_copy_values(&trie.member_input, v));
        let edges = align(&trie, &vocab, options, &budget, false)?;
        let mut a = freeze(vocab, trie, edges, options, &budget, false)?;
        a.values = by_rank.map(Into::into);
        Ok(a)
    }
}

/// The value of each member by rank: that of its first copy (`member_input[rank]`, an index into `values`).
pub(crate) fn first_copy_values(member_input: &[u32], values: &[u64]) -> Vec<u64> {
    member_input.iter().map(|&i| values[i as usize]).collect()
}

/// An error unless there is one value per string (`what`: the name of the strings' argument).
pub(crate) fn check_values_len(n_values: usize, n_strings: usize, what: &str) -> Result<()> {
    if n_values == n_strings {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{n_values} values for {n_strings} {what}: give one value per string, in the same order"
    )))
}

/// The alignment of `trie` with the vocabulary by the options' method (`open`: no end-of-generation ids where a
/// member ends, as for [`freeze`]).
pub(crate) fn align(
    trie: &StringTrie,
    vocab: &Vocabulary,
    options: &CompileOptions,
    budget: &Budget,
    open: bool,
) -> Result<Edges> {
    match options.alignment {
        AlignmentMethod::TokenTrie => align_token_trie(trie, vocab, budget, derives(trie, vocab, options, open)),
        AlignmentMethod::AhoCorasick => align_aho_corasick(trie, vocab, budget),
    }
}

/// Whether the compile of `trie` derives the rows of its unary nodes (and of the branching ones with short rows)
/// instead of storing them (see `automaton/derived.rs`): on a vocabulary where every byte is a token, by the
/// options or the trie's size; then how.
pub(crate) fn derives(
    trie: &StringTrie,
    vocab: &Vocabulary,
    options: &CompileOptions,
    open: bool,
) -> Option<DeriveRule> {
    (derive_by_default(options.derive_rows, trie.n_nodes()) && ByteTokens::new(vocab).complete()).then(|| DeriveRule {
        max: options.byte_rows_limit(),
        dense: dense_threshold(vocab.mask_words()),
        eog: if open { 0 } else { vocab.eog_ids().len() },
    })
}

/// Prunes the alignment to live, reachable explicit nodes, numbers the states and lays out the flat arrays.
/// `open`: no end-of-generation tokens where a member ends (a template's [`crate::End::Open`]).
pub(crate) fn freeze(
    vocab: Arc<Vocabulary>,
    trie: StringTrie,
    al: Edges,
    options: &CompileOptions,
    budget: &Budget,
    open: bool,
) -> Result<Automaton> {
    let n = trie.n_nodes();
    let n_chain = trie.n_chain_positions();
    budget.charge(n * 9 + n_chain / 8, "pruning")?;
    let (keep, chain_entered) = prune(&trie, &al);
    // State numbering: kept explicit nodes in preorder, then the chain positions.
    let kept = Kept::new(&keep);
    let parallel = n >= PARALLEL_MIN;
    let (dropped, derive) = join(
        parallel,
        || dropped_members(&trie, &keep, &chain_entered, options),
        || match al.skipped.as_deref() {
            Some(skipped) => given_derived(&trie, skipped, &kept),
            None => Derive::ByRows(options.derive_rows),
        },
    );
    let (dropped, n_dropped_members) = dropped?;
    let mut trie = trie;
    trie.release_after_pruning();

    // Everything else the trie's node arrays give is taken before the transitions are laid out, so that those
    // arrays are freed first (the transitions and the alignment's edges are the compile's largest arrays, and are
    // held together).
    let ((accepting, depth), (single_member, chain_first_depth)) = join(
        parallel,
        || accepting_and_depth(&trie, &kept, parallel),
        || {
            join(
                parallel,
                || single_members(&trie, &keep, &chain_entered, &kept),
                || trie.chain_member.iter().map(|&m| trie.explicit_depth[m as usize] + 1).collect::<Vec<u32>>(),
            )
        },
    );
    drop((keep, chain_entered));
    let (member_offsets, member_bytes, end_member, chain_base, chain_member) = trie.into_freeze_parts();
    let (offsets, tokens, targets) = transitions(&end_member, &al, &kept, &vocab, budget, open)?;
    drop((al, end_member, kept));

    Ok(Automaton::assemble(
        vocab,
        Explicit { offsets, tokens, targets, accepting, depth, single_member },
        Chains { base: chain_base, member: chain_member, first_depth: chain_first_depth },
        member_offsets.into_iter().map(|o| o as u64).collect(),
        member_bytes,
        dropped,
        n_dropped_members,
        derive,
        options.byte_rows_limit(),
    ))
}

/// Tries with fewer explicit nodes than this are frozen on one thread: below it, handing the independent passes
/// to other threads costs more than they take (and on a loaded machine, a pass can wait for a thread).
const PARALLEL_MIN: usize = 1 << 18;

/// `rayon::join(a, b)` when `parallel`, else `a` then `b` on this thread.
fn join<A: FnOnce() -> RA + Send, B: FnOnce() -> RB + Send, RA: Send, RB: Send>(
    parallel: bool,
    a: A,
    b: B,
) -> (RA, RB) {
    if parallel {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// The accepting bits and the depths of the kept explicit states (in blocks of whole bit words, in parallel when
/// `parallel`).
fn accepting_and_depth(trie: &StringTrie, kept: &Kept, parallel: bool) -> (Vec<u64>, Vec<u32>) {
    let n = kept.len();
    let mut accepting = vec![0u64; n.div_ceil(64)];
    let mut depth = vec![0u32; n];
    const WORDS: usize = 256;
    let block = |(blk, (bits, d)): (usize, (&mut [u64], &mut [u32]))| {
        for (i, slot) in d.iter_mut().enumerate() {
            let node = kept.node(blk * WORDS * 64 + i);
            if trie.end_member[node] != NONE {
                bits[i / 64] |= 1 << (i % 64);
            }
            *slot = trie.depth[node];
        }
    };
    if parallel {
        accepting.par_chunks_mut(WORDS).zip(depth.par_chunks_mut(WORDS * 64)).enumerate().for_each(block);
    } else {
        accepting.chunks_mut(WORDS).zip(depth.chunks_mut(WORDS * 64)).enumerate().for_each(block);
    }
    (accepting, depth)
}

/// The derived states of an alignment that skipped the unary nodes: the kept skipped nodes whose child is kept
/// (it is then the next state), with the child's byte.
fn given_derived(trie: &StringTrie, skipped: &[bool], kept: &Kept) -> Derive {
    let n = kept.len();
    let mut bits = vec![0u64; n.div_ceil(64)];
    let mut bytes = vec![0u8; n];
    for s in 0..n {
        let node = kept.node(s);
        if skipped[node] && node + 1 < trie.n_nodes() && kept.state_of(node + 1) == s as u32 + 1 {
            bits[s / 64] |= 1 << (s % 64);
            bytes[s] = trie.byte[node + 1];
        }
    }
    Derive::Given(bits, bytes)
}

/// Pruning: `keep[n]` for the explicit nodes that are live (some member can be completed from them with tokens)
/// and reachable from the root through live nodes; `chain_entered[k]` for the chains some kept node's token leads
/// into. Chain positions are all live; explicit targets are descendants (larger ids).
fn prune(trie: &StringTrie, al: &Edges) -> (Vec<bool>, Vec<bool>) {
    let n = trie.n_nodes();
    let n_chain = trie.n_chain_positions();
    let skipped = |node: usize| al.skipped.as_ref().is_some_and(|s| s[node]);
    let mut live = vec![false; n];
    for node in (0..n).rev() {
        live[node] = (skipped(node) && live[node + 1])
            || trie.end_member[node] != NONE
            || al.edges(node).any(|(_, t)| match t.kind() {
                TargetKind::Chain(_) => true,
                TargetKind::Node(t) => live[t as usize],
            });
    }
    // keep[n]: live and reachable from the root through live nodes; entered: chain positions some kept node's
    // token leads to.
    let mut keep = vec![false; n];
    // One bit per chain position.
    let mut entered = vec![0u64; n_chain.div_ceil(64)];
    keep[0] = live[0];
    for node in 0..n {
        if keep[node] {
            if skipped(node) && live[node + 1] {
                keep[node + 1] = true;
            }
            for (_, t) in al.edges(node) {
                match t.kind() {
                    TargetKind::Chain(p) => entered[p as usize / 64] |= 1 << (p % 64),
                    TargetKind::Node(t) if live[t as usize] => keep[t as usize] = true,
                    TargetKind::Node(_) => {}
                }
            }
        }
    }
    drop(live);
    let chain_entered = |k: usize| any_bit(&entered, trie.chain_base[k] as usize, trie.chain_base[k + 1] as usize);
    let chain_entered: Vec<bool> = if n >= PARALLEL_MIN {
        (0..trie.chain_member.len()).into_par_iter().with_min_len(1 << 14).map(chain_entered).collect()
    } else {
        (0..trie.chain_member.len()).map(chain_entered).collect()
    };
    drop(entered);
    (keep, chain_entered)
}

/// Whether any of the bits `a..b` of `bits` is set.
fn any_bit(bits: &[u64], a: usize, b: usize) -> bool {
    if a >= b {
        return false;
    }
    let (wa, wb) = (a / 64, (b - 1) / 64);
    let low = !0u64 << (a % 64);
    let high = !0u64 >> (63 - (b - 1) % 64);
    if wa == wb {
        return bits[wa] & low & high != 0;
    }
    bits[wa] & low != 0 || bits[wa + 1..wb].iter().any(|&w| w != 0) || bits[wb] & high != 0
}

/// The members pruning left unreachable: an error naming them (unless `drop_unreachable` and some remain), else
/// every input index of a dropped member (duplicates included, ascending) and the number of dropped members.
fn dropped_members(
    trie: &StringTrie,
    keep: &[bool],
    chain_entered: &[bool],
    options: &CompileOptions,
) -> Result<(Vec<usize>, usize)> {
    let n = trie.n_nodes();
    // Members that cannot be produced: their end node is not kept, or their chain is never entered.
    let mut reachable = vec![false; trie.n_members()];
    for node in 0..n {
        if keep[node] && trie.end_member[node] != NONE {
            reachable[trie.end_member[node] as usize] = true;
        }
    }
    for (k, &m) in trie.chain_member.iter().enumerate() {
        reachable[m as usize] = chain_entered[k];
    }
    let unreachable: Vec<usize> = (0..trie.n_members()).filter(|&m| !reachable[m]).collect();
    drop(reachable);
    if !unreachable.is_empty() && (!options.drop_unreachable || unreachable.len() == trie.n_members()) {
        let names: Vec<String> = unreachable.iter().take(5).map(|&m| trie.describe_member(m)).collect();
        let more = if unreachable.len() > 5 { format!(" and {} more", unreachable.len() - 5) } else { String::new() };
        let all = if unreachable.len() == trie.n_members() { " (no member of the set can be produced)" } else { "" };
        return Err(Error::new(
            ErrorKind::UnreachableString,
            format!(
                "no sequence of tokens of this vocabulary produces {}{more}{all}: the vocabulary lacks tokens for \
                 some of its bytes; remove or rewrite these strings, or compile with drop_unreachable",
                names.join(", ")
            ),
        ));
    }
    // Every input index of a dropped member, duplicates included.
    let mut dropped: Vec<usize> = unreachable.iter().map(|&m| trie.member_input[m] as usize).collect();
    if !unreachable.is_empty() {
        dropped.extend(
            trie.duplicates
                .iter()
                .filter(|&&(m, _)| unreachable.binary_search(&(m as usize)).is_ok())
                .map(|&(_, input)| input as usize),
        );
    }
    dropped.sort_unstable();
    let n_dropped_members = unreachable.len();

    Ok((dropped, n_dropped_members))
}

/// The kept explicit nodes, numbered in preorder as states: every node (the state is the node, and no table is
/// held: the usual case, and on a byte-complete vocabulary the only one), or the list of kept nodes and the
/// node-to-state table (`NONE` for a pruned node).
enum Kept {
    All(usize),
    Some { nodes: Vec<u32>, state_of: Vec<u32> },
}

impl Kept {
    fn new(keep: &[bool]) -> Kept {
        if keep.iter().all(|&k| k) {
            return Kept::All(keep.len());
        }
        let mut state_of = vec![NONE; keep.len()];
        let mut nodes = Vec::new();
        for node in (0..keep.len()).filter(|&node| keep[node]) {
            state_of[node] = nodes.len() as u32;
            nodes.push(node as u32);
        }
        Kept::Some { nodes, state_of }
    }

    /// The number of kept nodes (explicit states).
    #[inline]
    fn len(&self) -> usize {
        match self {
            Kept::All(n) => *n,
            Kept::Some { nodes, .. } => nodes.len(),
        }
    }

    /// The node of state `s`.
    #[inline]
    fn node(&self, s: usize) -> usize {
        match self {
            Kept::All(_) => s,
            Kept::Some { nodes, .. } => nodes[s] as usize,
        }
    }

    /// The state of `node`, `NONE` if it was pruned.
    #[inline]
    fn state_of(&self, node: usize) -> u32 {
        match self {
            Kept::All(_) => node as u32,
            Kept::Some { state_of, .. } => state_of[node],
        }
    }
}

/// The transitions of the kept nodes: CSR offsets, tokens ascending
/// per state and their targets. `open`: no end-of-generation tokens where a member ends.
fn transitions(
    end_member: &[u32],
    al: &Edges,
    kept: &Kept,
    vocab: &Vocabulary,
    budget: &Budget,
    open: bool,
) -> Result<(Vec<u32>, Vec<TokenId>, Vec<u32>)> {
    let n_explicit = kept.len() as u32;
    let eog = vocab.eog_ids();
    let idx = &vocab.index;

    // Allowed tokens of every explicit state: counted in parallel blocks of states, then sorted and written in
    // place, each block into its own slice of the final arrays (the transitions are never held twice).
    const BLOCK: usize = 2048;
    let target_of = |t: Target| match t.kind() {
        TargetKind::Chain(p) => n_explicit + p,
        TargetKind::Node(n) => kept.state_of(n as usize),
    };
    let mut offsets = vec![0u32; kept.len() + 1];
    offsets[1..].par_chunks_mut(BLOCK).enumerate().try_for_each(|(blk, counts)| {
        if budget.exhausted() {
            return Err(Error::limit("compiling stopped: max_bytes was exceeded"));
        }
        let mut n_block = 0usize;
        for (i, count) in counts.iter_mut().enumerate() {
            let node = kept.node(blk * BLOCK + i);
            let mut n = 0usize;
            for (code, t) in al.edges(node) {
                if target_of(t) != NONE {
                    n += idx.code_tokens(&code).len();
                }
            }
            if end_member[node] != NONE && !open {
                n += eog.len();
            }
            *count = u32::try_from(n).unwrap_or(u32::MAX);
            n_block += n;
        }
        // Charged twice, as when the blocks were copied into the final arrays.
        budget.charge(counts.len() * 8 + n_block * 16, "the automaton's transitions")
    })?;
    let total: usize = offsets.par_iter().map(|&c| c as usize).sum();
    if total >= u32::MAX as usize {
        return Err(Error::limit(format!(
            "the automaton needs {total} transitions, over the limit of {}",
            u32::MAX - 1
        )));
    }
    for s in 0..kept.len() {
        offsets[s + 1] += offsets[s];
    }
    let mut tokens: Vec<TokenId> = vec![0; total];
    let mut targets = vec![0u32; total];
    let mut pieces = Vec::with_capacity(kept.len().div_ceil(BLOCK));
    let (mut tok_rest, mut tgt_rest) = (&mut tokens[..], &mut targets[..]);
    for a in (0..kept.len()).step_by(BLOCK) {
        let b = (a + BLOCK).min(kept.len());
        let n = (offsets[b] - offsets[a]) as usize;
        let (tok, rest) = std::mem::take(&mut tok_rest).split_at_mut(n);
        tok_rest = rest;
        let (tgt, rest) = std::mem::take(&mut tgt_rest).split_at_mut(n);
        tgt_rest = rest;
        pieces.push((a, b, tok, tgt));
    }
    pieces.into_par_iter().for_each(|(a, b, tok, tgt)| {
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        let mut at = 0;
        for s in a..b {
            let node = kept.node(s);
            pairs.clear();
            for (code, t) in al.edges(node) {
                let target = target_of(t);
                if target != NONE {
                    pairs.extend(idx.code_tokens(&code).iter().map(|&tok| (tok, target)));
                }
            }
            if end_member[node] != NONE && !open {
                pairs.extend(eog.iter().map(|&e| (e, State::FINISHED.0)));
            }
            pairs.sort_unstable();
            for (i, &(token, target)) in pairs.iter().enumerate() {
                tok[at + i] = token;
                tgt[at + i] = target;
            }
            at += pairs.len();
        }
    });
    Ok((offsets, tokens, targets))
}

/// For each kept explicit node: the only reachable member below it (ending there, ending at a kept descendant, or
/// in an entered chain hanging below), or `NONE`.
fn single_members(trie: &StringTrie, keep: &[bool], chain_entered: &[bool], kept: &Kept) -> Vec<u32> {
    let n = trie.n_nodes();
    // count (saturated at 2) of reachable members per subtree, and one of them.
    let mut count = vec![0u8; n];
    let mut some = vec![NONE; n];
    for node in (0..n).rev() {
        let m = trie.end_member[node];
        if m != NONE && keep[node] {
            count[node] = (count[node] + 1).min(2);
            some[node] = m;
        }
        for &k in trie.hanging(node as u32) {
            if chain_entered[k as usize] {
                count[node] = (count[node] + 1).min(2);
                some[node] = trie.chain_member[k as usize];
            }
        }
        let p = trie.parent[node];
        if p != NONE && count[node] > 0 {
            count[p as usize] = (count[p as usize] + count[node]).min(2);
            some[p as usize] = some[node];
        }
    }
    (0..kept.len()).map(|s| kept.node(s)).map(|node| if count[node] == 1 { some[node] } else { NONE }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenKind;
    use rand::{Rng, SeedableRng};

    /// Every byte a token, some longer ones (so that edges skip nodes and rows hold several codes), an
    /// end-of-generation id.
    fn vocab() -> Arc<Vocabulary> {
        let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for t in ["ab", "abc", "ba", "ca", "-a", "a-", "bcd", "cab", "abca", "dd", "ddd"] {
            toks.push(t.as_bytes().to_vec());
        }
        toks.push(b"</s>".to_vec());
        let eog = toks.len() as TokenId - 1;
        let mut kinds = vec![TokenKind::Normal; toks.len()];
        kinds[eog as usize] = TokenKind::Control;
        Arc::new(Vocabulary::new(toks, kinds, &[eog], None).unwrap())
    }

    /// Differential: the parallel compile (several worker threads, the sort split by first bytes, the alignment,
    /// transitions and per-state arrays in blocks) gives byte for byte the file of the compile on one thread, over
    /// sets that cross every block size and the parallel sort's threshold, with and without derived rows.
    #[test]
    fn parallel_and_serial_compiles_are_byte_identical() {
        let v = vocab();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(38);
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let four = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
        let word = |rng: &mut rand::rngs::SmallRng, max: usize| -> Vec<u8> {
            let len = rng.gen_range(0..max);
            (0..len).map(|_| b"abcd-"[rng.gen_range(0..5)]).collect()
        };
        for n in [1usize, 3000, 40_000, 300_000] {
            // Groups of up to three strings sharing a long prefix (long explicit paths: the large set has more
            // explicit nodes than the serial freeze's threshold), with short random strings between them.
            let mut set: Vec<Vec<u8>> = Vec::with_capacity(n);
            while set.len() < n {
                let base = word(&mut rng, 30);
                for _ in 0..rng.gen_range(1..4) {
                    let mut s = base.clone();
                    s.extend(word(&mut rng, 6));
                    set.push(s);
                }
                set.push(word(&mut rng, 12));
            }
            if n == 300_000 {
                let t = StringTrie::build(&set, &[true; 256], &Budget::new(None), None).unwrap();
                assert!(t.n_nodes() >= PARALLEL_MIN, "{} explicit nodes", t.n_nodes());
            }
            for derive in [None, Some(true), Some(false)] {
                let mut options = CompileOptions::default();
                if let Some(d) = derive {
                    options = options.derive_rows(d);
                }
                let compile = |pool: &rayon::ThreadPool| {
                    pool.install(|| Automaton::compile(v.clone(), &set, &options).unwrap().to_bytes())
                };
                let (serial, parallel) = (compile(&one), compile(&four));
                assert!(serial == parallel, "n = {n}, derive = {derive:?}: the files differ");
                let a = Automaton::compile(v.clone(), &set, &options).unwrap();
                assert_eq!(a.to_bytes(), serial);
                assert!(a.n_members() > 0);
            }
        }
    }
}
