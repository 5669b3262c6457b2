use super::*;
use crate::ErrorKind;

fn rec(shape: Shape, text: &str) -> Recognized {
    match recognize(shape, text.as_bytes()) {
        Ok(Recognition::Set(r)) => r,
        other => panic!("{shape:?} {text:?}: {other:?}"),
    }
}

fn not_set(shape: Shape, text: &str) -> String {
    match recognize(shape, text.as_bytes()) {
        Ok(Recognition::NotASet(reason)) => reason,
        other => panic!("{shape:?} {text:?} should not be a set: {other:?}"),
    }
}

fn err(shape: Shape, text: &[u8]) -> Error {
    match recognize(shape, text) {
        Err(e) => e,
        other => panic!("{shape:?} {:?} should be an error: {other:?}", String::from_utf8_lossy(text)),
    }
}

fn strs(r: &Recognized) -> Vec<&str> {
    r.members.iter().map(|m| std::str::from_utf8(m).unwrap()).collect()
}

#[test]
fn choices() {
    let r = rec(Shape::Choices, r#"["a", "b\"c", "", "é😀\n"]"#);
    assert_eq!(strs(&r), ["a", "b\"c", "", "é😀\n"]);
    assert!(r.template.is_bare() && r.payloads.is_none() && !r.trailing_whitespace);
    assert!(err(Shape::Choices, b"[\"a\", 1]").message().contains("choice 1 is not a string"));
    assert!(err(Shape::Choices, b"[\"a\", \"a\"]").message().contains("twice"));
    assert_eq!(err(Shape::Choices, b"[]").kind(), ErrorKind::EmptySet);
    assert!(err(Shape::Choices, b"[\"a\"").message().contains("not valid JSON"));
    assert!(err(Shape::Choices, b"{}").message().contains("not a JSON array"));
    assert!(err(Shape::Choices, b"[\"\xff\"]").message().contains("not UTF-8"));
}

#[test]
fn grammars_of_literals() {
    let r = rec(Shape::Grammar, r#"root ::= "a" | "b\"c" | "\\" | "x\ny" | "\x41\u00e9\U0001F600" | "" "#);
    assert_eq!(strs(&r), ["a", "b\"c", "\\", "x\ny", "Aé😀", ""]);
    assert_eq!(r.template.render, Render::Raw);
    // Comments, aliases, groups, concatenation.
    let r = rec(Shape::Grammar, "# top\nroot ::= ( x | \"c\" ) # tail\nx ::= y\ny ::= \"a\" \"b\" | \"d\"\n");
    assert_eq!(strs(&r), ["ab", "d", "c"]);
    // A newline after `|` and after `::=` is fine.
    assert_eq!(strs(&rec(Shape::Grammar, "root ::=\n  \"a\" |\n  \"b\"")), ["a", "b"]);
    // Every rule is checked, reachable or not (an engine refuses the whole grammar for one bad rule).
    assert!(not_set(Shape::Grammar, "root ::= \"a\"\nother ::= [a-z]* \"x\"+").contains("character class"));
    // Duplicates that do not change the language are served once, the first kept.
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= \"a\" | \"a\"")), ["a"]);
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= \"a\" (\"b\" | \"\") | \"ab\"")), ["ab", "a"]);
    assert_eq!(
        strs(&rec(Shape::Grammar, "root ::= (\"a\" | \"ab\") (\"b\" | \"\") | x\nx ::= \"a\"")),
        ["ab", "a", "abb"]
    );
    // `()` and `""` are the empty string in both dialects.
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= \"a\" () | ( ) \"\"")), ["a", ""]);
}

#[test]
fn a_comment_ends_at_a_carriage_return_too() {
    // Issue 28: `{"ab"}` to llama.cpp and XGrammar; libtrie used to read `{"a"}`.
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= (\"a\" # c\r \"b\" # )\n)")), ["ab"]);
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= \"a\" # c\r\nx ::= \"b\"")), ["a"]);
    // A `\r` ends a rule (GBNF) outside parentheses: going on after it is not a set.
    assert!(not_set(Shape::Grammar, "root ::= \"a\" # c\r| \"b\"").contains("line break"));
    assert!(not_set(Shape::Grammar, "root ::= \"a\"\r| \"b\"").contains("line break"));
    assert_eq!(strs(&rec(Shape::Grammar, "root ::= \"a\" |\r\n \"b\"\r\n")), ["a", "b"]);
}

