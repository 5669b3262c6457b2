//! JSON schemas that list their values (`enum`, `const`, `anyOf`/`oneOf` of those) and OpenAI-style tool lists.
//!
//! A schema node is read as: annotations that do not change the language (ignored), `type` (every value must
//! have one of its types, else not a set: the language would be smaller than the list), and exactly one of
//! `enum`, `const`, `anyOf`, `oneOf`. Any other keyword (`minLength`, `pattern`, `format`, `nullable`, `$ref`,
//! ...) is "not a set": libtrie does not prove it harmless. Values are strings, integers, floats written without
//! an exponent, booleans and null; an object or array value is not a set (its JSON text depends on the engine's
//! formatting). All strings: [`Render::JsonString`] with the strings as members; otherwise [`Render::JsonText`]
//! with each value's JSON text (strings as `ensure_ascii=False` literals).

use super::{
    check_count, check_members, not_a_set, parse_json, set, short_json, tool_call_template, Limits, Recognition,
    Recognized, Shape,
};
use crate::error::{Error, Result};
use crate::template::{json_string, Render, Template};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;

/// Keywords that do not change a schema's language.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Recognizes a JSON schema (see the module docs).
pub(super) fn json_schema(text: &str, limits: &Limits) -> Result<Recognition> {
    let root = parse_json(Shape::JsonSchema, text)?;
    let mut values = Vec::new();
    if let Err(reason) = collect(root, 0, limits, &mut values)? {
        return not_a_set(reason);
    }
    let all_strings = values.iter().all(Value::is_string);
    let mut members = Vec::with_capacity(values.len());
    for v in values {
        members.push(match v {
            Value::String(s) if all_strings => s.into_bytes(),
            Value::String(s) => {
                let mut out = Vec::with_capacity(s.len() + 2);
                json_string(&s, &mut out);
                out
            }
            Value::Number(n) => n.to_string().into_bytes(),
            other => other.to_string().into_bytes(),
        });
    }
    check_members(&members, "JSON schema", limits)?;
    let render = if all_strings { Render::JsonString } else { Render::JsonText };
    set(members, Template::bare().render(render))
}

/// Appends the values of schema node `node` to `out`; `Ok(Err(reason))` when it is not a set.
fn collect(
    node: Value,
    depth: usize,
    limits: &Limits,
    out: &mut Vec<Value>,
) -> Result<std::result::Result<(), String>> {
    if depth > limits.max_depth {
        return Err(Error::limit(format!(
            "the JSON schema nests anyOf/oneOf deeper than the limit max_depth = {}",
            limits.max_depth
        )));
    }
    let Value::Object(mut map) = node else {
        return match node {
            Value::Bool(_) => Ok(Err(format!("the schema {node} is a boolean schema, not a list of values"))),
            _ => Err(Error::invalid(format!("a JSON schema must be an object, found {}", short_json(&node)))),
        };
    };
    let listing: Vec<&'static str> =
        ["enum", "const", "anyOf", "oneOf"].into_iter().filter(|k| map.contains_key(*k)).collect();
    if let Some(key) =
        map.keys().find(|k| !ANNOTATIONS.contains(&k.as_str()) && *k != "type" && !listing.contains(&k.as_str()))
    {
        return Ok(Err(format!("the schema has `{key}`, which may change its language")));
    }
    let start = out.len();
    match listing.as_slice() {
        ["enum"] => {
            let items = match map.remove("enum") {
                Some(Value::Array(items)) => items,
                other => {
                    let found = short_json(&other.unwrap_or_default());
                    return Err(Error::invalid(format!("`enum` must be an array, found {found}")));
                }
            };
            if items.is_empty() {
                return Err(Error::new(crate::ErrorKind::EmptySet, "the JSON schema has an empty `enum`"));
            }
            check_count(out.len() + items.len(), limits)?;
            out.extend(items);
        }
        ["const"] => out.push(map.remove("const").unwrap_or_default()),
        [key @ ("anyOf" | "oneOf")] => {
            let Some(Value::Array(branches)) = map.remove(*key) else {
                return Err(Error::invalid(format!("`{key}` must be an array of schemas")));
            };
            if branches.is_empty() {
                return Err(Error::new(crate::ErrorKind::EmptySet, format!("the JSON schema has an empty `{key}`")));
            }
            for b in branches {
                if let Err(reason) = collect(b, depth + 1, limits, out)? {
                    return Ok(Err(reason));
                }
            }
        }
        [] => return Ok(Err("the schema has no enum, const, anyOf or oneOf: it does not list its values".into())),
        more => {
            return Ok(Err(format!("the schema combines {}: their intersection is not checked", more.join(" and "))))
        }
    }
    for v in &out[start..] {
        if let Err(reason) = scalar(v) {
            return Ok(Err(reason));
        }
    }
    if let Some(t) = map.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) if a.iter().all(Value::is_string) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(Error::invalid(format!("`type` must be a string or an array of strings, found {t}"))),
        };
        if let Some(v) = out[start..].iter().find(|v| !types.iter().any(|t| has_type(v, t))) {
            return Ok(Err(format!(
                "the value {} is not of type {t}: the schema's language is smaller",
                short_json(v)
            )));
        }
    }
    Ok(Ok(()))
}

