//! The member offsets table (`Automaton::member_offsets`): where each member's stored bytes begin and end.
//!
//! Two representations ([`MemberOffsets`]):
//! - `Plain`: a [`Packed`] array, one offset per member plus the end: every automaton as a file holds it, and
//!   every automaton that is not front-coded, or that is loaded lazily (mapped, checked as it is read), keeps it.
//! - `Blocked`: front-coded members held in memory (compiled, or loaded eagerly and validated) keep a [`Blocked`]
//!   in the [`Layout::Lengths`] layout, one base per 16-member restart block (see `front`) plus each member's
//!   suffix length at a packed width: about 1.3 bytes a member instead of 4 (issue 38).
//!
//! Files are unchanged: the table is written as the plain offsets (the section `A_MEMBER_OFFSETS`, at the width
//! its values need, as before) and turned into blocks once an eager load has validated it.

use super::front;
use crate::util::blocked::{Blocked, Layout};
use crate::util::packed::{Ints, Packed};

/// Member offsets, plain or in blocks (see the module documentation).
#[derive(Debug)]
pub(crate) enum MemberOffsets {
    Plain(Packed<u64>),
    Blocked(Blocked),
}

impl Default for MemberOffsets {
    fn default() -> Self {
        MemberOffsets::Plain(Packed::default())
    }
}

impl MemberOffsets {
    /// Front-coded offsets (ascending, starting at 0) in blocks of the restart interval; plain (narrow) when a
    /// suffix is too long for the blocks' per-member lengths.
    pub(crate) fn front(offsets: &[u64]) -> MemberOffsets {
        match Blocked::new(offsets, front::RESTART, Layout::Lengths) {
            Some(b) => MemberOffsets::Blocked(b),
            None => MemberOffsets::Plain(Packed::narrow(offsets)),
        }
    }

    /// These offsets in blocks (see [`MemberOffsets::front`]), when they are plain; for front-coded members
    /// once validated.
    pub(crate) fn into_blocks(self) -> MemberOffsets {
        match self {
            MemberOffsets::Plain(p) => MemberOffsets::front(&p.iter().collect::<Vec<u64>>()),
            b => b,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            MemberOffsets::Plain(p) => p.len(),
            MemberOffsets::Blocked(b) => b.len(),
        }
    }

    /// Offset `i` (`< len`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        match self {
            MemberOffsets::Plain(p) => p.get(i),
            MemberOffsets::Blocked(b) => b.get(i),
        }
    }

    /// Offsets `m` and `m + 1` (`m + 1 < len`): member `m`'s stored range.
    #[inline]
    pub(crate) fn pair(&self, m: usize) -> (u64, u64) {
        match self {
            MemberOffsets::Plain(p) => {
                let o = p.slice(m..m + 2);
                (o.get(0), o.get(1))
            }
            MemberOffsets::Blocked(b) => b.pair(m),
        }
    }

    /// The offsets in order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            MemberOffsets::Plain(p) => Box::new(p.iter()),
            MemberOffsets::Blocked(b) => Box::new(b.iter()),
        }
    }

    /// Offsets `r` in order.
    pub(crate) fn range(&self, r: std::ops::Range<usize>) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            MemberOffsets::Plain(p) => Box::new(p.slice(r).iter()),
            MemberOffsets::Blocked(b) => Box::new(r.map(|i| b.get(i))),
        }
    }

    /// The plain array (every lazily loaded automaton's, and every one's that is not front-coded); `None` in
    /// blocks.
    pub(crate) fn plain(&self) -> Option<&Packed<u64>> {
        match self {
            MemberOffsets::Plain(p) => Some(p),
            MemberOffsets::Blocked(_) => None,
        }
    }

    /// The plain array's integers (see [`MemberOffsets::plain`]); panics in blocks, which only front-coded
    /// members use (their readers decode them first, `Automaton::decoded_members`).
    pub(crate) fn ints(&self) -> Ints<'_, u64> {
        self.plain().expect("plain member offsets (not front-coded)").ints()
    }

    /// The offsets as a plain array at the width their values need (what a file holds for blocks).
    pub(crate) fn narrowed(&self) -> Packed<u64> {
        Packed::narrow(&self.iter().collect::<Vec<u64>>())
    }

    /// Whether plain at the full width of `u64` (the layout of format versions 1 to 4).
    pub(crate) fn is_plain(&self) -> bool {
        self.plain().is_some_and(Packed::is_plain)
    }

    pub(crate) fn size_bytes(&self) -> usize {
        match self {
            MemberOffsets::Plain(p) => p.size_bytes(),
            MemberOffsets::Blocked(b) => b.size_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_answer_as_the_plain_offsets() {
        let offsets: Vec<u64> = (0..1000u64).scan(0, |s, i| Some(std::mem::replace(s, *s + i % 7))).collect();
        let b = MemberOffsets::front(&offsets);
        assert!(matches!(b, MemberOffsets::Blocked(_)));
        assert!(b.size_bytes() < offsets.len() * 2, "{}", b.size_bytes());
        assert_eq!(b.len(), offsets.len());
        assert_eq!(b.iter().collect::<Vec<_>>(), offsets);
        assert_eq!(b.range(17..40).collect::<Vec<_>>(), offsets[17..40]);
        for m in 0..offsets.len() - 1 {
            assert_eq!(b.get(m), offsets[m]);
            assert_eq!(b.pair(m), (offsets[m], offsets[m + 1]));
        }
        assert_eq!(b.narrowed().iter().collect::<Vec<_>>(), offsets);
        let p = MemberOffsets::Plain(Packed::narrow(&offsets)).into_blocks();
        assert!(matches!(p, MemberOffsets::Blocked(_)));
    }

    #[test]
    fn long_suffixes_stay_plain() {
        let offsets = [0u64, 1, u32::MAX as u64 + 5];
        let b = MemberOffsets::front(&offsets);
        assert!(b.plain().is_some());
        assert_eq!(b.iter().collect::<Vec<_>>(), offsets);
    }
}
