//! Tool search (`trie_tool_search_*`): the index of a tool list, built once, and its BM25 and regex queries (see
//! [`crate::sets::search`]), for the tool-search tool of `defer_loading` clients.

use super::handle::{arc_to_ptr, free_arc, try_clone_arc, try_ref, Castable, OwnershipArc};
use super::{boundary, check_out, guard, null, slice, slice_mut, trie_status};
use crate::error::{Error, Result};
use crate::sets::search::{Mode, SearchLimits, ToolSearch};
use std::sync::Arc;

/// The search index of one tool list. Opaque, immutable: any number of threads may query it at once. Reference
/// counted: [`trie_tool_search_retain`], [`trie_tool_search_free`].
pub struct trie_tool_search {
    _private: [u8; 0],
}

impl Castable for trie_tool_search {
    type Ownership = OwnershipArc;
    type RustType = ToolSearch;
    const WHAT: &'static str = "search";
}

/// [`trie_tool_search_query`]'s `mode`: words ranked by BM25 over names, descriptions and parameters' text
/// (Anthropic's `tool_search_tool_bm25`, OpenAI's `tool_search`).
pub const TRIE_SEARCH_BM25: u32 = 0;
/// [`trie_tool_search_query`]'s `mode`: a regular expression (the `regex` crate's syntax; `(?i)` for
/// case-insensitive) matched anywhere in a name (score 2) or else in the other text (score 1) (Anthropic's
/// `tool_search_tool_regex`).
pub const TRIE_SEARCH_REGEX: u32 = 1;

/// Builds the search index of a JSON tool list (`len` bytes, UTF-8): the OpenAI `tools` shape
/// (`[{"type": "function", "function": {"name", "description", "parameters"}}]`), or tools without the `function`
/// wrapper (`{"name", "description", "parameters" | "input_schema"}`). Tool `i` of the list is tool `i` of every
/// result. Bounds: 1,000,000 tools, 1 GiB of list, 16 KiB of searchable text per tool (cut there). Errors:
/// `TRIE_ERR_INVALID_ARGUMENT` naming the tool (`tools[3]: no name`, a name listed twice, a tool of another type
/// than `function`), `TRIE_ERR_LIMIT_EXCEEDED` over a bound. `*out` is a new reference (NULL on failure).
///
/// # Safety
/// `tools_json` `len` readable bytes (NULL with 0: an error, not JSON); `out` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_tool_search_new(
    tools_json: *const u8,
    len: usize,
    out: *mut *mut trie_tool_search,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let list = slice(tools_json, len, "tools_json")?;
        let search = ToolSearch::from_json(list, SearchLimits::default())?;
        out.write(arc_to_ptr(Arc::new(search)));
        Ok(())
    })
}

/// The search index of a registry's tools (`trie_registry_cache_get`): tool `i` is the registry's tool `i`. Built
/// on the first call for a registry (then shared, immutable); `*out` is a new reference (NULL on failure).
///
/// # Safety
/// `registry` NULL or live; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_registry_search(
    registry: *const super::registry::trie_registry,
    out: *mut *mut trie_tool_search,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let r = try_ref(registry)?;
        out.write(arc_to_ptr(r.search()?));
        Ok(())
    })
}

/// Adds a reference to `search` and returns it (NULL for NULL).
///
/// # Safety
/// `search` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn trie_tool_search_retain(search: *const trie_tool_search) -> *const trie_tool_search {
    boundary(|| match try_clone_arc(search) {
        Ok(a) => arc_to_ptr::<trie_tool_search>(a) as *const trie_tool_search,
        Err(_) => std::ptr::null(),
    })
}

/// Drops a reference to `search` (NULL: nothing).
///
/// # Safety
/// `search` NULL or live, each reference freed once.
#[no_mangle]
pub unsafe extern "C" fn trie_tool_search_free(search: *const trie_tool_search) {
    boundary(|| free_arc(search))
}

/// The number of tools of the index (0 for NULL).
///
/// # Safety
/// `search` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn trie_tool_search_n_tools(search: *const trie_tool_search) -> usize {
    boundary(|| try_ref(search).map(|s| s.names().len()).unwrap_or(0))
}

/// A view of tool `i`'s name (UTF-8, `*len` bytes, no NUL), valid while `search` lives.
/// `TRIE_ERR_INVALID_ARGUMENT` for `i` out of range.
///
/// # Safety
/// `search` NULL or live; `name` and `len` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_tool_search_name(
    search: *const trie_tool_search,
    i: usize,
    name: *mut *const u8,
    len: *mut usize,
) -> trie_status {
    guard(|| {
        super::out_view(name, len, ("name", "len"), || {
            let s = try_ref(search)?;
            let n = s
                .names()
                .get(i)
                .ok_or_else(|| Error::invalid(format!("i: tool {i} of an index of {} tools", s.names().len())))?;
            Ok((n.as_ptr(), n.len()))
        })
    })
}

fn mode_of(mode: u32) -> Result<Mode> {
    match mode {
        TRIE_SEARCH_BM25 => Ok(Mode::Bm25),
        TRIE_SEARCH_REGEX => Ok(Mode::Regex),
        m => Err(Error::invalid(format!("mode: {m} is not TRIE_SEARCH_BM25 (0) or TRIE_SEARCH_REGEX (1)"))),
    }
}

