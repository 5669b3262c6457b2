//! Automata loaded lazily ([`Automaton::load_lazy`]): the file is mapped and only its header, section table, the
//! checksum of its block hashes and the sizes of its arrays are checked at load; everything else is checked on
//! first use, once.
//!
//! What is checked when (a failure makes the state behave as an invalid one: [`ErrorKind::MalformedFile`] from
//! `advance` and the mask fills, empty / `false` / `None` from the queries without an error):
//! - an explicit state, the first time it is asked about: its row (tokens ascending ids of the vocabulary,
//!   targets inside the automaton), its depth, its accepting bit, its single member (offsets and bytes) and its
//!   precomputed mask row, and every block of the file these lie in against its stored hash (2 KiB blocks from
//!   format version 8 on, 64 KiB before);
//! - the chain index (`chain_base` ascending, its blocks) the first time any chain state is asked about, then a
//!   chain (its member, offsets and bytes, first depth and length) the first time one of its states is;
//! - the ascending arrays held in blocks (format version 9, see `ascending`): the first and last block of the
//!   row offsets, chain bases and member offsets at load; each other block of the row offsets, chain members
//!   and member offsets (its base, the next block's, its per-element values: ascending from the one to the
//!   other, and their bytes against the file's block hashes) the first time a state reads an element in it,
//!   once (one bit per block); the chain bases whole with the chain index;
//! - everything ([`Automaton::validate`] and every block), the first time a member is looked up by rank
//!   (`member_at`, `member_range`, `member_bytes`, `member_id`, `member_value`, `rank_value`, `possible_values`,
//!   `crossing`, `cross`) or the automaton is updated with `with_changes`; a templated file is checked whole at
//!   load. The member values' count is checked at load, their bytes with the whole.
//!
//! So every index a query uses was checked before it is used, as for an eagerly loaded automaton, and every byte
//! it reads was checked against the file's checksum. A check that passed is remembered (one bit per state and
//! chain, set by whichever thread checked first: the arrays never change, so the checks are idempotent); one that
//! failed is repeated, and fails again, on every use.

use super::*;
use crate::format::Blocks;
use crate::util::packed::Ints;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The checks still to be made of a lazily loaded automaton.
pub(crate) struct Lazy {
    blocks: Blocks,
    /// Bit `s`: explicit state `s` was checked.
    explicit: Box<[AtomicU64]>,
    /// Bit `k`: chain `k` was checked.
    chains: Box<[AtomicU64]>,
    /// Bit `k`: block `k` of `offsets`, `chain_member`, `member_offsets` (in blocks, see `ascending`) was checked.
    offset_blocks: Box<[AtomicU64]>,
    chain_member_blocks: Box<[AtomicU64]>,
    member_blocks: Box<[AtomicU64]>,
    chain_index: OnceLock<bool>,
    whole: OnceLock<Result<()>>,
}

