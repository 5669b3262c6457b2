//! Typed handles (the idea of rustls-ffi's `Castable`): each opaque C handle type names the Rust type behind it and
//! how it is owned, and the only conversions between a handle pointer and a Rust value are the functions below,
//! each allowed only for handles of the matching ownership. A handle can therefore only be read as the type it
//! was made from, and an `Arc` handle is never freed as a `Box` (or the reverse): both are compile errors.
//!
//! Invariants: a non-NULL handle pointer was made by [`arc_to_ptr`] or [`box_to_ptr`] of the same handle type and
//! is live (the caller's side of the contract, stated in each function's `# Safety`); NULL is checked here.

use super::null;
use crate::error::Result;
use std::sync::Arc;

/// A handle that holds one strong reference of an `Arc` (reference counted: `*_retain` / `*_free`).
pub(super) struct OwnershipArc;
/// A handle that owns a `Box` (freed once).
pub(super) struct OwnershipBox;

/// An opaque C handle type: the Rust type a handle points to, its ownership, and its name in messages.
pub(super) trait Castable {
    /// [`OwnershipArc`] or [`OwnershipBox`].
    type Ownership;
    /// The value behind the handle.
    type RustType;
    /// The argument's name in a NULL-pointer message ("vocab is NULL").
    const WHAT: &'static str;
}

/// The value behind a handle, borrowed for as long as the caller keeps the handle; `NullArgument` for NULL.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `C`.
pub(super) unsafe fn try_ref<'a, C: Castable>(ptr: *const C) -> Result<&'a C::RustType> {
    if ptr.is_null() {
        return Err(null(C::WHAT));
    }
    Ok(&*ptr.cast::<C::RustType>())
}

/// Like [`try_ref`], `None` for NULL (for arrays of handles where NULL means "none").
///
/// # Safety
/// As [`try_ref`].
pub(super) unsafe fn try_ref_opt<'a, C: Castable>(ptr: *const C) -> Option<&'a C::RustType> {
    (!ptr.is_null()).then(|| &*ptr.cast::<C::RustType>())
}

/// A new handle holding `value`'s reference.
pub(super) fn arc_to_ptr<C: Castable<Ownership = OwnershipArc>>(value: Arc<C::RustType>) -> *mut C {
    Arc::into_raw(value).cast_mut().cast::<C>()
}

/// A new strong reference to the value behind a handle; `NullArgument` for NULL.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `C`.
pub(super) unsafe fn try_clone_arc<C: Castable<Ownership = OwnershipArc>>(ptr: *const C) -> Result<Arc<C::RustType>> {
    if ptr.is_null() {
        return Err(null(C::WHAT));
    }
    let p = ptr.cast::<C::RustType>();
    Arc::increment_strong_count(p);
    Ok(Arc::from_raw(p))
}

/// Drops the handle's reference (NULL: nothing).
///
/// # Safety
/// `ptr` is NULL or a live handle of type `C`, freed once.
pub(super) unsafe fn free_arc<C: Castable<Ownership = OwnershipArc>>(ptr: *const C) {
    if !ptr.is_null() {
        drop(Arc::from_raw(ptr.cast::<C::RustType>()));
    }
}

/// A new handle owning `value`.
pub(super) fn box_to_ptr<C: Castable<Ownership = OwnershipBox>>(value: C::RustType) -> *mut C {
    Box::into_raw(Box::new(value)).cast::<C>()
}

/// The value behind an owned handle, borrowed mutably for the call; `NullArgument` for NULL.
///
/// # Safety
/// `ptr` is NULL or a live handle of type `C` with no other call on it in flight.
pub(super) unsafe fn try_mut<'a, C: Castable<Ownership = OwnershipBox>>(ptr: *mut C) -> Result<&'a mut C::RustType> {
    if ptr.is_null() {
        return Err(null(C::WHAT));
    }
    Ok(&mut *ptr.cast::<C::RustType>())
}

/// Frees the value behind the handle (NULL: nothing).
///
/// # Safety
/// `ptr` is NULL or a live handle of type `C`, freed once, with no call on it in flight.
pub(super) unsafe fn free_box<C: Castable<Ownership = OwnershipBox>>(ptr: *mut C) {
    if !ptr.is_null() {
        drop(Box::from_raw(ptr.cast::<C::RustType>()));
    }
}
