//! Arrays of unsigned integers stored at the width their values need: 1, 2, 3, 4 or 8 bytes per element, chosen
//! when the array is built ([`Packed::narrow`]) and recorded in a file as the section's element size, so a saved
//! array maps back in place at its width.
//!
//! Element `i` is the `width` bytes at `i * width`, in native byte order (width 3: a `u16`, then the high byte). The
//! value of all-ones bytes is the element type's `MAX` (`u32::MAX` is the sentinel of several automaton arrays:
//! `NONE`, `FINISHED`), so the narrowest width is the smallest one whose all-ones value is above every other
//! value: values up to 254 take one byte, 255 two. At the full width (4 bytes for `u32`, 8 for `u64`) the layout is
//! the plain array's, byte for byte.

use super::array::{Array, Mapping};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

/// The element types of packed arrays.
pub(crate) trait Word: Pod + Ord + std::fmt::Debug + Send + Sync {
    /// The full width in bytes.
    const BYTES: usize;
    /// The value of all-ones bytes at any width.
    const MAX: Self;
    /// `v`, which fits (the low bits).
    fn from_u64(v: u64) -> Self;
    fn to_u64(self) -> u64;
}

impl Word for u32 {
    const BYTES: usize = 4;
    const MAX: u32 = u32::MAX;
    #[inline]
    fn from_u64(v: u64) -> u32 {
        v as u32
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self as u64
    }
}

impl Word for u64 {
    const BYTES: usize = 8;
    const MAX: u64 = u64::MAX;
    #[inline]
    fn from_u64(v: u64) -> u64 {
        v
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self
    }
}

/// The widths an array of `T` may have, in bytes.
pub(crate) fn valid_width<T: Word>(width: usize) -> bool {
    matches!(width, 1 | 2 | 3 | 4 | 8) && width <= T::BYTES
}

/// All-ones at `width` bytes.
#[inline]
fn ones(width: usize) -> u64 {
    if width >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    }
}

/// The narrowest width for `values`: every value but `T::MAX` below the all-ones value of the width.
pub(crate) fn width_for<T: Word>(values: &[T]) -> usize {
    let max = values.iter().filter(|&&v| v != T::MAX).map(|&v| v.to_u64()).max().unwrap_or(0);
    [1, 2, 3, 4, 8].into_iter().find(|&w| w <= T::BYTES && max < ones(w)).unwrap_or(T::BYTES)
}

/// The raw value of the first `w` bytes of `c` (before the all-ones mapping of [`value_of`]).
#[inline(always)]
fn raw_at(c: &[u8], w: usize) -> u64 {
    match w {
        1 => c[0] as u64,
        2 => u16::from_ne_bytes([c[0], c[1]]) as u64,
        3 => (u16::from_ne_bytes([c[0], c[1]]) as u64) | ((c[2] as u64) << 16),
        4 => u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as u64,
        _ => u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
    }
}

/// [`raw_at`] at a width known when compiling (the width-specialised loops).
#[inline(always)]
fn raw<const W: usize>(c: &[u8]) -> u64 {
    raw_at(c, W)
}

/// The element a raw value at width `w` stands for: all-ones below the type's width is `MAX`.
#[inline(always)]
fn value_of<T: Word>(v: u64, w: usize) -> T {
    if w < T::BYTES && v == ones(w) {
        T::MAX
    } else {
        T::from_u64(v)
    }
}

/// Elements per block of the width-specialised loops: each block is checked whole (no early exit inside it, so
/// the loop has no branch per element), the blocks in order until one fails.
const CHECK_BLOCK: usize = 4096;

fn ascending_at<const W: usize>(bytes: &[u8], strict: bool) -> bool {
    let n = bytes.len() / W;
    if n < 2 {
        return true;
    }
    let (prev, next) = (&bytes[..(n - 1) * W], &bytes[W..n * W]);
    prev.chunks(CHECK_BLOCK * W).zip(next.chunks(CHECK_BLOCK * W)).all(|(p, q)| {
        let pairs = p.chunks_exact(W).zip(q.chunks_exact(W));
        if strict {
            pairs.fold(true, |ok, (a, b)| ok & (raw::<W>(a) < raw::<W>(b)))
        } else {
            pairs.fold(true, |ok, (a, b)| ok & (raw::<W>(a) <= raw::<W>(b)))
        }
    })
}

