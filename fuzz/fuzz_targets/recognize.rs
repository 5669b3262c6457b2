//! The recognizers on arbitrary text: the first byte picks the shape, the rest is the request. Checked:
//! - no panic, whatever the input; errors and "not a set" are both fine;
//! - a recognized set has distinct members, one payload per member when it has payloads, and every segment
//!   renders (JSON renderings parse back: a JSON string segment is its member);
//! - a grammar set round-trips: the members written back as a GBNF alternation (vLLM's escaping) are
//!   recognized as exactly the same members.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use trie::sets::recognize::{recognize_with, Limits, Recognition, Shape};
use trie::Render;

fn gbnf_literal(m: &[u8]) -> String {
    let s = std::str::from_utf8(m).expect("grammar members are UTF-8");
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, text)) = data.split_first() else { return };
    let shape = Shape::ALL[pick as usize % Shape::ALL.len()];
    let limits = Limits {
        max_text_bytes: 1 << 20,
        max_members: 10_000,
        max_member_bytes: 1 << 20,
        max_depth: 64,
        over_bounds_not_a_set: pick & 0x80 != 0,
    };
    let Ok(Recognition::Set(r)) = recognize_with(shape, text, &limits) else { return };
    assert!(!r.members.is_empty());
    let distinct: HashSet<&Vec<u8>> = r.members.iter().collect();
    assert_eq!(distinct.len(), r.members.len(), "members are distinct");
    if let Some(p) = &r.payloads {
        assert_eq!(p.len(), r.members.len());
    }
    for m in &r.members {
        let seg = r.template.segment(m).expect("every member renders");
        if r.template.render == Render::JsonString && r.template.prefix.is_empty() && r.template.suffix.is_empty() {
            let back: String = serde_json::from_slice(&seg).expect("a JSON string segment parses");
            assert_eq!(back.as_bytes(), m.as_slice());
        }
    }
    if shape == Shape::Grammar && r.template.render == Render::Raw {
        let again = format!("root ::= {}", r.members.iter().map(|m| gbnf_literal(m)).collect::<Vec<_>>().join(" | "));
        match recognize_with(Shape::Grammar, again.as_bytes(), &limits) {
            Ok(Recognition::Set(back)) => assert_eq!(back.members, r.members, "{again}"),
            other => panic!("the members written back as a grammar were not recognized: {other:?}\n{again}"),
        }
    }
});
