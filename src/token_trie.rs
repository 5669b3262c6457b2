//! The flat token trie: a trie of the vocabulary's distinct text-token byte strings, the alignment index
//! libtrie uses by default (the Aho-Corasick automaton of the paper is kept as an alternative, built on demand).
//!
//! Invariants: nodes are in preorder (root = 0); node `u`'s children are
//! `child_node[child_offsets[u]..child_offsets[u + 1]]`, ascending by `child_byte`; the root's children are
//! also in the dense table `root`; `pattern_at[u]` is the pattern that ends at `u`, or `NONE`.

use crate::string_trie::NONE;

pub(crate) struct TokenTrie {
    pub(crate) root: Box<[u32; 256]>,
    pub(crate) child_offsets: Vec<u32>,
    pub(crate) child_byte: Vec<u8>,
    pub(crate) child_node: Vec<u32>,
    pub(crate) pattern_at: Vec<u32>,
}

impl TokenTrie {
    /// Builds the trie of `patterns`, which must be sorted ascending, distinct and non-empty.
    pub(crate) fn build(patterns: &[&[u8]]) -> TokenTrie {
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
            pattern_at[path[s.len()] as usize] = p as u32;
            prev = s;
        }
        let n = parent.len();
        let mut child_offsets = vec![0u32; n + 1];
        for &p in &parent[1..] {
            child_offsets[p as usize + 1] += 1;
        }
        for i in 0..n {
            child_offsets[i + 1] += child_offsets[i];
        }
        let mut cursor = child_offsets.clone();
        let mut child_byte = vec![0u8; n - 1];
        let mut child_node = vec![0u32; n - 1];
        // Preorder visits siblings in byte order, so each child list comes out sorted.
        for c in 1..n {
            let p = parent[c] as usize;
            let k = cursor[p] as usize;
            child_byte[k] = byte[c];
            child_node[k] = c as u32;
            cursor[p] += 1;
        }
        let mut root = Box::new([NONE; 256]);
        for k in child_offsets[0] as usize..child_offsets[1] as usize {
            root[child_byte[k] as usize] = child_node[k];
        }
        TokenTrie { root, child_offsets, child_byte, child_node, pattern_at }
    }

    /// The child of `u` along `b`, or `NONE`.
    #[inline]
    pub(crate) fn child(&self, u: u32, b: u8) -> u32 {
        if u == 0 {
            return self.root[b as usize];
        }
        let r = self.child_offsets[u as usize] as usize..self.child_offsets[u as usize + 1] as usize;
        let bytes = &self.child_byte[r.clone()];
        if bytes.len() <= 8 {
            for (i, &x) in bytes.iter().enumerate() {
                if x == b {
                    return self.child_node[r.start + i];
                }
            }
            NONE
        } else {
            match bytes.binary_search(&b) {
                Ok(i) => self.child_node[r.start + i],
                Err(_) => NONE,
            }
        }
    }

    pub(crate) fn memory_usage(&self) -> usize {
        256 * 4
            + self.child_offsets.capacity() * 4
            + self.child_byte.capacity()
            + self.child_node.capacity() * 4
            + self.pattern_at.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_sorted_and_patterns_marked() {
        let pats: Vec<&[u8]> = vec![b"a", b"ab", b"ac", b"b", b"bca"];
        let t = TokenTrie::build(&pats);
        let a = t.child(0, b'a');
        assert_eq!(t.pattern_at[a as usize], 0);
        assert_eq!(t.pattern_at[t.child(a, b'c') as usize], 2);
        let b = t.child(0, b'b');
        let bc = t.child(b, b'c');
        assert_eq!(t.pattern_at[bc as usize], NONE);
        assert_eq!(t.pattern_at[t.child(bc, b'a') as usize], 4);
        assert_eq!(t.child(0, b'z'), NONE);
    }
}
