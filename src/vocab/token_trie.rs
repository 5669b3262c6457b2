//! The flat token trie: a trie of the vocabulary's distinct text-token byte strings, the alignment index
//! libtrie uses by default (the Aho-Corasick automaton of the paper is kept as an alternative, built on demand).
//!
//! Invariants: nodes are in preorder (root = 0); node `u`'s children are
//! `edges[nodes[u].first_edge..nodes[u + 1].first_edge]`, ascending by byte (a sentinel node closes the last
//! range); the root's children are also in the dense table `root`; `nodes[u].code` is the *token code* of the
//! pattern that ends at `u` (see [`crate::vocab::TokenIndex::code_tokens`]), or `NONE`. A node's record and its edges are each contiguous, so a step costs about two cache lines.

use crate::error::Result;
use crate::format::{ensure, Reader, Writer};
use crate::ids::NONE;
use crate::util::array::Array;
use bytemuck::{Pod, Zeroable};

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Node {
    first_edge: u32,
    code: u32,
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Edge {
    byte: u32,
    child: u32,
}

// Section tags of the token trie in a saved vocabulary.
const T_ROOT: u32 = 20;
const T_NODES: u32 = 21;
const T_EDGES: u32 = 22;

pub(crate) struct TokenTrie {
    /// The root's child along each byte, or `NONE` (256 entries).
    root: Array<u32>,
    nodes: Array<Node>,
    edges: Array<Edge>,
}

impl TokenTrie {
    /// Builds the trie of `patterns`, which must be sorted ascending, distinct and non-empty; pattern `p`'s node
    /// gets `codes[p]`.
    pub(crate) fn build(patterns: &[&[u8]], codes: &[u32]) -> TokenTrie {
        let mut parent: Vec<u32> = vec![NONE];
        let mut byte: Vec<u8> = vec![0];
        let mut pattern_at: Vec<u32> = vec![NONE];
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for (p, &s) in patterns.iter().enumerate() {
            debug_assert!(prev < s && !s.is_empty());
            let l = prev.iter().zip(s).take_while(|(a, b)| a == b).count();
            path.truncate(l + 1);
            for d in l..s.len() {
                let id = parent.len() as u32;
                parent.push(path[d]);
                byte.push(s[d]);
                pattern_at.push(NONE);
                path.push(id);
            }
            pattern_at[path[s.len()] as usize] = codes[p];
            prev = s;
        }
        let n = parent.len();
        let mut first = vec![0u32; n + 1];
        for &p in &parent[1..] {
            first[p as usize + 1] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut cursor = first.clone();
        let mut edges = vec![Edge { byte: 0, child: 0 }; n - 1];
        // Preorder visits siblings in byte order, so each child list comes out sorted.
        for c in 1..n {
            let p = parent[c] as usize;
            edges[cursor[p] as usize] = Edge { byte: byte[c] as u32, child: c as u32 };
            cursor[p] += 1;
        }
        let mut root = vec![NONE; 256];
        for e in &edges[first[0] as usize..first[1] as usize] {
            root[e.byte as usize] = e.child;
        }
        let mut nodes: Vec<Node> = (0..n).map(|u| Node { first_edge: first[u], code: pattern_at[u] }).collect();
        nodes.push(Node { first_edge: first[n], code: NONE });
        TokenTrie { root: root.into(), nodes: nodes.into(), edges: edges.into() }
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        w.section(T_ROOT, &self.root);
        w.section(T_NODES, &self.nodes);
        w.section(T_EDGES, &self.edges);
    }

    /// Reads a saved trie and checks that every lookup stays in bounds: node ranges ascending and within the
    /// edges, children ascending by byte (a byte value) and deeper in preorder, codes accepted by `valid_code`.
    pub(crate) fn read(r: &Reader, valid_code: &dyn Fn(u32) -> bool) -> Result<TokenTrie> {
        let root: Array<u32> = r.array(T_ROOT)?;
        let nodes: Array<Node> = r.array(T_NODES)?;
        let edges: Array<Edge> = r.array(T_EDGES)?;
        let n = nodes.len().saturating_sub(1);
        ensure(root.len() == 256 && n >= 1 && nodes[0].first_edge == 0, || "token trie tables".into())?;
        ensure(nodes[n].first_edge as usize == edges.len() && nodes[n].code == NONE, || "token trie end".into())?;
        for u in 0..n {
            let (a, b) = (nodes[u].first_edge as usize, nodes[u + 1].first_edge as usize);
            ensure(a <= b && b <= edges.len() && valid_code(nodes[u].code), || format!("token trie node {u}"))?;
            let kids = &edges[a..b];
            ensure(
                kids.iter().all(|e| e.byte < 256 && e.child as usize > u && (e.child as usize) < n)
                    && kids.windows(2).all(|w| w[0].byte < w[1].byte),
                || format!("token trie node {u}'s children"),
            )?;
        }
        let root_kids = &edges[nodes[0].first_edge as usize..nodes[1].first_edge as usize];
        let mut want = [NONE; 256];
        for e in root_kids {
            want[e.byte as usize] = e.child;
        }
        ensure(root[..] == want[..], || "token trie root table".into())?;
        Ok(TokenTrie { root, nodes, edges })
    }

    /// The child of `u` along `b`, or `NONE`.
    #[inline]
    pub(crate) fn child(&self, u: u32, b: u8) -> u32 {
        if u == 0 {
            return self.root[b as usize];
        }
        let edges =
            &self.edges[self.nodes[u as usize].first_edge as usize..self.nodes[u as usize + 1].first_edge as usize];
        let b = b as u32;
        if edges.len() <= 8 {
            for e in edges {
                if e.byte == b {
                    return e.child;
                }
            }
            NONE
        } else {
            match edges.binary_search_by_key(&b, |e| e.byte) {
                Ok(i) => edges[i].child,
                Err(_) => NONE,
            }
        }
    }

    /// Calls `f(code, length)` for every pattern that is a prefix of `bytes` (its token code and length),
    /// shortest first.
    #[inline]
    pub(crate) fn prefixes(&self, bytes: &[u8], mut f: impl FnMut(u32, usize)) {
        let mut u = 0;
        for (i, &b) in bytes.iter().enumerate() {
            u = self.child(u, b);
            if u == NONE {
                return;
            }
            let code = self.code(u);
            if code != NONE {
                f(code, i + 1);
            }
        }
    }

    /// The node reached from the root along `bytes`, or `NONE`.
    #[inline]
    pub(crate) fn walk(&self, bytes: &[u8]) -> u32 {
        let mut u = 0;
        for &b in bytes {
            u = self.child(u, b);
            if u == NONE {
                break;
            }
        }
        u
    }

    /// Calls `f(code, extra)` for every pattern strictly below node `u` (`extra` > 0 bytes longer than `u`'s
    /// path), in preorder, skipping the subtrees whose extra bytes so far `keep` refuses (`keep` sees each
    /// extra-byte path once, before anything below it).
    pub(crate) fn below(&self, u: u32, mut keep: impl FnMut(&[u8]) -> bool, mut f: impl FnMut(u32, usize)) {
        let mut path: Vec<u8> = Vec::new();
        // (node, depth below u, byte into it).
        let mut stack: Vec<(u32, usize, u8)> = vec![(u, 0, 0)];
        while let Some((v, d, byte)) = stack.pop() {
            if d > 0 {
                path.truncate(d - 1);
                path.push(byte);
                if !keep(&path) {
                    continue;
                }
                if self.code(v) != NONE {
                    f(self.code(v), d);
                }
            }
            let (a, b) = (self.nodes[v as usize].first_edge as usize, self.nodes[v as usize + 1].first_edge as usize);
            stack.extend(self.edges[a..b].iter().rev().map(|e| (e.child, d + 1, e.byte as u8)));
        }
    }

    /// Whether node `u` has children (some pattern is longer than its path and starts with it).
    #[inline]
    pub(crate) fn has_children(&self, u: u32) -> bool {
        self.nodes[u as usize].first_edge != self.nodes[u as usize + 1].first_edge
    }

    /// The token code of the pattern that ends at node `u`, or `NONE`.
    #[inline]
    pub(crate) fn code(&self, u: u32) -> u32 {
        self.nodes[u as usize].code
    }

    pub(crate) fn memory_usage(&self) -> usize {
        self.root.size_bytes() + self.nodes.size_bytes() + self.edges.size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_sorted_and_patterns_marked() {
        let pats: Vec<&[u8]> = vec![b"a", b"ab", b"ac", b"b", b"bca"];
        let codes: Vec<u32> = (0..pats.len() as u32).collect();
        let t = TokenTrie::build(&pats, &codes);
        let a = t.child(0, b'a');
        assert_eq!(t.code(a), 0);
        assert_eq!(t.code(t.child(a, b'c')), 2);
        let b = t.child(0, b'b');
        let bc = t.child(b, b'c');
        assert_eq!(t.code(bc), NONE);
        assert_eq!(t.code(t.child(bc, b'a')), 4);
        assert_eq!(t.child(0, b'z'), NONE);
    }
}
