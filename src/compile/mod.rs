//! Compiling a set into an [`Automaton`](crate::Automaton): the string trie of the set, its alignment with the
//! vocabulary's tokens, and compiling token sequences.

pub(crate) mod align;
pub(crate) mod canonical;
pub(crate) mod freeze;
mod incremental;
pub(crate) mod string_trie;
mod template;
