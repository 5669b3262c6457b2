//! Tool calls: one engine for a whole tool-calling answer (free content, the call's marker, the tool's name from a
//! trie, the hand-over to that tool's argument grammar, the close, the next call or the end), shared by every
//! serving integration through the C ABI (`trie_calls_*`). The integration supplies only what is its own: the
//! matcher of a tool's arguments (xgrammar in vLLM, a llama.cpp grammar in llama-server), through [`ArgMatcher`]
//! and [`ArgFactory`].
//!
//! - [`Format`]: how a call is written (the markers), by name ([`Format::named`]: `hermes`, `llama`, `mistral`,
//!   `mistral_v11`, `json`) or given field by field;
//! - [`ToolCalls`]: the engine of one tool list (immutable, shared by the sequences of a request and across
//!   requests): the name automata, compiled by [`ToolCalls::compile`] from the names and the format, or given
//!   ([`ToolCalls::from_names`]: a registry's automata, kept and updated by the caller), the marker's tokens and the
//!   tokens that straddle it;
//! - [`CallsMatcher`]: one sequence (phases, one history of positions for rollback, the argument matchers).
//!
//! Phases: `free` (only with [`Mode::Auto`]): any token except those that would finish the marker and go on past
//! it in one token (a call starts at a token boundary); the marker (its text, or its own token) opens a call.
//! `name`: the name automaton (the format's prefix, the name, the suffix, left open). `args`: the tool's matcher,
//! until it has read its whole grammar (the arguments and the format's close); then `end` (one call:
//! `parallel` off), `name` again (the JSON list, after its separator), or `free` (more calls from free text; under
//! [`Mode::Required`] only whitespace, then the marker, or a stop token: a required answer is its calls, as the
//! stock engines' required grammars have it).
//! `end`: only the stop tokens. `done`: after a stop token.

use crate::error::{Error, Result};
use crate::template::{End, Render, Template};
use crate::vocab::{TokenId, Vocabulary};
use crate::{Automaton, CompileOptions, State};
use std::sync::Arc;

pub mod deferred;
mod marker;
mod matcher;

pub use marker::straddlers;
pub use matcher::{ArgFactory, ArgMatcher, CallsMatcher, Phase};

/// How a tool call is written. A call is `trigger? prefix NAME suffix ARGS close`, the name rendered by `render`;
/// calls of a JSON list are separated by `more` and the list ends with `last`, a further call of the list begins
/// with `next_prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// What opens a call in free text ([`Mode::Auto`]); `None`: the output starts with a call.
    pub trigger: Option<Vec<u8>>,
    /// Before the name.
    pub prefix: Vec<u8>,
    /// After the name, before the arguments.
    pub suffix: Vec<u8>,
    /// After the arguments.
    pub close: Vec<u8>,
    /// Between the calls of a list (`, `), or empty when calls are separated by free text.
    pub more: Vec<u8>,
    /// After the last call of a list (`]`).
    pub last: Vec<u8>,
    /// The prefix of a further call of a list (right after `more`).
    pub next_prefix: Vec<u8>,
    /// How a name is written: [`Render::JsonString`] or [`Render::Raw`].
    pub render: Render,
}

/// The names of [`Format::named`], in table order.
///
/// cbindgen:ignore
pub const FORMAT_NAMES: [&str; 5] = ["hermes", "llama", "mistral", "mistral_v11", "json"];

