//! Tool search: which tools of a catalog fit a query, for the tool-search tool of the APIs (`defer_loading` with
//! OpenAI's `{"type": "tool_search"}`, Anthropic's `tool_search_tool_bm25_20251119` and
//! `tool_search_tool_regex_20251119`). One [`ToolSearch`] index per tool list (a registry, a request's tools),
//! built once and immutable (`Send + Sync`, shared by every request); a query returns the top `k` tools.
//!
//! - [`Mode::Bm25`]: Okapi BM25 (`k1 = 1.2`, `b = 0.75`, Lucene's non-negative IDF `ln(1 + (N - df + 0.5) / (df +
//!   0.5))`) over one document per tool: its name, its description, and its parameters' names and descriptions.
//!   Text is cut into tokens by [`tokens`]: runs of letters, digits and combining marks (anything else separates,
//!   so `_`, `.`, `-` and spaces do), each run cut again at camelCase boundaries (`getWeather` → `get`, `weather`; `HTTPServer` →
//!   `http`, `server`), lowercased; scripts written without spaces (Chinese, Japanese, Korean syllables, Thai, ...)
//!   give overlapping character pairs (`天气预报` → `天气`, `气预`, `预报`). A query term counts once.
//! - [`Mode::Regex`]: a pattern of the `regex` crate's syntax (Python's `re` for what tool-search patterns use;
//!   `(?i)` for case-insensitive), matched anywhere in a tool's name (score 2) or else in its description or
//!   parameters' text (score 1).
//!
//! Results are ordered by score (higher first), ties by the tool's index in the list (deterministic); tools that
//! do not match at all are never returned.
//!
//! Bounds ([`SearchLimits`]): tools in a catalog, bytes of the list, bytes of one tool's text, query bytes and
//! terms, `k`, pattern bytes, and the compiled regex's size. A BM25 query reads the postings of at most
//! `max_query_terms` terms (each at most one entry per tool); a regex query scans each tool's text once (the
//! `regex` crate matches in linear time). Memory: the postings (one entry per distinct term of a tool) and the
//! tools' text.

use crate::error::{Error, ErrorKind, Result};
use serde_json::Value;
use std::collections::HashMap;

/// BM25's term-frequency saturation.
pub const BM25_K1: f64 = 1.2;
/// BM25's length normalisation.
pub const BM25_B: f64 = 0.75;

/// How a query is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Words, ranked by BM25.
    Bm25,
    /// A regular expression over names and descriptions.
    Regex,
}

/// The bounds of an index and of its queries. Over a bound is [`ErrorKind::LimitExceeded`] naming the field.
#[derive(Clone, Copy, Debug)]
pub struct SearchLimits {
    /// Tools in one catalog.
    pub max_tools: usize,
    /// Bytes of the JSON tool list.
    pub max_list_bytes: usize,
    /// Bytes of one tool's searchable text (name, description, parameters' text): longer text is cut there.
    pub max_tool_text_bytes: usize,
    /// Bytes of a BM25 query.
    pub max_query_bytes: usize,
    /// Distinct terms of a BM25 query.
    pub max_query_terms: usize,
    /// Results of one query.
    pub max_k: usize,
    /// Bytes of a regex pattern.
    pub max_pattern_bytes: usize,
    /// The compiled regex's size (the `regex` crate's `size_limit`) and its lazy DFA's cache (`dfa_size_limit`).
    pub max_regex_bytes: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            max_tools: 1_000_000,
            max_list_bytes: 1 << 30,
            max_tool_text_bytes: 16 << 10,
            max_query_bytes: 4096,
            max_query_terms: 64,
            max_k: 1000,
            max_pattern_bytes: 1024,
            max_regex_bytes: 1 << 20,
        }
    }
}

/// One result: the tool's index in the list and its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// The tool's index in the list the index was built from.
    pub tool: usize,
    /// Its score (BM25, or 2 / 1 for a regex match in the name / elsewhere).
    pub score: f64,
}

/// The search index of one tool list. Immutable once built; `Send + Sync`.
#[derive(Debug)]
pub struct ToolSearch {
    names: Vec<String>,
    /// Per tool: its description and parameters' text (what a regex reads besides the name).
    texts: Vec<String>,
    /// Term → its postings: (tool, term frequency), tools ascending.
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// Per tool: its document's length in tokens.
    lengths: Vec<u32>,
    average_length: f64,
    limits: SearchLimits,
}

