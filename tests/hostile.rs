//! A hostile client against the recognizers, through the C ABI (`trie_recognize_with`, `trie_json_check_depth`):
//! expansion bombs, deep nesting, million-member lists, invalid UTF-8, lone surrogates, control characters, huge
//! numbers, look-alike schemas and vLLM look-alikes. Every one is answered (a set, "not a set", or an error naming
//! the problem) without a crash, an abort or a large allocation. No timings are asserted (the recognize bench
//! measures them).

use std::ffi::CStr;
use std::ptr::{null, null_mut};
use trie::ffi::recognize::*;
use trie::ffi::trie_last_error;
use trie::ffi::trie_status::{self, *};

/// What the C ABI answered.
#[derive(Debug, PartialEq)]
enum Answer {
    Set(usize),
    NotASet(String),
    Error(trie_status, String),
}

/// A `trie_recognize_limits` of zeros (then set by `trie_recognize_limits_init`).
fn zeroed_limits() -> trie_recognize_limits {
    trie_recognize_limits {
        struct_size: 0,
        max_text_bytes: 0,
        max_members: 0,
        max_member_bytes: 0,
        max_depth: 0,
        flags: 0,
    }
}

fn ask(kind: u32, text: &[u8], limits: Option<&trie_recognize_limits>) -> Answer {
    unsafe {
        let mut r = null_mut();
        let lim = limits.map_or(null(), |l| l as *const _);
        let st = trie_recognize_with(kind, text.as_ptr(), text.len(), lim, &mut r);
        if st != TRIE_OK {
            assert!(r.is_null());
            return Answer::Error(st, CStr::from_ptr(trie_last_error()).to_string_lossy().into_owned());
        }
        if r.is_null() {
            return Answer::NotASet(CStr::from_ptr(trie_recognize_reason()).to_string_lossy().into_owned());
        }
        let n = trie_recognized_n_members(r);
        trie_recognized_free(r);
        Answer::Set(n)
    }
}

fn limit_error(kind: u32, text: &[u8], names: &str) {
    match ask(kind, text, None) {
        Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, msg) => assert!(msg.contains(names), "{msg} (want {names})"),
        other => panic!("kind {kind}: want a limit error naming {names}, got {other:?}"),
    }
}

fn not_a_set(kind: u32, text: &str, why: &str) {
    match ask(kind, text.as_bytes(), None) {
        Answer::NotASet(reason) => assert!(reason.contains(why), "{text}: {reason} (want {why})"),
        other => panic!("{text}: want not a set ({why}), got {other:?}"),
    }
}

const DIGITS: &str = "d ::= \"0\" | \"1\" | \"2\" | \"3\" | \"4\" | \"5\" | \"6\" | \"7\" | \"8\" | \"9\"";

#[test]
fn expansion_bombs() {
    limit_error(
        TRIE_RECOGNIZE_GRAMMAR,
        format!("root ::= d d d d d d d \"\"\n{DIGITS}").as_bytes(),
        "max_members = 10000",
    );
    // The 4 KB variant: each rule the square of the last.
    let mut g = String::from("root ::= r40\nr0 ::= d\n");
    for i in 1..=40 {
        g.push_str(&format!("r{i} ::= r{} r{}\n", i - 1, i - 1));
    }
    g.push_str(DIGITS);
    limit_error(TRIE_RECOGNIZE_GRAMMAR, g.as_bytes(), "max_members");
    // Few members, huge bytes: literals of 300 KB multiplied.
    let big = format!("root ::= w w w\nw ::= \"{0}\" | \"{0}x\"", "a".repeat(300_000));
    limit_error(TRIE_RECOGNIZE_GRAMMAR, big.as_bytes(), "max_member_bytes");
    // A caller's own bounds travel in.
    let mut l = zeroed_limits();
    unsafe { assert_eq!(trie_recognize_limits_init(&mut l), TRIE_OK) };
    l.max_members = 99;
    match ask(TRIE_RECOGNIZE_GRAMMAR, format!("root ::= d d\n{DIGITS}").as_bytes(), Some(&l)) {
        Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, msg) => assert!(msg.contains("max_members = 99"), "{msg}"),
        other => panic!("{other:?}"),
    }
    l.max_members = 100;
    assert_eq!(ask(TRIE_RECOGNIZE_GRAMMAR, format!("root ::= d d\n{DIGITS}").as_bytes(), Some(&l)), Answer::Set(100));
    l.max_text_bytes = 10;
    limit_error_with(TRIE_RECOGNIZE_CHOICES, br#"["aaaaaaaaaaaa"]"#, &l, "max_text_bytes");
}

