//! The tool-call engine through its C ABI (`trie_calls_*`): a call decoded with C callbacks as the argument matcher
//! (made per call, rolled back, released, the user data freed once), the phases and tools reported, and every
//! pointer, size and field checked with a status and a message naming it.

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use trie::ffi::trie_status::*;
use trie::ffi::*;

fn last_error() -> String {
    unsafe { CStr::from_ptr(trie_last_error()) }.to_str().unwrap().to_string()
}

const EOS: i32 = 258;
const CALL: i32 = 256;
const STRADDLE: i32 = 257;

/// 256 byte tokens, `<tool_call>` (256), `>\n{` (257), `</s>` (258, control, end of generation).
fn vocab() -> *mut trie_vocab {
    let mut texts: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    texts.extend([b"<tool_call>".to_vec(), b">\n{".to_vec(), b"</s>".to_vec()]);
    let ptrs: Vec<*const u8> = texts.iter().map(|t| t.as_ptr()).collect();
    let lens: Vec<usize> = texts.iter().map(|t| t.len()).collect();
    let mut kinds = vec![TRIE_TOKEN_NORMAL; texts.len()];
    kinds[EOS as usize] = TRIE_TOKEN_CONTROL;
    let mut v = null_mut();
    let st = unsafe { trie_vocab_new(ptrs.as_ptr(), lens.as_ptr(), kinds.as_ptr(), texts.len(), &EOS, 1, &mut v) };
    assert_eq!(st, TRIE_OK, "{}", last_error());
    v
}

/// The user data of the callbacks: the arguments of each tool, what happened.
#[derive(Default)]
struct User {
    args: Vec<Vec<u8>>,
    made: Vec<(usize, bool)>,
    prefetched: Vec<usize>,
    released: usize,
    freed: usize,
    refuse: bool,
}

/// A matcher over one text (the tool's arguments then hermes' close), one byte token at a time.
struct M {
    text: Vec<u8>,
    at: Vec<usize>,
}

unsafe fn user<'a>(u: *mut c_void) -> &'a mut User {
    &mut *(u as *mut User)
}

unsafe fn matcher<'a>(m: *mut c_void) -> &'a mut M {
    &mut *(m as *mut M)
}

unsafe extern "C" fn make(u: *mut c_void, tool: usize, last: bool) -> *mut c_void {
    let u = user(u);
    u.made.push((tool, last));
    if u.refuse {
        return null_mut();
    }
    let text = [u.args[tool].as_slice(), b"}\n</tool_call>"].concat();
    Box::into_raw(Box::new(M { text, at: vec![0] })) as *mut c_void
}

unsafe extern "C" fn prefetch(u: *mut c_void, tool: usize, _last: bool) {
    user(u).prefetched.push(tool);
}

unsafe extern "C" fn accept(_u: *mut c_void, m: *mut c_void, token: i32) -> bool {
    let m = matcher(m);
    let at = *m.at.last().unwrap();
    if (0..256).contains(&token) && m.text.get(at) == Some(&(token as u8)) {
        m.at.push(at + 1);
        return true;
    }
    false
}

unsafe extern "C" fn fill(_u: *mut c_void, m: *mut c_void, row: *mut u32, words: usize) -> bool {
    let m = matcher(m);
    let row = std::slice::from_raw_parts_mut(row, words);
    row.fill(0);
    if let Some(&b) = m.text.get(*m.at.last().unwrap()) {
        row[b as usize / 32] |= 1 << (b % 32);
    }
    true
}

unsafe extern "C" fn rollback(_u: *mut c_void, m: *mut c_void, n: usize) {
    let m = matcher(m);
    let keep = m.at.len() - n;
    m.at.truncate(keep);
}

unsafe extern "C" fn completed(_u: *mut c_void, m: *mut c_void) -> i32 {
    let m = matcher(m);
    (*m.at.last().unwrap() == m.text.len()) as i32
}

unsafe extern "C" fn release(u: *mut c_void, m: *mut c_void) {
    drop(Box::from_raw(m as *mut M));
    user(u).released += 1;
}

unsafe extern "C" fn free_user(u: *mut c_void) {
    user(u).freed += 1;
}

