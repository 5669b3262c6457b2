//! The walks: the engine's masks drive a "model" that draws each token from the mask, at random or greedily under
//! one random logit vector per walk; the argument matcher of a call follows one of its tool's valid argument texts.

use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use trie::calls::{ArgFactory, ArgMatcher, CallsMatcher, Format, Phase};
use trie::{Result, TokenId, TokenKind, Vocabulary};

/// A vocabulary with what the walks need of it: token ids by bytes, the plain-text tokens of free content.
pub struct Vocab {
    pub vocab: Arc<Vocabulary>,
    by_bytes: HashMap<Vec<u8>, Vec<TokenId>>,
    max_len: usize,
    /// Tokens of plain prose (letters, digits, spaces, `.,!?'`): the free content a model writes before a call.
    pub plain: Vec<TokenId>,
    pub stops: Vec<TokenId>,
}

impl Vocab {
    pub fn new(vocab: Arc<Vocabulary>) -> Vocab {
        let mut by_bytes: HashMap<Vec<u8>, Vec<TokenId>> = HashMap::new();
        let mut plain = Vec::new();
        let mut max_len = 1;
        for t in 0..vocab.n_vocab() as TokenId {
            let b = vocab.token_bytes(t);
            if !vocab.is_text_token(t) {
                continue;
            }
            max_len = max_len.max(b.len());
            by_bytes.entry(b.to_vec()).or_default().push(t);
            if vocab.kind(t) == TokenKind::Normal
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || b" .,!?'".contains(&c))
            {
                plain.push(t);
            }
        }
        let stops = vocab.eog_ids().to_vec();
        Vocab { vocab, by_bytes, max_len, plain, stops }
    }
}

/// The stand-in argument matcher: one of `texts` (an argument text, the format's close, the list's end or
/// separator), any text token whose bytes continue it; a stop token once a text is complete.
struct Stand {
    v: Arc<Vocab>,
    texts: Arc<Vec<Vec<u8>>>,
    stack: Vec<Vec<u8>>,
    says: bool,
    /// What this call's matcher has read so far (for the record of the call).
    written: Arc<Mutex<Vec<u8>>>,
}

