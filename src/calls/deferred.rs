//! Deferred tools and tool search (`defer_loading`), the request's side, once for every engine (vLLM's front end
//! and llama-server call it through `trie_deferred_plan`): which tools the chat template renders, and the history as
//! the model sees it.
//!
//! - A tool with `"defer_loading": true` (at the tool level or in `function`) is left out of the prompt; the caller
//!   keeps it in the call's name set and its schema in the hand-over.
//! - A tool-search tool (`{"type": "tool_search"}`, Anthropic's `tool_search_tool_bm25_20251119` /
//!   `tool_search_tool_regex_20251119` types, or a function named `tool_search_tool_bm25` / `tool_search_tool_regex`)
//!   is rendered as a function with one free-text argument (`query`, or `pattern`). A call of it in the history whose
//!   result is missing or empty (no tool message, or `""`) is answered here with libtrie's search
//!   ([`crate::sets::search`]) over the request's deferred tools and the registry's: the result becomes the tool
//!   message's text and the tools found are loaded. A query the search refuses is answered with its message (the
//!   model may try again), as the APIs answer a search error.
//! - `tool_reference` items in the history (vLLM's `name`, Anthropic's `tool_name`, or a
//!   `tool_search_tool_search_result` block) load the referenced tools; the items are rendered as text.
//! - A registry offered as deferred tools: its tools are searched, and a tool found or referenced is loaded with its
//!   name, description and parameters.
//!
//! Stateless: the same request gives the same plan.

use crate::error::{Error, ErrorKind, Result};
use crate::sets::search::{tool_texts_of, Mode, SearchLimits, ToolSearch};
use crate::sets::Registry;
use serde_json::{json, Map, Value};

/// Results of one search (Anthropic returns 3 to 5).
pub const SEARCH_K: usize = 5;
/// The longest query the search function's call may write (Anthropic bounds a pattern at 200 characters).
pub const MAX_QUERY: usize = 200;
/// The function names of the search tools, and the form each reads.
pub const SEARCH_NAMES: [(&str, Mode); 2] =
    [("tool_search_tool_bm25", Mode::Bm25), ("tool_search_tool_regex", Mode::Regex)];
/// The largest request text [`plan_json`] reads.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

fn function(tool: &Value) -> &Value {
    match tool.get("function") {
        Some(f) if f.is_object() => f,
        _ => tool,
    }
}

fn name_of(tool: &Value) -> &str {
    function(tool).get("name").and_then(Value::as_str).unwrap_or("")
}

/// Whether a tool has `"defer_loading": true`, at the tool level or in `function`.
pub fn is_deferred(tool: &Value) -> bool {
    tool.get("defer_loading") == Some(&Value::Bool(true))
        || function(tool).get("defer_loading") == Some(&Value::Bool(true))
}

/// The search form of a tool-search tool, `None` for any other tool.
pub fn search_kind(tool: &Value) -> Option<Mode> {
    if let Some(kind) = tool.get("type").and_then(Value::as_str) {
        if kind == "tool_search" {
            return Some(Mode::Bm25);
        }
        for (name, mode) in SEARCH_NAMES {
            if kind == name || kind.strip_prefix(name).is_some_and(|rest| rest.starts_with('_')) {
                return Some(mode);
            }
        }
    }
    let n = name_of(tool);
    SEARCH_NAMES.iter().find(|(s, _)| *s == n).map(|&(_, m)| m)
}

fn default_name(mode: Mode) -> &'static str {
    SEARCH_NAMES.iter().find(|(_, m)| *m == mode).map(|(n, _)| *n).unwrap_or("tool_search_tool_bm25")
}

fn argument(mode: Mode) -> &'static str {
    match mode {
        Mode::Bm25 => "query",
        Mode::Regex => "pattern",
    }
}

/// The argument schema of a search tool's call: one required free-text argument.
pub fn search_parameters(mode: Mode) -> Value {
    let arg = argument(mode);
    json!({"type": "object", "properties": {arg: {"type": "string", "maxLength": MAX_QUERY}}, "required": [arg],
           "additionalProperties": false})
}

/// The function the model sees for a search tool.
pub fn search_function(mode: Mode, name: &str) -> Value {
    let description = match mode {
        Mode::Bm25 => {
            "Search the catalog of deferred tools by keywords (their names, descriptions and parameters). The tools \
             found become available to call."
        }
        Mode::Regex => {
            "Search the catalog of deferred tools with a regular expression over their names and descriptions ((?i) \
             for case-insensitive). The tools found become available to call."
        }
    };
    json!({"type": "function", "function": {"name": name, "description": description,
                                            "parameters": search_parameters(mode)}})
}

/// A tool as the chat template sees it: `defer_loading` removed.
fn plain(tool: &Value) -> Value {
    let mut t = tool.clone();
    if let Some(o) = t.as_object_mut() {
        o.remove("defer_loading");
        if let Some(Value::Object(f)) = o.get_mut("function") {
            f.remove("defer_loading");
        }
    }
    t
}

