//! Ascending integers stored as one absolute value per block of `block` elements plus a narrow [`Packed`] value
//! per element (issue 38: the large automaton layout's `offsets`, `chain_base`, `chain_member` and
//! `member_offsets`, 2 to 4 bytes an element as packed arrays, take 1 or 2 here; see `automaton::ascending`).
//!
//! Two layouts ([`Layout`]):
//! - [`Layout::Deltas`]: `deltas[i] = v[i] - bases[i / block]` (the block's first delta 0), one per element, so
//!   `get` is one add;
//! - [`Layout::Lengths`]: `deltas[i] = v[i + 1] - v[i]`, one per element but the last, so `get(i)` adds the
//!   lengths from the block's start to `i` (at most `block - 1` adds, one loop over the bytes); for offsets of
//!   short strings (front-coded member suffixes, blocks of 16: the restart points) and chain bases.
//!
//! Reading never panics on crafted parts (sizes are checked by [`Blocked::from_parts`], sums wrap): a file's
//! parts give wrong values until [`Blocked::is_sound`] (or [`Blocked::block_sound`] for one block) accepts them.
#![cfg_attr(not(test), allow(dead_code))]

use super::packed::{width_for, Packed, Word};

/// How the per-element values relate to the block bases (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    Deltas,
    Lengths,
}

/// Ascending `u64` values: block bases at their width, narrow per-element values.
#[derive(Debug)]
pub(crate) struct Blocked {
    bases: Packed<u64>,
    deltas: Packed<u32>,
    block: usize,
    len: usize,
    layout: Layout,
}

impl Blocked {
    /// `values` (ascending) in `layout` with blocks of `block` (a power of two); `None` when they are not
    /// ascending or a per-element value does not fit below `u32::MAX`.
    pub(crate) fn new<T: Word>(values: &[T], block: usize, layout: Layout) -> Option<Blocked> {
        assert!(block.is_power_of_two(), "block {block}");
        if values.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let v = |i: usize| values[i].to_u64();
        let bases: Vec<u64> = values.iter().step_by(block).map(|x| x.to_u64()).collect();
        let fits = |d: u64| u32::try_from(d).ok().filter(|&d| d != u32::MAX);
        let deltas: Option<Vec<u32>> = match layout {
            Layout::Deltas => (0..values.len()).map(|i| fits(v(i) - bases[i / block])).collect(),
            Layout::Lengths => (1..values.len()).map(|i| fits(v(i) - v(i - 1))).collect(),
        };
        let (bases, deltas) = (Packed::narrow(&bases), Packed::narrow(&deltas?));
        Some(Blocked { bases, deltas, block, len: values.len(), layout })
    }

    /// The bytes [`Blocked::new`] would take for ascending `values` in `layout` with blocks of `block`, without
    /// building it; `None` where it would refuse them.
    pub(crate) fn size_of<T: Word>(values: &[T], block: usize, layout: Layout) -> Option<usize> {
        let (mut max_base, mut max_delta, mut base) = (0u64, 0u64, 0u64);
        for (i, x) in values.iter().enumerate() {
            let x = x.to_u64();
            let d = if i % block == 0 {
                base = x;
                max_base = max_base.max(x);
                if layout == Layout::Lengths && i > 0 {
                    x.checked_sub(values[i - 1].to_u64())?
                } else {
                    0
                }
            } else if layout == Layout::Deltas {
                x.checked_sub(base)?
            } else {
                x.checked_sub(values[i - 1].to_u64())?
            };
            max_delta = max_delta.max(d);
        }
        if max_delta >= u32::MAX as u64 {
            return None;
        }
        let n_deltas = match layout {
            Layout::Deltas => values.len(),
            Layout::Lengths => values.len().saturating_sub(1),
        };
        let bases = values.len().div_ceil(block) * width_for(&[max_base]);
        Some(bases + n_deltas * width_for(&[max_delta as u32]))
    }

    /// A [`Blocked`] of `len` elements from its parts (as [`Blocked::bases`] and [`Blocked::deltas`] give them,
    /// say read from a file); `None` unless `block` is a power of two and the parts' sizes are those of `len`
    /// elements. Their values are not checked ([`Blocked::is_sound`]).
    pub(crate) fn from_parts(
        bases: Packed<u64>,
        deltas: Packed<u32>,
        block: usize,
        len: usize,
        layout: Layout,
    ) -> Option<Blocked> {
        let n_deltas = match layout {
            Layout::Deltas => len,
            Layout::Lengths => len.saturating_sub(1),
        };
        (block.is_power_of_two() && bases.len() == len.div_ceil(block) && deltas.len() == n_deltas).then_some(Blocked {
            bases,
            deltas,
            block,
            len,
            layout,
        })
    }

