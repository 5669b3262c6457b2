//! The README's Rust example, whole: compile three tool names against a model's vocabulary, decode one member with
//! a stand-in for the model (it takes the last allowed token), then update the set.
//! `scripts/check-docs.py` checks that the README shows exactly the regions between the `docs:` lines, and
//! `scripts/test-docs.sh` runs this program on a real vocabulary in CI.
//!
//! `cargo run --release --example quickstart -- model.gguf`
use trie::Result;

fn main() -> Result<()> {
    let path = std::env::args().nth(1).expect("usage: quickstart MODEL.gguf");
    let mut text = Vec::new();
    // docs:begin decode
    use std::sync::Arc;
    use trie::{Automaton, CompileOptions, Step, Vocabulary};
    let vocab = Arc::new(Vocabulary::from_gguf(&path)?); // once per tokenizer
    let set = ["calendar.create_event", "calendar.list_events", "weather.get_forecast"];
    let automaton = Automaton::compile(vocab.clone(), &set, &CompileOptions::default())?;
    let (mut state, mut mask) = (automaton.start(), vec![0u32; automaton.mask_words()]); // a u32; ceil(V/32) words
    loop {
        automaton.fill_bitmask(state, &mut mask)?; // XGrammar's layout: bit t % 32 of word t / 32
        let token = *automaton.allowed(state).last().unwrap(); // your sampler; here the last allowed id
        match automaton.advance(state, token)? {
            Step::Next(next) => state = next,
            Step::Finished => break, // end of generation after a whole member: `text` is one of the set
        }
        text.extend_from_slice(vocab.token_bytes(token));
    }
    // docs:end decode
    println!("{}", String::from_utf8_lossy(&text));
    assert!(set.iter().any(|m| m.as_bytes() == text.as_slice()), "not a member");

    // docs:begin update
    let updated =
        automaton.with_changes(&["calendar.delete_event"], &["weather.get_forecast"], &CompileOptions::default())?;
    // the old automaton is untouched: sequences in flight on it finish there
    assert_eq!(updated.n_members(), 3);
    // docs:end update
    println!("updated: {} members", updated.n_members());

    // docs:begin template
    use trie::{End, Render, Template};
    let t =
        Template::bare().prefix("{\"name\": ").suffix(", \"arguments\": ").render(Render::JsonString).end(End::Open);
    let tool_names = ["get_weather", "send_email"];
    let calls = Automaton::compile_template(vocab.clone(), &tool_names, &t, &CompileOptions::default())?;
    // docs:end template
    println!("templated: {} members, open end: {}", calls.n_members(), calls.is_open());
    assert_eq!(calls.n_members(), 2);
    Ok(())
}