fn limit_error_with(kind: u32, text: &[u8], l: &trie_recognize_limits, names: &str) {
    match ask(kind, text, Some(l)) {
        Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, msg) => assert!(msg.contains(names), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deep_nesting() {
    let json = "[".repeat(50_000) + &"]".repeat(50_000);
    for kind in [TRIE_RECOGNIZE_CHOICES, TRIE_RECOGNIZE_JSON_SCHEMA, TRIE_RECOGNIZE_TOOLS, TRIE_RECOGNIZE_VLLM_TOOLS] {
        limit_error(kind, json.as_bytes(), "max_depth = 64");
    }
    let any_of = "{\"anyOf\": [".repeat(50_000) + "{\"const\": 1}" + &"]}".repeat(50_000);
    limit_error(TRIE_RECOGNIZE_JSON_SCHEMA, any_of.as_bytes(), "max_depth");
    unsafe {
        assert_eq!(trie_json_check_depth(any_of.as_ptr(), any_of.len(), 64), TRIE_ERR_LIMIT_EXCEEDED);
        assert!(CStr::from_ptr(trie_last_error()).to_str().unwrap().contains("max_depth = 64"));
        assert_eq!(trie_json_check_depth(b"[[1]]".as_ptr(), 5, 2), TRIE_OK);
        assert_eq!(trie_json_check_depth(null(), 0, 2), TRIE_OK);
        assert_eq!(trie_json_check_depth(null(), 1, 2), TRIE_ERR_NULL_ARGUMENT);
    }
    let parens = format!("root ::= {}\"a\"{}", "(".repeat(50_000), ")".repeat(50_000));
    limit_error(TRIE_RECOGNIZE_GRAMMAR, parens.as_bytes(), "max_depth");
    let chain: String = (0..50_000).map(|i| format!("r{i} ::= r{}\n", i + 1)).collect();
    limit_error(TRIE_RECOGNIZE_GRAMMAR, format!("root ::= r0\n{chain}r50000 ::= \"a\"\n").as_bytes(), "max_depth");
}

#[test]
fn million_member_lists() {
    // A million members within the default text bound (8 MiB): short (and repeated) members.
    let m = 1_000_000;
    let list = |item: &str| format!("[{}]", vec![item; m].join(","));
    limit_error(TRIE_RECOGNIZE_CHOICES, list("\"a\"").as_bytes(), "max_members");
    limit_error(TRIE_RECOGNIZE_JSON_SCHEMA, format!("{{\"enum\": {}}}", list("1")).as_bytes(), "max_members");
    limit_error(TRIE_RECOGNIZE_GRAMMAR, format!("root ::= {}", vec!["\"a\""; m].join(" | ")).as_bytes(), "max_members");
    limit_error(TRIE_RECOGNIZE_REGEX, vec!["a"; m].join("|").as_bytes(), "max_members");
    limit_error(TRIE_RECOGNIZE_TOOLS, list("{}").as_bytes(), "max_members");
    // A huge literal: one member over the byte bound.
    let huge = format!("root ::= \"{}\"", "a".repeat(2 << 20));
    limit_error(TRIE_RECOGNIZE_GRAMMAR, huge.as_bytes(), "max_member_bytes");
    limit_error(TRIE_RECOGNIZE_CHOICES, format!("[\"{}\"]", "a".repeat(2 << 20)).as_bytes(), "max_member_bytes");
}

#[test]
fn malformed_bytes_and_values() {
    for kind in 0..=5u32 {
        match ask(kind, b"[\"\xff\"]", None) {
            Answer::Error(TRIE_ERR_INVALID_ARGUMENT, msg) => assert!(msg.contains("not UTF-8"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }
    // Lone surrogates in JSON: refused by the JSON reader.
    for (kind, text) in [
        (TRIE_RECOGNIZE_CHOICES, r#"["\ud800"]"#),
        (TRIE_RECOGNIZE_JSON_SCHEMA, r#"{"enum": ["\udc00x"]}"#),
        (TRIE_RECOGNIZE_TOOLS, r#"[{"function": {"name": "\ud800"}}]"#),
    ] {
        assert!(matches!(ask(kind, text.as_bytes(), None), Answer::Error(TRIE_ERR_INVALID_ARGUMENT, _)), "{text}");
    }
    not_a_set(TRIE_RECOGNIZE_GRAMMAR, r#"root ::= "\ud800""#, "scalar");
    not_a_set(TRIE_RECOGNIZE_REGEX, r"\ud800", "scalar");
    // Control characters: literal members where the language has them, not a set where the dialects differ.
    assert_eq!(ask(TRIE_RECOGNIZE_CHOICES, b"[\"a\\u0000\\u001f\"]", None), Answer::Set(1));
    assert_eq!(ask(TRIE_RECOGNIZE_JSON_SCHEMA, br#"{"enum": ["\u0001", "\n"]}"#, None), Answer::Set(2));
    not_a_set(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"a\u{1}\" | \"b\u{0}\"", "NUL");
    not_a_set(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"a\" \u{b} \"b\"", "construct");
    // Huge numbers.
    for text in [r#"{"enum": [1e999999]}"#, r#"{"const": -1e999999}"#] {
        assert!(matches!(ask(TRIE_RECOGNIZE_JSON_SCHEMA, text.as_bytes(), None), Answer::Error(..)), "{text}");
    }
    let digits400 = format!(r#"{{"enum": [{}]}}"#, "9".repeat(400));
    assert!(matches!(ask(TRIE_RECOGNIZE_JSON_SCHEMA, digits400.as_bytes(), None), Answer::Error(..)));
    not_a_set(TRIE_RECOGNIZE_JSON_SCHEMA, &format!(r#"{{"enum": [{}]}}"#, "9".repeat(30)), "exponent");
    not_a_set(TRIE_RECOGNIZE_JSON_SCHEMA, r#"{"enum": [9223372036854775808]}"#, "64-bit");
    assert_eq!(ask(TRIE_RECOGNIZE_JSON_SCHEMA, br#"{"enum": [-9223372036854775808, 2.5]}"#, None), Answer::Set(2));
}

#[test]
fn look_alike_schemas() {
    for (text, why) in [
        (r#"{"enum": ["a", "b"], "not": {"const": "a"}}"#, "`not`"),
        (r#"{"enum": ["a", "bb"], "minLength": 2}"#, "minLength"),
        (r#"{"enum": ["a"], "pattern": "b"}"#, "pattern"),
        (r#"{"type": "integer", "enum": ["a"]}"#, "not of type"),
        (r#"{"anyOf": [{"const": "a"}], "required": ["a"]}"#, "required"),
        (r#"{"oneOf": [{"const": 1}, {"const": 1.0}]}"#, "integral float"),
        (r#"{"oneOf": [{"const": "x"}, {"enum": ["x", "y"]}]}"#, "two branches"),
        (r#"{"enum": [1.0, 2]}"#, "integral float"),
        (r#"{"enum": [0.1]}"#, "17-digit"),
        (r#"{"enum": [{"a": 1}]}"#, "array or object"),
    ] {
        not_a_set(TRIE_RECOGNIZE_JSON_SCHEMA, text, why);
    }
    // Duplicates that do not change the language are served once.
    assert_eq!(ask(TRIE_RECOGNIZE_JSON_SCHEMA, br#"{"enum": ["a", "a"]}"#, None), Answer::Set(1));
    assert_eq!(
        ask(TRIE_RECOGNIZE_JSON_SCHEMA, br#"{"anyOf": [{"const": 1}, {"enum": [1, 2]}]}"#, None),
        Answer::Set(2)
    );
    assert_eq!(ask(TRIE_RECOGNIZE_GRAMMAR, br#"root ::= "a" ("b" | "") | "ab""#, None), Answer::Set(2));
    assert_eq!(ask(TRIE_RECOGNIZE_REGEX, b"a|a", None), Answer::Set(1));
    // ... but not where the client lists members on purpose.
    assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, br#"["a", "a"]"#, None), Answer::Error(TRIE_ERR_INVALID_ARGUMENT, _)));
}

#[test]
fn vllm_look_alikes() {
    let alt = |name: &str, extra: &str| {
        format!(
            r#"{{"properties": {{"name": {{"type": "string", "enum": ["{name}"]}}, "parameters": {{"type": "object", "properties": {{}}}}}}, "required": ["name", "parameters"{extra}]}}"#
        )
    };
    let schema = |head: &str, alts: &[String]| {
        format!(r#"{{"type": "array", {head}"items": {{"type": "object", "anyOf": [{}]}}}}"#, alts.join(", "))
    };
    let good = schema(r#""minItems": 1, "#, &[alt("a", ""), alt("b", "")]);
    assert_eq!(ask(TRIE_RECOGNIZE_VLLM_TOOLS, good.as_bytes(), None), Answer::Set(2));
    for bad in [
        schema(r#""minItems": 2, "#, &[alt("a", "")]),
        schema(r#""minItems": 1, "maxItems": 0, "#, &[alt("a", "")]),
        schema(r#""minItems": 1, "not": {}, "#, &[alt("a", "")]),
        schema(r#""minItems": 1, "#, &[alt("a", r#", "x""#)]),
        schema("", &[alt("a", "")]),
        schema(r#""minItems": 1, "#, &[alt("a", "").replace(r#""type": "string""#, r#""type": "integer""#)]),
    ] {
        assert!(matches!(ask(TRIE_RECOGNIZE_VLLM_TOOLS, bad.as_bytes(), None), Answer::NotASet(_)), "{bad}");
    }
    // Two tools of one name: vLLM and XGrammar serve that schema, so libtrie leaves it to them.
    let dup = schema(r#""minItems": 1, "#, &[alt("a", ""), alt("a", "")]);
    assert!(matches!(ask(TRIE_RECOGNIZE_VLLM_TOOLS, dup.as_bytes(), None), Answer::NotASet(_)));
}

#[test]
fn versioned_limits_and_bad_arguments() {
    unsafe {
        let size = std::mem::size_of::<trie_recognize_limits>();
        // An older, smaller struct: the missing fields keep their defaults.
        let mut l = zeroed_limits();
        trie_recognize_limits_init(&mut l);
        assert_eq!(l.struct_size, size);
        assert_eq!((l.max_text_bytes, l.max_members, l.max_member_bytes, l.max_depth), (8 << 20, 10_000, 1 << 20, 64));
        l.max_members = 1;
        l.struct_size = std::mem::offset_of!(trie_recognize_limits, max_members); // max_members not read
        let two = br#"["a", "b"]"#;
        assert_eq!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&l)), Answer::Set(2));
        l.struct_size = size;
        assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&l)), Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, _)));
        // A newer, larger struct: zero extra fields are fine, nonzero ones refused.
        #[repr(C)]
        struct Newer {
            l: trie_recognize_limits,
            extra: u64,
        }
        let mut n = Newer { l, extra: 0 };
        n.l.struct_size = std::mem::size_of::<Newer>();
        n.l.max_members = 0;
        assert_eq!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&n.l)), Answer::Set(2));
        n.extra = 7;
        assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&n.l)), Answer::Error(TRIE_ERR_INVALID_ARGUMENT, _)));
        // Routing: over a bound, not a set (issue 36); a struct ending before `flags` never reads it; unknown bits.
        let mut f = l;
        f.flags = TRIE_RECOGNIZE_OVER_BOUNDS_NOT_A_SET;
        match ask(TRIE_RECOGNIZE_CHOICES, two, Some(&f)) {
            Answer::NotASet(why) => {
                assert!(why.contains("max_members") && why.contains("the engine serves it"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        f.struct_size = std::mem::offset_of!(trie_recognize_limits, flags);
        assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&f)), Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, _)));
        f.struct_size = size;
        f.flags = 2;
        assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&f)), Answer::Error(TRIE_ERR_INVALID_ARGUMENT, _)));
        let mut g = l;
        g.struct_size = 1 << 40;
        assert!(matches!(ask(TRIE_RECOGNIZE_CHOICES, two, Some(&g)), Answer::Error(TRIE_ERR_INVALID_ARGUMENT, _)));
        assert_eq!(trie_recognize_limits_init(null_mut()), TRIE_ERR_NULL_ARGUMENT);
        let mut r = null_mut();
        assert_eq!(trie_recognize_with(9, two.as_ptr(), two.len(), null(), &mut r), TRIE_ERR_INVALID_ARGUMENT);
        assert_eq!(trie_recognize_with(0, null(), 3, null(), &mut r), TRIE_ERR_NULL_ARGUMENT);
        assert_eq!(trie_recognize_with(0, two.as_ptr(), two.len(), null(), null_mut()), TRIE_ERR_NULL_ARGUMENT);
        let _: trie_status = TRIE_OK;
    }
}

#[test]
fn a_huge_depth_limit_is_capped() {
    let mut l = zeroed_limits();
    unsafe { trie_recognize_limits_init(&mut l) };
    l.max_depth = u32::MAX;
    let parens = format!("root ::= {}\"a\"{}", "(".repeat(200_000), ")".repeat(200_000));
    match ask(TRIE_RECOGNIZE_GRAMMAR, parens.as_bytes(), Some(&l)) {
        Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, msg) => assert!(msg.contains("max_depth = 256"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_deepest_allowed_nesting_fits_a_thread_stack() {
    let mut l = zeroed_limits();
    unsafe { trie_recognize_limits_init(&mut l) };
    l.max_depth = 256;
    let parens = format!("root ::= {}\"a\"{}", "(".repeat(250), ")".repeat(250));
    let chain: String = (0..250).map(|i| format!("r{i} ::= (r{})\n", i + 1)).collect();
    let chain = format!("root ::= r0\n{chain}r250 ::= \"a\"\n");
    // Run on a thread with a 1 MiB stack in release builds (less than any engine thread gets; debug frames are larger): the readers' recursion must stay well within it.
    std::thread::Builder::new()
        .stack_size(if cfg!(debug_assertions) { 16 << 20 } else { 1 << 20 })
        .spawn(move || {
            assert_eq!(ask(TRIE_RECOGNIZE_GRAMMAR, parens.as_bytes(), Some(&l)), Answer::Set(1));
            assert!(matches!(
                ask(TRIE_RECOGNIZE_GRAMMAR, chain.as_bytes(), Some(&l)),
                Answer::Error(TRIE_ERR_LIMIT_EXCEEDED, _)
            ));
        })
        .unwrap()
        .join()
        .unwrap();
}
