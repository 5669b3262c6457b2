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
/// without it is an explicit node.
pub(crate) const CHAIN: u32 = 1 << 31;