impl Format {
    /// The format of a tool parser by name (the table of `python/libtrie/vllm/calls.py`, `FORMATS`):
    ///
    /// - `hermes` (Hermes, Qwen 2.5/3): `<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>`;
    /// - `llama` (Llama 3.x JSON): `{"name": NAME, "parameters": ARGS}`, opened by its `{`;
    /// - `mistral` (before v11): `[TOOL_CALLS][{"name": NAME, "arguments": ARGS}, ...]`;
    /// - `mistral_v11`: `[TOOL_CALLS]NAME[ARGS]ARGS`, the name raw;
    /// - `json` (vLLM's `tool_choice="required"` list): `[{"name": NAME, "parameters": ARGS}, ...]`.
    pub fn named(name: &str) -> Result<Format> {
        let f = |trigger: Option<&str>, prefix, suffix, close, more, last, next, render| Format {
            trigger: trigger.map(|t: &str| t.as_bytes().to_vec()),
            prefix: <&str>::into(prefix),
            suffix: <&str>::into(suffix),
            close: <&str>::into(close),
            more: <&str>::into(more),
            last: <&str>::into(last),
            next_prefix: <&str>::into(next),
            render,
        };
        let (js, raw) = (Render::JsonString, Render::Raw);
        Ok(match name {
            "hermes" => f(
                Some("<tool_call>"),
                "\n{\"name\": ",
                ", \"arguments\": ",
                "}\n</tool_call>",
                "",
                "",
                "\n{\"name\": ",
                js,
            ),
            "llama" => f(Some("{"), "\"name\": ", ", \"parameters\": ", "}", "", "", "\"name\": ", js),
            "mistral" => {
                f(Some("[TOOL_CALLS]"), "[{\"name\": ", ", \"arguments\": ", "}", ", ", "]", "{\"name\": ", js)
            }
            "mistral_v11" => f(Some("[TOOL_CALLS]"), "", "[ARGS]", "", "", "", "", raw),
            "json" => f(None, "[{\"name\": ", ", \"parameters\": ", "}", ", ", "]", "{\"name\": ", js),
            _ => {
                return Err(Error::invalid(format!(
                    "format: {name:?} is not a tool-call format; known: {}",
                    FORMAT_NAMES.join(", ")
                )))
            }
        })
    }

    /// Whether calls are written as one JSON list (`more` not empty).
    pub fn is_list(&self) -> bool {
        !self.more.is_empty()
    }

    /// The template of a name automaton whose segments begin with `prefix`.
    fn template(&self, prefix: Vec<u8>) -> Template {
        Template::bare().prefix(prefix).suffix(self.suffix.clone()).render(self.render).end(End::Open)
    }
}

/// Whether the answer may be free text ([`Mode::Auto`]) or must be a call ([`Mode::Required`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `tool_choice="auto"`: free text until the marker opens a call; a stop token may end the answer at once.
    Auto,
    /// `tool_choice="required"` (or a named tool: a list of one name): the output starts with a call; parallel calls
    /// written in free text are separated by whitespace only.
    Required,
}

/// The configuration of a [`ToolCalls`] besides its names.
#[derive(Clone, Debug)]
pub struct CallsConfig {
    /// How calls are written.
    pub format: Format,
    /// Free text allowed before a call or not.
    pub mode: Mode,
    /// Several calls (`parallel_tool_calls`), or one then only the end.
    pub parallel: bool,
    /// The tokens that end the answer (the request's stop ids): allowed in `free` and `end`.
    pub stops: Vec<TokenId>,
    /// Once a call is written, only calls follow (whitespace, the next marker, a stop token), for an engine whose
    /// parser reads nothing else after a call (llama.cpp's chat parser; its own grammar constrains the rest of the
    /// answer so). In `required` mode in every format, in `auto` mode in formats with a marker of their own (not
    /// Llama 3's `{`). `false`: free text between calls (vLLM's parsers drop it), and a model may end there.
    pub only_calls_after_a_call: bool,
}

/// A name automaton and the tool of each of its members: `tools[member]` (`None`: the member id, i.e. the
/// position of the name in the list compiled, is the tool's index).
#[derive(Clone, Debug)]
pub struct Names {
    /// An open templated automaton of the names ([`Automaton::compile_template`], [`End::Open`]).
    pub automaton: Arc<Automaton>,
    /// Member id → tool index (a registry's automaton updated by `with_changes` numbers its members anew).
    pub tools: Option<Arc<[u32]>>,
}

impl Names {
    /// The automaton, each member its own tool.
    pub fn new(automaton: Arc<Automaton>) -> Names {
        Names { automaton, tools: None }
    }
}

/// Which name automaton a position decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    /// The first call (prefix: the format's `prefix`).
    First,
    /// A further call of a JSON list (prefix `next_prefix`).
    Following,
    /// The first call under [`Mode::Required`] with a marker: the marker's text, then the prefix.
    Opener,
}