fn callbacks(u: &mut User) -> trie_calls_callbacks {
    trie_calls_callbacks {
        struct_size: std::mem::size_of::<trie_calls_callbacks>(),
        user: u as *mut User as *mut c_void,
        make: Some(make),
        prefetch: Some(prefetch),
        accept: Some(accept),
        fill: Some(fill),
        rollback: Some(rollback),
        completed: Some(completed),
        release: Some(release),
        free_user: Some(free_user),
    }
}

fn engine(v: *const trie_vocab, names: &[&str], mode: u32, parallel: bool) -> (trie_status, *mut trie_calls) {
    let ptrs: Vec<*const u8> = names.iter().map(|s| s.as_ptr()).collect();
    let lens: Vec<usize> = names.iter().map(|s| s.len()).collect();
    let mut f = std::mem::MaybeUninit::<trie_calls_format>::uninit();
    assert_eq!(unsafe { trie_calls_format_init(f.as_mut_ptr(), c"hermes".as_ptr()) }, TRIE_OK);
    let f = unsafe { f.assume_init() };
    let mut c = std::mem::MaybeUninit::<trie_calls_config>::uninit();
    assert_eq!(unsafe { trie_calls_config_init(c.as_mut_ptr()) }, TRIE_OK);
    let mut c = unsafe { c.assume_init() };
    c.mode = mode;
    c.parallel = parallel;
    c.stops = &EOS;
    c.n_stops = 1;
    let mut out = 1usize as *mut trie_calls;
    let st = unsafe { trie_calls_new(v, ptrs.as_ptr(), lens.as_ptr(), names.len(), &f, &c, null(), &mut out) };
    (st, out)
}

fn allowed(m: *mut trie_calls_matcher) -> Vec<i32> {
    let mut row = [u32::MAX; 9];
    assert_eq!(unsafe { trie_calls_fill_bitmask(m, row.as_mut_ptr(), 9) }, TRIE_OK, "{}", last_error());
    (0..9 * 32).filter(|&t| row[t as usize / 32] >> (t % 32) & 1 == 1).collect()
}

fn info(m: *mut trie_calls_matcher) -> trie_calls_info {
    let mut i = trie_calls_info::default();
    assert_eq!(unsafe { trie_calls_info_of(m, &mut i) }, TRIE_OK);
    i
}

fn feed(m: *mut trie_calls_matcher, text: &[u8]) {
    for &b in text {
        assert_eq!(unsafe { trie_calls_accept(m, b as i32) }, TRIE_OK, "{:?}: {}", b as char, last_error());
    }
}