fn all_at<const W: usize, T: Word>(bytes: &[u8], pred: impl Fn(T) -> bool) -> bool {
    bytes
        .chunks(CHECK_BLOCK * W)
        .all(|block| block.chunks_exact(W).fold(true, |ok, c| ok & pred(value_of::<T>(raw::<W>(c), W))))
}

#[inline(always)]
fn each_at<const W: usize, T: Word>(bytes: &[u8], mut f: impl FnMut(T)) {
    for c in bytes.chunks_exact(W) {
        f(value_of::<T>(raw::<W>(c), W));
    }
}

/// `binary_search` over ascending elements of width `W` (raw values order as the values do).
#[inline(always)]
fn search_at<const W: usize, T: Word>(bytes: &[u8], x: T) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, bytes.len() / W);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let v = value_of::<T>(raw::<W>(&bytes[mid * W..mid * W + W]), W);
        match v.cmp(&x) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// A borrowed packed array (copied freely): of a [`Packed`], or of a plain slice at the full width.
#[derive(Clone, Copy)]
pub(crate) struct Ints<'a, T> {
    bytes: &'a [u8],
    width: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Word> Ints<'a, T> {
    /// A plain slice, at the full width (no copy).
    pub(crate) fn of(values: &'a [T]) -> Ints<'a, T> {
        Ints { bytes: bytemuck::cast_slice(values), width: T::BYTES, len: values.len(), _t: PhantomData }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Element `i`; panics past the end, as indexing a slice does.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> T {
        let w = self.width;
        let at = i * w;
        value_of(raw_at(&self.bytes[at..at + w], w), w)
    }

    /// The elements `r` (panics past the end, as slicing does).
    #[inline]
    pub(crate) fn slice(&self, r: Range<usize>) -> Ints<'a, T> {
        assert!(r.start <= r.end && r.end <= self.len, "range {r:?} of a packed array of {}", self.len);
        let bytes = &self.bytes[r.start * self.width..r.end * self.width];
        Ints { bytes, width: self.width, len: r.end - r.start, _t: PhantomData }
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = T> + ExactSizeIterator + 'a {
        let a = *self;
        (0..a.len).map(move |i| a.get(i))
    }

    #[allow(dead_code)] // (Of the readers' API; none uses it now.)
    pub(crate) fn last(&self) -> Option<T> {
        self.len.checked_sub(1).map(|i| self.get(i))
    }

    /// Whether the elements ascend (strictly when `strict`). One loop per width over the raw bytes (no dispatch
    /// per element): the raw values at a width order as the values do (all-ones, `MAX`, is the largest of both).
    pub(crate) fn ascending(&self, strict: bool) -> bool {
        match self.width {
            1 => ascending_at::<1>(self.bytes, strict),
            2 => ascending_at::<2>(self.bytes, strict),
            3 => ascending_at::<3>(self.bytes, strict),
            4 => ascending_at::<4>(self.bytes, strict),
            _ => ascending_at::<8>(self.bytes, strict),
        }
    }

    /// Whether every element satisfies `pred` (one loop per width, as [`Ints::ascending`]).
    pub(crate) fn all(&self, pred: impl Fn(T) -> bool) -> bool {
        match self.width {
            1 => all_at::<1, T>(self.bytes, pred),
            2 => all_at::<2, T>(self.bytes, pred),
            3 => all_at::<3, T>(self.bytes, pred),
            4 => all_at::<4, T>(self.bytes, pred),
            _ => all_at::<8, T>(self.bytes, pred),
        }
    }

    /// The first index whose element fails `pred` (the elements partitioned by it), as for a slice.
    #[inline]
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// As `[T]::binary_search` on ascending elements (`Ok` of some index holding `x`): the slice's own at the full
    /// width, else one loop per width (the width branch out of the loop; the hot row searches of `advance`).
    #[inline]
    pub(crate) fn binary_search(&self, x: T) -> Result<usize, usize> {
        if let Some(s) = self.as_slice() {
            return s.binary_search(&x);
        }
        match self.width {
            1 => search_at::<1, T>(self.bytes, x),
            2 => search_at::<2, T>(self.bytes, x),
            3 => search_at::<3, T>(self.bytes, x),
            4 => search_at::<4, T>(self.bytes, x),
            _ => search_at::<8, T>(self.bytes, x),
        }
    }

    /// The elements as a slice, when they are at the full width (the layout of a plain array: no copy). Every
    /// full-width array is aligned (the heap's, and a file's sections at 64-byte offsets); `None` otherwise.
    #[inline]
    pub(crate) fn as_slice(&self) -> Option<&'a [T]> {
        if self.width == T::BYTES {
            bytemuck::try_cast_slice(self.bytes).ok()
        } else {
            None
        }
    }

    /// `f(element)` for every element in order: the slice's loop at the full width, else one loop per width (the
    /// width branch out of the loop; the hot row reads of the mask fills).
    #[inline]
    pub(crate) fn for_each(&self, mut f: impl FnMut(T)) {
        if let Some(s) = self.as_slice() {
            return s.iter().for_each(|&v| f(v));
        }
        match self.width {
            1 => each_at::<1, T>(self.bytes, f),
            2 => each_at::<2, T>(self.bytes, f),
            3 => each_at::<3, T>(self.bytes, f),
            4 => each_at::<4, T>(self.bytes, f),
            _ => each_at::<8, T>(self.bytes, f),
        }
    }

    /// Appends the elements to `out` (a row decoded; [`Ints::for_each`]).
    #[inline]
    pub(crate) fn extend_into(&self, out: &mut Vec<T>) {
        out.reserve(self.len);
        self.for_each(|v| out.push(v));
    }

    /// The bytes the elements take (for the block checks of a lazily loaded file, and for saving).
    #[inline]
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    #[cfg(test)]
    pub(crate) fn to_vec(self) -> Vec<T> {
        self.iter().collect()
    }
}