unsafe fn run_query<'a>(
    search: *const trie_tool_search,
    mode: u32,
    query: *const u8,
    len: usize,
    k: usize,
) -> Result<(&'a ToolSearch, Vec<crate::sets::search::Hit>)> {
    let s: &'a ToolSearch = try_ref(search)?;
    let mode = mode_of(mode)?;
    let what = if mode == Mode::Regex { "pattern" } else { "query" };
    let q = std::str::from_utf8(slice(query, len, what)?)
        .map_err(|e| Error::invalid(format!("{what}: not UTF-8 (at byte {})", e.valid_up_to())))?;
    Ok((s, s.search(mode, q, k)?))
}

/// The top `k` tools (1 to 1,000) of `search` for `query` (`len` bytes of UTF-8: words for `TRIE_SEARCH_BM25`,
/// at most 4,096 bytes and 64 distinct words; a pattern for `TRIE_SEARCH_REGEX`, at most 1,024 bytes, compiled
/// within 1 MiB), best first, ties in list order; tools that do not match are left out. `*n` is the number of
/// results; `tools[j]` gets the j-th result's tool index and `scores[j]` (NULL: not written) its score; a
/// `capacity` below `*n` is `TRIE_ERR_BUFFER_TOO_SMALL` with only `*n` written (a capacity of `k` always fits).
/// Errors name the field: `mode`, `k`, `query` / `pattern` (`TRIE_ERR_INVALID_ARGUMENT`: empty, not UTF-8, not a
/// regex; `TRIE_ERR_LIMIT_EXCEEDED`: over a bound).
///
/// # Safety
/// `search` live; `query` `len` readable bytes; `tools` NULL (with capacity 0) or `capacity` writable; `scores`
/// NULL or `capacity` writable; `n` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_tool_search_query(
    search: *const trie_tool_search,
    mode: u32,
    query: *const u8,
    len: usize,
    k: usize,
    tools: *mut u32,
    scores: *mut f64,
    capacity: usize,
    n: *mut usize,
) -> trie_status {
    guard(|| {
        if n.is_null() {
            return Err(null("n"));
        }
        n.write(0);
        let (_, hits) = run_query(search, mode, query, len, k)?;
        let buf = slice_mut(tools, capacity, "tools")?;
        super::copy_out(&hits, buf, n, |h| h.tool as u32, || format!("{} results", hits.len()))?;
        if !scores.is_null() {
            let sc = slice_mut(scores, capacity, "scores")?;
            for (dst, h) in sc.iter_mut().zip(&hits) {
                *dst = h.score;
            }
        }
        Ok(())
    })
}

/// [`trie_tool_search_query`] with the result as Anthropic's search result block, JSON text (UTF-8, no NUL):
/// `{"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name":
/// NAME}, ...]}`, best first. `*n` is its length in bytes; `buf` gets it, or `TRIE_ERR_BUFFER_TOO_SMALL` with only
/// `*n` written (call again with `*n` bytes).
///
/// # Safety
/// As [`trie_tool_search_query`]; `buf` NULL (with capacity 0) or `capacity` writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn trie_tool_search_query_json(
    search: *const trie_tool_search,
    mode: u32,
    query: *const u8,
    len: usize,
    k: usize,
    buf: *mut u8,
    capacity: usize,
    n: *mut usize,
) -> trie_status {
    guard(|| {
        if n.is_null() {
            return Err(null("n"));
        }
        n.write(0);
        let (s, hits) = run_query(search, mode, query, len, k)?;
        let refs: Vec<serde_json::Value> = hits
            .iter()
            .map(|h| serde_json::json!({"type": "tool_reference", "tool_name": s.names()[h.tool]}))
            .collect();
        let text = serde_json::json!({"type": "tool_search_tool_search_result", "tool_references": refs}).to_string();
        let out = slice_mut(buf, capacity, "buf")?;
        super::copy_out(text.as_bytes(), out, n, |b| b, || format!("{} bytes of JSON", text.len()))
    })
}

