//! The byte trie of the set's strings.
//!
//! Invariants: members are sorted and distinct; nodes are numbered in preorder (root = 0) with children in
//! byte order, so every descendant of a node has a larger id than the node; member `i` creates the nodes of
//! its path at depths `lcp[i] + 1 ..= len(i)` (its longest common prefix with member `i - 1`), consecutively
//! from `first_new[i]`.

use crate::budget::Budget;
use crate::error::{show_bytes, Error, ErrorKind, Result};
use rayon::prelude::*;

/// Node or member index that means "none".
pub(crate) const NONE: u32 = u32::MAX;

/// Heap bytes per trie node (parent, depth, end member, byte, subtree end).
const NODE_BYTES: usize = 17;

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
    /// Id of the first node member `i` creates (meaningless when it creates none).
    pub(crate) first_new: Vec<u32>,
    /// Parent of each node (`NONE` for the root).
    pub(crate) parent: Vec<u32>,
    /// Depth of each node (root = 0).
    pub(crate) depth: Vec<u32>,
    /// Member that ends at each node, or `NONE`.
    pub(crate) end_member: Vec<u32>,
    /// The byte on the edge into each node (0 for the root).
    pub(crate) byte: Vec<u8>,
    /// Node `n`'s subtree is `n..subtree_end[n]`; its children are `n + 1`, then `subtree_end` of each child
    /// while below `subtree_end[n]`.
    pub(crate) subtree_end: Vec<u32>,
}

impl StringTrie {
    /// Builds the trie of `strings` (duplicates merged), charging its memory to `budget` and refusing more than
    /// `max_nodes` nodes.
    pub(crate) fn build<S: AsRef<[u8]> + Sync>(
        strings: &[S],
        budget: &Budget,
        max_nodes: Option<usize>,
    ) -> Result<StringTrie> {
        if strings.is_empty() {
            return Err(Error::new(ErrorKind::EmptySet, "the set of strings is empty: give at least one string"));
        }
        if strings.len() >= NONE as usize {
            return Err(Error::limit(format!("{} strings exceed the limit of {}", strings.len(), NONE - 1)));
        }
        budget.charge(strings.len().saturating_mul(std::mem::size_of::<(&[u8], u32)>()), "sorting the strings")?;
        let mut keyed: Vec<(&[u8], u32)> = strings.iter().enumerate().map(|(i, s)| (s.as_ref(), i as u32)).collect();
        if !keyed.windows(2).all(|w| w[0] <= w[1]) {
            if keyed.len() >= 1 << 18 {
                keyed.par_sort_unstable();
            } else {
                keyed.sort_unstable();
            }
        }
        // Merge duplicates, remembering the later input indices of each member.
        let mut duplicates = Vec::new();
        let mut kept = 0;
        for r in 0..keyed.len() {
            if kept > 0 && keyed[r].0 == keyed[kept - 1].0 {
                duplicates.push(((kept - 1) as u32, keyed[r].1));
            } else {
                keyed[kept] = keyed[r];
                kept += 1;
            }
        }
        keyed.truncate(kept);
        // One pass over the sorted strings copies them into contiguous memory; the rest reads only that.
        let total: usize = keyed.iter().map(|(s, _)| s.len()).sum();
        if let Some((s, i)) = keyed.iter().find(|(s, _)| s.len() >= NONE as usize) {
            return Err(Error::limit(format!(
                "string {i} is {} bytes long, over the limit of {} bytes",
                s.len(),
                NONE - 1
            )));
        }
        budget.charge(total.saturating_add(keyed.len().saturating_mul(32)), "copying the strings")?;
        let mut member_offsets = Vec::with_capacity(keyed.len() + 1);
        let mut member_bytes = Vec::with_capacity(total);
        let mut order = Vec::with_capacity(keyed.len());
        member_offsets.push(0);
        for (s, i) in keyed {
            member_bytes.extend_from_slice(s);
            member_offsets.push(member_bytes.len());
            order.push(i);
        }
        let member = |m: usize| &member_bytes[member_offsets[m]..member_offsets[m + 1]];
        let lcp: Vec<u32> = (0..order.len())
            .into_par_iter()
            .with_min_len(1 << 14)
            .map(|i| {
                if i == 0 {
                    return 0;
                }
                member(i - 1).iter().zip(member(i)).take_while(|(x, y)| x == y).count() as u32
            })
            .collect();
        let n_nodes: usize = 1 + (0..order.len()).map(|m| member(m).len() - lcp[m] as usize).sum::<usize>();
        if n_nodes >= (NONE - 1) as usize {
            return Err(Error::limit(format!(
                "the set needs {n_nodes} trie nodes, more than the limit of {}; split the set",
                NONE - 2
            )));
        }
        if let Some(max) = max_nodes {
            if n_nodes > max {
                return Err(Error::limit(format!(
                    "the set needs {n_nodes} trie nodes (states before pruning), over max_states = {max}; raise \
                     max_states or split the set"
                )));
            }
        }
        budget.charge(n_nodes.saturating_mul(NODE_BYTES), "the trie's nodes")?;
        let mut first_new = Vec::with_capacity(order.len());
        let mut parent = Vec::with_capacity(n_nodes);
        let mut depth = Vec::with_capacity(n_nodes);
        let mut end_member = vec![NONE; n_nodes];
        let mut byte = Vec::with_capacity(n_nodes);
        byte.push(0u8);
        parent.push(NONE);
        depth.push(0u32);
        // path[d] = node at depth d on the current member's path.
        let mut path: Vec<u32> = vec![0];
        for (m, &l) in lcp.iter().enumerate() {
            let s = member(m);
            let l = l as usize;
            path.truncate(l + 1);
            first_new.push(parent.len() as u32);
            for d in l..s.len() {
                let id = parent.len() as u32;
                parent.push(path[d]);
                byte.push(s[d]);
                depth.push(d as u32 + 1);
                path.push(id);
            }
            end_member[path[s.len()] as usize] = m as u32;
        }
        debug_assert_eq!(parent.len(), n_nodes);
        let mut subtree_end: Vec<u32> = (1..=n_nodes as u32).collect();
        for n in (1..n_nodes).rev() {
            let p = parent[n] as usize;
            subtree_end[p] = subtree_end[p].max(subtree_end[n]);
        }
        Ok(StringTrie {
            member_offsets,
            member_bytes,
            member_input: order,
            duplicates,
            lcp,
            first_new,
            parent,
            depth,
            end_member,
            byte,
            subtree_end,
        })
    }