#[test]
fn lexical_points_where_the_dialects_differ_are_not_sets() {
    for (g, why) in [
        ("root ::= my_rule\nmy_rule ::= \"a\"", "differently"),
        ("root ::= a.b\na.b ::= \"a\"", "differently"),
        ("root ::= 1a\n1a ::= \"a\"", "differently"),
        ("root ::= true\ntrue ::= \"a\"", "differently"),
        ("root ::= Token\nToken ::= \"a\"", "differently"),
        ("root ::= \"a\" | .", "differently"),
        ("root ::= \"\\[\"", "XGrammar refuses"),
        ("root ::= \"\\-\"", "XGrammar refuses"),
        ("root ::= \"\\'\"", "GBNF refuses"),
        ("root ::= \"\\/\"", "GBNF refuses"),
        ("root ::= \"\\0\"", "GBNF refuses"),
        ("root ::= \"\\e\"", "GBNF refuses"),
        ("root ::= \"\\x4\"", "hex digits"),
        ("root ::= \"a\nb\"", "line break"),
        ("root ::= \"a\rb\"", "line break"),
        ("root ::= \"a\" | \"b\"\u{0}junk", "NUL"),
        ("root ::= \"a\" |", "empty alternative"),
        ("root ::= (\"a\" | )", "empty alternative"),
        ("root ::= ( | \"a\")", "empty alternative"),
        ("root ::=", "empty alternative"),
        ("root ::= \"a\" b ::= \"c\"", "start a line"),
        ("root\n::= \"a\"", "line break between"),
        ("root # c\n::= \"a\"", "line break between"),
        ("root[lazy] ::= \"a\"", "does not follow"),
        ("root ::= \"a\" (= \"b\")", "construct"),
        ("root ::= \"a\"\nroot ::= \"b\"", "twice"),
        ("root ::= [a]", "character class"),
        ("root ::= <[12]>", "construct"),
        ("root ::= \"é\" | rè\nrè ::= \"a\"", "construct"),
    ] {
        let reason = not_set(Shape::Grammar, g);
        assert!(reason.contains(why), "{g:?}: {reason}");
    }
    // What both read the same: `::=` spacing, names with `-` and digits, line ends after `::=`, `|`, `(`.
    let r = rec(Shape::Grammar, "root::=a-1|\n\"b\"\na-1 ::=\n(\n\"x\"\n|\"y\"\n)");
    assert_eq!(strs(&r), ["x", "y", "b"]);
}

