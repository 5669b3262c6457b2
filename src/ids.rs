//! Index spaces and their sentinels, in one place. Every index is a `u32` in the flat arrays (the file format stores
//! them as such); the sentinel of each space is written here once, with the spaces it must not be confused with.
//!
//! | space | values | sentinel | where |
//! |---|---|---|---|
//! | string-trie node, member, input index | `0..n` (`n < NONE`) | [`NONE`] = `u32::MAX` ("none") | `compile/` |
//! | automaton state ([`crate::State`]) | `0..n_states()` (`n_states() < u32::MAX - 1`) | `State::FINISHED` = `u32::MAX` | `automaton/` |
//! | alignment edge target | explicit node, or [`CHAIN`]` \| chain index` | flag bit 31 | `compile/align` |
//! | token code (vocabulary index) | one token id, or `MULTI \| pattern` | flag bit 31 | `vocab/` |
//!
//! `NONE` and `State::FINISHED` are the same number in different spaces: a member index is never a state. The
//! incremental update's old-to-new state table has its own typed entry (`compile/incremental`), whose "gone"
//! value cannot be mistaken for `FINISHED`.

/// A token id (`0..n_vocab`).
pub type TokenId = u32;

/// Node, member or input index meaning "none" (string trie, token trie, member tables).
pub(crate) const NONE: u32 = u32::MAX;

/// Flag of an alignment edge target that is a chain position (the low 31 bits are its chain index); a target
/// without it is an explicit node. Only [`Target`] reads or writes it.
const CHAIN: u32 = 1 << 31;

/// Where an alignment edge leads: an explicit string-trie node or a chain position (one `u32`, the kind in bit 31,
/// so the edge arrays stay flat). Node ids and chain positions are below `2^31` (the compile's limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct Target(u32);

/// A [`Target`], taken apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// An explicit node of the string trie.
    Node(u32),
    /// A chain position (index into the trie's chain positions).
    Chain(u32),
}

impl Target {
    /// The explicit node `n`.
    #[inline]
    pub(crate) fn node(n: u32) -> Target {
        debug_assert!(n & CHAIN == 0, "node {n} collides with the chain flag");
        Target(n)
    }

    /// Chain position `p`.
    #[inline]
    pub(crate) fn chain(p: u32) -> Target {
        debug_assert!(p & CHAIN == 0, "chain position {p} collides with the chain flag");
        Target(CHAIN | p)
    }

    #[inline]
    pub(crate) fn kind(self) -> TargetKind {
        if self.0 & CHAIN != 0 {
            TargetKind::Chain(self.0 & !CHAIN)
        } else {
            TargetKind::Node(self.0)
        }
    }

    #[inline]
    pub(crate) fn is_chain(self) -> bool {
        self.0 & CHAIN != 0
    }
}