/// The engine of one tool list (see the module docs): immutable, shared by its sequences ([`CallsMatcher`]).
#[derive(Debug)]
pub struct ToolCalls {
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) config: CallsConfig,
    pub(crate) first: Names,
    pub(crate) following: Option<Names>,
    pub(crate) opener: Option<Names>,
    /// Sorted, distinct.
    pub(crate) stops: Vec<TokenId>,
    /// The marker's own tokens and the tokens that straddle it (per marker bytes pending).
    pub(crate) marker: Arc<marker::Marker>,
    /// The last bytes of a token that may end a call's arguments.
    pub(crate) end_bytes: Vec<u8>,
}

impl ToolCalls {
    /// Compiles the name automata of `names` (tool `i` is `names[i]`, UTF-8 for a JSON-string format; distinct,
    /// none empty) for `config`: the first call's, a further list call's (parallel JSON lists) and the opener's
    /// (required with a marker: the marker's text then the first call).
    pub fn compile<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        names: &[S],
        config: CallsConfig,
        options: &CompileOptions,
    ) -> Result<ToolCalls> {
        check_names(names)?;
        let fmt = &config.format;
        let build = |prefix: Vec<u8>| -> Result<Names> {
            let a = Automaton::compile_template(vocab.clone(), names, &fmt.template(prefix), options)?;
            Ok(Names::new(Arc::new(a)))
        };
        let first = build(fmt.prefix.clone())?;
        let following = if fmt.is_list() && config.parallel { Some(build(fmt.next_prefix.clone())?) } else { None };
        let opener = match (&fmt.trigger, config.mode) {
            (Some(t), Mode::Required) => Some(build([t.as_slice(), &fmt.prefix].concat())?),
            _ => None,
        };
        ToolCalls::from_names(vocab, config, first, following, opener)
    }

    /// [`ToolCalls::compile`] for a named tool (`tool_choice` naming one function): only `names[tool]` may be
    /// called, and it keeps its index `tool` in the list (what [`ArgFactory::make`] is told).
    pub fn compile_named<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        names: &[S],
        tool: usize,
        config: CallsConfig,
        options: &CompileOptions,
    ) -> Result<ToolCalls> {
        check_names(names)?;
        let Some(name) = names.get(tool) else {
            return Err(Error::invalid(format!("named_tool: {tool} is not below the {} names", names.len())));
        };
        let mut calls = ToolCalls::compile(vocab, &[name.as_ref()], config, options)?;
        let map: Arc<[u32]> = Arc::from(vec![tool as u32]);
        for n in [Some(&mut calls.first), calls.following.as_mut(), calls.opener.as_mut()].into_iter().flatten() {
            n.tools = Some(map.clone());
        }
        Ok(calls)
    }

    /// The engine over name automata built by the caller (a registry's, kept across requests and updated with
    /// `with_changes`): `first` (prefix: the format's `prefix`), `following` (a parallel JSON list's further calls:
    /// `next_prefix`; required then), `opener` (required with a marker: the marker then `prefix`; required then).
    /// Each must be an open templated automaton of `vocab`.
    pub fn from_names(
        vocab: Arc<Vocabulary>,
        config: CallsConfig,
        first: Names,
        following: Option<Names>,
        opener: Option<Names>,
    ) -> Result<ToolCalls> {
        let fmt = &config.format;
        let need_following = fmt.is_list() && config.parallel;
        let need_opener = fmt.trigger.is_some() && config.mode == Mode::Required;
        for (what, names, needed) in [
            ("first", Some(&first), true),
            ("following", following.as_ref(), need_following),
            ("opener", opener.as_ref(), need_opener),
        ] {
            match names {
                None if needed => {
                    return Err(Error::invalid(format!("names.{what}: this format and mode need its name automaton")))
                }
                Some(n) => check_automaton(&vocab, what, n)?,
                None => {}
            }
        }
        if config.mode == Mode::Auto && fmt.trigger.is_none() {
            return Err(Error::invalid("mode: auto needs a format with a trigger (free text until the marker)"));
        }
        let mut stops = config.stops.clone();
        stops.sort_unstable();
        stops.dedup();
        if let Some(&t) = stops.iter().find(|&&t| t as usize >= vocab.n_vocab()) {
            return Err(Error::invalid(format!("stops: token {t} is not below n_vocab {}", vocab.n_vocab())));
        }
        let marker = marker::cached_marker(&vocab, fmt.trigger.as_deref().unwrap_or_default());
        let mut end_bytes: Vec<u8> = [[fmt.close.as_slice(), &fmt.last].concat(), fmt.more.clone()]
            .iter()
            .filter_map(|e| e.last().copied())
            .collect();
        if end_bytes.is_empty() {
            end_bytes.push(b'}');
        }
        let (following, opener) = (following.filter(|_| need_following), opener.filter(|_| need_opener));
        Ok(ToolCalls { vocab, config, first, following, opener, stops, marker, end_bytes })
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The configuration.
    pub fn config(&self) -> &CallsConfig {
        &self.config
    }

    /// The tokens whose bytes are exactly the marker (they open a call as the marker's text does).
    pub fn trigger_ids(&self) -> &[TokenId] {
        &self.marker.ids
    }

    /// The name automaton of the first call.
    pub fn first(&self) -> &Names {
        &self.first
    }

    pub(crate) fn names(&self, which: Which) -> &Names {
        match which {
            Which::First => &self.first,
            Which::Following => self.following.as_ref().unwrap_or(&self.first),
            Which::Opener => self.opener.as_ref().unwrap_or(&self.first),
        }
    }

    /// The tool of member `member` of a name automaton without values: the caller's map, else the member id.
    fn tool_of(&self, which: Which, member: usize) -> usize {
        let names = self.names(which);
        names.tools.as_ref().and_then(|t| t.get(member)).map_or(member, |&t| t as usize)
    }

    /// The tool whose name is complete in `state` of a name automaton, or `None`: the one place a name becomes a
    /// tool index. Where the names carry values (a registry's: each name its tool's index, kept by
    /// `with_changes_and_values`), the member's value; else the caller's map or the member id.
    pub(crate) fn tool_at(&self, which: Which, state: State) -> Option<usize> {
        let a = &self.names(which).automaton;
        if a.has_values() {
            return a.member_value(state).and_then(|v| usize::try_from(v).ok());
        }
        a.member_at(state).map(|m| self.tool_of(which, m))
    }

    /// The tool whose name is the only one left in `state` (its rest is forced), or `None` (as [`Self::tool_at`]).
    pub(crate) fn only_tool(&self, which: Which, state: State) -> Option<usize> {
        let a = &self.names(which).automaton;
        let range = a.member_range(state);
        if range.len() != 1 {
            return None;
        }
        if a.has_values() {
            return a.rank_value(range.start).and_then(|v| usize::try_from(v).ok());
        }
        a.member_id(range.start).map(|m| self.tool_of(which, m))
    }
}