#[test]
fn a_call_through_c_callbacks() {
    let v = vocab();
    let (st, calls) = engine(v, &["get_weather", "get_time"], TRIE_CALLS_AUTO, true);
    assert_eq!(st, TRIE_OK, "{}", last_error());
    unsafe { trie_vocab_free(v) };
    let mut u =
        User { args: vec![b"{\"city\": \"Paris\"}".to_vec(), b"{\"tz\": \"UTC\"}".to_vec()], ..User::default() };
    let cb = callbacks(&mut u);
    let mut m = null_mut();
    assert_eq!(unsafe { trie_calls_matcher_new(calls, &cb, &mut m) }, TRIE_OK, "{}", last_error());
    unsafe { trie_calls_free(calls) }; // the sequence keeps the engine alive
    assert_eq!(info(m).phase, TRIE_CALLS_PHASE_FREE);
    feed(m, b"Hi <tool_call");
    assert!(!allowed(m).contains(&STRADDLE), "'>\\n{{' would finish the marker and go on past it");
    assert!(allowed(m).contains(&EOS));
    feed(m, b">\n{\"name\": \"get_t");
    assert_eq!(u.prefetched, vec![1]);
    feed(m, b"ime\", \"arguments\": ");
    let i = info(m);
    assert_eq!((i.phase, i.has_tool, i.tool, u.made.clone()), (TRIE_CALLS_PHASE_ARGS, true, 1, vec![(1, false)]));
    assert_eq!(allowed(m), vec![b'{' as i32], "the matcher's own fill");
    let st = unsafe { trie_calls_accept(m, b'x' as i32) };
    assert_eq!(st, TRIE_ERR_TOKEN_REJECTED);
    assert!(last_error().contains("phase args"), "{}", last_error());
    feed(m, b"{\"tz\": \"UTC\"}}\n</tool_call>");
    let i = info(m);
    assert_eq!((i.phase, i.calls), (TRIE_CALLS_PHASE_FREE, 1));
    // validate: nothing changes; rollback into the arguments rolls the matcher back.
    let more = [b' ' as i32, EOS, CALL];
    let mut n = 9;
    assert_eq!(unsafe { trie_calls_validate(m, more.as_ptr(), more.len(), &mut n) }, TRIE_OK);
    assert_eq!((n, info(m).n_accepted), (2, i.n_accepted), "up to the stop token");
    assert_eq!(unsafe { trie_calls_rollback(m, 3) }, TRIE_OK);
    assert_eq!((info(m).phase, allowed(m)), (TRIE_CALLS_PHASE_ARGS, vec![b'l' as i32]));
    feed(m, b"ll>");
    assert_eq!(unsafe { trie_calls_accept(m, EOS) }, TRIE_OK);
    assert!(unsafe { trie_calls_is_terminated(m) });
    // A matcher that cannot be made rejects the token that completes the name, with the callback's word.
    assert_eq!(unsafe { trie_calls_reset(m) }, TRIE_OK);
    assert_eq!(u.released, 1, "reset releases the matchers");
    u.refuse = true;
    feed(m, b"<tool_call>\n{\"name\": \"get_time\", \"arguments\":");
    assert_eq!(unsafe { trie_calls_accept(m, b' ' as i32) }, TRIE_ERR_TOKEN_REJECTED);
    assert!(last_error().contains("callbacks.make returned NULL for tool 1"), "{}", last_error());
    u.refuse = false;
    feed(m, b" {");
    unsafe { trie_calls_matcher_free(m) };
    assert_eq!((u.released, u.freed), (2, 1), "every matcher released, the user data freed once");
}

