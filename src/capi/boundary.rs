//! The panic boundary and the argument helpers every C function uses: per-thread messages, the fallback of each
//! return type, NULL-checked slices and out pointers.

use super::*;

thread_local! {
    pub(super) static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A per-thread message slot of the C ABI (the last error; `trie_recognize_reason`): a C string that stays valid
/// until the thread's next write to the same slot.
pub(super) type MessageSlot = std::thread::LocalKey<RefCell<CString>>;

/// Stores `message` in `slot` (NUL bytes written as `\0`); a slot being torn down or read is left alone.
pub(super) fn store_message(slot: &'static MessageSlot, message: &str) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    let _ = slot.try_with(|cell| {
        if let Ok(mut s) = cell.try_borrow_mut() {
            *s = c;
        }
    });
}

/// The message in `slot`, or "" when it cannot be read; never NULL.
pub(super) fn message_ptr(slot: &'static MessageSlot) -> *const c_char {
    slot.try_with(|cell| cell.try_borrow().map(|s| s.as_ptr()).unwrap_or(c"".as_ptr())).unwrap_or(c"".as_ptr())
}

pub(super) fn set_last_error(message: &str) {
    store_message(&LAST_ERROR, message);
}

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

pub(super) fn report_panic(payload: Box<dyn std::any::Any + Send>) {
    let msg = panic_message(&*payload);
    // Dropping a payload can itself panic: forget it instead.
    std::mem::forget(payload);
    set_last_error(&format!("libtrie panicked (a bug: please report it): {msg}"));
}

/// What an `extern "C"` function returns when a panic is caught inside it, chosen by its return type (the idea of
/// rustls-ffi's `panic_boundary`): a status is `TRIE_ERR_PANIC`, a pointer NULL, a `bool` false, a count 0, a state
/// [`PANIC_STATE`], a static string the empty string. The panic's message is stored for `trie_last_error`.
pub(super) trait PanicFallback {
    fn panic_fallback() -> Self;
}

impl PanicFallback for trie_status {
    fn panic_fallback() -> Self {
        TRIE_ERR_PANIC
    }
}

impl<T> PanicFallback for *mut T {
    fn panic_fallback() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> PanicFallback for *const T {
    fn panic_fallback() -> Self {
        std::ptr::null()
    }
}

impl PanicFallback for bool {
    fn panic_fallback() -> Self {
        false
    }
}

impl PanicFallback for usize {
    fn panic_fallback() -> Self {
        0
    }
}

/// `trie_state` is `u32`: the only `u32` an `extern "C"` function here returns is a state.
impl PanicFallback for trie_state {
    fn panic_fallback() -> Self {
        PANIC_STATE
    }
}

impl PanicFallback for () {
    fn panic_fallback() -> Self {}
}

/// A state no automaton has (valid states are below `n_states() < TRIE_STATE_FINISHED - 1`, and
/// `TRIE_STATE_FINISHED`): what a state-returning function gives after a panic, so the next call that takes it
/// fails with `TRIE_ERR_INVALID_STATE` instead of decoding from a wrong state.
pub(super) const PANIC_STATE: trie_state = TRIE_STATE_FINISHED - 1;

/// A static NUL-terminated string, never NULL (its fallback is the empty string).
pub(super) struct StaticStr(pub(super) *const c_char);

impl PanicFallback for StaticStr {
    fn panic_fallback() -> Self {
        StaticStr(c"".as_ptr())
    }
}

/// The panic boundary of every `extern "C"` function: runs `f`; a panic gives the fallback of `T`.
pub(super) fn boundary<T: PanicFallback>(f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(payload) => {
            report_panic(payload);
            T::panic_fallback()
        }
    }
}

/// [`boundary()`] for a function that returns a status: an error becomes its status, its message stored.
pub(super) fn guard(f: impl FnOnce() -> Result<()>) -> trie_status {
    boundary(|| match f() {
        Ok(()) => TRIE_OK,
        Err(e) => {
            set_last_error(e.message());
            e.kind().into()
        }
    })
}

