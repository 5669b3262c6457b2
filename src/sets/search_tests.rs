use super::*;

fn index(tools: &[(&str, &str)]) -> ToolSearch {
    ToolSearch::new(tools.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(), SearchLimits::default())
        .unwrap()
}

#[test]
fn tokens_cut_names_and_text() {
    assert_eq!(tokens("get_weather"), ["get", "weather"]);
    assert_eq!(tokens("files.readFile-v2"), ["files", "read", "file", "v2"]);
    assert_eq!(tokens("HTTPServer getURL2Json"), ["http", "server", "get", "url2", "json"]);
    assert_eq!(tokens("Weather, in  Paris!"), ["weather", "in", "paris"]);
    assert_eq!(tokens("Ünïcode ÉTÉ"), ["ünïcode", "été"]);
    assert!(tokens("  ,;_-. ").is_empty());
    // Scripts without spaces: overlapping pairs, a lone character itself, Latin runs beside them as words.
    assert_eq!(tokens("天气预报"), ["天气", "气预", "预报"]);
    assert_eq!(tokens("查 getWeather天气"), ["查", "get", "weather", "天气"]);
    assert_eq!(tokens("東京の天気"), ["東京", "京の", "の天", "天気"]);
    assert_eq!(tokens("날씨 조회"), ["날씨", "조회"]);
    assert_eq!(tokens("พยากรณ์อากาศ").len(), "พยากรณ์อากาศ".chars().count() - 1);
    // Combining marks stay inside their word (Devanagari vowel signs, a decomposed accent); a danda separates.
    assert_eq!(tokens("मौसम की जानकारी। शहर"), ["मौसम", "की", "जानकारी", "शहर"]);
    assert_eq!(tokens("cafe\u{301} menu"), ["cafe\u{301}", "menu"]);
}

#[test]
fn bm25_scores_are_the_standard_formula() {
    // Three documents: "n1 a b" (3 tokens), "n2 a a c" (4), "n3 d" (2); average length 3.
    let s = index(&[("n1", "a b"), ("n2", "a a c"), ("n3", "d")]);
    let idf = |df: f64| (1.0 + (3.0 - df + 0.5) / (df + 0.5)).ln();
    let term = |tf: f64, dl: f64| tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / 3.0));
    let hits = s.search(Mode::Bm25, "a", 10).unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].tool, 1, "tf 2 in a 4-token document beats tf 1 in a 3-token one");
    assert!((hits[0].score - idf(2.0) * term(2.0, 4.0)).abs() < 1e-12);
    assert!((hits[1].score - idf(2.0) * term(1.0, 3.0)).abs() < 1e-12);
    let hits = s.search(Mode::Bm25, "B c d", 10).unwrap();
    let mut want = vec![(0, idf(1.0) * term(1.0, 3.0)), (1, idf(1.0) * term(1.0, 4.0)), (2, idf(1.0) * term(1.0, 2.0))];
    want.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(hits.len(), 3);
    for (h, (tool, score)) in hits.iter().zip(want) {
        assert_eq!(h.tool, tool);
        assert!((h.score - score).abs() < 1e-12);
    }
    // A repeated query word counts once; no match: no result.
    assert_eq!(s.search(Mode::Bm25, "a a a", 10).unwrap(), s.search(Mode::Bm25, "a", 10).unwrap());
    assert!(s.search(Mode::Bm25, "zebra", 10).unwrap().is_empty());
}

#[test]
fn ties_are_in_list_order_and_k_cuts() {
    let tools: Vec<(String, String)> = (0..50).map(|i| (format!("tool_{i}"), "same words here".into())).collect();
    let s = ToolSearch::new(tools, SearchLimits::default()).unwrap();
    let hits = s.search(Mode::Bm25, "words", 7).unwrap();
    assert_eq!(hits.iter().map(|h| h.tool).collect::<Vec<_>>(), (0..7).collect::<Vec<_>>());
    let all = s.search(Mode::Bm25, "tool 31 words", 50).unwrap();
    assert_eq!(all[0].tool, 31, "the name's number is a word of its own");
    assert_eq!(all.len(), 50);
    assert_eq!(&all[1..4].iter().map(|h| h.tool).collect::<Vec<_>>(), &[0, 1, 2]);
}

#[test]
fn the_right_tool_comes_first() {
    let list = br#"[
      {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}}}},
      {"type": "function", "function": {"name": "sendEmail", "description": "Send an email message to someone"}},
      {"name": "convert_currency", "description": "Convert an amount between currencies",
        "input_schema": {"type": "object", "properties": {"amount": {"type": "number"}}}},
      {"name": "stock.price", "description": "The latest price of a stock ticker"}
    ]"#;
    let s = ToolSearch::from_json(list, SearchLimits::default()).unwrap();
    assert_eq!(s.names(), ["get_weather", "sendEmail", "convert_currency", "stock.price"]);
    let top = |q: &str| s.search(Mode::Bm25, q, 1).unwrap()[0].tool;
    assert_eq!(top("what's the weather in Paris"), 0);
    assert_eq!(top("email my boss"), 1);
    assert_eq!(top("how many euros is 5 dollars? convert the amount"), 2);
    assert_eq!(top("AAPL stock price"), 3);
    assert_eq!(top("city"), 0, "a parameter's name and description are searched");
    let r = s.search(Mode::Regex, "(?i)^send|price", 10).unwrap();
    assert_eq!(r, vec![Hit { tool: 1, score: 2.0 }, Hit { tool: 3, score: 2.0 }]);
    let r = s.search(Mode::Regex, "currenc", 10).unwrap();
    assert_eq!(r, vec![Hit { tool: 2, score: 2.0 }], "the name first");
    let r = s.search(Mode::Regex, "(?i)CITY", 10).unwrap();
    assert_eq!(r, vec![Hit { tool: 0, score: 1.0 }]);
    assert!(s.search(Mode::Regex, "CITY", 10).unwrap().is_empty(), "case-sensitive unless (?i)");
}