#[test]
fn every_pointer_size_and_field_is_checked() {
    let v = vocab();
    let mut f = std::mem::MaybeUninit::<trie_calls_format>::uninit();
    assert_eq!(unsafe { trie_calls_format_init(null_mut(), null()) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_calls_format_init(f.as_mut_ptr(), c"qwen".as_ptr()) }, TRIE_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("hermes"), "{}", last_error());
    let (st, out) = engine(v, &["a", "a"], TRIE_CALLS_AUTO, false);
    assert_eq!((st, out), (TRIE_ERR_INVALID_ARGUMENT, null_mut()));
    assert!(last_error().contains("names[1]"), "{}", last_error());
    assert_eq!(engine(v, &[], TRIE_CALLS_AUTO, false).0, TRIE_ERR_EMPTY_SET);
    assert_eq!(engine(null(), &["a"], TRIE_CALLS_AUTO, false).0, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(engine(v, &["a"], 7, false).0, TRIE_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("config.mode"), "{}", last_error());
    // A named tool: only it, with its index.
    let mut c = std::mem::MaybeUninit::<trie_calls_config>::uninit();
    unsafe { trie_calls_config_init(c.as_mut_ptr()) };
    let mut c = unsafe { c.assume_init() };
    unsafe { trie_calls_format_init(f.as_mut_ptr(), c"hermes".as_ptr()) };
    let mut f = unsafe { f.assume_init() };
    let names = [b"get_a".as_ptr(), b"get_b".as_ptr()];
    let lens = [5usize, 5];
    c.mode = TRIE_CALLS_NAMED;
    c.named_tool = 5;
    let mut out = null_mut();
    let st = unsafe { trie_calls_new(v, names.as_ptr(), lens.as_ptr(), 2, &f, &c, null(), &mut out) };
    assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("named_tool"), "{}", last_error());
    c.struct_size = 0;
    let st = unsafe { trie_calls_new(v, names.as_ptr(), lens.as_ptr(), 2, &f, &c, null(), &mut out) };
    assert!(st == TRIE_ERR_INVALID_ARGUMENT && last_error().contains("config.struct_size"), "{}", last_error());
    c.struct_size = std::mem::size_of::<trie_calls_config>();
    c.named_tool = 1;
    f.render = 9;
    let st = unsafe { trie_calls_new(v, names.as_ptr(), lens.as_ptr(), 2, &f, &c, null(), &mut out) };
    assert!(st == TRIE_ERR_INVALID_ARGUMENT && last_error().contains("format.render"), "{}", last_error());
    f.render = TRIE_RENDER_JSON_STRING;
    f.prefix_len = 3;
    f.prefix = null();
    let st = unsafe { trie_calls_new(v, names.as_ptr(), lens.as_ptr(), 2, &f, &c, null(), &mut out) };
    assert!(st == TRIE_ERR_NULL_ARGUMENT && last_error().contains("format.prefix"), "{}", last_error());
    unsafe { trie_calls_format_init(&mut f, c"hermes".as_ptr()) };
    let st = unsafe { trie_calls_new(v, names.as_ptr(), lens.as_ptr(), 2, &f, &c, null(), &mut out) };
    assert_eq!(st, TRIE_OK, "{}", last_error());
    // The callbacks: each required one named when missing.
    let mut u = User { args: vec![b"{}".to_vec(); 2], ..User::default() };
    let mut cb = callbacks(&mut u);
    cb.fill = None;
    let mut m = null_mut();
    assert_eq!(unsafe { trie_calls_matcher_new(out, &cb, &mut m) }, TRIE_ERR_NULL_ARGUMENT);
    assert!(last_error().contains("callbacks.fill"), "{}", last_error());
    assert_eq!(u.freed, 0, "a refused table's user data stays the caller's");
    let cb = callbacks(&mut u);
    assert_eq!(unsafe { trie_calls_matcher_new(out, &cb, &mut m) }, TRIE_OK);
    assert_eq!(allowed(m), vec![b'<' as i32, CALL], "required with a marker: its token or its text");
    feed(m, b"<tool_call>\n{\"name\": \"get_");
    assert_eq!(allowed(m), vec![b'b' as i32], "the named tool only");
    let mut short = [0u32; 2];
    assert_eq!(unsafe { trie_calls_fill_bitmask(m, short.as_mut_ptr(), 2) }, TRIE_ERR_BUFFER_TOO_SMALL);
    assert_eq!(unsafe { trie_calls_fill_bitmask(m, null_mut(), 9) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_calls_accept(m, -1) }, TRIE_ERR_TOKEN_REJECTED);
    assert_eq!(unsafe { trie_calls_accept(null_mut(), 1) }, TRIE_ERR_NULL_ARGUMENT);
    let mut n = 0;
    assert_eq!(unsafe { trie_calls_validate(m, null(), 3, &mut n) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_calls_validate(m, null(), 0, null_mut()) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_calls_info_of(m, null_mut()) }, TRIE_ERR_NULL_ARGUMENT);
    assert!(!unsafe { trie_calls_is_terminated(null()) });
    feed(m, b"b\", \"arguments\": {}}\n</tool_call>");
    assert_eq!((info(m).tool, info(m).phase, u.made.clone()), (1, TRIE_CALLS_PHASE_END, vec![(1, true)]));
    unsafe { trie_calls_matcher_free(m) };
    unsafe { trie_calls_free(out) };
    // Automata built by the caller: open templated ones only.
    let a = {
        let set = [b"x".as_ptr()];
        let mut a = null_mut();
        assert_eq!(unsafe { trie_compile(v, set.as_ptr(), [1usize].as_ptr(), 1, null(), &mut a) }, TRIE_OK);
        a
    };
    let first = trie_calls_names { automaton: a, tools: null(), n_tools: 0 };
    c.mode = TRIE_CALLS_AUTO;
    let st = unsafe { trie_calls_from_automata(&first, null(), null(), &f, &c, &mut out) };
    assert!(st == TRIE_ERR_INVALID_ARGUMENT && last_error().contains("end open"), "{}", last_error());
    let st = unsafe { trie_calls_from_automata(null(), null(), null(), &f, &c, &mut out) };
    assert!(st == TRIE_ERR_NULL_ARGUMENT && last_error().contains("first"), "{}", last_error());
    unsafe { trie_automaton_free(a) };
    // The straddlers of a marker.
    let mut ids = [0i32; 4];
    let st = unsafe { trie_calls_straddlers(v, b"<tool_call>".as_ptr(), 11, 10, ids.as_mut_ptr(), 4, &mut n) };
    assert_eq!((st, n, ids[0]), (TRIE_OK, 1, STRADDLE));
    let st = unsafe { trie_calls_straddlers(v, b"<tool_call>".as_ptr(), 11, 11, ids.as_mut_ptr(), 4, &mut n) };
    assert!(st == TRIE_ERR_INVALID_ARGUMENT && last_error().contains("pending"), "{}", last_error());
    let st = unsafe { trie_calls_straddlers(v, b"<tool_call>".as_ptr(), 11, 10, ids.as_mut_ptr(), 0, &mut n) };
    assert_eq!((st, n), (TRIE_ERR_BUFFER_TOO_SMALL, 1));
    unsafe { trie_vocab_free(v) };
}

