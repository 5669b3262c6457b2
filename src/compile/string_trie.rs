//! The byte trie of the set's strings, with unary tails left implicit.
//!
//! Members are sorted and distinct. The trie has two kinds of positions:
//! - *explicit nodes*: every prefix shared by two or more members (and the root), plus every node of a member
//!   whose tail the vocabulary cannot spell byte by byte. They are materialised: numbered in preorder (root = 0,
//!   children in byte order, so every descendant of a node has a larger id), with parent, depth and byte;
//! - *chains*: below its last explicit node (depth `explicit_depth[i]`), a member whose remaining bytes are all
//!   single-byte text tokens of the vocabulary continues as a chain of positions `(i, d)`,
//!   `explicit_depth[i] < d <= len(i)`, that are never materialised. Exactly one member lies below each chain
//!   position, and every chain position is live (the rest of the member can be spelled byte by byte).
//!
//! With sorted members and `lcp[i]` (the longest common prefix of members `i - 1` and `i`), the prefixes shared
//! by two members are those of length `<= max(lcp[i], lcp[i + 1])` of member `i`; member `i` creates the explicit
//! nodes of its path at depths `lcp[i] + 1 ..= explicit_depth[i]`, consecutively from `first_new[i]`.
//!
//! Chain positions are numbered by the *chain index*: chain `k` (of member `chain_member[k]`) holds indices
//! `chain_base[k] .. chain_base[k + 1]`, the position at depth `d` being `chain_base[k] + d - explicit_depth - 1`.

use crate::error::{show_bytes, Error, ErrorKind, Result};
use crate::util::budget::Budget;
use rayon::prelude::*;

pub(crate) use crate::ids::NONE;
use crate::util::sort::sorted_order;

/// Heap bytes per explicit node (parent, depth, end member, byte, subtree end, hanging list).
const NODE_BYTES: usize = 21;

/// Heap bytes per member (offsets, input index, lcp, explicit depth, first new node, chain bookkeeping).
const MEMBER_BYTES: usize = 36;

pub(crate) struct StringTrie {
    /// Member `i` is `member_bytes[member_offsets[i]..member_offsets[i + 1]]`, sorted ascending, distinct.
    pub(crate) member_offsets: Vec<usize>,
    pub(crate) member_bytes: Vec<u8>,
    /// The first input index that gave member `i` (for messages and for reporting dropped strings).
    pub(crate) member_input: Vec<u32>,
    /// `(member, input index)` of every later copy of a member in the input, by member.
    pub(crate) duplicates: Vec<(u32, u32)>,
    /// Longest common prefix of member `i` with member `i - 1` (0 for the first).
    pub(crate) lcp: Vec<u32>,
    /// Depth of member `i`'s last explicit node; its chain (if any) covers the depths after it.
    pub(crate) explicit_depth: Vec<u32>,
    /// Id of the first explicit node member `i` creates (meaningless when it creates none).
    pub(crate) first_new: Vec<u32>,
    /// Parent of each explicit node (`NONE` for the root).
    pub(crate) parent: Vec<u32>,
    /// Depth of each explicit node (root = 0).
    pub(crate) depth: Vec<u32>,
    /// Member that ends at each explicit node, or `NONE`.
    pub(crate) end_member: Vec<u32>,
    /// The byte on the edge into each explicit node (0 for the root).
    pub(crate) byte: Vec<u8>,
    /// Node `n`'s explicit subtree is `n..subtree_end[n]`; its explicit children are `n + 1`, then `subtree_end`
    /// of each child while below `subtree_end[n]`.
    pub(crate) subtree_end: Vec<u32>,
    /// The chains hanging below explicit node `n` are `hanging[hang_offsets[n]..hang_offsets[n + 1]]` (chain
    /// indices `k`, ascending).
    pub(crate) hang_offsets: Vec<u32>,
    pub(crate) hanging: Vec<u32>,
    /// Member of chain `k`, ascending.
    pub(crate) chain_member: Vec<u32>,
    /// First chain index of chain `k`; `chain_base[n_chains]` is the number of chain positions.
    pub(crate) chain_base: Vec<u32>,
}

