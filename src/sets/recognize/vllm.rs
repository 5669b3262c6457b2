//! The JSON schema vLLM writes for `tool_choice="required"` (`vllm/tool_parsers/utils.py`,
//! `get_json_schema_from_tools`), recognized only in exactly that form:
//!
//! ```json
//! {"type": "array", "minItems": 1,
//!  "items": {"type": "object",
//!            "anyOf": [{"properties": {"name": {"type": "string", "enum": [NAME]}, "parameters": PARAMS},
//!                       "required": ["name", "parameters"]}, ...]},
//!  "$defs": {...}}
//! ```
//!
//! (`$defs` only when a tool's parameters had some: vLLM moves them to the top.) Key order and whitespace are
//! free (the text is JSON); any other or missing keyword, another value (`minItems: 2`, `maxItems`, `not`, an
//! extra `required` entry, `name: {"type": "integer", ...}`), a key written twice, parameters that are not a
//! non-empty object (vLLM writes `{"type": "object", "properties": {}}` for none), parameters with their own
//! `$defs`, or a `$ref` that does not point into the top `$defs` (`#` would mean the whole array there) is not
//! a set. Members: the tool names (a duplicate is an error; an empty name is not a set). Payloads: each tool's
//! parameters text as written, with the top `$defs` added as its first key when there is one (so its
//! `#/$defs/...` references resolve the same). Template: `[{"name": ` NAME as a JSON string `, "parameters": `,
//! open (the arguments and `}]` follow), the format of `python/libtrie/vllm/tools.py`.

use super::{check_count, check_members, not_a_set, Limits, Recognition, Recognized, Shape};
use crate::error::{Error, Result};
use crate::template::{End, Render, Template};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;

/// The template of a required tool call: `[{"name": NAME, "parameters": `, open.
pub fn vllm_tool_call_template() -> Template {
    Template::bare().prefix("[{\"name\": ").suffix(", \"parameters\": ").render(Render::JsonString).end(End::Open)
}

type Object = HashMap<String, Box<RawValue>>;

/// A JSON object's members as raw texts, or None when it is not an object or writes a key twice.
fn object(raw: &str) -> Option<Object> {
    let map: Object = serde_json::from_str(raw).ok()?;
    (count_keys(raw) == map.len()).then_some(map)
}

/// The number of keys of the JSON object text `raw` (the `:` at its first level, outside strings).
fn count_keys(raw: &str) -> usize {
    let mut n = 0;
    super::json_scan(raw.as_bytes(), |c, depth| n += usize::from(c == b':' && depth == 1));
    n
}

fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// Whether `map` has exactly the keys `keys`.
fn keys_are(map: &Object, keys: &[&str]) -> bool {
    map.len() == keys.len() && keys.iter().all(|k| map.contains_key(*k))
}

/// A `$ref` (or another reference keyword) in `v` that does not point into `#/$defs/` of `defs`.
fn foreign_ref(v: &Value, defs: Option<&serde_json::Map<String, Value>>) -> Option<String> {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if matches!(k.as_str(), "$id" | "$anchor" | "$dynamicRef" | "$dynamicAnchor" | "$recursiveRef") {
                    return Some(format!("a `{k}`"));
                }
                if k == "$ref" {
                    let target = x.as_str().and_then(|s| s.strip_prefix("#/$defs/"));
                    let name = target.map(|t| t.split('/').next().unwrap_or(t).replace("~1", "/").replace("~0", "~"));
                    if !name.is_some_and(|n| defs.is_some_and(|d| d.contains_key(&n))) {
                        return Some(format!("the reference {x}"));
                    }
                }
                if let Some(r) = foreign_ref(x, defs) {
                    return Some(r);
                }
            }
            None
        }
        Value::Array(a) => a.iter().find_map(|x| foreign_ref(x, defs)),
        _ => None,
    }
}

