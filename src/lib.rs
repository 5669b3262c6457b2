//! # libtrie
//!
//! Forces a language model to output exactly one string of a large finite set. The set is compiled into a
//! *trie automaton*: a byte trie of the strings, aligned with the model's token vocabulary so that for every
//! trie node the allowed tokens (and the node each leads to) are precomputed. Decoding is then a lookup:
//! `mask = allowed(state)`, `state = advance(state, token)`. A state is one `u32`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use trie::{Automaton, CompileOptions, Vocabulary, Step};
//! let vocab = Arc::new(Vocabulary::from_gguf("model.gguf")?);
//! let set = ["search_flights", "search_hotels", "book_flight"];
//! let automaton = Automaton::compile(vocab.clone(), &set, &CompileOptions::default())?;
//! let mut state = automaton.start();
//! let mut mask = vec![0u32; vocab.mask_words()];
//! automaton.fill_bitmask(state, &mut mask)?;          // apply to the logits, sample a token
//! let token = automaton.allowed(state)[0];
//! match automaton.advance(state, token)? {
//!     Step::Next(next) => state = next,
//!     Step::Finished => {}
//! }
//! # Ok::<(), trie::Error>(())
//! ```
//!
//! The source is laid out by concept in one-way layers (`ids`/`error` < `util` < `format` < `template` < `vocab` <
//! `load` < `automaton` < `compile` < `sets` < `capi`): see `ARCHITECTURE.md`, checked by `scripts/check-layers.py`.
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod automaton;
pub mod calls;
mod compile;
pub mod error;
mod format;
mod ids;
mod load;
#[doc(hidden)]
pub mod profile;
pub mod sets;
pub mod template;
mod util;
pub mod vocab;

pub mod capi;
/// The C ABI's Rust items under their former path (`trie::ffi`); new code names [`capi`].
#[doc(hidden)]
pub use capi as ffi;
pub use load::gguf;
#[cfg(feature = "hf")]
pub use load::hf;

pub use automaton::{AlignmentMethod, Allowed, Automaton, CompileOptions, Draft, Forced, History, State, Step};
pub use error::{Error, ErrorKind, Result};
pub use template::{End, Render, Template};
pub use vocab::{TokenId, TokenKind, Vocabulary};
