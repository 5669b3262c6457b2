//! JSON schemas that list their values (`enum`, `const`, `anyOf`/`oneOf` of those) and OpenAI-style tool lists.
//!
//! A schema node is read as: annotations that do not change the language (ignored: `title`, `description`,
//! `$comment`, `examples`, `$schema`, `$id`, `default`, `deprecated`, `readOnly`, `writeOnly`), `type` (every
//! value must have one of its types, else not a set: the language would be smaller than the list), and exactly
//! one of `enum`, `const`, `anyOf`, `oneOf`. Any other keyword (`not`, `minLength`, `pattern`, `format`,
//! `nullable`, `required`, `properties`, `$ref`, ...) is "not a set": libtrie does not prove it harmless.
//!
//! Values are served only where the engines write them as libtrie does (XGrammar writes an `enum`/`const`
//! value with picojson's `serialize`, llama.cpp with nlohmann's `dump`): strings without U+007F (picojson
//! escapes it as `\u007f`), integers within 64-bit signed range, floats that are not integral (picojson writes
//! `1.0` as `1`, nlohmann as `1.0`) and whose shortest form is also their `%.17g` form (picojson writes `0.1` as
//! `0.10000000000000001`), booleans and null. An object or array value is not a set (its JSON text depends on
//! the engine's formatting). All strings: [`Render::JsonString`] with the strings as members; otherwise
//! [`Render::JsonText`] with each value's JSON text (strings as `ensure_ascii=False` literals).
//!
//! Equal values (JSON equality; the served values are equal exactly when their texts are) in an `enum` or
//! across `anyOf` branches are served once (the first kept); the same value in two `oneOf` branches is not a
//! set (`oneOf` excludes it; XGrammar falls back to `anyOf`).

use super::{
    check_count, check_members, not_a_set, parse_json, set, short_json, tool_call_template, Limits, Recognition,
    Recognized, Shape,
};
use crate::error::{Error, Result};
use crate::template::{json_string, Render, Template};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

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

/// One value of the list and its JSON text as the engines write it (equal values have equal texts).
struct Item {
    value: Value,
    text: String,
}

/// Recognizes a JSON schema (see the module docs).
pub(super) fn json_schema(text: &str, limits: &Limits) -> Result<Recognition> {
    let root = parse_json(Shape::JsonSchema, text)?;
    let items = match collect(root, 0, limits)? {
        Ok(items) => items,
        Err(reason) => return not_a_set(reason),
    };
    let all_strings = items.iter().all(|i| i.value.is_string());
    let members: Vec<Vec<u8>> = items
        .into_iter()
        .map(|i| match i.value {
            Value::String(s) if all_strings => s.into_bytes(),
            _ => i.text.into_bytes(),
        })
        .collect();
    check_members(&members, "JSON schema", limits)?;
    let render = if all_strings { Render::JsonString } else { Render::JsonText };
    set(members, Template::bare().render(render))
}

/// Drops the items equal to an earlier one.
fn dedup_items(items: &mut Vec<Item>) {
    let mut seen = HashSet::with_capacity(items.len());
    let mut keep = Vec::with_capacity(items.len());
    for i in items.drain(..) {
        if seen.insert(i.text.clone()) {
            keep.push(i);
        }
    }
    *items = keep;
}

type Collected = Result<std::result::Result<Vec<Item>, String>>;

