//! `libtrie`: the operator's command line over the library's public API.
//!
//! ```text
//! libtrie compile SET --vocab MODEL -o OUT     a set file into an automaton file
//! libtrie inspect FILE [--vocab MODEL]         what a compiled file holds
//! libtrie check BODY --engine ENGINE           what the front door does with a request body
//! libtrie bench FILE --vocab MODEL             mask fill and advance timings on a compiled file
//! ```
//!
//! Exit codes: 0 done, 1 a failure (a file missing or malformed, a compile refused), 2 a usage error (an unknown
//! verb or option, a missing or bad argument). Every message names the argument or file at fault. A progress
//! indication is drawn on stderr while long work runs, only when stderr is a terminal. docs/cli.md is the guide.

mod args;
mod bench;
mod check;
mod compile;
mod input;
mod inspect;
mod progress;

use std::fmt;
use std::process::ExitCode;

/// Why a verb stopped: the exit code follows the kind.
#[derive(Debug)]
pub enum Fail {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// The work failed (exit 1).
    Failed(String),
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fail::Usage(m) | Fail::Failed(m) => f.write_str(m),
        }
    }
}

/// A verb's result.
pub type Res<T> = std::result::Result<T, Fail>;

/// A failure naming `what` (an argument or a file) and the library's message.
pub fn failed(what: impl fmt::Display, e: impl fmt::Display) -> Fail {
    Fail::Failed(format!("{what}: {e}"))
}

const USAGE: &str = "\
usage: libtrie <verb> [options]

verbs:
  compile SET --vocab MODEL -o OUT   compile a set (one member a line, a JSON list, or an OpenAI tools file)
                                     for a vocabulary (GGUF file or tokenizer.json) into an automaton file
  inspect FILE [--vocab MODEL]       what a compiled automaton file holds
  check BODY --engine ENGINE         what the front door does with a request body (ENGINE: llama-server or
                                     vllm; BODY a file, or - for stdin): served, delegated or refused, and why
  bench FILE --vocab MODEL           member decodes, mask fill p50/p99 and advance p50 on a compiled file

`libtrie <verb> --help` lists a verb's options. Exit codes: 0 done, 1 failed, 2 usage error.";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let verb = argv.first().map(String::as_str).unwrap_or("");
    let rest = argv.get(1..).unwrap_or(&[]);
    let result = match verb {
        "compile" => compile::run(rest),
        "inspect" => inspect::run(rest),
        "check" => check::run(rest),
        "bench" => bench::run(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        "-V" | "--version" => {
            println!("libtrie {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        "" => Err(Fail::Usage("no verb given".into())),
        other => Err(Fail::Usage(format!("unknown verb '{other}' (one of compile, inspect, check, bench)"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(m)) if matches!(verb, "compile" | "inspect" | "check" | "bench") => {
            eprintln!("libtrie: {m} (see `libtrie {verb} --help`)");
            ExitCode::from(2)
        }
        Err(Fail::Usage(m)) => {
            eprintln!("libtrie: {m}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Fail::Failed(m)) => {
            eprintln!("libtrie {verb}: {m}");
            ExitCode::from(1)
        }
    }
}