/// Recognizes vLLM's `tool_choice="required"` schema (see the module docs).
pub(super) fn vllm_tools(text: &str, limits: &Limits) -> Result<Recognition> {
    let not_vllm = |what: &str| not_a_set(format!("not the schema vLLM writes for tool_choice=\"required\": {what}"));
    // Valid JSON or an error, checked without building anything.
    serde_json::from_str::<&RawValue>(text)
        .map_err(|e| Error::invalid(format!("the {} text is not valid JSON: {e}", Shape::VllmTools.name())))?;
    let Some(top) = object(text) else { return not_vllm("the top is not an object with distinct keys") };
    let has_defs = top.contains_key("$defs");
    let want: &[&str] = if has_defs { &["type", "minItems", "items", "$defs"] } else { &["type", "minItems", "items"] };
    if !keys_are(&top, want) {
        return not_vllm("its keys are not type, minItems, items (and $defs)");
    }
    if value(&top["type"]) != "array" || value(&top["minItems"]).as_u64() != Some(1) || top["minItems"].get() != "1" {
        return not_vllm("not an array of minItems 1");
    }
    let defs_raw = top.get("$defs").map(|d| d.get());
    let defs = match defs_raw.map(serde_json::from_str::<Value>) {
        None => None,
        Some(Ok(Value::Object(m))) if !m.is_empty() => Some(m),
        Some(_) => return not_vllm("$defs is not a non-empty object"),
    };
    let Some(items) = object(top["items"].get()) else { return not_vllm("items is not an object") };
    if !keys_are(&items, &["type", "anyOf"]) || value(&items["type"]) != "object" {
        return not_vllm("items is not {\"type\": \"object\", \"anyOf\": [...]}");
    }
    check_count(super::top_level_items(items["anyOf"].get().as_bytes()), "tools list", limits)?;
    let alts: Vec<&RawValue> = match serde_json::from_str(items["anyOf"].get()) {
        Ok(a) => a,
        Err(_) => return not_vllm("anyOf is not an array"),
    };
    if alts.is_empty() {
        return not_vllm("anyOf is empty");
    }
    check_count(alts.len(), "tools list", limits)?;
    let required = serde_json::json!(["name", "parameters"]);
    let mut names = Vec::with_capacity(alts.len());
    let mut payloads = Vec::with_capacity(alts.len());
    for (i, alt) in alts.iter().enumerate() {
        let Some(alt) = object(alt.get()) else { return not_vllm(&format!("tool {i} is not an object")) };
        if !keys_are(&alt, &["properties", "required"]) || value(&alt["required"]) != required {
            return not_vllm(&format!("tool {i} is not {{\"properties\", \"required\": [\"name\", \"parameters\"]}}"));
        }
        let Some(props) = object(alt["properties"].get()) else { return not_vllm(&format!("tool {i}'s properties")) };
        if !keys_are(&props, &["name", "parameters"]) {
            return not_vllm(&format!("tool {i}'s properties are not name and parameters"));
        }
        let name = match object(props["name"].get()) {
            Some(n) if keys_are(&n, &["type", "enum"]) && value(&n["type"]) == "string" => match value(&n["enum"]) {
                Value::Array(a) if a.len() == 1 && a[0].is_string() => a[0].as_str().unwrap_or_default().to_string(),
                _ => return not_vllm(&format!("tool {i}'s name is not an enum of one string")),
            },
            _ => return not_vllm(&format!("tool {i}'s name is not {{\"type\": \"string\", \"enum\": [NAME]}}")),
        };
        if name.is_empty() {
            return not_vllm(&format!("tool {i} has an empty name"));
        }
        let raw = props["parameters"].get();
        let params = match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(m)) if !m.is_empty() && !m.contains_key("$defs") && count_keys(raw) == m.len() => {
                Value::Object(m)
            }
            _ => return not_vllm(&format!("tool {i}'s parameters are not a non-empty object without $defs")),
        };
        if let Some(r) = foreign_ref(&params, defs.as_ref()) {
            return not_vllm(&format!("tool {i}'s parameters have {r}, which does not point into the top $defs"));
        }
        let payload = match defs_raw {
            Some(d) => format!("{{\"$defs\": {d}, {}", &raw.trim_start()[1..]),
            None => raw.to_string(),
        };
        names.push(name.into_bytes());
        payloads.push(payload);
    }
    if let Some(defs) = &defs {
        if let Some(r) = defs.values().find_map(|d| foreign_ref(d, Some(defs))) {
            return not_vllm(&format!("$defs have {r}, which does not point into the top $defs"));
        }
    }
    if let Some((first, again)) = super::first_duplicate(&names) {
        // vLLM writes the schema from the client's tools and XGrammar serves it: not a set, the engine keeps it.
        return not_vllm(&format!(
            "tools {first} and {again} have the same name `{}`",
            String::from_utf8_lossy(&names[first])
        ));
    }
    check_members(&names, "tools list", limits)?;
    Ok(Recognition::Set(Recognized {
        members: names,
        template: vllm_tool_call_template(),
        payloads: Some(payloads),
        trailing_whitespace: false,
    }))
}
