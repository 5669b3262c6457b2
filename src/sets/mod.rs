//! The request front end: a remote request names a set (a file of the operator's set directory, or its members
//! inline, with optional additions and removals); this module parses that spec, confines and reads set files,
//! bounds inline sets, and keeps the compiled automata in an LRU shared by every request. The vLLM processor and
//! the llama-server integration both use it through the C ABI (`trie_set_cache_*`).
//!
//! Requests are untrusted: every refusal is an [`Error`](crate::Error) whose message is fit for an HTTP 400 (it
//! never discloses where the set directory is), and nothing a request names is read outside the set directory.

pub mod recognize;

mod cache;
mod compiled;
mod confine;
mod front;
mod options;
mod read;
mod registry;
pub mod search;
mod spec;

pub use compiled::{CompiledDir, Counters as CompiledCounters, Source as CompiledSource};
pub use front::{Got, Options, SetCache, Stats};
pub use read::lines as file_lines;
pub use registry::{GotRegistry, Registry, RegistryCache};
#[cfg(test)]
mod tests;