/// An owned or file-mapped packed array.
pub(crate) struct Packed<T> {
    bytes: Array<u8>,
    width: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Word> Packed<T> {
    /// `values` at the full width (their buffer, no copy).
    pub(crate) fn plain(values: Vec<T>) -> Packed<T> {
        let len = values.len();
        Packed { bytes: Array::bytes_of(values), width: T::BYTES, len, _t: PhantomData }
    }

    /// `values` at the narrowest width they fit ([`width_for`]).
    pub(crate) fn narrow(values: &[T]) -> Packed<T> {
        Packed::with_width(values, width_for(values))
    }

    /// [`Packed::narrow`] of values the caller gives up: at the full width they are kept, not copied.
    pub(crate) fn narrow_vec(values: Vec<T>) -> Packed<T> {
        let width = width_for(&values);
        if width == T::BYTES {
            Packed::plain(values)
        } else {
            Packed::with_width(&values, width)
        }
    }

    /// `values` at `width` bytes each; panics unless every value fits ([`width_for`] at most `width`).
    pub(crate) fn with_width(values: &[T], width: usize) -> Packed<T> {
        assert!(valid_width::<T>(width) && width_for(values) <= width, "width {width}");
        if width == T::BYTES {
            return Packed::plain(values.to_vec());
        }
        let mut out = Vec::with_capacity(values.len() * width);
        for &v in values {
            let v = v.to_u64();
            match width {
                1 => out.push(v as u8),
                2 => out.extend_from_slice(&(v as u16).to_ne_bytes()),
                3 => {
                    out.extend_from_slice(&(v as u16).to_ne_bytes());
                    out.push((v >> 16) as u8);
                }
                _ => out.extend_from_slice(&(v as u32).to_ne_bytes()),
            }
        }
        Packed { bytes: out.into(), width, len: values.len(), _t: PhantomData }
    }

    /// `len` elements of `width` bytes at byte `offset` of `map`; `None` for another width or when they do not
    /// fit.
    pub(crate) fn mapped(map: &Arc<Mapping>, offset: usize, len: usize, width: usize) -> Option<Packed<T>> {
        if !valid_width::<T>(width) {
            return None;
        }
        let bytes = Array::mapped(map, offset, len.checked_mul(width)?)?;
        Some(Packed { bytes, width, len, _t: PhantomData })
    }

    /// The borrowed view, with the reading methods.
    #[inline]
    pub(crate) fn ints(&self) -> Ints<'_, T> {
        Ints { bytes: &self.bytes, width: self.width, len: self.len, _t: PhantomData }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> T {
        self.ints().get(i)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[allow(dead_code)] // (Of the readers' API; none uses it now.)
    pub(crate) fn last(&self) -> Option<T> {
        self.ints().last()
    }

    #[inline]
    pub(crate) fn slice(&self, r: Range<usize>) -> Ints<'_, T> {
        self.ints().slice(r)
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = T> + ExactSizeIterator + '_ {
        self.ints().iter()
    }

    /// Whether the elements live in a file mapping.
    pub(crate) fn is_mapped(&self) -> bool {
        self.bytes.is_mapped()
    }

    /// Bytes per element.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// Whether the array is stored at its type's full width (the layout of a plain array).
    pub(crate) fn is_plain(&self) -> bool {
        self.width == T::BYTES
    }

    /// The bytes the elements take.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.bytes.len()
    }
}