/// Whether a value can be a member: a string, an integer, a float written without an exponent, a boolean, null.
fn scalar(v: &Value) -> std::result::Result<(), String> {
    match v {
        Value::Array(_) | Value::Object(_) => {
            Err(format!("the value {} is an array or object: its JSON text depends on the engine", short_json(v)))
        }
        Value::Number(n) if n.to_string().contains(['e', 'E']) => {
            Err(format!("the number {n} is written with an exponent, which engines write differently"))
        }
        _ => Ok(()),
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

/// The payload of a tool without `parameters` (what vLLM uses for it).
///
/// cbindgen:ignore
pub const EMPTY_PARAMETERS: &str = r#"{"type": "object", "properties": {}}"#;

/// Recognizes an OpenAI-style tools list: `[{"type": "function", "function": {"name", "parameters", ...}}]`
/// (also the flat form `{"type": "function", "name", "parameters"}`). Any tool that is not a function: not a
/// set. A tool without a name, a duplicate name, non-object parameters: an error naming the tool's index.
pub(super) fn tools(text: &str, limits: &Limits) -> Result<Recognition> {
    let list: Vec<Box<RawValue>> = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("the tools are not a JSON array of tool objects: {e}")))?;
    check_count(list.len(), limits)?;
    let mut names = Vec::with_capacity(list.len());
    let mut payloads = Vec::with_capacity(list.len());
    for (i, raw) in list.iter().enumerate() {
        let tool: HashMap<String, Box<RawValue>> = serde_json::from_str(raw.get())
            .map_err(|e| Error::invalid(format!("tool {i} is not a JSON object: {e}")))?;
        if let Some(t) = tool.get("type") {
            let t: Value = serde_json::from_str(t.get()).unwrap_or(Value::Null);
            if t != "function" {
                return not_a_set(format!("tool {i} is of type {t}, not a function"));
            }
        }
        let function: HashMap<String, Box<RawValue>> = match tool.get("function") {
            Some(f) => serde_json::from_str(f.get())
                .map_err(|e| Error::invalid(format!("tool {i}: `function` is not a JSON object: {e}")))?,
            None => tool,
        };
        let name = match function.get("name").map(|n| serde_json::from_str::<Value>(n.get())) {
            Some(Ok(Value::String(s))) if !s.is_empty() => s,
            Some(Ok(Value::String(_))) => return Err(Error::invalid(format!("tool {i} has an empty name"))),
            Some(_) => return Err(Error::invalid(format!("tool {i}: `name` is not a string"))),
            None => return Err(Error::invalid(format!("tool {i} has no name"))),
        };
        let payload = match function.get("parameters") {
            None => EMPTY_PARAMETERS.to_string(),
            Some(p) => {
                let value: Value = serde_json::from_str(p.get()).unwrap_or(Value::Null);
                match value {
                    Value::Object(ref m) if m.is_empty() => EMPTY_PARAMETERS.to_string(),
                    Value::Object(_) => p.get().to_string(),
                    Value::Null => EMPTY_PARAMETERS.to_string(),
                    other => {
                        return Err(Error::invalid(format!(
                            "tool {i} (`{name}`): `parameters` must be a JSON object, found {}",
                            short_json(&other)
                        )))
                    }
                }
            }
        };
        names.push(name.into_bytes());
        payloads.push(payload);
    }
    if let Err(e) = check_members(&names, "tools list", limits) {
        let dup = duplicate_index(&names);
        return Err(match dup {
            Some((first, again)) => Error::invalid(format!(
                "tools {first} and {again} have the same name `{}`",
                String::from_utf8_lossy(&names[first])
            )),
            None => e,
        });
    }
    Ok(Recognition::Set(Recognized {
        members: names,
        template: tool_call_template(),
        payloads: Some(payloads),
        trailing_whitespace: false,
    }))
}

fn duplicate_index(names: &[Vec<u8>]) -> Option<(usize, usize)> {
    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(&first) = seen.get(n.as_slice()) {
            return Some((first, i));
        }
        seen.insert(n, i);
    }
    None
}