/// The length of the longest common prefix of `a` and `b`, compared 8 bytes at a time.
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x =
            u64::from_le_bytes(a[i..i + 8].try_into().unwrap()) ^ u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The members of a compile: the distinct strings in byte order, copied into one buffer, with the input index of
/// each (its first copy) and the later copies of duplicates as `(member, input index)`.
struct Sorted {
    member_offsets: Vec<usize>,
    member_bytes: Vec<u8>,
    order: Vec<u32>,
    duplicates: Vec<(u32, u32)>,
}

/// Sorts and merges `strings` (which all share their first `shared` bytes); refuses strings over the 32-bit limit.
fn sorted_members<S: AsRef<[u8]>>(strings: &[S], shared: usize, budget: &Budget) -> Result<Sorted> {
    // One pass in input order (the order the caller's strings usually lie in memory) copies them into one
    // buffer; sorting, merging and the members then read only that.
    let mut total = 0usize;
    for (i, s) in strings.iter().enumerate() {
        let len = s.as_ref().len();
        if len >= NONE as usize {
            return Err(Error::limit(format!("string {i} is {len} bytes long, over the limit of {} bytes", NONE - 1)));
        }
        total = total.saturating_add(len);
    }
    budget.charge(
        total.saturating_add(strings.len().saturating_mul(std::mem::size_of::<(&[u8], usize)>() + 4)),
        "sorting the strings",
    )?;
    let mut input_bytes = Vec::with_capacity(total);
    let mut input_ends = Vec::with_capacity(strings.len());
    for s in strings {
        input_bytes.extend_from_slice(s.as_ref());
        input_ends.push(input_bytes.len());
    }
    let views: Vec<&[u8]> =
        (0..strings.len()).map(|i| &input_bytes[if i == 0 { 0 } else { input_ends[i - 1] }..input_ends[i]]).collect();
    drop(input_ends);
    let sorted = if shared == 0 {
        sorted_order(&views)
    } else {
        sorted_order(&views.iter().map(|v| &v[shared..]).collect::<Vec<_>>())
    };
    // Merge duplicates, remembering the later input indices of each member; copy the members in order.
    let mut duplicates = Vec::new();
    budget.charge(total.saturating_add(strings.len().saturating_mul(MEMBER_BYTES)), "copying the strings")?;
    let mut member_offsets = Vec::with_capacity(strings.len() + 1);
    let mut member_bytes = Vec::with_capacity(total);
    let mut order: Vec<u32> = Vec::with_capacity(strings.len());
    member_offsets.push(0);
    let mut last: Option<&[u8]> = None;
    for i in sorted {
        let s = views[i as usize];
        if last == Some(s) {
            duplicates.push(((order.len() - 1) as u32, i));
            continue;
        }
        last = Some(s);
        member_bytes.extend_from_slice(s);
        member_offsets.push(member_bytes.len());
        order.push(i);
    }
    drop(views);
    drop(input_bytes);
    Ok(Sorted { member_offsets, member_bytes, order, duplicates })
}

impl StringTrie {
    /// Builds the trie of `strings` (duplicates merged). `single_byte[b]` tells whether byte `b` is a text token
    /// of the vocabulary on its own (tails made only of such bytes become chains). Charges its memory to
    /// `budget` and refuses more than `max_nodes` positions (explicit and chain).
    pub(crate) fn build<S: AsRef<[u8]> + Sync>(
        strings: &[S],
        single_byte: &[bool; 256],
        budget: &Budget,
        max_nodes: Option<usize>,
    ) -> Result<StringTrie> {
        Self::build_sharing(strings, 0, single_byte, budget, max_nodes)
    }