pub(super) fn null(what: &str) -> Error {
    Error::new(ErrorKind::NullArgument, format!("{what} is NULL"))
}

/// A slice from a C array; NULL is fine when `len` is 0.
pub(super) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::new(ErrorKind::NullArgument, format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(format!("the length {len} of {what} is too large")));
    }
    Ok(std::slice::from_raw_parts(ptr, len))
}

/// Element `i` of an array of byte strings: like [`slice()`], naming `what[i]` only when failing.
pub(super) unsafe fn element<'a>(ptr: *const u8, len: usize, what: &str, i: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || len > isize::MAX as usize {
        return slice(ptr, len, &format!("{what}[{i}]"));
    }
    Ok(std::slice::from_raw_parts(ptr, len))
}

/// An array of `n` byte strings given as pointers (`what`) and lengths (`lens_what`), each checked as [`element()`].
pub(super) unsafe fn byte_strings<'a>(
    ptrs: *const *const u8,
    lens: *const usize,
    n: usize,
    what: &str,
    lens_what: &str,
) -> Result<Vec<&'a [u8]>> {
    let ptrs = slice(ptrs, n, what)?;
    let lens = slice(lens, n, lens_what)?;
    ptrs.iter().zip(lens).enumerate().map(|(i, (&p, &len))| element(p, len, what, i)).collect()
}

/// Writes a borrowed array (its pointer and length) to two out pointers. Both are checked first (NULL:
/// `TRIE_ERR_NULL_ARGUMENT` naming it, from `names`) and cleared (NULL, 0) before `data` runs, so a failure
/// leaves them cleared.
pub(super) unsafe fn out_view<T>(
    ptr: *mut *const T,
    len: *mut usize,
    names: (&str, &str),
    data: impl FnOnce() -> Result<(*const T, usize)>,
) -> Result<()> {
    if ptr.is_null() || len.is_null() {
        return Err(null(if ptr.is_null() { names.0 } else { names.1 }));
    }
    ptr.write(std::ptr::null());
    len.write(0);
    let (p, n) = data()?;
    ptr.write(p);
    len.write(n);
    Ok(())
}

pub(super) unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Error::new(ErrorKind::NullArgument, format!("{what} is NULL but its length is {len}")));
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(Error::invalid(format!("the length {len} of {what} is too large")));
    }
    Ok(std::slice::from_raw_parts_mut(ptr, len))
}

/// Sets `*n` to `items.len()` and copies the items (converted by `conv`) into the caller's buffer `buf`; a short
/// buffer is `TRIE_ERR_BUFFER_TOO_SMALL` (`what()` says what is there, the message adds the buffer's size) with
/// nothing written but `*n`. `n` must be checked non-NULL.
pub(super) unsafe fn copy_out<T: Copy, U>(
    items: &[T],
    buf: &mut [U],
    n: *mut usize,
    conv: impl Fn(T) -> U,
    what: impl FnOnce() -> String,
) -> Result<()> {
    n.write(items.len());
    if buf.len() < items.len() {
        return Err(Error::new(ErrorKind::BufferTooSmall, format!("{}; the buffer holds {}", what(), buf.len())));
    }
    for (dst, &t) in buf.iter_mut().zip(items) {
        *dst = conv(t);
    }
    Ok(())
}

/// Writes `value` through an out pointer checked earlier.
pub(super) unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        out.write(value);
    }
}

pub(super) unsafe fn path_str<'a>(path: *const c_char) -> Result<&'a str> {
    if path.is_null() {
        return Err(null("path"));
    }
    CStr::from_ptr(path).to_str().map_err(|_| {
        Error::invalid(format!(
            "the path {} is not UTF-8",
            crate::error::show_bytes(CStr::from_ptr(path).to_bytes(), 200)
        ))
    })
}