/// The values of schema node `node` (distinct, in order); `Ok(Err(reason))` when it is not a set.
fn collect(node: Value, depth: usize, limits: &Limits) -> Collected {
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
    let mut out: Vec<Item> = Vec::new();
    match listing.as_slice() {
        ["enum"] => {
            let values = match map.remove("enum") {
                Some(Value::Array(values)) => values,
                other => {
                    let found = short_json(&other.unwrap_or_default());
                    return Err(Error::invalid(format!("`enum` must be an array, found {found}")));
                }
            };
            if values.is_empty() {
                return Err(Error::new(crate::ErrorKind::EmptySet, "the JSON schema has an empty `enum`"));
            }
            check_count(values.len(), "JSON schema", limits)?;
            for v in values {
                match item(v) {
                    Ok(i) => out.push(i),
                    Err(reason) => return Ok(Err(reason)),
                }
            }
            dedup_items(&mut out);
        }
        ["const"] => match item(map.remove("const").unwrap_or_default()) {
            Ok(i) => out.push(i),
            Err(reason) => return Ok(Err(reason)),
        },
        [key @ ("anyOf" | "oneOf")] => {
            let Some(Value::Array(branches)) = map.remove(*key) else {
                return Err(Error::invalid(format!("`{key}` must be an array of schemas")));
            };
            if branches.is_empty() {
                return Err(Error::new(crate::ErrorKind::EmptySet, format!("the JSON schema has an empty `{key}`")));
            }
            let mut owner: HashMap<String, usize> = HashMap::new();
            for (k, b) in branches.into_iter().enumerate() {
                let items = match collect(b, depth + 1, limits)? {
                    Ok(items) => items,
                    Err(reason) => return Ok(Err(reason)),
                };
                for i in items {
                    match owner.get(&i.text) {
                        Some(&first) if *key == "oneOf" && first != k => {
                            return Ok(Err(format!(
                                "the value {} is in two branches of a oneOf (oneOf excludes it; XGrammar does not)",
                                i.text
                            )))
                        }
                        Some(_) => {}
                        None => {
                            owner.insert(i.text.clone(), k);
                            out.push(i);
                        }
                    }
                }
                check_count(out.len(), "JSON schema", limits)?;
            }
        }
        [] => return Ok(Err("the schema has no enum, const, anyOf or oneOf: it does not list its values".into())),
        more => {
            return Ok(Err(format!("the schema combines {}: their intersection is not checked", more.join(" and "))))
        }
    }
    if let Some(t) = map.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) if a.iter().all(Value::is_string) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(Error::invalid(format!("`type` must be a string or an array of strings, found {t}"))),
        };
        if let Some(i) = out.iter().find(|i| !types.iter().any(|t| has_type(&i.value, t))) {
            return Ok(Err(format!(
                "the value {} is not of type {t}: the schema's language is smaller",
                short_json(&i.value)
            )));
        }
    }
    Ok(Ok(out))
}

/// A value that can be a member, with its text as the engines write it; else why not.
fn item(v: Value) -> std::result::Result<Item, String> {
    let text = match &v {
        Value::Array(_) | Value::Object(_) => {
            return Err(format!(
                "the value {} is an array or object: its JSON text depends on the engine",
                short_json(&v)
            ))
        }
        Value::String(s) => {
            if s.contains('\u{7f}') {
                return Err("a string with U+007F, which XGrammar writes as \\u007f".into());
            }
            let mut out = Vec::with_capacity(s.len() + 2);
            json_string(s, &mut out);
            String::from_utf8(out).expect("JSON text of a string is UTF-8")
        }
        Value::Number(n) => number_text(n)?,
        other => other.to_string(),
    };
    Ok(Item { value: v, text })
}

/// The text of a number the engines write as libtrie does, or why not.
fn number_text(n: &serde_json::Number) -> std::result::Result<String, String> {
    if n.is_i64() {
        return Ok(n.to_string());
    }
    if n.is_u64() {
        return Err(format!("the number {n} is beyond 64-bit signed integers, which engines write differently"));
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    let s = n.to_string();
    if !f.is_finite() || s.contains(['e', 'E']) {
        return Err(format!("the number {n} is written with an exponent, which engines write differently"));
    }
    if f.fract() == 0.0 {
        return Err(format!("the number {n} is an integral float (XGrammar writes 1.0 as 1, llama.cpp as 1.0)"));
    }
    if percent_17g(f).as_deref() != Some(s.as_str()) {
        return Err(format!("the number {n} has no 17-digit form equal to its shortest one (XGrammar writes %.17g)"));
    }
    Ok(s)
}

/// `printf("%.17g", f)` for a finite, non-integral `f` written without an exponent (`None` where `%g` would use
/// one).
fn percent_17g(f: f64) -> Option<String> {
    let sci = format!("{:.16e}", f);
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    if !(-4..17).contains(&exp) {
        return None;
    }
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let point = exp + 1; // digits before the decimal point
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat('0').take((-point) as usize));
        out.push_str(digits);
    } else {
        let point = point as usize;
        if digits.len() <= point {
            return None; // integral: not a case of this function
        }
        out.push_str(&digits[..point]);
        out.push('.');
        out.push_str(&digits[point..]);
    }
    Some(out)
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
    check_count(super::top_level_items(text.as_bytes()), "tools list", limits)?;
    let list: Vec<Box<RawValue>> = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("the tools are not a JSON array of tool objects: {e}")))?;
    check_count(list.len(), "tools list", limits)?;
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
        let dup = super::first_duplicate(&names);
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