    /// [`StringTrie::build`] of strings that all begin with the same `shared` bytes (a template's prefix): the
    /// sort and the common prefixes skip them (else every comparison would scan them again).
    pub(crate) fn build_sharing<S: AsRef<[u8]> + Sync>(
        strings: &[S],
        shared: usize,
        single_byte: &[bool; 256],
        budget: &Budget,
        max_nodes: Option<usize>,
    ) -> Result<StringTrie> {
        debug_assert!(strings.windows(2).all(|w| w[0].as_ref()[..shared] == w[1].as_ref()[..shared]));
        if strings.is_empty() {
            return Err(Error::new(ErrorKind::EmptySet, "the set of strings is empty: give at least one string"));
        }
        if strings.len() >= NONE as usize {
            return Err(Error::limit(format!("{} strings exceed the limit of {}", strings.len(), NONE - 1)));
        }
        let Sorted { member_offsets, member_bytes, order, duplicates } = sorted_members(strings, shared, budget)?;
        let k = order.len();
        let member = |m: usize| &member_bytes[member_offsets[m]..member_offsets[m + 1]];
        let lcp: Vec<u32> = (0..k)
            .into_par_iter()
            .with_min_len(1 << 13)
            .map(|i| {
                if i == 0 {
                    return 0;
                }
                (shared + common_prefix(&member(i - 1)[shared..], &member(i)[shared..])) as u32
            })
            .collect();
        // The last explicit depth of each member: its deepest shared prefix, or its whole length when the
        // vocabulary cannot spell its tail byte by byte.
        let explicit_depth: Vec<u32> = (0..k)
            .into_par_iter()
            .with_min_len(1 << 13)
            .map(|i| {
                let shared = lcp[i].max(lcp.get(i + 1).copied().unwrap_or(0));
                let s = member(i);
                if s[shared as usize..].iter().all(|&b| single_byte[b as usize]) {
                    shared
                } else {
                    s.len() as u32
                }
            })
            .collect();
        let n_explicit: usize = 1 + (0..k).map(|m| (explicit_depth[m] - lcp[m]) as usize).sum::<usize>();
        let n_chain: usize = (0..k).map(|m| member(m).len() - explicit_depth[m] as usize).sum();
        let n_positions = n_explicit + n_chain;
        check_positions(n_positions, max_nodes)?;
        budget.charge(n_explicit.saturating_mul(NODE_BYTES), "the trie's nodes")?;

        let mut first_new = Vec::with_capacity(k);
        let mut parent = Vec::with_capacity(n_explicit);
        let mut depth = Vec::with_capacity(n_explicit);
        let mut end_member = vec![NONE; n_explicit];
        let mut byte = Vec::with_capacity(n_explicit);
        byte.push(0u8);
        parent.push(NONE);
        depth.push(0u32);
        let mut chain_member = Vec::new();
        let mut chain_base = vec![0u32];
        // (node, chain) pairs, made in chain order; grouped by node below.
        let mut hang_node = Vec::new();
        // path[d] = explicit node at depth d on the current member's path.
        let mut path: Vec<u32> = vec![0];
        for m in 0..k {
            let s = member(m);
            let (l, h) = (lcp[m] as usize, explicit_depth[m] as usize);
            path.truncate(l + 1);
            first_new.push(parent.len() as u32);
            for d in l..h {
                let id = parent.len() as u32;
                parent.push(path[d]);
                byte.push(s[d]);
                depth.push(d as u32 + 1);
                path.push(id);
            }
            if h == s.len() {
                end_member[path[h] as usize] = m as u32;
            } else {
                hang_node.push(path[h]);
                chain_member.push(m as u32);
                chain_base.push(chain_base.last().unwrap() + (s.len() - h) as u32);
            }
        }
        debug_assert_eq!(parent.len(), n_explicit);
        let mut subtree_end: Vec<u32> = (1..=n_explicit as u32).collect();
        for n in (1..n_explicit).rev() {
            let p = parent[n] as usize;
            subtree_end[p] = subtree_end[p].max(subtree_end[n]);
        }
        let mut hang_offsets = vec![0u32; n_explicit + 1];
        for &n in &hang_node {
            hang_offsets[n as usize + 1] += 1;
        }
        for i in 0..n_explicit {
            hang_offsets[i + 1] += hang_offsets[i];
        }
        let mut cursor = hang_offsets.clone();
        let mut hanging = vec![0u32; hang_node.len()];
        for (c, &n) in hang_node.iter().enumerate() {
            hanging[cursor[n as usize] as usize] = c as u32;
            cursor[n as usize] += 1;
        }
        Ok(StringTrie {
            member_offsets,
            member_bytes,
            member_input: order,
            duplicates,
            lcp,
            explicit_depth,
            first_new,
            parent,
            depth,
            end_member,
            byte,
            subtree_end,
            hang_offsets,
            hanging,
            chain_member,
            chain_base,
        })
    }

