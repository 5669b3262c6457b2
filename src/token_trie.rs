//! The flat token trie: a trie of the vocabulary's distinct text-token byte strings, the alignment index
//! libtrie uses by default (the Aho-Corasick automaton of the paper is kept as an alternative, built on demand).
//!
//! Invariants: nodes are in preorder (root = 0); node `u`'s children are
//! `edges[nodes[u].first_edge..nodes[u + 1].first_edge]`, ascending by byte (a sentinel node closes the last
//! range); the root's children are also in the dense table `root`; `nodes[u].code` is the *token code* of the
//! pattern that ends at `u` (see [`crate::vocab::TokenIndex::code_tokens`]), or `NONE`. A node's record and its edges are each contiguous, so a step costs about two cache lines.

use crate::string_trie::NONE;

#[derive(Clone, Copy)]
struct Node {
    first_edge: u32,
    code: u32,
}

#[derive(Clone, Copy)]
struct Edge {
    byte: u8,
    child: u32,
}

pub(crate) struct TokenTrie {
    root: Box<[u32; 256]>,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
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
            edges[cursor[p] as usize] = Edge { byte: byte[c], child: c as u32 };
            cursor[p] += 1;
        }
        let mut root = Box::new([NONE; 256]);
        for e in &edges[first[0] as usize..first[1] as usize] {
            root[e.byte as usize] = e.child;
        }
        let mut nodes: Vec<Node> = (0..n).map(|u| Node { first_edge: first[u], code: pattern_at[u] }).collect();
        nodes.push(Node { first_edge: first[n], code: NONE });
        TokenTrie { root, nodes, edges }
    }

    /// The child of `u` along `b`, or `NONE`.
    #[inline]
    pub(crate) fn child(&self, u: u32, b: u8) -> u32 {
        if u == 0 {
            return self.root[b as usize];
        }
        let edges =
            &self.edges[self.nodes[u as usize].first_edge as usize..self.nodes[u as usize + 1].first_edge as usize];
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

    /// The token code of the pattern that ends at node `u`, or `NONE`.
    #[inline]
    pub(crate) fn code(&self, u: u32) -> u32 {
        self.nodes[u as usize].code
    }

    pub(crate) fn memory_usage(&self) -> usize {
        256 * 4
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.edges.capacity() * std::mem::size_of::<Edge>()
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