/// The tokens of `text` (see the module's documentation): runs of letters and digits, cut at camelCase
/// boundaries (a lowercase letter or digit followed by an uppercase one; an uppercase run followed by an uppercase
/// then lowercase letter), lowercased; within a run, the characters of scripts written without spaces (Han, kana,
/// Hangul syllables, Thai, Lao, Khmer, Myanmar) give their overlapping pairs instead (`天气预报` → `天气`, `气预`,
/// `预报`; a lone one itself), as Lucene's CJK analyzer does, so a query's words match inside a description.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for run in text.split(|c: char| !word_char(c)).filter(|r| !r.is_empty()) {
        let chars: Vec<char> = run.chars().collect();
        let mut start = 0;
        while start < chars.len() {
            let unspaced = no_spaces(chars[start]);
            let end = (start..chars.len()).find(|&i| no_spaces(chars[i]) != unspaced).unwrap_or(chars.len());
            if unspaced {
                bigrams(&chars[start..end], &mut out);
            } else {
                words(&chars[start..end], &mut out);
            }
            start = end;
        }
    }
    out
}

/// Whether `c` is part of a word: a letter or digit, or a combining mark (the vowel signs of Devanagari, Thai and
/// their kin, accents written apart, Hebrew and Arabic points), which must not cut a word in two.
fn word_char(c: char) -> bool {
    if c.is_alphanumeric() {
        return true;
    }
    match c as u32 {
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F => true,
        0x0591..=0x05BD | 0x05BF | 0x05C1 | 0x05C2 | 0x05C4 | 0x05C5 | 0x05C7 => true,
        0x0610..=0x061A | 0x064B..=0x065F | 0x0670 | 0x06D6..=0x06DC | 0x06DF..=0x06E4 | 0x06E7 | 0x06E8 => true,
        0x06EA..=0x06ED => true,
        // Brahmic scripts, Thai, Lao, Tibetan, Myanmar, Khmer: all but their punctuation.
        0x0964 | 0x0965 | 0x0970 | 0x0DF4 | 0x0E4F | 0x0E5A | 0x0E5B | 0x0F04..=0x0F14 | 0x104A..=0x104F => false,
        0x17D4..=0x17DA => false,
        0x0900..=0x0DFF | 0x0E00..=0x0EFF | 0x0F00..=0x0FFF | 0x1000..=0x109F | 0x1780..=0x17FF => true,
        _ => false,
    }
}

/// Whether `c` belongs to a script written without spaces between words.
fn no_spaces(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3400..=0x4DBF // CJK Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0x20000..=0x3FFFF) // CJK Extensions B..
}

/// The overlapping pairs of `chars` (itself when it is one character).
fn bigrams(chars: &[char], out: &mut Vec<String>) {
    if chars.len() == 1 {
        out.push(chars[0].to_lowercase().collect());
    }
    out.extend(chars.windows(2).map(|w| w.iter().flat_map(|c| c.to_lowercase()).collect::<String>()));
}

/// `chars` cut at camelCase boundaries, lowercased.
fn words(chars: &[char], out: &mut Vec<String>) {
    let mut start = 0;
    for i in 1..chars.len() {
        let (prev, cur) = (chars[i - 1], chars[i]);
        let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
        let lower_to_upper = (prev.is_lowercase() || prev.is_numeric()) && cur.is_uppercase();
        let acronym_end = prev.is_uppercase() && cur.is_uppercase() && next_lower;
        if lower_to_upper || acronym_end {
            out.push(chars[start..i].iter().collect::<String>().to_lowercase());
            start = i;
        }
    }
    out.push(chars[start..].iter().collect::<String>().to_lowercase());
}

/// A string field of a JSON object, "" when absent or not a string.
fn text_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

