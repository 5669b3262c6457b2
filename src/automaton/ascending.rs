//! The automaton's ascending integer arrays: `offsets` (the CSR row starts of the explicit states), `chain_base`
//! (the first chain index of each chain), `chain_member` (each chain's member, chains numbered in member order)
//! and `member_offsets` (where each member's stored bytes begin and end).
//!
//! Two representations ([`Ascending`]):
//! - `Plain`: a [`Packed`] array (at the full width of its type in the small layout, byte for byte the plain
//!   array of format versions 1 to 4; at the width its values need in the large layout of versions 5 to 8);
//! - `Blocked`: a [`Blocked`] (one base per block of 16, 32 or 64 elements plus a narrow value per element), in
//!   the large layout (front-coded automata, format version 9): the layout and block size the smallest for the
//!   array's values among the choices its readers can afford ([`OFFSETS_BLOCKS`] for the rows `advance` reads,
//!   one add; [`CHAIN_BLOCKS`], [`MEMBER_BLOCKS`]). Issue 38: on all 4.5 M npm names, `offsets` 17.2 MB,
//!   `chain_base` 16.3, `chain_member` 12.2 and `member_offsets` 18.0 take about a third of that in blocks.
//!
//! In a file, a blocked array is two sections (its bases and its per-element values, each at its width) and its
//! shape (length, block size, layout) in the section `A_BLOCKED` (see `persist`); a plain one its own section as
//! before. A loaded array is checked before any query reads it: all of it by an eager load
//! ([`Ascending::is_sound`]); by a lazy load, each block the first time an element in it is read
//! ([`Ascending::block_verified`]: its bytes against the file's block hashes, then [`Blocked::block_sound`]), so a
//! crafted base, delta or length is refused before it can send a read out of bounds.

use crate::error::Result;
use crate::format::{ensure, Blocks, Reader, Writer};
use crate::util::blocked::{Blocked, Layout};
use crate::util::packed::{Ints, Packed, Word};

/// The block choices of `offsets`: deltas from the block base only (`advance` reads two offsets per state: one
/// add each, no running sum).
pub(crate) const OFFSETS_BLOCKS: &[(usize, Layout)] =
    &[(16, Layout::Deltas), (32, Layout::Deltas), (64, Layout::Deltas)];
/// The block choices of `chain_base` and `chain_member` (read once a chain state, after a search).
pub(crate) const CHAIN_BLOCKS: &[(usize, Layout)] =
    &[(16, Layout::Deltas), (32, Layout::Deltas), (64, Layout::Deltas), (16, Layout::Lengths)];
/// The block choices of front-coded member offsets: lengths in blocks of the restart interval first (a member
/// lookup decodes its restart block anyway), deltas otherwise.
pub(crate) const MEMBER_BLOCKS: &[(usize, Layout)] =
    &[(super::front::RESTART, Layout::Lengths), (16, Layout::Deltas), (32, Layout::Deltas), (64, Layout::Deltas)];
/// The largest block size a file may declare (a [`Layout::Lengths`] read sums up to a block of lengths).
const MAX_BLOCK: u64 = 1 << 10;

/// An ascending array, plain or in blocks (see the module documentation).
#[derive(Debug)]
pub(crate) enum Ascending<T: Word> {
    Plain(Packed<T>),
    Blocked(Blocked),
}

/// Member offsets: one per member plus the end.
pub(crate) type MemberOffsets = Ascending<u64>;

impl<T: Word> Default for Ascending<T> {
    fn default() -> Self {
        Ascending::Plain(Packed::default())
    }
}

/// The sections of one array in a file: the plain array, or (in blocks) its bases and per-element values.
#[derive(Clone, Copy)]
pub(super) struct Tags {
    pub(super) plain: u32,
    pub(super) bases: u32,
    pub(super) deltas: u32,
}

/// The shape of an array in the section `A_BLOCKED`: length, block size, layout (0: plain, in its own section).
pub(super) type Shape = [u64; 3];

impl<T: Word> Ascending<T> {
    /// `values` at the full width of `T` (the small layout).
    pub(crate) fn plain(values: Vec<T>) -> Self {
        Ascending::Plain(Packed::plain(values))
    }