pub(super) fn check_state(automaton: &Automaton, state: trie_state) -> Result<State> {
    if state == TRIE_STATE_FINISHED || (state as usize) < automaton.n_states() {
        Ok(State(state))
    } else {
        Err(Error::new(
            ErrorKind::InvalidState,
            format!("state {state} is not a state of this automaton (it has {} states)", automaton.n_states()),
        ))
    }
}

/// Token ids as `int32_t` (vocabularies have fewer than 2^31 ids, so every id fits).
pub(super) fn as_i32_ptr(ids: &[TokenId]) -> *const i32 {
    ids.as_ptr() as *const i32
}

/// The largest `struct_size` of a versioned struct accepted (bytes): far above any future struct, small enough
/// that a garbage size (an uninitialised struct) is refused instead of read.
pub(super) const MAX_STRUCT_SIZE: usize = 4096;

/// A caller's versioned struct (`struct_size` its first field, fields only ever appended), read field by field.
/// One rule for every such struct of the C ABI (`trie_options`, `trie_template`, `trie_set_config`,
/// `trie_recognize_limits`): a smaller `struct_size` (a program built against an older header) leaves the fields
/// it does not reach at their defaults; a larger one (a newer header) is accepted when the fields this libtrie does
/// not know are zero. A size below `min` or over [`MAX_STRUCT_SIZE`] is refused before any other byte is read.
pub(super) struct Versioned<'a> {
    bytes: &'a [u8],
}

impl<'a> Versioned<'a> {
    /// Reads the struct at `p` (not NULL) whose Rust layout is `T`; `what` names it in messages (`options`),
    /// `init` is its init function, `min` the smallest size accepted (it must reach the fields every caller sets).
    pub(super) unsafe fn read<T>(p: *const T, what: &str, init: &str, min: usize) -> Result<Versioned<'a>> {
        let size = (p as *const usize).read_unaligned();
        let ours = std::mem::size_of::<T>();
        if !(min..=MAX_STRUCT_SIZE).contains(&size) {
            return Err(Error::invalid(format!(
                "{what}.struct_size is {size}, outside {min}..={MAX_STRUCT_SIZE}: initialise the struct with {init} \
                 (it sets struct_size = sizeof = {ours})"
            )));
        }
        let bytes = std::slice::from_raw_parts(p as *const u8, size);
        if size > ours && bytes[ours..].iter().any(|&b| b != 0) {
            return Err(Error::invalid(format!(
                "the {what} set fields this libtrie {} does not know (struct_size {size} > {ours}): use a newer \
                 libtrie or leave them zero",
                env!("CARGO_PKG_VERSION")
            )));
        }
        Ok(Versioned { bytes })
    }

    /// The `N` bytes of the field at `offset`, or `None` when the caller's struct ends before it.
    fn field<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        self.bytes.get(offset..offset + N).map(|b| b.try_into().expect("N bytes"))
    }

    pub(super) fn u64(&self, offset: usize) -> Option<u64> {
        self.field::<8>(offset).map(u64::from_ne_bytes)
    }

    pub(super) fn u32(&self, offset: usize) -> Option<u32> {
        self.field::<4>(offset).map(u32::from_ne_bytes)
    }

    pub(super) fn usize(&self, offset: usize) -> Option<usize> {
        self.field::<{ std::mem::size_of::<usize>() }>(offset).map(usize::from_ne_bytes)
    }

    /// A C `bool` read as a byte (nonzero: true), so no value a caller writes is undefined behaviour here.
    pub(super) fn bool(&self, offset: usize) -> Option<bool> {
        self.field::<1>(offset).map(|b| b[0] != 0)
    }

    /// A pointer field.
    pub(super) fn ptr<T>(&self, offset: usize) -> Option<*const T> {
        self.usize(offset).map(|v| v as *const T)
    }
}