impl<T: Word> From<Vec<T>> for Packed<T> {
    /// At the full width.
    fn from(values: Vec<T>) -> Packed<T> {
        Packed::plain(values)
    }
}

impl<T: Word> Default for Packed<T> {
    fn default() -> Packed<T> {
        Packed::plain(Vec::new())
    }
}

impl<T: Word> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The width is the narrowest whose all-ones value is above every value (all-ones is `MAX`): each boundary.
    #[test]
    fn widths_at_their_boundaries() {
        let cases: [(u32, usize); 9] = [
            (0, 1),
            (254, 1),
            (255, 2),
            (65_534, 2),
            (65_535, 3),
            (0xFF_FFFE, 3),
            (0xFF_FFFF, 4),
            (u32::MAX - 1, 4),
            (1 << 31, 4),
        ];
        for (max, width) in cases {
            let values = vec![0, max / 2, max, u32::MAX, 1];
            let p = Packed::narrow(&values);
            assert_eq!(p.width(), width, "max {max}");
            assert_eq!(p.size_bytes(), values.len() * width);
            assert_eq!(p.iter().collect::<Vec<_>>(), values, "max {max}");
            assert_eq!(p.get(3), u32::MAX, "the sentinel at width {width}");
        }
        assert_eq!(width_for::<u32>(&[]), 1);
        assert_eq!(width_for(&[u32::MAX, u32::MAX]), 1, "only sentinels");
    }

    /// Member offsets: 4 bytes while the member bytes are under 4 GiB, 8 from there (no sentinel in them, but
    /// `u32::MAX` as a `u64` is a value, and needs 8).
    #[test]
    fn u64_offsets_take_four_bytes_under_four_gib() {
        let under: Vec<u64> = vec![0, 7, (1 << 32) - 2];
        assert_eq!(width_for(&under), 4);
        let p = Packed::narrow(&under);
        assert_eq!((p.width(), p.to_vec_for_test()), (4, under));
        for over in [(1u64 << 32) - 1, 1 << 32, 5 << 40, u64::MAX - 1] {
            let values = vec![0, 3, over];
            let p = Packed::narrow(&values);
            assert_eq!(p.width(), 8, "{over}");
            assert_eq!(p.to_vec_for_test(), values);
        }
        assert_eq!(Packed::narrow(&[0u64, 200, 254]).width(), 1);
    }

    #[test]
    fn the_full_width_is_the_plain_layout() {
        let values: Vec<u32> = vec![5, 0, u32::MAX, 1 << 30];
        let p = Packed::with_width(&values, 4);
        assert!(p.is_plain());
        assert_eq!(p.bytes(), bytemuck::cast_slice::<u32, u8>(&values));
        let q = Packed::with_width(&[1u32, 2, 3], 3);
        assert_eq!(q.bytes().len(), 9);
        assert_eq!(q.slice(1..3).to_vec(), [2, 3]);
        assert_eq!(Ints::of(&values[..]).to_vec(), values);
    }

    #[test]
    fn searches_match_the_slice_ones() {
        let values: Vec<u32> = vec![0, 3, 3, 9, 300, 70_000, 70_001];
        for width in [3, 4] {
            let p = Packed::with_width(&values, width);
            for x in [0, 1, 3, 4, 9, 299, 300, 70_001, 80_000] {
                assert_eq!(p.ints().partition_point(|v| v <= x), values.partition_point(|&v| v <= x), "{x}");
                match p.ints().binary_search(x) {
                    Ok(i) => assert_eq!(values[i], x),
                    Err(i) => assert_eq!((i, values.contains(&x)), (values.partition_point(|&v| v < x), false)),
                }
            }
            assert!(p.ints().ascending(false) && !p.ints().ascending(true));
            assert_eq!(p.last(), Some(70_001));
        }
    }

    /// The width-specialised checks answer as the element-by-element ones, at every width, on ascending arrays
    /// (with repeats, with the all-ones sentinel last) and on arrays made non-ascending at each place.
    #[test]
    fn ascending_and_all_match_the_element_checks_at_every_width() {
        fn reference<T: Word>(p: &Ints<'_, T>, strict: bool) -> bool {
            (1..p.len()).all(|i| if strict { p.get(i - 1) < p.get(i) } else { p.get(i - 1) <= p.get(i) })
        }
        fn check<T: Word>(values: &[T], width: usize) {
            let p = Packed::with_width(values, width);
            let q = p.ints();
            for strict in [false, true] {
                assert_eq!(q.ascending(strict), reference(&q, strict), "width {width} strict {strict} {values:?}");
            }
            let limit = values.iter().copied().filter(|&v| v != T::MAX).max();
            if let Some(limit) = limit {
                assert!(q.all(|v| v == T::MAX || v <= limit));
                assert_eq!(q.all(|v| v < limit), values.iter().all(|&v| v < limit), "width {width}");
            }
            assert_eq!(q.all(|v| v != T::MAX), !values.contains(&T::MAX), "width {width}");
        }
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |bound: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % bound
        };
        for (width, top) in [(1usize, 254u64), (2, 65_534), (3, 0xFF_FFFE), (4, u32::MAX as u64 - 1)] {
            // Long enough to span several check blocks.
            for n in [0usize, 1, 2, 3, 5000, 9000] {
                let mut values: Vec<u32> = (0..n).map(|_| next(top + 1) as u32).collect();
                values.sort_unstable();
                check(&values, width);
                values.dedup();
                check(&values, width);
                if n >= 2 {
                    values.push(u32::MAX);
                    check(&values, width);
                    values.pop();
                    for _ in 0..20 {
                        let mut bad = values.clone();
                        let i = next(bad.len() as u64 - 1) as usize;
                        bad.swap(i, i + 1);
                        check(&bad, width);
                        bad[i] = bad[i + 1];
                        check(&bad, width);
                        bad[i] = u32::MAX;
                        check(&bad, width);
                    }
                }
            }
        }
        for width in [4usize, 8] {
            let top = if width == 4 { (1u64 << 32) - 2 } else { u64::MAX - 1 };
            let mut values: Vec<u64> = (0..6000).map(|_| next(top)).collect();
            values.sort_unstable();
            check(&values, width);
            let mut bad = values.clone();
            bad.swap(4500, 4501);
            check(&bad, width);
            assert!(!Packed::with_width(&bad, width).ints().ascending(false) || bad[4500] == bad[4501]);
        }
    }

    #[test]
    fn mapped_arrays_read_their_width() {
        let p = Packed::with_width(&[1u32, 600, 70_000], 3);
        let map = Arc::new(Mapping::copy_of(p.bytes()));
        let q: Packed<u32> = Packed::mapped(&map, 0, 3, 3).unwrap();
        assert_eq!(q.bytes().as_ptr(), map.bytes().as_ptr(), "in place");
        assert_eq!(q.to_vec_for_test(), [1, 600, 70_000]);
        assert!(Packed::<u32>::mapped(&map, 0, 4, 3).is_none(), "past the end");
        assert!(Packed::<u32>::mapped(&map, 0, 1, 8).is_none(), "8 bytes for a u32");
        assert!(Packed::<u32>::mapped(&map, 0, 1, 5).is_none(), "no width 5");
    }

    impl<T: Word> Packed<T> {
        fn to_vec_for_test(&self) -> Vec<T> {
            self.ints().to_vec()
        }
    }
}