fn check_names<S: AsRef<[u8]>>(names: &[S]) -> Result<()> {
    if names.is_empty() {
        return Err(Error::new(crate::ErrorKind::EmptySet, "names: no tool to call"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, n) in names.iter().enumerate() {
        let n = n.as_ref();
        if n.is_empty() {
            return Err(Error::invalid(format!("names[{i}]: a tool name must not be empty")));
        }
        if !seen.insert(n) {
            return Err(Error::invalid(format!(
                "names[{i}]: the tool name {} is listed twice",
                crate::error::show_bytes(n, 80)
            )));
        }
    }
    Ok(())
}

fn check_automaton(vocab: &Arc<Vocabulary>, what: &str, names: &Names) -> Result<()> {
    let a = &names.automaton;
    if a.vocab().fingerprint() != vocab.fingerprint() {
        return Err(Error::new(
            crate::ErrorKind::VocabularyMismatch,
            format!("names.{what}: the automaton was compiled against another vocabulary"),
        ));
    }
    if !a.is_open() {
        return Err(Error::invalid(format!(
            "names.{what}: the automaton must be a templated one with end open (the arguments follow the name)"
        )));
    }
    if let Some(tools) = &names.tools {
        if a.has_values() {
            return Err(Error::invalid(format!(
                "names.{what}.tools: the automaton's members carry values (each name's tool): give no map"
            )));
        }
        if tools.len() < a.n_members() {
            return Err(Error::invalid(format!(
                "names.{what}.tools: {} entries for {} members (one tool index per member)",
                tools.len(),
                a.n_members()
            )));
        }
    }
    Ok(())
}
