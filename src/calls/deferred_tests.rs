use super::*;

fn tools() -> Vec<Value> {
    serde_json::from_str(
        r#"[{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city"}},
            {"type": "function", "defer_loading": true, "function": {"name": "stock_price",
             "description": "The latest price of a stock ticker"}},
            {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
             "defer_loading": true}}]"#,
    )
    .unwrap()
}

fn names(p: &Value) -> Vec<&str> {
    p["tools"].as_array().unwrap().iter().map(name_of).collect()
}

fn user() -> Vec<Value> {
    vec![json!({"role": "user", "content": "What does AAPL cost?"})]
}

#[test]
fn deferred_tools_leave_the_prompt() {
    let p = plan(&tools(), &user(), None).unwrap().unwrap();
    assert_eq!(names(&p), ["get_weather"]);
    assert_eq!(p["messages"], json!(user()));
    assert_eq!((p["loaded"].clone(), p["search"].clone()), (json!([]), Value::Null));
    assert!(plan(&tools()[..1], &user(), None).unwrap().is_none(), "nothing deferred: nothing to do");
}

#[test]
fn references_load_tools_and_become_text() {
    let mut history = user();
    history.push(json!({"role": "tool", "tool_call_id": "c1",
                        "content": [{"type": "tool_reference", "name": "stock_price"}]}));
    history.push(json!({"role": "user", "content": [{"type": "text", "text": "and the time?"},
        {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference",
                                                                        "tool_name": "get_time"}]}]}));
    let p = plan(&tools(), &history, None).unwrap().unwrap();
    assert_eq!(p["loaded"], json!(["stock_price", "get_time"]));
    assert_eq!(names(&p), ["get_weather", "stock_price", "get_time"]);
    assert!(!p["tools"].to_string().contains("defer_loading"));
    assert_eq!(p["messages"][1]["content"], "Tools found and now available: stock_price");
    assert_eq!(p["messages"][2]["content"], "and the time?\nTools found and now available: get_time");
}

#[test]
fn a_search_call_is_answered() {
    let mut ts = tools();
    ts.push(json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}));
    let call = |args: &str| {
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "type": "function",
               "function": {"name": "tool_search_tool_regex", "arguments": args}}]})
    };
    let p = plan(&ts, &user(), None).unwrap().unwrap();
    assert_eq!(names(&p), ["get_weather", "tool_search_tool_regex"]);
    assert_eq!(p["tools"][1]["function"]["parameters"]["required"], json!(["pattern"]));
    assert_eq!(p["search"], json!({"name": "tool_search_tool_regex", "form": "regex"}));
    for tail in [vec![], vec![json!({"role": "tool", "tool_call_id": "s1", "content": ""})]] {
        let mut h = user();
        h.push(call(r#"{"pattern": "^get_"}"#));
        h.extend(tail);
        let p = plan(&ts, &h, None).unwrap().unwrap();
        assert_eq!(p["loaded"], json!(["get_time"]), "deferred tools only");
        assert_eq!(names(&p), ["get_weather", "get_time", "tool_search_tool_regex"]);
        assert_eq!(p["messages"].as_array().unwrap().len(), 3);
        assert_eq!(
            p["messages"][2],
            json!({"role": "tool", "tool_call_id": "s1",
                                            "content": "Tools found and now available: get_time"})
        );
    }
    let mut h = user();
    h.push(call(r#"{"pattern": "a(b"}"#));
    let p = plan(&ts, &h, None).unwrap().unwrap();
    let text = p["messages"][2]["content"].as_str().unwrap();
    assert!(text.starts_with("The search failed: pattern: not a regular expression"), "{text}");
    assert_eq!(search_kind(&json!({"type": "tool_search"})), Some(Mode::Bm25));
    assert_eq!(
        search_kind(&json!({"type": "function", "function": {"name": "tool_search_tool_bm25"}})),
        Some(Mode::Bm25)
    );
    assert_eq!(search_kind(&tools()[0]), None);
}

#[test]
fn bad_requests_name_the_field() {
    for (req, want) in [
        (&b"[]"[..], "request: not a JSON object"),
        (b"{", "request: not a JSON object"),
        (br#"{"tools": 3}"#, "request.tools: not a JSON array"),
        (br#"{"tools": [3]}"#, "request.tools[0]: not a JSON object"),
        (br#"{"messages": {}}"#, "request.messages: not a JSON array"),
    ] {
        let e = plan_json(req, None).unwrap_err();
        assert!(e.message().starts_with(want), "{e}");
    }
    assert_eq!(plan_json(br#"{"tools": [], "model": "m"}"#, None).unwrap(), None);
}