    /// `values` at the narrowest width they fit.
    #[allow(dead_code)] // (Of the readers' API; the tests use it.)
    pub(crate) fn narrow(values: &[T]) -> Self {
        Ascending::Plain(Packed::narrow(values))
    }

    /// `values` (ascending) in the smallest of the block `choices` (block size, layout; lengths only where they
    /// take a tenth less than deltas), or plain at their narrowest width where that is smaller or none fits.
    pub(crate) fn blocked(values: &[T], choices: &[(usize, Layout)]) -> Self {
        let plain = Packed::<T>::narrow(values);
        let best = |layout: Layout| {
            choices
                .iter()
                .filter(|c| c.1 == layout)
                .filter_map(|&(block, layout)| {
                    Blocked::size_of(values, block, layout).map(|size| (size, block, layout))
                })
                .min_by_key(|c| c.0)
        };
        // Deltas unless lengths save a tenth: a read of lengths sums up to a block of them.
        let best = match (best(Layout::Deltas), best(Layout::Lengths)) {
            (Some(d), Some(l)) => Some(if l.0 * 10 < d.0 * 9 { l } else { d }),
            (d, l) => d.or(l),
        };
        match best {
            Some((size, block, layout)) if size < plain.size_bytes() => match Blocked::new(values, block, layout) {
                Some(b) => Ascending::Blocked(b),
                None => Ascending::Plain(plain),
            },
            _ => Ascending::Plain(plain),
        }
    }

    /// These values in blocks (see [`Ascending::blocked`]), when they are plain: for the arrays of a front-coded
    /// automaton loaded eagerly from an older file, once validated.
    pub(crate) fn into_blocks(self, choices: &[(usize, Layout)]) -> Self {
        match self {
            Ascending::Plain(p) => Ascending::blocked(&p.iter().collect::<Vec<T>>(), choices),
            b => b,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Ascending::Plain(p) => p.len(),
            Ascending::Blocked(b) => b.len(),
        }
    }