#[test]
fn grammar_near_misses_are_not_sets() {
    for (g, why) in [
        (r#"root ::= "a" | "b"*"#, "repetition"),
        (r#"root ::= "a" | "b"+"#, "repetition"),
        (r#"root ::= "a" | "b"?"#, "repetition"),
        (r#"root ::= "a" | "b"{1,2}"#, "repetition"),
        (r#"root ::= "a" | [bc]"#, "character class"),
        (r#"root ::= "a" | ."#, "construct"),
        ("root ::= \"a\" | x\nx ::= \"b\" x", "recursive"),
        ("root ::= \"a\" | x\nx ::= [0-9]", "character class"),
        ("root ::= \"a\"\n| \"b\"", "line break"),
        (r#"root ::= "\x414""#, "third hex digit"),
        (r#"root ::= "\ud800""#, "scalar"),
        (r#"root ::= "\q""#, "not understood"),
        ("root ::= \"a\"\nroot ::= \"b\"", "twice"),
        (r#"root ::= "a" <[123]>"#, "construct"),
        ("root ::= ::= \" \"?", "does not follow"),
    ] {
        let reason = not_set(Shape::Grammar, g);
        assert!(reason.contains(why), "{g:?}: {reason}");
    }
}

#[test]
fn malformed_grammars_are_errors() {
    for (g, why) in [
        ("root ::= \"a", "unterminated"),
        ("root ::= \"a\\", "unterminated"),
        ("root ::= \"a\" | \"\\", "unterminated"),
        ("start ::= \"a\"", "no rule named `root`"),
        ("root ::= x", "not defined"),
        ("\"a\" | \"b\"", "expected a rule"),
        ("root ::= (\"a\"", "unbalanced"),
        ("root ::= \"a\")", "unbalanced"),
    ] {
        let e = err(Shape::Grammar, g.as_bytes());
        assert!(e.message().contains(why), "{g:?}: {}", e.message());
    }
}

#[test]
fn llama_cpp_space_rule() {
    let space = r#"space ::= | " " | "\n"{1,2} [ \t]{0,20}"#;
    // The older form: the alternation followed by `space`.
    let r = rec(Shape::Grammar, &format!("root ::= (\"\\\"a\\\"\" | \"\\\"b\\\\\\\\c\\\"\") space\n{space}\n"));
    assert_eq!(strs(&r), ["a", "b\\c"]);
    assert_eq!(r.template.render, Render::JsonString);
    assert!(r.trailing_whitespace);
    // The pinned form: no trailing space, the rule defined but unused; mixed values are JSON text.
    let r = rec(Shape::Grammar, &format!("root ::= (\"\\\"a\\\"\" | \"1\" | \"null\")\n{space}\n"));
    assert_eq!(strs(&r), ["\"a\"", "1", "null"]);
    assert_eq!(r.template.render, Render::JsonText);
    assert!(!r.trailing_whitespace);
    // Per alternative (a union of consts), and the oldest `" "?` rule.
    let r = rec(
        Shape::Grammar,
        "root ::= a0 | a1\na0 ::= \"\\\"x\\\"\" space\na1 ::= \"\\\"y\\\"\" space\nspace ::= \" \"?",
    );
    assert_eq!(strs(&r), ["x", "y"]);
    assert!(r.trailing_whitespace);
    assert!(not_set(Shape::Grammar, &format!("root ::= \"a\" space \"b\"\n{space}")).contains("followed"));
    assert!(not_set(Shape::Grammar, &format!("root ::= \"a\" space | \"b\"\n{space}")).contains("only some"));
    // A `space` rule that is not llama.cpp's is just a rule.
    assert!(not_set(Shape::Grammar, "root ::= \"a\" space\nspace ::= \" \"*").contains("repetition"));
}

#[test]
fn regexes() {
    for (re, want) in [
        (r"^(?:a|b\.c)$", vec!["a", "b.c"]),
        (r"(a|b)", vec!["a", "b"]),
        (r"a|b\|c|d\(e\)", vec!["a", "b|c", "d(e)"]),
        (r"^abc$", vec!["abc"]),
        (r"x\ny\t\x41\u00e9 z", vec!["x\ny\tAé z"]),
        (r"é|😀|\\", vec!["é", "😀", "\\"]),
    ] {
        assert_eq!(strs(&rec(Shape::Regex, re)), want, "{re}");
    }
    for (re, why) in [
        ("a|b*", "metacharacter"),
        ("[ab]", "metacharacter"),
        (r"a|\d", "escape"),
        ("(a|b)(c)", "metacharacter"),
        ("^a|b$", "anchor"),
        ("a.b", "metacharacter"),
        ("(?i)a", "metacharacter"),
        (r"a\1", "escape"),
    ] {
        let reason = not_set(Shape::Regex, re);
        assert!(reason.contains(why), "{re}: {reason}");
    }
    assert_eq!(strs(&rec(Shape::Regex, "a|a|b|a")), ["a", "b"]);
}

#[test]
fn json_schemas() {
    let r =
        rec(Shape::JsonSchema, r#"{"type": "string", "enum": ["a", "b\"", "é"], "title": "T", "description": "d"}"#);
    assert_eq!(strs(&r), ["a", "b\"", "é"]);
    assert_eq!(r.template.render, Render::JsonString);
    let r = rec(Shape::JsonSchema, r#"{"const": "x", "$schema": "https://json-schema.org/draft/2020-12/schema"}"#);
    assert_eq!(strs(&r), ["x"]);
    let r = rec(Shape::JsonSchema, r#"{"anyOf": [{"const": "a"}, {"enum": [1, 2.5, true, null, "q\n"]}]}"#);
    assert_eq!(strs(&r), ["\"a\"", "1", "2.5", "true", "null", "\"q\\n\""]);
    assert_eq!(r.template.render, Render::JsonText);
    let r = rec(Shape::JsonSchema, r#"{"oneOf": [{"type": "string", "const": "a"}, {"oneOf": [{"const": "b"}]}]}"#);
    assert_eq!(strs(&r), ["a", "b"]);
    for (s, why) in [
        (r#"{"type": "string", "minLength": 2}"#, "minLength"),
        (r#"{"type": "string", "enum": ["a"], "pattern": "a"}"#, "pattern"),
        (r#"{"type": "string"}"#, "does not list"),
        (r#"{"type": "integer", "enum": ["a"]}"#, "not of type"),
        (r#"{"enum": [{"a": 1}]}"#, "array or object"),
        (r#"{"enum": [1e300]}"#, "exponent"),
        (r#"{"enum": [1.0]}"#, "integral float"),
        (r#"{"enum": [0.1]}"#, "17-digit"),
        (r#"{"enum": [18446744073709551615]}"#, "64-bit"),
        (r#"{"enum": ["a\u007f"]}"#, "U+007F"),
        (r#"{"oneOf": [{"const": 1}, {"const": 1}]}"#, "two branches"),
        (r#"{"oneOf": [{"enum": ["a", "b"]}, {"const": "a"}]}"#, "two branches"),
        (r#"{"enum": ["a"], "not": {"const": "a"}}"#, "`not`"),
        (r#"{"enum": ["a"], "minLength": 2}"#, "minLength"),
        (r#"{"enum": [["a"]], "minItems": 2}"#, "minItems"),
        (r#"{"const": "a", "required": ["x"]}"#, "required"),
        (r#"{"const": "a", "properties": {}}"#, "properties"),
        (r#"{"enum": ["a"], "const": "a"}"#, "combines"),
        (r#"{"anyOf": [{"const": "a"}, {"type": "string"}]}"#, "does not list"),
        ("true", "boolean schema"),
        (r##"{"$ref": "#/$defs/x", "$defs": {}}"##, "$"),
    ] {
        let reason = not_set(Shape::JsonSchema, s);
        assert!(reason.contains(why), "{s}: {reason}");
    }
    assert_eq!(err(Shape::JsonSchema, br#"{"enum": []}"#).kind(), ErrorKind::EmptySet);
    assert_eq!(strs(&rec(Shape::JsonSchema, r#"{"enum": ["a", "a"]}"#)), ["a"]);
    assert_eq!(strs(&rec(Shape::JsonSchema, r#"{"anyOf": [{"enum": ["a", "b"]}, {"const": "a"}]}"#)), ["a", "b"]);
    assert_eq!(strs(&rec(Shape::JsonSchema, r#"{"enum": [1, "1", 1, 2.5, 2.5]}"#)), ["1", "\"1\"", "2.5"]);
    assert!(err(Shape::JsonSchema, br#"{"enum": 3}"#).message().contains("must be an array"));
    assert!(err(Shape::JsonSchema, b"{\"enum\": [").message().contains("not valid JSON"));
    assert!(err(Shape::JsonSchema, b"[1]").message().contains("must be an object"));
}

#[test]
fn tools() {
    let text = r#"[{"type": "function", "function": {"name": "get_weather", "description": "w",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "ping"}},
        {"type": "function", "name": "flat", "parameters": {"b": 1, "a": 2}}]"#;
    let r = rec(Shape::Tools, text);
    assert_eq!(strs(&r), ["get_weather", "ping", "flat"]);
    let p = r.payloads.as_ref().unwrap();
    assert_eq!(p[0], r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#);
    assert_eq!(p[1], schema::EMPTY_PARAMETERS);
    assert_eq!(p[2], r#"{"b": 1, "a": 2}"#, "the payload keeps the request's text and key order");
    assert_eq!(r.template, tool_call_template());
    assert_eq!(r.template.segment(b"ping").unwrap(), b"{\"name\": \"ping\", \"arguments\": ");
    for (t, why) in [
        (r#"[{"type": "function", "function": {"parameters": {}}}]"#, "tool 0 has no name"),
        (r#"[{"function": {"name": "a"}}, {"function": {"name": 3}}]"#, "tool 1: `name` is not a string"),
        (r#"[{"function": {"name": "a"}}, {"function": {"name": "a"}}]"#, "tools 0 and 1 have the same name"),
        (r#"[{"function": {"name": "a", "parameters": [1]}}]"#, "tool 0 (`a`): `parameters` must be a JSON object"),
        (r#"[3]"#, "tool 0 is not a JSON object"),
        (r#"{}"#, "not a JSON array"),
    ] {
        let e = err(Shape::Tools, t.as_bytes());
        assert!(e.message().contains(why), "{t}: {}", e.message());
    }
    assert_eq!(err(Shape::Tools, b"[]").kind(), ErrorKind::EmptySet);
    assert!(not_set(Shape::Tools, r#"[{"type": "custom", "name": "a"}]"#).contains("not a function"));
}

#[test]
fn limits_are_errors_naming_them() {
    let small =
        Limits { max_text_bytes: 1000, max_members: 3, max_member_bytes: 1 << 20, max_depth: 4, ..Limits::default() };
    let e = recognize_with(Shape::Choices, &[b' '; 1001], &small).unwrap_err();
    assert!(e.kind() == ErrorKind::LimitExceeded && e.message().contains("max_text_bytes"));
    let e = recognize_with(Shape::Choices, br#"["a","b","c","d"]"#, &small).unwrap_err();
    assert!(e.message().contains("max_members"), "{}", e.message());
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(10), ")".repeat(10));
    let e = recognize_with(Shape::Grammar, deep.as_bytes(), &small).unwrap_err();
    assert!(e.message().contains("max_depth"), "{}", e.message());
    let chain: String = (0..10).map(|i| format!("r{i} ::= r{}\n", i + 1)).collect::<String>() + "r10 ::= \"a\"\n";
    let e = recognize_with(Shape::Grammar, format!("root ::= r0\n{chain}").as_bytes(), &small).unwrap_err();
    assert!(e.message().contains("max_depth"), "{}", e.message());
    let e = recognize_with(Shape::Grammar, br#"root ::= ("a"|"b") ("a"|"b")"#, &small).unwrap_err();
    assert!(e.message().contains("max_members"), "{}", e.message());
    let nested = format!("{}{{\"const\": \"a\"}}{}", "{\"anyOf\": [".repeat(10), "]}".repeat(10));
    let e = recognize_with(Shape::JsonSchema, nested.as_bytes(), &small).unwrap_err();
    assert!(e.message().contains("max_depth"), "{}", e.message());
    // Deep input within the default limits does not overflow the stack.
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(recognize(Shape::Grammar, deep.as_bytes()).unwrap_err().kind(), ErrorKind::LimitExceeded);
    let deep = "[".repeat(100_000);
    assert!(recognize(Shape::JsonSchema, deep.as_bytes()).is_err());
}

/// Routing (issue 36, defect 11): over a bound, a request the engine serves itself is "not a set" (the reason names
/// the bound) and keeps the engine's path; the same texts within the bounds are sets, and malformed ones are still
/// errors.
#[test]
fn over_the_bounds_routing_keeps_the_engines_path() {
    let routing = Limits { max_members: 1000, over_bounds_not_a_set: true, ..Limits::default() };
    // Seven digits: 10,000,000 members (llama.cpp's own grammar serves it).
    let digits = "root ::= d d d d d d d \"\"\nd ::= \"0\" | \"1\" | \"2\" | \"3\" | \"4\" | \"5\" | \"6\" | \"7\" | \"8\" | \"9\"";
    let over: Vec<(Shape, String, &str)> = vec![
        (Shape::Grammar, digits.to_string(), "max_members"),
        (
            Shape::Choices,
            serde_json::to_string(&(0..1001).map(|i| format!("c{i}")).collect::<Vec<_>>()).unwrap(),
            "max_members",
        ),
        (
            Shape::JsonSchema,
            format!("{{\"enum\": [{}]}}", (0..1001).map(|i| i.to_string()).collect::<Vec<_>>().join(",")),
            "max_members",
        ),
        (Shape::Regex, (0..1001).map(|i| format!("m{i}")).collect::<Vec<_>>().join("|"), "max_members"),
        (
            Shape::JsonSchema,
            format!("{}{{\"const\": 1}}{}", "{\"anyOf\": [".repeat(100), "]}".repeat(100)),
            "max_depth",
        ),
        (Shape::Choices, " ".repeat((8 << 20) + 1), "max_text_bytes"),
    ];
    for (shape, text, bound) in &over {
        match recognize_with(*shape, text.as_bytes(), &routing).unwrap() {
            Recognition::NotASet(reason) => {
                assert!(reason.contains(bound) && reason.contains("the engine serves it"), "{reason}")
            }
            Recognition::Set(_) => panic!("{shape:?} over the bounds was served as a set"),
        }
        // Without the routing flag the same text is the bound's error (libtrie's own fields).
        let strict = Limits { over_bounds_not_a_set: false, ..routing };
        let e = recognize_with(*shape, text.as_bytes(), &strict).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{}", e.message());
    }
    // Within the bounds: a set, as before; malformed: an error either way.
    let three = r#"root ::= d d d ""
d ::= "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9""#;
    assert!(
        matches!(recognize_with(Shape::Grammar, three.as_bytes(), &routing).unwrap(), Recognition::Set(s) if s.members.len() == 1000)
    );
    assert!(recognize_with(Shape::Choices, br#"["a", "a"]"#, &routing).is_err());
}

#[test]
fn json_view_keeps_the_bytes() {
    let (m, r) = json_view(vec![b"\"a\"".to_vec(), b"\"\\u00e9\"".to_vec()]);
    assert_eq!(r, Render::JsonText, "an ensure_ascii=True literal is kept as JSON text");
    assert_eq!(m[1], b"\"\\u00e9\"");
    let (_, r) = json_view(vec![b"\"a\"".to_vec(), b"a".to_vec()]);
    assert_eq!(r, Render::Raw);
    let (m, r) = json_view(vec![b"\"a\\\"\"".to_vec()]);
    assert_eq!((m, r), (vec![b"a\"".to_vec()], Render::JsonString));
}

#[test]
fn canonical_json_strings_match_the_renderer() {
    let mut rng = 0x9e3779b97f4a7c15u64;
    let alphabet: Vec<char> = "ab\"\\/\n\r\t\u{0}\u{1}\u{8}\u{c}\u{1f}\u{7f}é😀\u{2028} ".chars().collect();
    for _ in 0..2000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let s: String = (0..(rng % 9)).map(|i| alphabet[((rng >> (i * 5)) % alphabet.len() as u64) as usize]).collect();
        let mut lit = Vec::new();
        crate::template::json_string(&s, &mut lit);
        assert!(canonical_json_string(&lit), "{s:?}");
        unescape_in_place(&mut lit);
        assert_eq!(lit, s.as_bytes());
        lit.clear();
        crate::template::json_string(&s, &mut lit);
        assert_eq!(serde_json::to_string(&s).unwrap().as_bytes(), lit.as_slice());
    }
    for other in [
        &br#""\u00E9""#[..],
        br#""\/""#,
        br#""\u0041""#,
        br#""\u000a""#,
        br#""\u001F""#,
        b"\"\x01\"",
        br#""a"#,
        br#""""""#,
    ] {
        assert!(!canonical_json_string(other), "{:?}", String::from_utf8_lossy(other));
    }
}

/// vLLM's `tool_choice="required"` schema for `tools` (name, parameters), as `json.dumps` writes it.
fn vllm_schema(tools: &[(&str, &str)], defs: Option<&str>) -> String {
    let alts: Vec<String> = tools
        .iter()
        .map(|(n, p)| {
            format!(
                r#"{{"properties": {{"name": {{"type": "string", "enum": ["{n}"]}}, "parameters": {p}}}, "required": ["name", "parameters"]}}"#
            )
        })
        .collect();
    let defs = defs.map_or(String::new(), |d| format!(r#", "$defs": {d}"#));
    format!(
        r#"{{"type": "array", "minItems": 1, "items": {{"type": "object", "anyOf": [{}]}}{defs}}}"#,
        alts.join(", ")
    )
}

#[test]
fn vllm_tools() {
    let p = r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#;
    let empty = r#"{"type": "object", "properties": {}}"#;
    let r = rec(Shape::VllmTools, &vllm_schema(&[("get_weather", p), ("ping", empty)], None));
    assert_eq!(strs(&r), ["get_weather", "ping"]);
    assert_eq!(r.payloads.as_ref().unwrap(), &[p.to_string(), empty.to_string()]);
    assert_eq!(r.template.segment(b"ping").unwrap(), b"[{\"name\": \"ping\", \"parameters\": ");
    assert_eq!(r.template.end, crate::template::End::Open);
    // $defs travel with each payload.
    let pd = r##"{"type": "object", "properties": {"u": {"$ref": "#/$defs/U"}}}"##;
    let r = rec(Shape::VllmTools, &vllm_schema(&[("a", pd)], Some(r#"{"U": {"enum": ["c", "f"]}}"#)));
    let payload: serde_json::Value = serde_json::from_str(&r.payloads.unwrap()[0]).unwrap();
    assert_eq!(payload["$defs"]["U"]["enum"][0], "c");
    assert_eq!(payload["properties"]["u"]["$ref"], "#/$defs/U");
    // Look-alikes are not sets.
    let good = vllm_schema(&[("a", p)], None);
    for (bad, why) in [
        (good.replace(r#""minItems": 1"#, r#""minItems": 2"#), "minItems"),
        (good.replace(r#""minItems": 1"#, r#""minItems": 1.0"#), "minItems"),
        (good.replace(r#""minItems": 1,"#, r#""minItems": 1, "maxItems": 0,"#), "keys"),
        (good.replace(r#""minItems": 1,"#, r#""minItems": 1, "not": {},"#), "keys"),
        (good.replace(r#""minItems": 1,"#, r#""minItems": 1, "minItems": 1,"#), "twice in one object"),
        (good.replace(r#"["name", "parameters"]}"#, r#"["name", "parameters", "x"]}"#), "required"),
        (good.replace(r#"{"type": "string", "enum": ["a"]}"#, r#"{"type": "integer", "enum": [1]}"#), "name"),
        (good.replace(r#"{"type": "string", "enum": ["a"]}"#, r#"{"type": "string", "enum": ["a", "b"]}"#), "name"),
        (good.replace(r#""type": "object", "anyOf""#, r#""type": "object", "minProperties": 3, "anyOf""#), "items"),
        (vllm_schema(&[("a", "{}")], None), "parameters"),
        (vllm_schema(&[("a", r#"{"type": "string"}"#), ("", p)], None), "empty name"),
        (vllm_schema(&[("a", r##"{"$ref": "#"}"##)], None), "reference"),
        (vllm_schema(&[("a", r##"{"$ref": "#/$defs/X"}"##)], None), "reference"),
        (vllm_schema(&[("a", r#"{"$defs": {"X": {}}, "type": "object"}"#)], None), "$defs"),
        (r#"[{"type": "function", "function": {"name": "a"}}]"#.to_string(), "top"),
    ] {
        let reason = not_set(Shape::VllmTools, &bad);
        assert!(reason.contains(why), "{bad}: {reason}");
    }
    // Two tools of one name: vLLM writes the schema and XGrammar serves it, so the engine keeps it.
    assert!(not_set(Shape::VllmTools, &vllm_schema(&[("a", p), ("a", empty)], None)).contains("same name"));
    // A key written twice anywhere (here in a tool's parameters) is not a set: engines keep different values.
    let twice = r#"{"type": "object", "properties": {}, "type": "object"}"#;
    assert!(not_set(Shape::VllmTools, &vllm_schema(&[("a", twice)], None)).contains("twice in one object"));
}

#[test]
fn expansion_bombs_are_refused_before_they_are_built() {
    let digits = "d ::= \"0\" | \"1\" | \"2\" | \"3\" | \"4\" | \"5\" | \"6\" | \"7\" | \"8\" | \"9\"";
    // Issue 28: 90 bytes, 10,000,000 members (1.3 GB before the fix).
    let bomb = format!("root ::= d d d d d d d \"\"\n{digits}");
    let e = recognize(Shape::Grammar, bomb.as_bytes()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert!(e.message().contains("max_members = 10000"), "{}", e.message());
    // 4 members of 400,000 bytes: few members, too many bytes.
    let big = format!("root ::= w w\nw ::= \"{0}\" | \"{0}b\"", "a".repeat(400_000));
    let e = recognize(Shape::Grammar, big.as_bytes()).unwrap_err();
    assert!(e.message().contains("max_member_bytes"), "{}", e.message());
    // A 4 KB variant: a chain of rules, each the product of the last.
    let mut chain = String::from("root ::= r0 r0\nr0 ::= d d d d\n");
    for i in 1..200 {
        chain.push_str(&format!("r{i} ::= r{} r{}\n", i - 1, i - 1));
    }
    chain.push_str(digits);
    let e = recognize(Shape::Grammar, chain.as_bytes()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    // Within the limits, the same shapes are sets.
    let r = rec(Shape::Grammar, &format!("root ::= d d d d\n{digits}"));
    assert_eq!(r.members.len(), 10_000);
    // Memoized copies are charged: many alternatives naming one big rule.
    let copies = format!("root ::= {}\nx ::= d d d\n{digits}", vec!["x \"\""; 200].join(" | "));
    assert_eq!(recognize(Shape::Grammar, copies.as_bytes()).unwrap_err().kind(), ErrorKind::LimitExceeded);
}

#[test]
fn json_depth_is_checked_on_the_raw_text() {
    assert!(json_check_depth(b"[[[]]]", 3).is_ok());
    let e = json_check_depth(b"[[[[]]]]", 3).unwrap_err();
    assert!(e.kind() == ErrorKind::LimitExceeded && e.message().contains("max_depth = 3"), "{}", e.message());
    assert!(json_check_depth(br#"["[[[[\"[[[[", {"a": "{{{{"}]"#, 2).is_ok());
    let deep = "[".repeat(50_000) + &"]".repeat(50_000);
    for shape in [Shape::Choices, Shape::JsonSchema, Shape::Tools, Shape::VllmTools] {
        let e = recognize(shape, deep.as_bytes()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded, "{shape:?}");
    }
    let e = recognize(Shape::Choices, format!("[{}]", vec!["\"a\""; 10_001].join(",")).as_bytes()).unwrap_err();
    assert!(e.message().contains("max_members"), "{}", e.message());
}

#[test]
fn differential_findings_are_not_sets() {
    // Found by tests/differential: Python's `re` reads `\x41` then `B`, XGrammar's regex one code point U+041B.
    assert!(not_set(Shape::Regex, r"\x41B|c").contains("third hex digit"));
    // llama.cpp's matcher works on C strings: U+0000 is never matched there.
    for g in [r#"root ::= "\x00""#, r#"root ::= "a" | "\u0000""#, r#"root ::= "\U00000000""#] {
        assert!(not_set(Shape::Grammar, g).contains("U+0000"), "{g}");
    }
}

/// A regex holding U+0000 (issue 36, defect 10): XGrammar refuses a raw NUL ("The regex must not contain null
/// characters") and reads an escaped one as the empty string (`^(?:a|b\x00)$` matches "a" and "b"), so neither is
/// a set: the engine keeps the request and its own answer.
#[test]
fn a_regex_with_nul_is_not_a_set() {
    for r in ["a\u{0}b", "^(?:a|b\u{0})$", r"^(?:a|b\x00)$", r"a\u0000", r"a|\x00"] {
        match recognize(Shape::Regex, r.as_bytes()).unwrap() {
            Recognition::NotASet(reason) => assert!(reason.contains("NUL") || reason.contains("U+0000"), "{reason}"),
            Recognition::Set(s) => panic!("{r:?} was served as {:?}", s.members),
        }
    }
    // Other escapes of control characters are still sets, read exactly.
    match recognize(Shape::Regex, br"^(?:a|b\x01)$").unwrap() {
        Recognition::Set(s) => assert_eq!(s.members, vec![b"a".to_vec(), b"b\x01".to_vec()]),
        Recognition::NotASet(r) => panic!("{r}"),
    }
}
