//! A small command-line reader: positionals, `--name value`, `--name=value` and `--flag`, each option declared.

use crate::{Fail, Res};
use std::collections::HashMap;
use std::str::FromStr;

/// One option a verb accepts.
pub struct Opt {
    /// The name without its dashes.
    pub name: &'static str,
    /// Whether it takes a value.
    pub value: bool,
    /// One line of help.
    pub help: &'static str,
}

/// A verb's parsed command line.
pub struct Args {
    verb: &'static str,
    positional: Vec<String>,
    values: HashMap<&'static str, String>,
    flags: Vec<&'static str>,
}

/// The help text of a verb: its synopsis and its options.
pub fn help(verb: &str, synopsis: &str, opts: &[Opt]) -> String {
    let mut s = format!("usage: libtrie {verb} {synopsis}\n\noptions:\n");
    for o in opts {
        let name = if o.value { format!("--{} VALUE", o.name) } else { format!("--{}", o.name) };
        s.push_str(&format!("  {name:<28} {}\n", o.help));
    }
    s
}

impl Args {
    /// Parses `argv` against `opts`; `Ok(None)` when `--help` was asked (the help is printed).
    pub fn parse(verb: &'static str, synopsis: &str, argv: &[String], opts: &[Opt]) -> Res<Option<Args>> {
        let mut a = Args { verb, positional: Vec::new(), values: HashMap::new(), flags: Vec::new() };
        let mut it = argv.iter();
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                print!("{}", help(verb, synopsis, opts));
                return Ok(None);
            }
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-').filter(|b| b.len() == 1)) else {
                a.positional.push(arg.clone());
                continue;
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let name = if name == "o" { "output" } else { name };
            let Some(opt) = opts.iter().find(|o| o.name == name) else {
                return Err(Fail::Usage(format!("{verb}: unknown option '{arg}' (see `libtrie {verb} --help`)")));
            };
            if opt.value {
                let v = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| Fail::Usage(format!("{verb}: option --{name} needs a value")))?,
                };
                a.values.insert(opt.name, v);
            } else if inline.is_some() {
                return Err(Fail::Usage(format!("{verb}: option --{name} takes no value")));
            } else {
                a.flags.push(opt.name);
            }
        }
        Ok(Some(a))
    }

    /// The one positional argument, named `what` in messages.
    pub fn one_positional(&self, what: &str) -> Res<&str> {
        match self.positional.as_slice() {
            [one] => Ok(one),
            [] => Err(Fail::Usage(format!("{}: missing argument {what}", self.verb))),
            more => {
                Err(Fail::Usage(format!("{}: one {what} expected, got {}: {}", self.verb, more.len(), more.join(" "))))
            }
        }
    }

    /// The value of `--name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `--name`, required.
    pub fn need(&self, name: &str) -> Res<&str> {
        self.get(name).ok_or_else(|| Fail::Usage(format!("{}: missing option --{name}", self.verb)))
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }

    /// The value of `--name` parsed as `T`, or `default`.
    pub fn parsed<T: FromStr>(&self, name: &str, default: T) -> Res<T> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                Fail::Usage(format!("{}: --{name} {v:?} is not a valid {}", self.verb, std::any::type_name::<T>()))
            }),
        }
    }
}