    /// Element `i` (`< len`; panics otherwise, as a slice does).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        assert!(i < self.len, "index {i} of {}", self.len);
        let base = self.bases.get(i / self.block);
        match self.layout {
            Layout::Deltas => base.wrapping_add(self.deltas.get(i) as u64),
            Layout::Lengths => base.wrapping_add(self.raw_sum(i - i % self.block..i)),
        }
    }

    /// The sum of the per-element values `r` as stored (wrapping; an all-ones value, the sentinel that
    /// [`Blocked::block_sound`] refuses, counts as its bytes): one loop over the bytes at the deltas' width, the
    /// running sums of [`Layout::Lengths`].
    #[inline]
    fn raw_sum(&self, r: std::ops::Range<usize>) -> u64 {
        let d = self.deltas.slice(r);
        let bytes = d.bytes();
        match self.deltas.width() {
            1 => bytes.iter().fold(0u64, |s, &b| s.wrapping_add(b as u64)),
            2 => bytes.chunks_exact(2).fold(0u64, |s, c| s.wrapping_add(u16::from_ne_bytes([c[0], c[1]]) as u64)),
            4 => bytes
                .chunks_exact(4)
                .fold(0u64, |s, c| s.wrapping_add(u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as u64)),
            _ => d.iter().fold(0u64, |s, x| s.wrapping_add(x as u64)),
        }
    }

    /// Elements `i` and `i + 1` (`i + 1 < len`), in one pass ([`Layout::Lengths`]: the second is the first plus
    /// length `i`): a member's stored range, the hot path of reading its rest.
    #[inline]
    pub(crate) fn pair(&self, i: usize) -> (u64, u64) {
        let from = self.get(i);
        match self.layout {
            // (Within a block, both from its base.)
            Layout::Deltas if (i + 1) % self.block != 0 && i + 1 < self.len => {
                let base = self.bases.get(i / self.block);
                (from, base.wrapping_add(self.deltas.get(i + 1) as u64))
            }
            Layout::Deltas => (from, self.get(i + 1)),
            Layout::Lengths => {
                assert!(i + 1 < self.len, "index {} of {}", i + 1, self.len);
                (from, from.wrapping_add(self.raw_sum(i..i + 1)))
            }
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn last(&self) -> Option<u64> {
        self.len.checked_sub(1).map(|i| self.get(i))
    }

    /// The elements in order (one add each).
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut sum = 0u64;
        (0..self.len).map(move |i| {
            if i % self.block == 0 || self.layout == Layout::Deltas {
                sum = self.get(i);
            } else {
                sum = sum.wrapping_add(self.raw_sum(i - 1..i));
            }
            sum
        })
    }

    /// The first index whose element fails `pred` (true, then false, over the ascending elements; `len` if
    /// none fails), as [`slice::partition_point`]: a binary search over the blocks' first elements, then one
    /// within the block (a scan of running sums for [`Layout::Lengths`]).
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(u64) -> bool) -> usize {
        let n_blocks = self.bases.len();
        let (mut lo, mut hi) = (0, n_blocks);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.bases.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return 0;
        }
        let (from, to) = ((lo - 1) * self.block + 1, (lo * self.block).min(self.len));
        match self.layout {
            Layout::Deltas => {
                let (mut a, mut b) = (from, to);
                while a < b {
                    let mid = a + (b - a) / 2;
                    if pred(self.get(mid)) {
                        a = mid + 1;
                    } else {
                        b = mid;
                    }
                }
                a
            }
            Layout::Lengths => {
                let mut sum = self.bases.get(lo - 1);
                for i in from..to {
                    sum = sum.wrapping_add(self.raw_sum(i - 1..i));
                    if !pred(sum) {
                        return i;
                    }
                }
                to
            }
        }
    }

    /// The last element at most `x` and its index (`None` when the first is above `x`), as
    /// `partition_point(|v| v <= x) - 1` and `get` of it in one pass: a binary search over the block bases, then
    /// one within the block (a scan of running sums for [`Layout::Lengths`], one loop over the bytes at width 1).
    #[inline]
    pub(crate) fn last_at_most(&self, x: u64) -> Option<(usize, u64)> {
        let (mut lo, mut hi) = (0, self.bases.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.bases.get(mid) <= x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let k = lo.checked_sub(1)?;
        let (from, to) = (k * self.block, ((k + 1) * self.block).min(self.len));
        match self.layout {
            Layout::Deltas => {
                let (mut a, mut b) = (from + 1, to);
                while a < b {
                    let mid = a + (b - a) / 2;
                    if self.get(mid) <= x {
                        a = mid + 1;
                    } else {
                        b = mid;
                    }
                }
                Some((a - 1, self.get(a - 1)))
            }
            Layout::Lengths => {
                let (mut i, mut sum) = (from, self.bases.get(k));
                if self.deltas.width() == 1 {
                    for &d in self.deltas.slice(from..to - 1).bytes() {
                        let next = sum.wrapping_add(d as u64);
                        if next > x {
                            break;
                        }
                        (i, sum) = (i + 1, next);
                    }
                } else {
                    for j in from..to - 1 {
                        let next = sum.wrapping_add(self.raw_sum(j..j + 1));
                        if next > x {
                            break;
                        }
                        (i, sum) = (i + 1, next);
                    }
                }
                Some((i, sum))
            }
        }
    }

    /// Whether block `k` (`< ` the block count) is sound: its elements ascending (strictly if `strict`) without
    /// overflow, none of its per-element values the all-ones `u32::MAX`, its first delta 0 ([`Layout::Deltas`]),
    /// and the next block's base, if any, its last element plus the length after it (or not below it, strictly
    /// above if `strict`, for [`Layout::Deltas`]). Every block sound is the whole array ascending.
    pub(crate) fn block_sound(&self, k: usize, strict: bool) -> bool {
        if k >= self.bases.len() {
            return false;
        }
        let (from, to) = (k * self.block, ((k + 1) * self.block).min(self.len));
        let ok = |a: u64, b: u64| if strict { a < b } else { a <= b };
        let mut prev = self.bases.get(k);
        match self.layout {
            Layout::Deltas => {
                if self.deltas.get(from) != 0 {
                    return false;
                }
                for i in from + 1..to {
                    let d = self.deltas.get(i);
                    match self.bases.get(k).checked_add(d as u64) {
                        Some(v) if d != u32::MAX && ok(prev, v) => prev = v,
                        _ => return false,
                    }
                }
                k + 1 >= self.bases.len() || ok(prev, self.bases.get(k + 1))
            }
            Layout::Lengths => {
                let end = if k + 1 < self.bases.len() { to } else { to - 1 };
                for i in from..end {
                    let d = self.deltas.get(i);
                    match prev.checked_add(d as u64) {
                        Some(v) if d != u32::MAX && ok(prev, v) => prev = v,
                        _ => return false,
                    }
                }
                k + 1 >= self.bases.len() || prev == self.bases.get(k + 1)
            }
        }
    }

    /// Whether every block is sound ([`Blocked::block_sound`]): the elements ascending and every `get` exact.
    pub(crate) fn is_sound(&self, strict: bool) -> bool {
        (0..self.bases.len()).all(|k| self.block_sound(k, strict))
    }

    /// The block bases (the first element of each block).
    pub(crate) fn bases(&self) -> &Packed<u64> {
        &self.bases
    }

    /// The per-element values (deltas from the block base, or lengths).
    pub(crate) fn deltas(&self) -> &Packed<u32> {
        &self.deltas
    }

    pub(crate) fn block(&self) -> usize {
        self.block
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// The bytes of both parts.
    pub(crate) fn size_bytes(&self) -> usize {
        self.bases.size_bytes() + self.deltas.size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ascending values from a small deterministic generator: steps of 0..`max_step`.
    fn ascending(n: usize, max_step: u64, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        let mut v = 1000u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v += x % max_step;
                v
            })
            .collect()
    }

    /// `get`, `iter`, `last` and `partition_point` answer as the plain array, in both layouts, at the sizes
    /// around the block boundaries.
    #[test]
    fn answers_as_the_plain_array() {
        for layout in [Layout::Deltas, Layout::Lengths] {
            for (block, max_step) in [(16, 40), (64, 900), (1, 3)] {
                for n in [0, 1, 2, 15, 16, 17, 63, 64, 65, 1000] {
                    let v = ascending(n, max_step, n as u64 + block as u64);
                    let b = Blocked::new(&v, block, layout).unwrap();
                    assert!(b.is_sound(false), "{layout:?} {block} {n}");
                    assert_eq!(Blocked::size_of(&v, block, layout), Some(b.size_bytes()), "{layout:?} {block} {n}");
                    assert_eq!((b.len(), b.is_empty(), b.last()), (n, n == 0, v.last().copied()));
                    assert_eq!(b.iter().collect::<Vec<_>>(), v, "{layout:?} {block} {n}");
                    assert!((0..n).all(|i| b.get(i) == v[i]));
                    assert!((1..n).all(|i| b.pair(i - 1) == (v[i - 1], v[i])));
                    let probes = v.iter().flat_map(|&x| [x - 1, x, x + 1]).chain([0, u64::MAX]);
                    for x in probes {
                        let at = v.partition_point(|&y| y <= x);
                        assert_eq!(b.last_at_most(x), at.checked_sub(1).map(|i| (i, v[i])), "{x}");
                        assert_eq!(b.partition_point(|y| y <= x), at, "{x}");
                        assert_eq!(b.partition_point(|y| y < x), v.partition_point(|&y| y < x), "{x}");
                    }
                }
            }
        }
    }

    /// The per-element values take the width they need: 1 byte for lengths under 255 (members of 16), 2 for
    /// deltas within a block of 64 under 65,535 (chains).
    #[test]
    fn narrow_widths() {
        let v = ascending(10_000, 200, 7);
        let lengths = Blocked::new(&v, 16, Layout::Lengths).unwrap();
        assert_eq!((lengths.deltas().width(), lengths.bases().len()), (1, 625));
        assert_eq!(lengths.size_bytes(), 9_999 + 625 * lengths.bases().width());
        let deltas = Blocked::new(&v, 64, Layout::Deltas).unwrap();
        assert_eq!((deltas.deltas().width(), deltas.block(), deltas.layout()), (2, 64, Layout::Deltas));
        assert!(Blocked::new(&[0, u32::MAX as u64], 16, Layout::Lengths).is_none(), "a length of u32::MAX");
        assert!(Blocked::new(&[5u64, 4], 16, Layout::Deltas).is_none(), "descending");
    }

    /// `strict` soundness refuses a repeated element, within a block and across a block boundary.
    #[test]
    fn strict_refuses_repeats() {
        for layout in [Layout::Deltas, Layout::Lengths] {
            let strictly: Vec<u64> = (0..40).map(|i| i * 3).collect();
            assert!(Blocked::new(&strictly, 16, layout).unwrap().is_sound(true));
            for at in [5, 16] {
                let mut v = strictly.clone();
                v[at] = v[at - 1];
                let b = Blocked::new(&v, 16, layout).unwrap();
                assert!(b.is_sound(false) && !b.is_sound(true), "{layout:?} {at}");
            }
        }
    }

    /// Parts of the wrong sizes are refused; parts of the right sizes but spoiled values are not sound, and
    /// reading them (every `get`, `iter`, `partition_point`) gives values, never a panic.
    #[test]
    fn spoiled_parts_are_refused_or_unsound() {
        let v = ascending(100, 300, 3);
        for layout in [Layout::Deltas, Layout::Lengths] {
            let b = Blocked::new(&v, 16, layout).unwrap();
            let (bases, deltas) = (b.bases().iter().collect::<Vec<_>>(), b.deltas().iter().collect::<Vec<_>>());
            let parts = |bs: &[u64], ds: &[u32], len| {
                Blocked::from_parts(Packed::plain(bs.to_vec()), Packed::plain(ds.to_vec()), 16, len, layout)
            };
            assert!(parts(&bases, &deltas, 100).is_some_and(|b| b.is_sound(false)));
            assert!(parts(&bases, &deltas, 101).is_none());
            assert!(parts(&bases[1..], &deltas, 100).is_none());
            assert!(parts(&bases, &deltas[1..], 100).is_none());
            assert!(Blocked::from_parts(Packed::plain(bases.clone()), Packed::plain(deltas.clone()), 12, 100, layout)
                .is_none());
            let spoils: [(usize, Option<u64>, Option<u32>); 5] = [
                (3, Some(0), None),
                (3, Some(u64::MAX), None),
                (17, None, Some(u32::MAX)),
                (0, None, Some(u32::MAX - 1)),
                (33, None, Some(100_000)),
            ];
            for (i, base, delta) in spoils {
                let (mut bs, mut ds) = (bases.clone(), deltas.clone());
                if let Some(x) = base {
                    bs[i] = x;
                }
                if let Some(x) = delta {
                    ds[i] = x;
                }
                let b = parts(&bs, &ds, 100).unwrap();
                assert!(!b.is_sound(false), "{layout:?} {i} {base:?} {delta:?}");
                assert!((0..bs.len()).any(|k| !b.block_sound(k, false)));
                assert!(!b.block_sound(bs.len(), false), "past the last block");
                let all: Vec<u64> = b.iter().collect();
                assert_eq!(all.len(), 100);
                assert!((0..100).all(|i| b.get(i) == all[i]));
                assert!((1..100).all(|i| b.pair(i - 1).0 == all[i - 1]), "pairs read, unchecked");
                for x in [0, v[50], u64::MAX] {
                    assert!(b.partition_point(|y| y <= x) <= 100);
                    assert!(b.last_at_most(x).is_none_or(|(i, _)| i < 100));
                }
            }
        }
    }
}