fn bits(n: usize) -> Box<[AtomicU64]> {
    (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect()
}

#[inline]
fn is_set(bits: &[AtomicU64], i: usize) -> bool {
    bits[i / 64].load(Ordering::Relaxed) >> (i % 64) & 1 == 1
}

fn set(bits: &[AtomicU64], i: usize) {
    bits[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
}

impl Lazy {
    pub(crate) fn memory_usage(&self) -> usize {
        let bits = self.explicit.len()
            + self.chains.len()
            + self.offset_blocks.len()
            + self.chain_member_blocks.len()
            + self.member_blocks.len();
        bits * 8 + self.blocks.memory_usage()
    }

    /// The file's bytes as they were loaded.
    pub(crate) fn file_bytes(&self) -> &[u8] {
        self.blocks.file_bytes()
    }

    /// Whether state `s` (`< n_states()`) and everything a query of it reads was checked, checking it now if not.
    #[inline]
    fn ready(&self, a: &Automaton, s: usize) -> bool {
        let e = a.n_explicit();
        if s < e {
            return is_set(&self.explicit, s) || self.check_row(a, s);
        }
        if !*self.chain_index.get_or_init(|| self.check_chain_index(a)) {
            return false;
        }
        // The index is ascending from 0 and `s - e < chain_base[k]` (the state count): 0 <= k < chain count.
        let idx = (s - e) as u32;
        let Some((k, _)) = a.chain_base.last_at_most(idx) else { return false };
        is_set(&self.chains, k) || self.check_chain(a, k)
    }

    /// Whether member `m`'s offsets and bytes are sound (and their blocks match); front-coded, those of every
    /// member from its restart point, their shared prefix lengths (0 at the restart point, none longer than the
    /// member before), so that decoding it reads only checked bytes.
    fn member_ok(&self, a: &Automaton, m: usize) -> bool {
        if m + 1 >= a.member_offsets.len() {
            return false;
        }
        if !a.is_front_coded() {
            return self.stored_ok(a, m);
        }
        let mut prev_len = 0u64;
        for i in m - m % front::RESTART..=m {
            if !(self.stored_ok(a, i) && self.blocks.verify(a.member_lcp.slice(i..i + 1).bytes())) {
                return false;
            }
            let shared = a.member_lcp.get(i) as u64;
            if (i % front::RESTART == 0 && shared != 0) || shared > prev_len {
                return false;
            }
            let (from, to) = a.member_offsets.pair(i);
            prev_len = shared + (to - from);
        }
        true
    }

    /// Whether member `m`'s (`< n_members`) offsets and stored bytes are sound (and their blocks match).
    fn stored_ok(&self, a: &Automaton, m: usize) -> bool {
        if !a.member_offsets.elements_verified(&self.blocks, &self.member_blocks, m, m + 1, false) {
            return false;
        }
        let (from, to) = a.member_offsets.pair(m);
        from <= to
            && to <= a.member_bytes.len() as u64
            && self.blocks.verify(&a.member_bytes[from as usize..to as usize])
    }

    #[cold]
    fn check_row(&self, a: &Automaton, s: usize) -> bool {
        let v = &self.blocks;
        if !a.offsets.elements_verified(v, &self.offset_blocks, s, s + 1, false) {
            return false;
        }
        let r = a.range(s);
        if !(r.start <= r.end && r.end <= a.tokens.len()) {
            return false;
        }
        let (toks, targets) = (a.tokens.slice(r.clone()), a.targets.slice(r));
        let n_states = a.n_states() as u64;
        let n_vocab = a.vocab.n_vocab() as u64;
        let row_ok = v.verify(toks.bytes())
            && v.verify(targets.bytes())
            && toks.ascending(true)
            && toks.last().map_or(true, |t| (t as u64) < n_vocab)
            && targets.all(|t| t == State::FINISHED.0 || (t as u64) < n_states);
        let single = a.single_member.get(s);
        let derived_ok = (a.derived.is_empty()
            || (v.verify(&a.derived[s / 64..s / 64 + 1])
                && v.verify(&a.unary_byte[s..s + 1])
                && (!a.is_unary(s) || a.derived_state_ok(s))))
            && (a.byte_rows.is_empty() || v.verify(&a.byte_rows[s / 64..s / 64 + 1]));
        let ok = row_ok
            && derived_ok
            && v.verify(&a.accepting[s / 64..s / 64 + 1])
            && v.verify(a.depth.slice(s..s + 1).bytes())
            && v.verify(a.single_member.slice(s..s + 1).bytes())
            && a.depth.get(s) as usize <= a.member_bytes.len()
            && (single == NONE || (single as usize) < a.n_members_stored() && self.member_ok(a, single as usize))
            && self.dense_row_ok(a, s, toks);
        if ok {
            set(&self.explicit, s);
        }
        ok
    }

    /// A precomputed row of state `s` (whose allowed tokens are `toks`), if it has one, is its allowed list.
    fn dense_row_ok(&self, a: &Automaton, s: usize, toks: Ints<'_, TokenId>) -> bool {
        if toks.len() < a.dense_threshold() {
            return true;
        }
        let Ok(i) = a.dense_states.binary_search(&(s as u32)) else { return true };
        let words = a.mask_words();
        let row = &a.dense_rows[i * words..(i + 1) * words];
        self.blocks.verify(row)
            && row.iter().map(|w| w.count_ones() as usize).sum::<usize>() == toks.len()
            && toks.all(|t| row[(t >> 5) as usize] >> (t & 31) & 1 == 1)
    }

    #[cold]
    fn check_chain_index(&self, a: &Automaton) -> bool {
        a.chain_base.verified(&self.blocks) && a.chain_base.is_sound(true)
    }

    #[cold]
    fn check_chain(&self, a: &Automaton, k: usize) -> bool {
        let v = &self.blocks;
        if !(a.chain_member.elements_verified(v, &self.chain_member_blocks, k, k, true)
            && v.verify(a.chain_first_depth.slice(k..k + 1).bytes()))
        {
            return false;
        }
        let m = a.chain_member.get(k) as usize;
        if !(m < a.n_members_stored() && self.member_ok(a, m)) {
            return false;
        }
        let (from, to) = a.chain_base.pair(k);
        let (first, n) = (a.chain_first_depth.get(k) as u64, (to - from) as u64);
        let ok = a.chain_ok(m, first, n);
        if ok {
            set(&self.chains, k);
        }
        ok
    }

    /// Checks everything (once): every block, then every array as an eager load does.
    fn whole(&self, a: &Automaton) -> &Result<()> {
        self.whole.get_or_init(|| match self.blocks.verify_all() {
            Some(i) => {
                Err(Error::malformed(format!("libtrie file: block {i} fails its checksum: the file is corrupt")))
            }
            None => a.validate(),
        })
    }
}

impl Automaton {
    /// The number of members in the member table (dropped ones included).
    #[inline]
    pub(super) fn n_members_stored(&self) -> usize {
        self.member_offsets.len() - 1
    }

    /// Whether `state` (`< n_states()`) can be queried: always, unless the automaton was loaded lazily and the
    /// state's part of the file fails its check (see the module comment).
    #[inline]
    pub(super) fn ready(&self, state: State) -> bool {
        match &self.lazy {
            None => true,
            Some(l) => l.ready(self, state.0 as usize),
        }
    }

    /// The error of a state whose part of a lazily loaded file fails its check.
    #[cold]
    pub(super) fn malformed_state(&self, state: State) -> Error {
        Error::malformed(format!(
            "libtrie file: state {} of this lazily loaded automaton is malformed (its row, chain or member does \
             not pass the checks, or a block of the file it lies in fails its checksum)",
            state.0
        ))
    }

    /// Whether the whole-file check of a lazily loaded automaton has run (always for another one).
    #[cfg(test)]
    pub(crate) fn whole_checked(&self) -> bool {
        self.lazy.as_ref().map_or(true, |l| l.whole.get().is_some())
    }

    /// Checks the whole automaton if it was loaded lazily (once; the result is remembered): what the member
    /// table's binary searches and `with_changes` rely on.
    pub(crate) fn check_whole(&self) -> Result<()> {
        match &self.lazy {
            None => Ok(()),
            Some(l) => l.whole(self).clone(),
        }
    }

    /// The checks a lazy load makes: the header's arrays, the sizes of every array against the others, the first
    /// and last entries the sizes rest on, and the small arrays (metadata, precomputed rows) in full.
    pub(super) fn lazy_checks(self, blocks: Blocks) -> Result<Automaton> {
        let mut a = self;
        let v = &blocks;
        let corrupt = || "a block of the file fails its checksum: the file is corrupt".to_string();
        let corrupt_block = || "a block of the array is not ascending or fails its checksum: the file is corrupt";
        let n = a.member_offsets.len().checked_sub(1);
        ensure(n.is_some(), || "member offsets".into())?;
        let n = n.unwrap();
        let mo = &a.member_offsets;
        ensure(mo.ends_verified(v, false), || format!("member offsets: {}", corrupt_block()))?;
        ensure(mo.get(0) == 0 && mo.get(n) == a.member_bytes.len() as u64 && a.n_dropped_members <= n, || {
            "member offsets are not within the member bytes".into()
        })?;
        ensure(!a.is_front_coded() || a.member_lcp.len() == n, || "member prefix lengths: not one per member".into())?;
        // Member values are read by rank, after the whole automaton is checked; their count is checked now.
        a.validate_values()?;
        let e = a.depth.len();
        ensure(e >= 1 && a.offsets.len() == e + 1, || "explicit state tables of inconsistent sizes".into())?;
        ensure(a.offsets.ends_verified(v, false), || format!("offsets: {}", corrupt_block()))?;
        ensure(
            a.single_member.len() == e
                && a.accepting.len() == e.div_ceil(64)
                && a.offsets.get(0) == 0
                && a.offsets.get(e) as usize == a.tokens.len()
                && a.targets.len() == a.tokens.len(),
            || "explicit state tables of inconsistent sizes".into(),
        )?;
        ensure(a.derived_sizes_ok(), || "derived rows: tables of inconsistent sizes".into())?;
        let k = a.chain_member.len();
        ensure(a.chain_base.len() == k + 1 && a.chain_first_depth.len() == k, || "chain tables".into())?;
        let cb = &a.chain_base;
        ensure(cb.ends_verified(v, true), || format!("chain bases: {}", corrupt_block()))?;
        ensure(cb.get(0) == 0, || "chain tables".into())?;
        ensure((e as u64 + cb.get(k) as u64) < State::FINISHED.0 as u64, || "too many states".into())?;
        let words = a.mask_words();
        ensure(v.verify(&a.dense_states) && v.verify(&a.dense_rows), corrupt)?;
        ensure(
            a.dense_states.windows(2).all(|w| w[0] < w[1])
                && a.dense_states.iter().all(|&s| (s as usize) < e)
                && a.dense_rows.len() == a.dense_states.len() * words,
            || "dense rows".into(),
        )?;
        a.lazy = Some(Box::new(Lazy {
            explicit: bits(e),
            chains: bits(k),
            offset_blocks: a.offsets.block_bits(),
            chain_member_blocks: a.chain_member.block_bits(),
            member_blocks: a.member_offsets.block_bits(),
            chain_index: OnceLock::new(),
            whole: OnceLock::new(),
            blocks,
        }));
        if a.segments.is_some() {
            a.check_whole()?;
        }
        Ok(a)
    }
}