impl Stand {
    fn allowed(&self) -> Vec<TokenId> {
        let cur = self.stack.last().unwrap();
        let mut out = Vec::new();
        for x in self.texts.iter() {
            if !x.starts_with(cur) {
                continue;
            }
            if x.len() == cur.len() {
                out.extend(&self.v.stops);
            }
            let rest = &x[cur.len()..];
            for l in 1..=rest.len().min(self.v.max_len) {
                if let Some(ids) = self.v.by_bytes.get(&rest[..l]) {
                    out.extend(ids);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

impl ArgMatcher for Stand {
    fn accept_token(&mut self, t: TokenId) -> bool {
        if !self.allowed().contains(&t) {
            return false;
        }
        let cur = self.stack.last().unwrap().clone();
        let next = if self.v.stops.contains(&t) { cur } else { [cur.as_slice(), self.v.vocab.token_bytes(t)].concat() };
        *self.written.lock().unwrap() = next.clone();
        self.stack.push(next);
        true
    }

    fn fill_bitmask(&mut self, row: &mut [u32]) -> Result<()> {
        row.fill(0);
        for t in self.allowed() {
            row[t as usize / 32] |= 1 << (t % 32);
        }
        Ok(())
    }

    fn rollback(&mut self, n: usize) {
        self.stack.truncate(self.stack.len() - n);
    }

    fn is_completed(&mut self) -> Option<bool> {
        self.says.then(|| self.texts.contains(self.stack.last().unwrap()))
    }
}

/// The tools a sequence handed over to, in order, each with what its matcher read.
pub type Made = Arc<Mutex<Vec<(u64, Arc<Mutex<Vec<u8>>>)>>>;

/// The argument texts of each tool (the engine's tool index → valid argument texts); the factory of a request.
/// A JSON list ends after its fourth call (a greedy walk would go on forever).
pub struct Factory {
    pub v: Arc<Vocab>,
    pub format: Format,
    pub args: Arc<HashMap<u64, Vec<String>>>,
    pub says: bool,
    /// The tools handed over to, in order, and what each call's matcher read (shared with the walk).
    pub made: Made,
}

impl ArgFactory for Factory {
    fn make(&mut self, tool: usize, last: bool) -> Result<Box<dyn ArgMatcher>> {
        let f = &self.format;
        let Some(args) = self.args.get(&(tool as u64)) else {
            return Err(trie::Error::new(
                trie::ErrorKind::InvalidArgument,
                format!("tool {tool}: not in the registry version"),
            ));
        };
        let mut texts = Vec::new();
        for a in args {
            let base = [a.as_bytes(), &f.close].concat();
            texts.push([base.as_slice(), &f.last].concat());
            if f.is_list() && !last && self.made.lock().unwrap().len() < 3 {
                texts.push([base.as_slice(), &f.more].concat());
            }
        }
        let written = Arc::new(Mutex::new(Vec::new()));
        self.made.lock().unwrap().push((tool as u64, written.clone()));
        let texts = Arc::new(texts);
        Ok(Box::new(Stand { v: self.v.clone(), texts, stack: vec![vec![]], says: self.says, written }))
    }
}

fn allowed(row: &[u32]) -> Vec<TokenId> {
    let mut out = Vec::new();
    for (w, &bits) in row.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            let i = b.trailing_zeros();
            out.push(w as TokenId * 32 + i);
            b &= b - 1;
        }
    }
    out
}

/// How a walk draws its tokens.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// Uniformly among the allowed tokens.
    Random,
    /// The allowed token of the highest logit, one random logit vector for the whole walk.
    Greedy,
}

/// One walk to the end: the output bytes (the stop token excluded) and whether the walk ended by a stop token.
pub fn walk(v: &Vocab, m: &mut CallsMatcher, rng: &mut SmallRng, draw: Draw) -> std::result::Result<Vec<u8>, String> {
    let words = v.vocab.mask_words();
    let logits: Vec<f32> = match draw {
        Draw::Greedy => (0..v.vocab.n_vocab()).map(|_| rng.gen::<f32>()).collect(),
        Draw::Random => vec![],
    };
    let trigger_ids = m.engine().trigger_ids().to_vec();
    let trigger = m.engine().config().format.trigger.clone().unwrap_or_default();
    let mut out: Vec<u8> = Vec::new();
    let mut row = vec![0u32; words];
    let mut free_run = 0;
    let mut pending: Vec<u8> = Vec::new(); // the marker's text being written byte by byte
    for _ in 0..20_000 {
        if m.is_terminated() {
            return Ok(out);
        }
        m.fill_bitmask(&mut row).map_err(|e| e.to_string())?;
        let ok = allowed(&row);
        if ok.is_empty() {
            return Err(format!("a dead end in phase {:?}", m.phase()));
        }
        let allows = |t: TokenId| row[t as usize / 32] >> (t % 32) & 1 == 1;
        let t = if m.phase() == Phase::Free {
            free_token(v, rng, &trigger, &trigger_ids, &mut pending, &mut free_run, m.calls_so_far(), &allows)
        } else {
            None
        };
        let t = t.unwrap_or_else(|| match draw {
            Draw::Random => ok[rng.gen_range(0..ok.len())],
            Draw::Greedy => *ok.iter().max_by(|&&a, &&b| logits[a as usize].total_cmp(&logits[b as usize])).unwrap(),
        });
        if !m.accept_token(t) {
            return Err(format!("token {t} in the mask refused in phase {:?}: {:?}", m.phase(), m.last_error()));
        }
        if !v.stops.contains(&t) {
            out.extend_from_slice(v.vocab.token_bytes(t));
        }
    }
    Err("the walk does not end".into())
}

/// The free content of a model: a few plain words, then the marker (its token, or its text token by token) or a
/// stop token (after a call, or at once: an answer without a call). The engine allows any free text between
/// calls; the model writes what its family writes there (the stock engines' parsers read nothing else: llama.cpp's
/// only whitespace between `<tool_call>` blocks and `, ` between Llama 3 objects; vLLM's Llama 3 parser loses
/// both calls of `{...}{...}`).
#[allow(clippy::too_many_arguments)]
fn free_token(
    v: &Vocab,
    rng: &mut SmallRng,
    trigger: &[u8],
    trigger_ids: &[TokenId],
    pending: &mut Vec<u8>,
    free_run: &mut usize,
    calls: usize,
    allows: &dyn Fn(TokenId) -> bool,
) -> Option<TokenId> {
    if !pending.is_empty() {
        // the rest of the marker's text: its longest token that the mask allows
        for l in (1..=pending.len().min(v.max_len)).rev() {
            if let Some(&t) = v.by_bytes.get(&pending[..l]).and_then(|ids| ids.iter().find(|&&t| allows(t))) {
                pending.drain(..l);
                return Some(t);
            }
        }
        pending.clear();
    }
    *free_run += 1;
    let words = if calls == 0 { 8 } else { 0 };
    let r = rng.gen_range(0..10);
    if *free_run > words || r < 3 {
        *free_run = 0;
        if r % 3 == 0 || calls > 0 && r < 6 {
            return v.stops.iter().copied().find(|&t| allows(t));
        }
        // between calls, what the model family writes there: `<tool_call>` blocks nothing or a newline, Llama 3's
        // objects `, `, Mistral v11's calls nothing
        let seps: &[&[u8]] = match trigger {
            b"{" => &[b", "],
            b"<tool_call>" => &[b"", b"\n"],
            _ => &[b""],
        };
        let sep: &[u8] = if calls > 0 { seps[rng.gen_range(0..seps.len())] } else { b"" };
        if sep.is_empty() && !trigger_ids.is_empty() && rng.gen_bool(0.5) {
            return Some(trigger_ids[0]);
        }
        pending.extend_from_slice(sep);
        pending.extend_from_slice(trigger);
        return free_token(v, rng, trigger, trigger_ids, pending, free_run, calls, allows);
    }
    for _ in 0..20 {
        let t = v.plain[rng.gen_range(0..v.plain.len())];
        if allows(t) {
            return Some(t);
        }
    }
    None
}