    /// The children of `node`, ascending by byte.
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

    pub(crate) fn n_nodes(&self) -> usize {
        self.parent.len()
    }

    pub(crate) fn n_members(&self) -> usize {
        self.member_input.len()
    }

    pub(crate) fn member(&self, m: usize) -> &[u8] {
        &self.member_bytes[self.member_offsets[m]..self.member_offsets[m + 1]]
    }

    /// The node where member `m` ends.
    pub(crate) fn end_node(&self, m: usize) -> u32 {
        let len = self.member(m).len();
        let l = self.lcp[m] as usize;
        if len == 0 {
            0
        } else {
            debug_assert!(len > l);
            self.first_new[m] + (len - l - 1) as u32
        }
    }

    /// The nodes of member `m`'s path, depths `0..=len`.
    pub(crate) fn path_of(&self, m: usize) -> Vec<u32> {
        let mut path = vec![0u32; self.member(m).len() + 1];
        let mut node = self.end_node(m);
        for d in (0..path.len()).rev() {
            path[d] = node;
            node = self.parent[node as usize];
        }
        path
    }

    /// A readable name of member `m` for error messages.
    pub(crate) fn describe_member(&self, m: usize) -> String {
        format!("string {} {}", self.member_input[m], show_bytes(self.member(m), 80))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_ids_and_shared_prefixes() {
        let t = StringTrie::build(&["ab", "a", "abc", "b", "ab"], &Budget::new(None), None).unwrap();
        // Members sorted and deduplicated: a, ab, abc, b.
        assert_eq!(t.n_members(), 4);
        assert_eq!(t.member(1), b"ab");
        assert_eq!(t.member_input, vec![1, 0, 2, 3]);
        assert_eq!(t.duplicates, vec![(1, 4)]);
        // Nodes: root, a, ab, abc, b.
        assert_eq!(t.n_nodes(), 5);
        assert_eq!(t.parent, vec![NONE, 0, 1, 2, 0]);
        assert_eq!(t.end_node(2), 3);
        assert_eq!(t.path_of(2), vec![0, 1, 2, 3]);
        assert_eq!(t.end_node(3), 4);
        assert_eq!(t.children(0).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(t.children(1).collect::<Vec<_>>(), vec![2]);
        assert_eq!(t.children(3).count(), 0);
        assert_eq!(t.byte, b"\0abcb");
    }

    #[test]
    fn empty_string_ends_at_root() {
        let t = StringTrie::build(&["", "x"], &Budget::new(None), None).unwrap();
        assert_eq!(t.end_node(0), 0);
        assert_eq!(t.end_member[0], 0);
        assert!(StringTrie::build::<&str>(&[], &Budget::new(None), None).is_err());
    }
}