/// The `tool_reference` items of a message's content (a list, or a search result block in it).
fn items(content: Option<&Value>) -> Vec<&Value> {
    let mut out = Vec::new();
    for item in content.and_then(Value::as_array).into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) == Some("tool_reference") {
            out.push(item);
        } else if let Some(refs) = item.get("tool_references").and_then(Value::as_array) {
            out.extend(refs.iter().filter(|r| r.is_object()));
        }
    }
    out
}

fn reference_name(item: &Value) -> Option<&str> {
    item.get("name").or_else(|| item.get("tool_name")).and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// The tool names of `tool_reference` items in the history, in order, each once.
pub fn references(messages: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in messages {
        for n in items(m.get("content")).into_iter().filter_map(reference_name) {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

fn found_text(names: &[String]) -> String {
    if names.is_empty() {
        "No tool found.".to_string()
    } else {
        format!("Tools found and now available: {}", names.join(", "))
    }
}

/// A message whose content holds references, with them as text.
fn references_as_text(m: Value) -> Value {
    let refs: Vec<String> = items(m.get("content")).into_iter().filter_map(reference_name).map(String::from).collect();
    if refs.is_empty() {
        return m;
    }
    let mut parts: Vec<String> = m["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|i| i.get("text").and_then(Value::as_str))
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect();
    parts.push(found_text(&refs));
    let mut m = m;
    m["content"] = Value::String(parts.join("\n"));
    m
}

/// The searches of one request: over its deferred tools and a registry's, merged by score.
struct Searcher<'a> {
    own: Option<ToolSearch>,
    registry: Option<(&'a Registry, std::sync::Arc<ToolSearch>)>,
}

impl Searcher<'_> {
    fn run(&self, mode: Mode, query: &str) -> Result<Vec<String>> {
        let mut hits: Vec<(f64, usize, &str)> = Vec::new();
        if let Some(s) = &self.own {
            hits.extend(s.search(mode, query, SEARCH_K)?.iter().map(|h| (h.score, 0, s.names()[h.tool].as_str())));
        }
        if let Some((_, s)) = &self.registry {
            hits.extend(s.search(mode, query, SEARCH_K)?.iter().map(|h| (h.score, 1, s.names()[h.tool].as_str())));
        }
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<String> = Vec::new();
        for (_, _, n) in hits {
            if out.len() < SEARCH_K && !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
        Ok(out)
    }
}

fn call_parts(call: &Value) -> (&str, &str, Value) {
    let f = call.get("function").unwrap_or(&Value::Null);
    let args = match f.get("arguments") {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
        Some(v) => v.clone(),
        None => Value::Null,
    };
    (call.get("id").and_then(Value::as_str).unwrap_or(""), f.get("name").and_then(Value::as_str).unwrap_or(""), args)
}

/// Each call of the search tool whose result is missing or empty gets the search's result as a tool message in
/// text; the names found are loaded.
fn answer_searches(msgs: Vec<Value>, mode: Mode, name: &str, s: &Searcher, loaded: &mut Vec<String>) -> Vec<Value> {
    let mut msgs = msgs;
    let mut out = Vec::with_capacity(msgs.len());
    let mut i = 0;
    while i < msgs.len() {
        let m = msgs[i].clone();
        i += 1;
        let calls: Vec<Value> = if m.get("role").and_then(Value::as_str) == Some("assistant") {
            m.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default()
        } else {
            vec![]
        };
        out.push(m);
        for call in &calls {
            let (id, fname, args) = call_parts(call);
            if fname != name {
                continue;
            }
            let at = (i..msgs.len()).find(|&j| {
                msgs[j].get("role").and_then(Value::as_str) == Some("tool")
                    && msgs[j].get("tool_call_id").and_then(Value::as_str) == Some(id)
            });
            let answered = at.and_then(|j| msgs[j].get("content")).is_some_and(|c| match c {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            });
            if answered {
                continue; // by the client (its references are read with the others)
            }
            let text = match args.get(argument(mode)).and_then(Value::as_str) {
                Some(q) if !q.is_empty() => match s.run(mode, q) {
                    Ok(found) => {
                        for n in &found {
                            if !loaded.contains(n) {
                                loaded.push(n.clone());
                            }
                        }
                        found_text(&found)
                    }
                    Err(e) => format!("The search failed: {}", e.message()),
                },
                _ => format!("The search failed: {}: missing", argument(mode)),
            };
            let answer = json!({"role": "tool", "tool_call_id": id, "content": text});
            match at {
                Some(j) => msgs[j] = answer,
                None => out.push(answer),
            }
        }
    }
    out
}

/// A registry tool as the prompt shows it (name, description, parameters).
fn registry_tool(r: &Registry, name: &str) -> Option<Value> {
    let i = r.names().iter().position(|n| n == name)?;
    let parameters: Value = serde_json::from_str(&r.parameters()[i]).unwrap_or_else(|_| json!({"type": "object"}));
    let mut f = Map::new();
    f.insert("name".into(), Value::String(name.to_string()));
    if !r.descriptions()[i].is_empty() {
        f.insert("description".into(), Value::String(r.descriptions()[i].clone()));
    }
    f.insert("parameters".into(), parameters);
    Some(json!({"type": "function", "function": f}))
}

/// The plan of a request with `tools` and `messages` (JSON values as the client sent them), `registry` an operator's
/// registry offered as deferred tools: `None` when nothing is deferred, no search tool is there, no reference is in
/// the history and no registry is offered (the request is left as it is); else `{"tools": [...] (what the template
/// renders), "messages": [...], "loaded": [names], "search": {"name", "form"} or null}`.
pub fn plan(tools: &[Value], messages: &[Value], registry: Option<&Registry>) -> Result<Option<Value>> {
    let kinds: Vec<Option<Mode>> = tools.iter().map(search_kind).collect();
    let deferred: Vec<bool> = tools.iter().zip(&kinds).map(|(t, k)| k.is_none() && is_deferred(t)).collect();
    let refs = references(messages);
    let search = tools.iter().zip(&kinds).find_map(|(t, k)| {
        k.map(|m| (m, if search_kind(&json!({"name": name_of(t)})).is_some() { name_of(t) } else { default_name(m) }))
    });
    if !deferred.contains(&true) && search.is_none() && refs.is_empty() && registry.is_none() {
        return Ok(None);
    }
    let mut loaded = refs;
    let mut msgs: Vec<Value> = messages.to_vec();
    if let Some((mode, name)) = search {
        let own: Vec<Value> = tools.iter().zip(&deferred).filter(|(_, &d)| d).map(|(t, _)| plain(t)).collect();
        let limits = SearchLimits::default();
        let own = if own.is_empty() {
            None
        } else {
            let texts = tool_texts_of(&own, &limits)
                .map_err(|e| Error::new(e.kind(), format!("tools (deferred): {}", e.message())))?;
            Some(ToolSearch::new(texts.into_iter().map(|t| (t.name, t.text)).collect(), limits)?)
        };
        let registry = match registry {
            Some(r) => Some((r, r.search()?)),
            None => None,
        };
        msgs = answer_searches(msgs, mode, name, &Searcher { own, registry }, &mut loaded);
    }
    let msgs: Vec<Value> = msgs.into_iter().map(references_as_text).collect();
    let mut prompt = Vec::new();
    for ((t, k), d) in tools.iter().zip(&kinds).zip(&deferred) {
        if let Some(m) = k {
            prompt.push(search_function(*m, search.map(|s| s.1).unwrap_or(default_name(*m))));
        } else if !d || loaded.iter().any(|n| n == name_of(t)) {
            prompt.push(plain(t));
        }
    }
    if let Some(r) = registry {
        for n in &loaded {
            if !tools.iter().any(|t| name_of(t) == n) {
                prompt.extend(registry_tool(r, n));
            }
        }
    }
    let search = search.map(|(m, n)| json!({"name": n, "form": if m == Mode::Regex { "regex" } else { "bm25" }}));
    Ok(Some(json!({"tools": prompt, "messages": msgs, "loaded": loaded, "search": search})))
}

/// [`plan`] of a request's JSON text `{"tools": [...], "messages": [...]}` (other fields ignored): the plan's JSON
/// text, or `None`. Errors name the field (`request`, `request.tools`, `request.messages`).
pub fn plan_json(request: &[u8], registry: Option<&Registry>) -> Result<Option<String>> {
    if request.len() > MAX_REQUEST_BYTES {
        return Err(Error::new(
            ErrorKind::LimitExceeded,
            format!("request: {} bytes, over the bound of {MAX_REQUEST_BYTES}", request.len()),
        ));
    }
    let v: Value =
        serde_json::from_slice(request).map_err(|e| Error::invalid(format!("request: not a JSON object: {e}")))?;
    let Some(o) = v.as_object() else { return Err(Error::invalid("request: not a JSON object")) };
    let list = |field: &str| -> Result<&[Value]> {
        match o.get(field) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(Error::invalid(format!("request.{field}: not a JSON array"))),
        }
    };
    let (tools, messages) = (list("tools")?, list("messages")?);
    if let Some(i) = tools.iter().position(|t| !t.is_object()) {
        return Err(Error::invalid(format!("request.tools[{i}]: not a JSON object")));
    }
    Ok(plan(tools, messages, registry)?.map(|p| p.to_string()))
}

#[cfg(test)]
#[path = "deferred_tests.rs"]
mod tests;
