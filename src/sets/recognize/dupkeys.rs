//! Duplicate keys in a JSON object. JSON leaves them undefined and the engines' parsers disagree (Python's
//! `json` and serde keep the last value, other C++ readers keep the first or refuse), so a request text with a
//! key written twice in one object has no single meaning: it is "not a set" and the engine keeps it.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The first key written twice in one object of the JSON text `text` (in document order), or `None` when
/// every object's keys are distinct or the text is not valid JSON (left to the parser). Recursion is bounded
/// by the caller's [`super::json_check_depth`] (and serde_json's own limit of 128).
pub(crate) fn first_duplicate_key(text: &str) -> Option<String> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_str(text);
    Walk { found: &mut found }.deserialize(&mut de).ok()?;
    found
}

/// Walks any JSON value, recording the first duplicate key into `found`.
struct Walk<'a> {
    found: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk { found: &mut *self.found })?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.found.is_none() && !keys.insert(key.clone()) {
                *self.found = Some(key);
            }
            if self.found.is_some() {
                map.next_value::<IgnoredAny>()?;
            } else {
                map.next_value_seed(Walk { found: &mut *self.found })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::first_duplicate_key;

    #[test]
    fn finds_the_first_key_written_twice_at_any_depth() {
        assert_eq!(first_duplicate_key(r#"{"a": 1, "b": 2}"#), None);
        assert_eq!(first_duplicate_key(r#"{"a": 1, "a": 2}"#).as_deref(), Some("a"));
        assert_eq!(first_duplicate_key(r#"{"x": [{"e": 1}, {"e": 2, "f": 0, "e": 3}]}"#).as_deref(), Some("e"));
        // The same key in two objects is fine; escapes are compared decoded.
        assert_eq!(first_duplicate_key(r#"[{"k": 1}, {"k": 2}]"#), None);
        assert_eq!(first_duplicate_key(r#"{"enum": [1], "\u0065num": [2]}"#).as_deref(), Some("enum"));
        // Not JSON: left to the parser.
        assert_eq!(first_duplicate_key(r#"{"a": 1, "a": "#), None);
    }
}
