//! Reading what the verbs are given: a vocabulary (GGUF or tokenizer.json) and a set file.

use crate::args::{Args, Opt};
use crate::{failed, Fail, Res};
use std::path::Path;
use std::sync::Arc;
use trie::sets::recognize::{recognize_with, Limits, Recognition, Shape};
use trie::{TokenId, Vocabulary};

/// The options that choose a vocabulary.
pub const VOCAB_OPTS: [Opt; 3] = [
    Opt { name: "vocab", value: true, help: "the model's vocabulary: a GGUF file or a tokenizer.json" },
    Opt {
        name: "eog",
        value: true,
        help: "tokenizer.json only: end-of-generation ids, comma separated (default: inferred)",
    },
    Opt { name: "n-vocab", value: true, help: "tokenizer.json only: the model's padded vocabulary size" },
];

/// Loads the vocabulary `--vocab` names: a GGUF file (by its magic) or a Hugging Face tokenizer.json.
pub fn vocab(a: &Args) -> Res<Arc<Vocabulary>> {
    let path = a.need("vocab")?;
    vocab_at(Path::new(path), a)
}

fn vocab_at(path: &Path, a: &Args) -> Res<Arc<Vocabulary>> {
    let what = format!("--vocab {}", path.display());
    let mut magic = [0u8; 4];
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| failed(&what, e))?;
        let n = f.read(&mut magic).map_err(|e| failed(&what, e))?;
        if n < 4 {
            return Err(failed(&what, "too short to be a GGUF file or a tokenizer.json"));
        }
    }
    if &magic == b"GGUF" {
        if a.get("eog").is_some() || a.get("n-vocab").is_some() {
            return Err(Fail::Usage("--eog and --n-vocab are for tokenizer.json files (a GGUF file has both)".into()));
        }
        // the library's messages name the file
        return Vocabulary::from_gguf(path).map(Arc::new).map_err(|e| failed("--vocab", e));
    }
    hf_vocab(path, a)
}

fn hf_vocab(path: &Path, a: &Args) -> Res<Arc<Vocabulary>> {
    let eog_ids = match a.get("eog") {
        None => None,
        Some(list) => Some(
            list.split(',')
                .map(|s| s.trim().parse::<TokenId>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| Fail::Usage(format!("--eog {list:?}: token ids separated by commas")))?,
        ),
    };
    let n_vocab = match a.get("n-vocab") {
        None => None,
        Some(v) => Some(v.parse().map_err(|_| Fail::Usage(format!("--n-vocab {v:?} is not a number")))?),
    };
    let options = trie::hf::HfOptions { eog_ids, n_vocab };
    Vocabulary::from_tokenizer_json(path, &options)
        .map(Arc::new)
        .map_err(|e| failed("--vocab (not a GGUF file, read as a tokenizer.json)", e))
}

/// A set file's members and how they were read.
pub struct SetFile {
    /// The members, in the file's order.
    pub members: Vec<Vec<u8>>,
    /// How the file was read: "lines", "JSON list", "tools".
    pub format: &'static str,
}

/// Bounds for a file the operator chose: as large as the file itself allows.
fn operator_limits(text_len: usize) -> Limits {
    Limits {
        max_text_bytes: text_len,
        max_members: usize::MAX / 2,
        max_member_bytes: usize::MAX / 2,
        ..Limits::default()
    }
}

/// Reads the set file `path`: `format` "lines" (one member a line), "json" (a JSON list of strings, or an OpenAI
/// `tools` list whose names are the members) or "auto" (JSON when the first non-blank byte is `[`).
pub fn set_file(path: &str, format: &str) -> Res<SetFile> {
    let what = format!("set file {path}");
    let bytes = std::fs::read(path).map_err(|e| failed(&what, e))?;
    let json = match format {
        "lines" => false,
        "json" => true,
        "auto" => bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'['),
        other => return Err(Fail::Usage(format!("--set-format {other:?}: one of auto, lines, json"))),
    };
    if !json {
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count();
            failed(&what, format!("not valid UTF-8 (line {line})"))
        })?;
        let members = trie::sets::file_lines(&text).into_iter().map(|l| l.as_bytes().to_vec()).collect();
        return Ok(SetFile { members, format: "lines" });
    }
    let limits = operator_limits(bytes.len());
    let tools = serde_json::from_slice::<serde_json::Value>(&bytes)
        .map_err(|e| failed(&what, format!("not JSON: {e}")))?
        .as_array()
        .and_then(|items| items.first())
        .is_some_and(|first| first.is_object());
    let (shape, format) = if tools { (Shape::Tools, "tools") } else { (Shape::Choices, "JSON list") };
    match recognize_with(shape, &bytes, &limits).map_err(|e| failed(&what, e))? {
        Recognition::Set(r) => Ok(SetFile { members: r.members, format }),
        Recognition::NotASet(why) => Err(failed(&what, why)),
    }
}
