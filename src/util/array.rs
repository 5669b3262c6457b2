//! Read-only arrays that either own their elements or borrow them from a shared file mapping, so a vocabulary or
//! an automaton loaded from a file ([`crate::format`]) is its frozen arrays in place: no copy, and the pages are
//! shared by every process that maps the same file.
//!
//! Invariant: `ptr` and `len` describe memory kept alive by `owner` for as long as the array lives (a `Vec`'s
//! heap buffer does not move when the `Vec` is moved; a mapping is reference counted).

use bytemuck::Pod;
use std::sync::Arc;

/// The bytes of a file: memory-mapped read-only (shared pages), or read into an 8-byte-aligned heap buffer.
pub(crate) enum Mapping {
    Mmap(memmap2::Mmap),
    Heap(Vec<u64>, usize),
}

impl Mapping {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Mapping::Mmap(m) => m,
            Mapping::Heap(words, len) => &bytemuck::cast_slice(words)[..*len],
        }
    }

    /// A copy of `bytes` in an aligned buffer.
    pub(crate) fn copy_of(bytes: &[u8]) -> Mapping {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Mapping::Heap(words, bytes.len())
    }
}

enum Owner<T> {
    Vec(#[allow(dead_code)] Vec<T>),
    Map(#[allow(dead_code)] Arc<Mapping>),
    /// A buffer of another element type (the bytes of a `Vec<u32>`, say: [`Array::bytes_of`]).
    Other(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>),
}

/// A read-only `[T]` owned (built in memory) or mapped (loaded from a file). Dereferences to `[T]` at no cost.
pub(crate) struct Array<T: Pod> {
    ptr: *const T,
    len: usize,
    /// Keeps the memory alive (read through `ptr`).
    #[allow(dead_code)]
    owner: Owner<T>,
}

// SAFETY: the array is read-only; its memory is owned by a `Vec<T>` or a shared, immutable mapping.
unsafe impl<T: Pod + Send> Send for Array<T> {}
unsafe impl<T: Pod + Sync> Sync for Array<T> {}

impl<T: Pod> Array<T> {
    /// `len` elements of `T` at byte `offset` of `map`; `None` when they do not fit or are misaligned.
    pub(crate) fn mapped(map: &Arc<Mapping>, offset: usize, len: usize) -> Option<Array<T>> {
        let size = len.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(size)?;
        let bytes = map.bytes().get(offset..end)?;
        let slice: &[T] = bytemuck::try_cast_slice(bytes).ok()?;
        Some(Array { ptr: slice.as_ptr(), len: slice.len(), owner: Owner::Map(map.clone()) })
    }

    /// Bytes of memory the array's elements take.
    pub(crate) fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Whether the elements live in a file mapping.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.owner, Owner::Map(_))
    }
}

impl Array<u8> {
    /// The bytes of `v`'s elements, without a copy (the buffer moves into the array).
    pub(crate) fn bytes_of<U: Pod + Send + Sync>(mut v: Vec<U>) -> Array<u8> {
        v.shrink_to_fit();
        let (ptr, len) = (v.as_ptr() as *const u8, std::mem::size_of_val(&v[..]));
        Array { ptr, len, owner: Owner::Other(Box::new(v)) }
    }
}

impl<T: Pod> From<Vec<T>> for Array<T> {
    fn from(mut v: Vec<T>) -> Array<T> {
        v.shrink_to_fit();
        Array { ptr: v.as_ptr(), len: v.len(), owner: Owner::Vec(v) }
    }
}

impl<T: Pod> Default for Array<T> {
    fn default() -> Array<T> {
        Array::from(Vec::new())
    }
}

impl<T: Pod> std::ops::Deref for Array<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: see the module invariant.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for Array<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_mapped_arrays_read_the_same() {
        let owned: Array<u32> = vec![1, 2, 3].into();
        assert_eq!(&owned[..], &[1, 2, 3]);
        assert!(!owned.is_mapped());
        let bytes: Vec<u8> = [7u32, 8, 9].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let map = Arc::new(Mapping::copy_of(&bytes));
        let mapped: Array<u32> = Array::mapped(&map, 4, 2).unwrap();
        assert_eq!(&mapped[..], &[8, 9]);
        assert!(mapped.is_mapped());
        assert!(Array::<u32>::mapped(&map, 4, 3).is_none(), "past the end");
        assert!(Array::<u32>::mapped(&map, 2, 1).is_none(), "misaligned");
        drop(map);
        assert_eq!(mapped.size_bytes(), 8);
        assert_eq!(&mapped[..], &[8, 9], "the array keeps the mapping alive");
    }
}