    /// The explicit children of `node`, ascending by byte.
    #[inline]
    pub(crate) fn children(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let end = self.subtree_end[node as usize];
        let mut c = node + 1;
        std::iter::from_fn(move || {
            if c < end {
                let this = c;
                c = self.subtree_end[c as usize];
                Some(this)
            } else {
                None
            }
        })
    }

    /// Whether `node` is unary: no member ends there, no chain hangs there, one explicit child (`node + 1`).
    #[inline]
    pub(crate) fn is_unary(&self, node: u32) -> bool {
        self.end_member[node as usize] == NONE && self.hanging(node).is_empty() && self.children(node).count() == 1
    }

    /// The chains hanging below explicit node `node`.
    #[inline]
    pub(crate) fn hanging(&self, node: u32) -> &[u32] {
        &self.hanging[self.hang_offsets[node as usize] as usize..self.hang_offsets[node as usize + 1] as usize]
    }

    /// Number of explicit nodes.
    pub(crate) fn n_nodes(&self) -> usize {
        self.parent.len()
    }

    /// Number of chain positions.
    pub(crate) fn n_chain_positions(&self) -> usize {
        *self.chain_base.last().unwrap() as usize
    }

    pub(crate) fn n_members(&self) -> usize {
        self.member_input.len()
    }

    pub(crate) fn member(&self, m: usize) -> &[u8] {
        &self.member_bytes[self.member_offsets[m]..self.member_offsets[m + 1]]
    }

    /// The explicit node of member `m` at depth `d <= explicit_depth[m]`.
    pub(crate) fn explicit_node(&self, m: usize, d: usize) -> u32 {
        debug_assert!(d <= self.explicit_depth[m] as usize);
        // A member that creates no node shares its explicit path with the member before it.
        let mut m = m;
        while m > 0 && self.explicit_depth[m] == self.lcp[m] {
            m -= 1;
        }
        let (h, l) = (self.explicit_depth[m] as usize, self.lcp[m] as usize);
        let mut node = if h > l { self.first_new[m] + (h - l - 1) as u32 } else { 0 };
        let h = if h > l { h } else { 0 };
        for _ in d..h {
            node = self.parent[node as usize];
        }
        node
    }

    /// The explicit node where member `m` ends, or `None` when it ends in a chain.
    #[cfg(test)]
    pub(crate) fn end_node(&self, m: usize) -> Option<u32> {
        let len = self.member(m).len();
        (self.explicit_depth[m] as usize == len).then(|| self.explicit_node(m, len))
    }

    /// A readable name of member `m` for error messages.
    pub(crate) fn describe_member(&self, m: usize) -> String {
        format!("string {} {}", self.member_input[m], show_bytes(self.member(m), 80))
    }
}