#[test]
fn bad_input_names_the_field() {
    let s = index(&[("a", "b")]);
    let err = |r: Result<Vec<Hit>>| r.unwrap_err();
    let e = err(s.search(Mode::Bm25, "a", 0));
    assert!(e.message().starts_with("k: 0") && e.kind() == ErrorKind::InvalidArgument, "{e}");
    assert!(err(s.search(Mode::Bm25, "a", 1001)).message().starts_with("k: 1001"));
    assert!(err(s.search(Mode::Bm25, " ,. ", 1)).message().starts_with("query: no word"));
    let e = err(s.search(Mode::Bm25, &"x".repeat(5000), 1));
    assert!(e.kind() == ErrorKind::LimitExceeded && e.message().starts_with("query (bytes): 5000"), "{e}");
    let many: String = (0..65).map(|i| format!("w{i} ")).collect();
    assert!(err(s.search(Mode::Bm25, &many, 1)).message().starts_with("query (distinct words): 65"));
    let e = err(s.search(Mode::Regex, "a(b", 1));
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message().starts_with("pattern: not a regular"), "{e}");
    assert!(err(s.search(Mode::Regex, "", 1)).message().starts_with("pattern: empty"));
    assert!(err(s.search(Mode::Regex, &"a".repeat(1025), 1)).message().starts_with("pattern (bytes): 1025"));
    let e = err(s.search(Mode::Regex, r"\w{1000}\w{1000}", 1));
    assert!(e.kind() == ErrorKind::LimitExceeded && e.message().starts_with("pattern: compiles to more"), "{e}");
    let bad: &[(&[u8], &str)] = &[
        (b"{}", "tools: not a JSON array"),
        (b"[1]", "tools[0]: not a JSON object"),
        (br#"[{"function": 3}]"#, "tools[0].function: not a JSON object"),
        (br#"[{"name": ""}]"#, "tools[0]: no name"),
        (br#"[{"name": "a"}, {"name": "a"}]"#, "tools[0] and tools[1] have the same name `a`"),
        (br#"[{"type": "tool_search"}]"#, "tools[0].type: \"tool_search\" is not a function"),
    ];
    for (list, want) in bad {
        let e = ToolSearch::from_json(list, SearchLimits::default()).unwrap_err();
        assert!(e.message().starts_with(want), "{e}");
    }
    let small = SearchLimits { max_tools: 1, ..SearchLimits::default() };
    let e = ToolSearch::from_json(br#"[{"name": "a"}, {"name": "b"}]"#, small).unwrap_err();
    assert!(e.kind() == ErrorKind::LimitExceeded && e.message().starts_with("tools: 2, over the bound of 1"), "{e}");
    let small = SearchLimits { max_list_bytes: 4, ..SearchLimits::default() };
    assert!(ToolSearch::from_json(b"[   ]", small).unwrap_err().message().starts_with("tools (bytes of the list)"));
}

#[test]
fn long_text_is_cut_and_an_empty_catalog_finds_nothing() {
    let small = SearchLimits { max_tool_text_bytes: 10, ..SearchLimits::default() };
    let list = format!(r#"[{{"name": "a", "description": "héllo wörld {} needle"}}]"#, "x ".repeat(100));
    let s = ToolSearch::from_json(list.as_bytes(), small).unwrap();
    assert!(s.search(Mode::Bm25, "needle", 5).unwrap().is_empty());
    assert_eq!(s.search(Mode::Bm25, "hello héllo", 5).unwrap().len(), 1);
    let empty = ToolSearch::from_json(b"[]", SearchLimits::default()).unwrap();
    assert!(empty.search(Mode::Bm25, "a", 5).unwrap().is_empty());
    assert!(empty.search(Mode::Regex, "a", 5).unwrap().is_empty());
}

#[test]
fn the_index_is_shared_across_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<ToolSearch>();
}

#[test]
fn words_inside_unspaced_text_are_found() {
    // Descriptions in Chinese and Japanese, queries with other words around the ones that match.
    let s = index(&[
        ("send_mail", "发送电子邮件给联系人"),
        ("get_weather", "获取城市的天气预报"),
        ("book_hotel", "ホテルを予約する"),
        ("exchange", "為替レートを調べる"),
    ]);
    let top = |q: &str| s.search(Mode::Bm25, q, 1).unwrap()[0].tool;
    assert_eq!(top("查询北京明天的天气"), 1);
    assert_eq!(top("给老板发邮件"), 0);
    assert_eq!(top("京都のホテルを予約したい"), 2);
    assert_eq!(top("今日の為替は"), 3);
    // No pair in common: nothing found, not a wrong tool.
    assert!(s.search(Mode::Bm25, "音乐", 4).unwrap().is_empty());
}
