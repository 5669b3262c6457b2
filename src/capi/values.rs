//! The C ABI of members that carry values (see [`crate::Automaton::compile_with_values`]): compiling and updating
//! with one `uint64_t` per string, and reading a member's value where its segment is complete.

use super::*;

/// Like [`trie_compile`], with `values[i]` the value of `strings[i]` (`n_strings` values): each member carries
/// the value of its first copy. The values are saved with the automaton (a file with values is format version 3,
/// which libtrie 0.2 refuses) and kept by [`trie_automaton_with_values`]; read them with [`trie_member_value`] and
/// [`trie_possible_values`]. Errors: those of [`trie_compile`]; `TRIE_ERR_NULL_ARGUMENT` for NULL `values` with
/// strings.
///
/// # Safety
/// As [`trie_compile`]; `values` NULL (with no strings) or holding `n_strings` values.
#[no_mangle]
pub unsafe extern "C" fn trie_compile_with_values(
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    values: *const u64,
    n_strings: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let set = byte_strings(strings, lens, n_strings, "strings", "lens")?;
        let values = slice(values, n_strings, "values")?;
        let opts = trie_options::read(options)?;
        let a = Automaton::compile_with_values(vocab, &set, values, &opts)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Like [`trie_compile_template`], with `values[i]` the value of member `i` (`n_strings` values; a duplicate
/// member carries its first copy's value, the copy [`trie_member`] names).
///
/// # Safety
/// As [`trie_compile_template`]; `values` NULL (with no strings) or holding `n_strings` values.
#[no_mangle]
pub unsafe extern "C" fn trie_compile_template_with_values(
    vocab: *const trie_vocab,
    strings: *const *const u8,
    lens: *const usize,
    values: *const u64,
    n_strings: usize,
    template: *const trie_template,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let vocab = try_clone_arc(vocab)?;
        let set = byte_strings(strings, lens, n_strings, "strings", "lens")?;
        let values = slice(values, n_strings, "values")?;
        let t = read_template(template)?;
        let opts = trie_options::read(options)?;
        let a = Automaton::compile_template_with_values(vocab, &set, values, &t, &opts)?;
        out.write(arc_to_ptr(Arc::new(a)));
        Ok(())
    })
}

/// Like [`trie_automaton_with`], for an automaton whose members carry values: `add_values[i]` is the value of
/// `add[i]` (`n_add` values). A kept member keeps its value; an added string takes its first copy's value, also
/// when it was a member already (re-adding a member changes its value). Errors: those of
/// [`trie_automaton_with`]; `TRIE_ERR_INVALID_ARGUMENT` when `automaton` was compiled without values (use
/// [`trie_automaton_with`], which in turn refuses an automaton with values).
///
/// # Safety
/// As [`trie_automaton_with`]; `add_values` NULL (with nothing added) or holding `n_add` values.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_with_values(
    automaton: *const trie_automaton,
    add: *const *const u8,
    add_lens: *const usize,
    add_values: *const u64,
    n_add: usize,
    remove: *const *const u8,
    remove_lens: *const usize,
    n_remove: usize,
    options: *const trie_options,
    out: *mut *mut trie_automaton,
) -> trie_status {
    guard(|| {
        check_out(out)?;
        let a = try_ref(automaton)?;
        let add = byte_strings(add, add_lens, n_add, "add", "add_lens")?;
        let add_values = slice(add_values, n_add, "add_values")?;
        let remove = byte_strings(remove, remove_lens, n_remove, "remove", "remove_lens")?;
        let opts = trie_options::read(options)?;
        let b = a.with_changes_and_values(&add, add_values, &remove, &opts)?;
        out.write(arc_to_ptr(Arc::new(b)));
        Ok(())
    })
}

/// Whether the members of `automaton` carry values. False for NULL.
///
/// # Safety
/// `automaton` must be NULL or a live automaton.
#[no_mangle]
pub unsafe extern "C" fn trie_automaton_has_values(automaton: *const trie_automaton) -> bool {
    boundary(|| try_ref(automaton).map(|a| a.has_values()).unwrap_or(false))
}

/// Sets `*found` to whether a member's segment is complete in `state` (where [`trie_member`] names it) and the
/// automaton carries values, and then `*value` to that member's value (else `*value` is 0).
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `value` and `found` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_member_value(
    automaton: *const trie_automaton,
    state: trie_state,
    value: *mut u64,
    found: *mut bool,
) -> trie_status {
    guard(|| {
        if value.is_null() || found.is_null() {
            return Err(null(if value.is_null() { "value" } else { "found" }));
        }
        value.write(0);
        found.write(false);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        if let Some(v) = a.member_value(s) {
            value.write(v);
            found.write(true);
        }
        Ok(())
    })
}

/// Copies the values of the members still possible in `state`, in the order of [`trie_possible_members`] (one
/// each), into `values` (room for `capacity`) and sets `*n_values` to their number (0 for an automaton without
/// values). Short: `TRIE_ERR_BUFFER_TOO_SMALL`, `*n_values` still set, nothing written (call with NULL and 0 to
/// count).
///
/// # Safety
/// `automaton` must be NULL or a live automaton; `values` NULL (with 0) or `capacity` writable; `n_values` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn trie_possible_values(
    automaton: *const trie_automaton,
    state: trie_state,
    values: *mut u64,
    capacity: usize,
    n_values: *mut usize,
) -> trie_status {
    guard(|| {
        if n_values.is_null() {
            return Err(null("n_values"));
        }
        n_values.write(0);
        let a = try_ref(automaton)?;
        let s = check_state(a, state)?;
        let buf = slice_mut(values, capacity, "values")?;
        let got = a.possible_values(s);
        copy_out(&got, buf, n_values, |v| v, || format!("{} members are possible in state {state}", got.len()))
    })
}