fn draft(m: *const trie_calls_matcher, capacity: usize) -> Vec<u8> {
    let mut out = vec![-1i32; capacity];
    let mut n = 99;
    assert_eq!(unsafe { trie_calls_draft(m, out.as_mut_ptr(), capacity, &mut n) }, TRIE_OK, "{}", last_error());
    let text = |t: i32| match t {
        CALL => b"<tool_call>".to_vec(),
        STRADDLE => b">\n{".to_vec(),
        _ => vec![u8::try_from(t).expect("a byte token or one of the two above")],
    };
    out[..n].iter().flat_map(|&t| text(t)).collect()
}

#[test]
fn the_forced_run_and_the_current_argument_matcher() {
    let v = vocab();
    let (st, calls) = engine(v, &["get_weather", "get_time"], TRIE_CALLS_REQUIRED, false);
    assert_eq!(st, TRIE_OK, "{}", last_error());
    unsafe { trie_vocab_free(v) };
    let mut u =
        User { args: vec![b"{\"city\": \"Paris\"}".to_vec(), b"{\"tz\": \"UTC\"}".to_vec()], ..User::default() };
    let cb = callbacks(&mut u);
    let mut m = null_mut();
    assert_eq!(unsafe { trie_calls_matcher_new(calls, &cb, &mut m) }, TRIE_OK, "{}", last_error());
    unsafe { trie_calls_free(calls) };
    // required with a marker: the marker's text and the prefix are forced, then the names part
    assert_eq!(draft(m, 64), b"<tool_call>\n{\"name\": \"get_".to_vec());
    assert_eq!(draft(m, 2), b"<tool_call>\n".to_vec(), "cut at the capacity (the marker's own token first)");
    assert!(unsafe { trie_calls_current_arguments(m) }.is_null(), "no argument matcher before the name");
    feed(m, b"<tool_call>\n{\"name\": \"get_w");
    assert_eq!(draft(m, 64), b"eather\", \"arguments\": ".to_vec(), "the only name left and the suffix");
    feed(m, b"eather\", \"arguments\": ");
    assert_eq!(info(m).phase, TRIE_CALLS_PHASE_ARGS);
    assert_eq!(draft(m, 64), b"".to_vec(), "the arguments are the matcher's, not forced here");
    let cur = unsafe { trie_calls_current_arguments(m) };
    assert!(!cur.is_null());
    assert_eq!(unsafe { matcher(cur) }.text, b"{\"city\": \"Paris\"}}\n</tool_call>".to_vec(), "tool 0's matcher");
    feed(m, b"{\"city\": \"Paris\"}}\n</tool_call>");
    assert_eq!(info(m).phase, TRIE_CALLS_PHASE_END);
    assert!(unsafe { trie_calls_current_arguments(m) }.is_null(), "after the call");
    assert!(unsafe { trie_calls_current_arguments(null()) }.is_null());
    let mut n = 7;
    assert_eq!(unsafe { trie_calls_draft(m, null_mut(), 0, &mut n) }, TRIE_OK);
    assert_eq!(n, 0);
    assert_eq!(unsafe { trie_calls_draft(m, null_mut(), 0, null_mut()) }, TRIE_ERR_NULL_ARGUMENT);
    assert_eq!(unsafe { trie_calls_draft(null(), null_mut(), 0, &mut n) }, TRIE_ERR_NULL_ARGUMENT);
    unsafe { trie_calls_matcher_free(m) };
}