/// Refuses a trie of `n_positions` nodes (explicit and chain, before pruning) over `max_states` or over the
/// 32-bit limit (ids keep their top bit free), with an error that names the bound.
pub(crate) fn check_positions(n_positions: usize, max_states: Option<usize>) -> Result<()> {
    if let Some(max) = max_states {
        if n_positions > max {
            return Err(Error::limit(format!(
                "the set needs {n_positions} trie nodes (states before pruning), over max_states = {max}; \
                 raise max_states or split the set"
            )));
        }
    }
    if n_positions >= (NONE / 2) as usize {
        return Err(Error::limit(format!(
            "the set needs {n_positions} trie nodes, more than the limit of {}; split the set",
            NONE / 2 - 1
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_bytes() -> [bool; 256] {
        [true; 256]
    }

    #[test]
    fn shared_prefixes_are_explicit_and_tails_are_chains() {
        let t =
            StringTrie::build(&["ab", "a", "abc", "b", "ab", "bcd"], &all_bytes(), &Budget::new(None), None).unwrap();
        // Members sorted and deduplicated: a, ab, abc, b, bcd.
        assert_eq!(t.n_members(), 5);
        assert_eq!(t.member(1), b"ab");
        assert_eq!(t.member_input, vec![1, 0, 2, 3, 5]);
        assert_eq!(t.duplicates, vec![(1, 4)]);
        // Shared prefixes: "", a, ab (a < ab < abc) and b (b < bcd). Explicit nodes: root, a, ab, b.
        assert_eq!(t.explicit_depth, vec![1, 2, 2, 1, 1]);
        assert_eq!(t.n_nodes(), 4);
        assert_eq!(t.parent, vec![NONE, 0, 1, 0]);
        assert_eq!(t.byte, b"\0abb");
        assert_eq!(t.end_member, vec![NONE, 0, 1, 3]);
        assert_eq!(t.children(0).collect::<Vec<_>>(), vec![1, 3]);
        // Chains: "c" of abc below ab, "cd" of bcd below b.
        assert_eq!(t.chain_member, vec![2, 4]);
        assert_eq!(t.chain_base, vec![0, 1, 3]);
        assert_eq!(t.hanging(2), &[0]);
        assert_eq!(t.hanging(3), &[1]);
        assert_eq!(t.n_chain_positions(), 3);
        assert_eq!(t.end_node(1), Some(2));
        assert_eq!(t.end_node(2), None);
        assert_eq!(t.explicit_node(2, 1), 1);
    }

    #[test]
    fn tails_the_vocabulary_cannot_spell_byte_by_byte_are_explicit() {
        let mut single = all_bytes();
        single[b'z' as usize] = false;
        let t = StringTrie::build(&["abz", "x"], &single, &Budget::new(None), None).unwrap();
        // "abz" is explicit all the way (root, a, ab, abz); "x" is a chain below the root.
        assert_eq!(t.explicit_depth, vec![3, 0]);
        assert_eq!(t.n_nodes(), 4);
        assert_eq!(t.end_node(0), Some(3));
        assert_eq!(t.hanging(0), &[0]);
    }

    #[test]
    fn empty_string_ends_at_root() {
        let t = StringTrie::build(&["", "x"], &all_bytes(), &Budget::new(None), None).unwrap();
        assert_eq!(t.end_node(0), Some(0));
        assert_eq!(t.end_member[0], 0);
        assert!(StringTrie::build::<&str>(&[], &all_bytes(), &Budget::new(None), None).is_err());
    }

    #[test]
    fn radix_order_is_byte_order() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for (n, max_len) in [(0usize, 14), (5, 14), (3000, 14), (3000, 40), (500, 40), (300_000, 20)] {
            let strings: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = rng.gen_range(0..max_len);
                    // Mostly one byte, so that long runs of equal chunks (and zero bytes against the padding) occur.
                    (0..len).map(|_| [0u8, 1, b'a', b'a', b'a', b'a', b'b', 0xff][rng.gen_range(0..8)]).collect()
                })
                .collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&a, &b| strings[a as usize].cmp(&strings[b as usize]).then(a.cmp(&b)));
            assert_eq!(sorted_order(&strings), want, "n = {n}");
        }
    }

    #[test]
    fn positions_are_counted_for_max_states() {
        // 1 root + "abc": 3 chain positions.
        let t = StringTrie::build(&["abc"], &all_bytes(), &Budget::new(None), Some(4)).unwrap();
        assert_eq!((t.n_nodes(), t.n_chain_positions()), (1, 3));
        let e = StringTrie::build(&["abc"], &all_bytes(), &Budget::new(None), Some(3)).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    }
}