    #[allow(dead_code)] // (Of the readers' API; the tests use it.)
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` (`< len`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> T {
        match self {
            Ascending::Plain(p) => p.get(i),
            Ascending::Blocked(b) => T::from_u64(b.get(i)),
        }
    }

    /// Elements `i` and `i + 1` (`i + 1 < len`): a row's or a member's range.
    #[inline]
    pub(crate) fn pair(&self, i: usize) -> (T, T) {
        match self {
            Ascending::Plain(p) => {
                let o = p.slice(i..i + 2);
                (o.get(0), o.get(1))
            }
            Ascending::Blocked(b) => {
                let (x, y) = b.pair(i);
                (T::from_u64(x), T::from_u64(y))
            }
        }
    }

    pub(crate) fn last(&self) -> Option<T> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// The elements in order.
    #[allow(dead_code)] // (Of the readers' API; the tests use it.)
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = T> + '_> {
        match self {
            Ascending::Plain(p) => Box::new(p.iter()),
            Ascending::Blocked(b) => Box::new(b.iter().map(T::from_u64)),
        }
    }

    /// Elements `r` in order.
    pub(crate) fn range(&self, r: std::ops::Range<usize>) -> Box<dyn Iterator<Item = T> + '_> {
        match self {
            Ascending::Plain(p) => Box::new(p.slice(r).iter()),
            Ascending::Blocked(b) => Box::new(r.map(|i| T::from_u64(b.get(i)))),
        }
    }

    /// The first index whose element fails `pred` (true, then false, over the elements), as for a slice.
    #[inline]
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(T) -> bool) -> usize {
        match self {
            Ascending::Plain(p) => p.ints().partition_point(pred),
            Ascending::Blocked(b) => b.partition_point(|x| pred(T::from_u64(x))),
        }
    }

    /// The last element at most `x` and its index (`None` when the first is above `x`): in blocks, one pass
    /// ([`Blocked::last_at_most`]); a chain state's chain and first index.
    #[inline]
    pub(crate) fn last_at_most(&self, x: T) -> Option<(usize, T)> {
        match self {
            Ascending::Plain(p) => {
                let k = p.ints().partition_point(|v| v <= x).checked_sub(1)?;
                Some((k, p.get(k)))
            }
            Ascending::Blocked(b) => b.last_at_most(x.to_u64()).map(|(k, v)| (k, T::from_u64(v))),
        }
    }

    /// As `[T]::binary_search` on ascending elements.
    pub(crate) fn binary_search(&self, x: T) -> std::result::Result<usize, usize> {
        let i = self.partition_point(|v| v < x);
        if i < self.len() && self.get(i) == x {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// The plain array; `None` in blocks.
    pub(crate) fn plain_array(&self) -> Option<&Packed<T>> {
        match self {
            Ascending::Plain(p) => Some(p),
            Ascending::Blocked(_) => None,
        }
    }

    /// The plain array's integers; panics in blocks, which only front-coded automata use (the readers of their
    /// member table decode it first, `Automaton::decoded_members`).
    pub(crate) fn ints(&self) -> Ints<'_, T> {
        self.plain_array().expect("a plain array (not front-coded)").ints()
    }

    /// Whether plain at the full width of `T` (the layout of format versions 1 to 4).
    pub(crate) fn is_plain(&self) -> bool {
        self.plain_array().is_some_and(Packed::is_plain)
    }

    /// Whether the elements ascend (strictly if `strict`) and, in blocks, every block is sound (every `get`
    /// exact): the eager check of a loaded array.
    pub(crate) fn is_sound(&self, strict: bool) -> bool {
        match self {
            Ascending::Plain(p) => p.ints().ascending(strict),
            Ascending::Blocked(b) => b.is_sound(strict),
        }
    }

    /// The eager check of a loaded array named `name` (see [`Ascending::is_sound`]), as an error naming the
    /// first element (plain) or block (in blocks) that fails it.
    pub(crate) fn ensure_sound(&self, name: &str, strict: bool) -> Result<()> {
        use rayon::prelude::*;
        let order = if strict { "strictly " } else { "" };
        match self {
            Ascending::Plain(p) if !p.ints().ascending(strict) => {
                let ints = p.ints();
                let up = |i: usize| ints.get(i - 1) < ints.get(i) || (!strict && ints.get(i - 1) == ints.get(i));
                let i = (1..ints.len()).find(|&i| !up(i)).unwrap_or(0);
                ensure(false, || format!("{name} do not ascend {order}(element {i})"))
            }
            Ascending::Plain(_) => Ok(()),
            Ascending::Blocked(b) => {
                let bad = (0..b.bases().len())
                    .into_par_iter()
                    .with_min_len(1 << 10)
                    .find_first(|&k| !b.block_sound(k, strict));
                ensure(bad.is_none(), || {
                    format!(
                        "{name} in blocks: block {} does not ascend {order}from its base to the next block's base (a \
                         base, delta or length is wrong)",
                        bad.unwrap()
                    )
                })
            }
        }
    }

    pub(crate) fn size_bytes(&self) -> usize {
        match self {
            Ascending::Plain(p) => p.size_bytes(),
            Ascending::Blocked(b) => b.size_bytes(),
        }
    }

    /// Elements per block (`None`: plain).
    pub(crate) fn block(&self) -> Option<usize> {
        match self {
            Ascending::Plain(_) => None,
            Ascending::Blocked(b) => Some(b.block()),
        }
    }

    /// Whether every byte of the array matches the file's block hashes (a lazily loaded file).
    pub(super) fn verified(&self, blocks: &Blocks) -> bool {
        match self {
            Ascending::Plain(p) => blocks.verify(p.bytes()),
            Ascending::Blocked(b) => blocks.verify(b.bases().bytes()) && blocks.verify(b.deltas().bytes()),
        }
    }

    /// Whether elements `from..=to` (`< len`) can be read exactly: plain, their bytes match the file's block
    /// hashes; in blocks, every block holding one, and the block before them, is verified
    /// ([`Ascending::block_verified`], what an eager load checks of every block; `done` says and remembers which
    /// blocks were, one bit per block).
    pub(super) fn elements_verified(
        &self,
        blocks: &Blocks,
        done: &[std::sync::atomic::AtomicU64],
        from: usize,
        to: usize,
        strict: bool,
    ) -> bool {
        use std::sync::atomic::Ordering;
        if from > to || to >= self.len() {
            return false;
        }
        match self {
            Ascending::Plain(p) => blocks.verify(p.slice(from..to + 1).bytes()),
            // (And the block before: its check holds this block's base against its own elements.)
            Ascending::Blocked(b) => ((from / b.block()).saturating_sub(1)..=to / b.block()).all(|k| {
                let word = done.get(k / 64).map_or(0, |w| w.load(Ordering::Relaxed));
                if word >> (k % 64) & 1 == 1 {
                    return true;
                }
                let ok = self.block_verified(blocks, k, strict);
                if ok {
                    if let Some(w) = done.get(k / 64) {
                        w.fetch_or(1 << (k % 64), Ordering::Relaxed);
                    }
                }
                ok
            }),
        }
    }

    /// One bit per block (all clear), for [`Ascending::elements_verified`]; empty when plain.
    pub(super) fn block_bits(&self) -> Box<[std::sync::atomic::AtomicU64]> {
        let n = match self {
            Ascending::Plain(_) => 0,
            Ascending::Blocked(b) => b.bases().len(),
        };
        (0..n.div_ceil(64)).map(|_| std::sync::atomic::AtomicU64::new(0)).collect()
    }

    /// Whether block `k` is sound ([`Blocked::block_sound`]) and its bytes (its base, the next block's base, its
    /// per-element values) match the file's block hashes; always `true` for a plain array.
    pub(super) fn block_verified(&self, blocks: &Blocks, k: usize, strict: bool) -> bool {
        let Ascending::Blocked(b) = self else { return true };
        let (n_bases, n_deltas) = (b.bases().len(), b.deltas().len());
        if k >= n_bases {
            return false;
        }
        let from = k * b.block();
        let to = ((k + 1) * b.block()).min(n_deltas);
        blocks.verify(b.bases().slice(k..(k + 2).min(n_bases)).bytes())
            && blocks.verify(b.deltas().slice(from.min(to)..to).bytes())
            && b.block_sound(k, strict)
    }

    /// Whether the first and the last element can be read exactly (a lazy load's check of a non-empty array:
    /// the sizes of the other arrays rest on them).
    pub(super) fn ends_verified(&self, blocks: &Blocks, strict: bool) -> bool {
        let n = self.len();
        match self {
            _ if n == 0 => false,
            Ascending::Plain(p) => blocks.verify(p.slice(0..1).bytes()) && blocks.verify(p.slice(n - 1..n).bytes()),
            Ascending::Blocked(b) => {
                self.block_verified(blocks, 0, strict) && self.block_verified(blocks, (n - 1) / b.block(), strict)
            }
        }
    }

    /// Writes the array (its plain section, or its two sections in blocks) and returns its shape.
    pub(super) fn write(&self, w: &mut Writer, tags: Tags) -> Shape {
        match self {
            Ascending::Plain(p) => {
                w.section_packed(tags.plain, p);
                [p.len() as u64, 0, 0]
            }
            Ascending::Blocked(b) => {
                w.section_packed(tags.bases, b.bases());
                w.section_packed(tags.deltas, b.deltas());
                let layout = match b.layout() {
                    Layout::Deltas => 1,
                    Layout::Lengths => 2,
                };
                [b.len() as u64, b.block() as u64, layout]
            }
        }
    }

    /// Reads the array `name` of shape `shape` (`None` or layout 0: plain, in its own section). Its values are
    /// not checked ([`Ascending::is_sound`], [`Ascending::block_verified`]).
    pub(super) fn read(r: &Reader, tags: Tags, shape: Option<&[u64]>, name: &str) -> Result<Self> {
        let [len, block, layout] = match shape {
            Some(&[len, block, layout]) if layout != 0 => [len, block, layout],
            _ => return Ok(Ascending::Plain(r.packed(tags.plain)?)),
        };
        ensure(layout <= 2 && block <= MAX_BLOCK && !r.has(tags.plain), || {
            format!("{name} in blocks: layout {layout} or block size {block} not one this libtrie writes")
        })?;
        let layout = if layout == 1 { Layout::Deltas } else { Layout::Lengths };
        let (bases, deltas) = (r.packed(tags.bases)?, r.packed(tags.deltas)?);
        let b =
            usize::try_from(len).ok().and_then(|len| Blocked::from_parts(bases, deltas, block as usize, len, layout));
        ensure(b.is_some(), || {
            format!("{name} in blocks: {len} elements in blocks of {block} do not match the sizes of its sections")
        })?;
        Ok(Ascending::Blocked(b.unwrap()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_answer_as_the_plain_offsets() {
        let offsets: Vec<u64> = (0..1000u64).scan(0, |s, i| Some(std::mem::replace(s, *s + i % 7))).collect();
        let b = MemberOffsets::blocked(&offsets, MEMBER_BLOCKS);
        assert!(matches!(b, Ascending::Blocked(_)));
        assert!(b.size_bytes() < offsets.len() * 2, "{}", b.size_bytes());
        assert_eq!(b.len(), offsets.len());
        assert!(b.is_sound(false) && !b.is_sound(true));
        assert_eq!(b.iter().collect::<Vec<_>>(), offsets);
        assert_eq!(b.range(17..40).collect::<Vec<_>>(), offsets[17..40]);
        for m in 0..offsets.len() - 1 {
            assert_eq!(b.get(m), offsets[m]);
            assert_eq!(b.pair(m), (offsets[m], offsets[m + 1]));
        }
        for x in [0, 5, 700, 1_000_000] {
            let at = offsets.partition_point(|&o| o < x);
            let want = if offsets.get(at) == Some(&x) { Ok(at) } else { Err(at) };
            assert_eq!(b.binary_search(x), want, "{x}");
        }
        let p = MemberOffsets::narrow(&offsets).into_blocks(MEMBER_BLOCKS);
        assert!(matches!(p, Ascending::Blocked(_)));
    }

    /// The smallest choice wins, lengths only where they save a tenth: chain bases growing by about 12 take
    /// deltas of one byte in blocks of 16 (lengths would save one byte); steps up to 40 take lengths of one byte
    /// (deltas would take two); offsets over 2^24 with one long row take two-byte deltas (not four-byte plain
    /// values).
    #[test]
    fn the_smallest_choice_is_taken() {
        let bases: Vec<u32> = (0..10_000u32).map(|i| i * 12 + i % 5).collect();
        let Ascending::Blocked(b) = Ascending::blocked(&bases, CHAIN_BLOCKS) else { panic!("plain") };
        assert_eq!((b.layout(), b.deltas().width()), (Layout::Deltas, 1));
        let size = |layout| {
            CHAIN_BLOCKS.iter().filter(|c| c.1 == layout).filter_map(|&(k, l)| Blocked::size_of(&bases, k, l)).min()
        };
        assert_eq!(Some(b.size_bytes()), size(Layout::Deltas));
        assert_eq!(size(Layout::Lengths), Some(b.size_bytes() - 1));
        let steps: Vec<u32> = (0..10_000u32).map(|i| i * 20 + i * i % 19).collect();
        let Ascending::Blocked(b) = Ascending::blocked(&steps, CHAIN_BLOCKS) else { panic!("plain") };
        assert_eq!((b.layout(), b.deltas().width(), b.block()), (Layout::Lengths, 1, 16));
        assert!((0..steps.len()).all(|i| b.get(i) == steps[i] as u64));
        let mut offsets: Vec<u32> = (0..5000u32).map(|i| (1 << 25) + i * 3).collect();
        offsets.iter_mut().skip(100).for_each(|o| *o += 20_000);
        let Ascending::Blocked(b) = Ascending::blocked(&offsets, OFFSETS_BLOCKS) else { panic!("plain") };
        assert_eq!((b.layout(), b.deltas().width()), (Layout::Deltas, 2));
    }

    #[test]
    fn long_suffixes_and_tiny_arrays_stay_plain() {
        let offsets = [0u64, 1, u32::MAX as u64 + 5];
        let b = MemberOffsets::blocked(&offsets, MEMBER_BLOCKS);
        assert!(b.plain_array().is_some());
        assert_eq!(b.iter().collect::<Vec<_>>(), offsets);
        assert!(Ascending::blocked(&[0u32, 3], CHAIN_BLOCKS).plain_array().is_some());
    }
}