/// The parameters' searchable text: each property's name and description, nested objects included (bounded by
/// `budget` bytes).
fn parameters_text(schema: Option<&Value>, out: &mut String, budget: usize, depth: usize) {
    let Some(props) = schema.and_then(|s| s.get("properties")).and_then(Value::as_object) else { return };
    for (name, p) in props {
        if out.len() >= budget || depth > 8 {
            return;
        }
        out.push(' ');
        out.push_str(name);
        let d = text_of(p.get("description"));
        if !d.is_empty() {
            out.push(' ');
            out.push_str(d);
        }
        parameters_text(Some(p), out, budget, depth + 1);
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

fn too_many(field: &str, n: usize, max: usize) -> Error {
    Error::new(ErrorKind::LimitExceeded, format!("{field}: {n}, over the bound of {max}"))
}

/// What a search reads of one tool.
#[derive(Clone, Debug)]
pub struct ToolText {
    /// The tool's name.
    pub name: String,
    /// Its description ("" without one).
    pub description: String,
    /// Its searchable text: the description, its parameters' names and descriptions, cut at `max_tool_text_bytes`.
    pub text: String,
}

/// Each tool's [`ToolText`] from a JSON tool list, as [`ToolSearch::from_json`] reads it (a registry keeps them).
pub fn tool_texts(list: &[u8], limits: &SearchLimits) -> Result<Vec<ToolText>> {
    let items: Vec<Value> = {
        if list.len() > limits.max_list_bytes {
            return Err(too_many("tools (bytes of the list)", list.len(), limits.max_list_bytes));
        }
        serde_json::from_slice(list)
            .map_err(|e| Error::invalid(format!("tools: not a JSON array of tool objects: {e}")))?
    };
    tool_texts_of(&items, limits)
}

/// [`tool_texts`] of tools already parsed.
pub fn tool_texts_of(items: &[Value], limits: &SearchLimits) -> Result<Vec<ToolText>> {
    if items.len() > limits.max_tools {
        return Err(too_many("tools", items.len(), limits.max_tools));
    }
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            return Err(Error::invalid(format!("tools[{i}]: not a JSON object")));
        };
        match obj.get("type") {
            None | Some(Value::Null) => {}
            Some(Value::String(t)) if t == "function" || t == "custom" => {}
            Some(t) => {
                return Err(Error::invalid(format!(
                    "tools[{i}].type: {t} is not a function (leave the tool-search tool out of the catalog)"
                )))
            }
        }
        let function = match obj.get("function") {
            Some(Value::Object(f)) => f,
            Some(_) => return Err(Error::invalid(format!("tools[{i}].function: not a JSON object"))),
            None => obj,
        };
        let name = match function.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(Error::invalid(format!("tools[{i}]: no name (a non-empty string)"))),
        };
        let description = text_of(function.get("description")).to_string();
        let mut text = description.clone();
        let schema = function.get("parameters").or_else(|| function.get("input_schema"));
        parameters_text(schema, &mut text, limits.max_tool_text_bytes, 0);
        cut(&mut text, limits.max_tool_text_bytes);
        tools.push(ToolText { name, description, text });
    }
    Ok(tools)
}

impl ToolSearch {
    /// The index of a JSON tool list: the OpenAI `tools` shape (`[{"type": "function", "function": {"name",
    /// "description", "parameters"}}]`), or tools without the `function` wrapper (`{"name", "description",
    /// "parameters"}` or Anthropic's `input_schema`). A tool of another `type` than `function` or `custom` (a
    /// tool-search tool itself) is refused: result indices are the list's. Errors name the tool: not a JSON array,
    /// a tool that is not an object or has no name, a name listed twice, over a bound.
    pub fn from_json(list: &[u8], limits: SearchLimits) -> Result<ToolSearch> {
        let tools = tool_texts(list, &limits)?.into_iter().map(|t| (t.name, t.text)).collect();
        ToolSearch::new(tools, limits)
    }