/// The request's side of deferred tools and tool search, once for every engine (see [`crate::calls::deferred`]):
/// `request` (`len` bytes) is the chat request's JSON, of which `tools` and `messages` are read; `registry` (NULL:
/// none) an operator's registry offered as deferred tools of every request. `*n` is the plan's length in bytes, 0
/// when the request is to be left as it is (nothing deferred, no search tool, no `tool_reference`, no registry);
/// else `buf` gets the plan, JSON text `{"tools": [...], "messages": [...], "loaded": [names], "search": {"name",
/// "form"} or null}`: the tools the chat template renders (deferred ones left out, referenced or found ones and the
/// search function in), the history as the model sees it (a search call with an empty result answered by libtrie's
/// search, `tool_reference` items as text), or `TRIE_ERR_BUFFER_TOO_SMALL` with only `*n` written (call again with
/// `*n` bytes: the same request gives the same plan). The caller keeps every tool of the request (deferred ones,
/// the search tool with its one free-text argument) in the call's name set. Errors name the field: `request`,
/// `request.tools[3]` (`TRIE_ERR_INVALID_ARGUMENT`), over 64 MiB (`TRIE_ERR_LIMIT_EXCEEDED`).
///
/// # Safety
/// `request` `len` readable bytes; `registry` NULL or live; `buf` NULL (with capacity 0) or `capacity` writable;
/// `n` writable.
#[no_mangle]
pub unsafe extern "C" fn trie_deferred_plan(
    request: *const u8,
    len: usize,
    registry: *const super::registry::trie_registry,
    buf: *mut u8,
    capacity: usize,
    n: *mut usize,
) -> trie_status {
    guard(|| {
        if n.is_null() {
            return Err(null("n"));
        }
        n.write(0);
        let req = slice(request, len, "request")?;
        let reg = if registry.is_null() { None } else { Some(try_ref(registry)?) };
        let Some(text) = crate::calls::deferred::plan_json(req, reg)? else { return Ok(()) };
        let out = slice_mut(buf, capacity, "buf")?;
        super::copy_out(text.as_bytes(), out, n, |b| b, || format!("{} bytes of JSON", text.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::trie_status::*;

    #[test]
    fn through_the_c_abi() {
        let list = br#"[{"type": "function", "function": {"name": "get_weather", "description": "weather"}},
                        {"type": "function", "function": {"name": "get_time", "description": "time"}}]"#;
        unsafe {
            let mut s = std::ptr::null_mut();
            assert_eq!(trie_tool_search_new(list.as_ptr(), list.len(), &mut s), TRIE_OK);
            assert_eq!(trie_tool_search_n_tools(s), 2);
            let (mut tools, mut scores, mut n) = ([9u32; 2], [0f64; 2], 0usize);
            let q = b"time please";
            let st = trie_tool_search_query(
                s,
                TRIE_SEARCH_BM25,
                q.as_ptr(),
                q.len(),
                2,
                tools.as_mut_ptr(),
                scores.as_mut_ptr(),
                2,
                &mut n,
            );
            assert_eq!((st, n, tools[0]), (TRIE_OK, 1, 1));
            assert!(scores[0] > 0.0);
            let p = b"^get_";
            let st = trie_tool_search_query(
                s,
                TRIE_SEARCH_REGEX,
                p.as_ptr(),
                p.len(),
                2,
                tools.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                &mut n,
            );
            assert_eq!((st, n), (TRIE_ERR_BUFFER_TOO_SMALL, 2));
            let mut buf = [0u8; 256];
            let st = trie_tool_search_query_json(
                s,
                TRIE_SEARCH_REGEX,
                p.as_ptr(),
                p.len(),
                5,
                buf.as_mut_ptr(),
                buf.len(),
                &mut n,
            );
            assert_eq!(st, TRIE_OK);
            let v: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
            assert_eq!(v["tool_references"][1]["tool_name"], "get_time");
            let st = trie_tool_search_query(
                s,
                7,
                q.as_ptr(),
                q.len(),
                2,
                tools.as_mut_ptr(),
                std::ptr::null_mut(),
                2,
                &mut n,
            );
            assert_eq!(st, TRIE_ERR_INVALID_ARGUMENT);
            let (mut name, mut len) = (std::ptr::null(), 0usize);
            assert_eq!(trie_tool_search_name(s, 2, &mut name, &mut len), TRIE_ERR_INVALID_ARGUMENT);
            assert!(name.is_null() && len == 0);
            assert_eq!(trie_tool_search_name(s, 0, &mut name, &mut len), TRIE_OK);
            assert_eq!(std::slice::from_raw_parts(name, len), b"get_weather");
            let r = trie_tool_search_retain(s);
            trie_tool_search_free(r);
            trie_tool_search_free(s);
            let req = br#"{"tools": [{"name": "a", "defer_loading": true}, {"name": "b"}], "messages": []}"#;
            assert_eq!(
                trie_deferred_plan(req.as_ptr(), req.len(), std::ptr::null(), std::ptr::null_mut(), 0, &mut n),
                TRIE_ERR_BUFFER_TOO_SMALL
            );
            let mut plan = vec![0u8; n];
            assert_eq!(
                trie_deferred_plan(req.as_ptr(), req.len(), std::ptr::null(), plan.as_mut_ptr(), plan.len(), &mut n),
                TRIE_OK
            );
            let v: serde_json::Value = serde_json::from_slice(&plan[..n]).unwrap();
            assert_eq!(v["tools"], serde_json::json!([{"name": "b"}]));
            let plain = br#"{"tools": [{"name": "b"}]}"#;
            assert_eq!(
                trie_deferred_plan(plain.as_ptr(), plain.len(), std::ptr::null(), std::ptr::null_mut(), 0, &mut n),
                TRIE_OK
            );
            assert_eq!(n, 0, "nothing to do");
            let mut s2 = std::ptr::null_mut();
            assert_eq!(trie_tool_search_new(std::ptr::null(), 5, &mut s2), TRIE_ERR_NULL_ARGUMENT);
            assert!(s2.is_null());
        }
    }
}