    /// The index of `(name, text)` pairs (`text`: the description and whatever else a query should find).
    pub fn new(tools: Vec<(String, String)>, limits: SearchLimits) -> Result<ToolSearch> {
        if tools.len() > limits.max_tools || tools.len() > u32::MAX as usize {
            return Err(too_many("tools", tools.len(), limits.max_tools));
        }
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(tools.len());
        for (i, (name, _)) in tools.iter().enumerate() {
            if let Some(first) = seen.insert(name.as_str(), i) {
                return Err(Error::invalid(format!("tools[{first}] and tools[{i}] have the same name `{name}`")));
            }
        }
        drop(seen);
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut total = 0u64;
        for (i, (name, text)) in tools.iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let toks: Vec<String> = tokens(name).into_iter().chain(tokens(text)).collect();
            for t in &toks {
                *counts.entry(t.clone()).or_default() += 1;
            }
            let mut counts: Vec<(String, u32)> = counts.into_iter().collect();
            counts.sort_unstable();
            for (term, tf) in counts {
                postings.entry(term).or_default().push((i as u32, tf));
            }
            let len = u32::try_from(toks.len()).unwrap_or(u32::MAX);
            lengths.push(len);
            total += u64::from(len);
        }
        let average_length = if tools.is_empty() { 0.0 } else { total as f64 / tools.len() as f64 };
        let (names, texts) = tools.into_iter().unzip();
        Ok(ToolSearch { names, texts, postings, lengths, average_length, limits })
    }

    /// The tools' names, by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The bounds this index was built with (its queries are checked against them).
    pub fn limits(&self) -> &SearchLimits {
        &self.limits
    }

    /// The top `k` tools for `query` (see [`Mode`]); `k` is 1 to `max_k`. Errors name the field: `k`, `query`
    /// (empty, too long, too many terms) or `pattern` (too long, not a regex this engine reads, too large).
    pub fn search(&self, mode: Mode, query: &str, k: usize) -> Result<Vec<Hit>> {
        if k == 0 || k > self.limits.max_k {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("k: {k}, outside 1..={} (the results of one query)", self.limits.max_k),
            ));
        }
        let mut hits = match mode {
            Mode::Bm25 => self.bm25(query)?,
            Mode::Regex => self.regex(query)?,
        };
        let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.tool.cmp(&b.tool));
        if hits.len() > k {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_unstable_by(order);
        Ok(hits)
    }

    fn bm25(&self, query: &str) -> Result<Vec<Hit>> {
        if query.len() > self.limits.max_query_bytes {
            return Err(too_many("query (bytes)", query.len(), self.limits.max_query_bytes));
        }
        let mut terms = tokens(query);
        terms.sort_unstable();
        terms.dedup();
        if terms.is_empty() {
            return Err(Error::invalid("query: no word to search for (letters or digits)"));
        }
        if terms.len() > self.limits.max_query_terms {
            return Err(too_many("query (distinct words)", terms.len(), self.limits.max_query_terms));
        }
        let n = self.names.len() as f64;
        // Dense scores (every contribution is positive: a tool's first one marks it touched).
        let mut scores = vec![0f64; self.names.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in &terms {
            let Some(list) = self.postings.get(term) else { continue };
            let df = list.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(tool, tf) in list {
                let tf = f64::from(tf);
                let dl = f64::from(self.lengths[tool as usize]);
                let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * dl / self.average_length.max(f64::MIN_POSITIVE));
                let score = &mut scores[tool as usize];
                if *score == 0.0 {
                    touched.push(tool);
                }
                *score += idf * tf * (BM25_K1 + 1.0) / (tf + norm);
            }
        }
        Ok(touched.into_iter().map(|t| Hit { tool: t as usize, score: scores[t as usize] }).collect())
    }

    fn regex(&self, pattern: &str) -> Result<Vec<Hit>> {
        if pattern.len() > self.limits.max_pattern_bytes {
            return Err(too_many("pattern (bytes)", pattern.len(), self.limits.max_pattern_bytes));
        }
        if pattern.is_empty() {
            return Err(Error::invalid("pattern: empty"));
        }
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(self.limits.max_regex_bytes)
            .dfa_size_limit(self.limits.max_regex_bytes)
            .nest_limit(64)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(n) => Error::new(
                    ErrorKind::LimitExceeded,
                    format!("pattern: compiles to more than {n} bytes (this server's bound); use a simpler pattern"),
                ),
                e => Error::invalid(format!("pattern: not a regular expression this server reads: {e}")),
            })?;
        let mut hits = Vec::new();
        for (i, (name, text)) in self.names.iter().zip(&self.texts).enumerate() {
            if re.is_match(name) {
                hits.push(Hit { tool: i, score: 2.0 });
            } else if re.is_match(text) {
                hits.push(Hit { tool: i, score: 1.0 });
            }
        }
        Ok(hits)
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
