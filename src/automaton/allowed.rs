//! [`Allowed`]: the tokens of one state, borrowed or inline.

use super::row_cache::DerivedRow;
use super::*;
use crate::util::packed::Ints;

/// The tokens allowed in a state, ascending: borrowed from the automaton for explicit states (decoded where a large
/// automaton stores them at a packed width), computed for chain states (a handful of ids, kept inline).
/// Dereferences to `[TokenId]`.
#[derive(Clone, Debug)]
pub struct Allowed<'a>(pub(super) AllowedRepr<'a>);

#[derive(Clone, Debug)]
pub(super) enum AllowedRepr<'a> {
    Borrowed(&'a [TokenId]),
    Inline([TokenId; INLINE], u8),
    Heap(Vec<TokenId>),
    /// A derived row kept in the automaton's cache (see `row_cache`).
    Shared(Arc<[TokenId]>),
}

/// Allowed lists of chain states up to this long are kept inline.
const INLINE: usize = 30;

impl<'a> Allowed<'a> {
    pub(super) fn collect(mut ids: Vec<TokenId>) -> Allowed<'a> {
        ids.sort_unstable();
        if ids.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..ids.len()].copy_from_slice(&ids);
            Allowed(AllowedRepr::Inline(inline, ids.len() as u8))
        } else {
            Allowed(AllowedRepr::Heap(ids))
        }
    }
}

impl<'a> Allowed<'a> {
    /// The stored row of an explicit state: borrowed at the full width, decoded at a packed one.
    #[inline]
    pub(super) fn row(tokens: Ints<'a, TokenId>) -> Allowed<'a> {
        if let Some(s) = tokens.as_slice() {
            return Allowed(AllowedRepr::Borrowed(s));
        }
        if tokens.len() <= INLINE {
            let mut inline = [0; INLINE];
            let mut n = 0;
            tokens.for_each(|t| {
                inline[n] = t;
                n += 1;
            });
            Allowed(AllowedRepr::Inline(inline, n as u8))
        } else {
            let mut ids = Vec::new();
            tokens.extend_into(&mut ids);
            Allowed(AllowedRepr::Heap(ids))
        }
    }
}

impl Allowed<'_> {
    /// A derived row (ascending): shared when kept in the cache.
    pub(super) fn derived(row: DerivedRow) -> Allowed<'static> {
        match row {
            DerivedRow::Cached(a) => Allowed(AllowedRepr::Shared(a)),
            DerivedRow::Fresh(v) => Allowed::collect(v),
        }
    }
}

impl std::ops::Deref for Allowed<'_> {
    type Target = [TokenId];
    #[inline]
    fn deref(&self) -> &[TokenId] {
        match &self.0 {
            AllowedRepr::Borrowed(s) => s,
            AllowedRepr::Inline(a, n) => &a[..*n as usize],
            AllowedRepr::Heap(v) => v,
            AllowedRepr::Shared(a) => a,
        }
    }
}

impl PartialEq<[TokenId]> for Allowed<'_> {
    fn eq(&self, other: &[TokenId]) -> bool {
        **self == *other
    }
}

impl<const N: usize> PartialEq<&[TokenId; N]> for Allowed<'_> {
    fn eq(&self, other: &&[TokenId; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<[TokenId; N]> for Allowed<'_> {
    fn eq(&self, other: &[TokenId; N]) -> bool {
        **self == other[..]
    }
}

impl PartialEq<Vec<TokenId>> for Allowed<'_> {
    fn eq(&self, other: &Vec<TokenId>) -> bool {
        **self == other[..]
    }
}

impl PartialEq<&[TokenId]> for Allowed<'_> {
    fn eq(&self, other: &&[TokenId]) -> bool {
        **self == **other
    }
}

impl PartialEq<Allowed<'_>> for Vec<TokenId> {
    fn eq(&self, other: &Allowed<'_>) -> bool {
        self[..] == **other
    }
}

impl PartialEq for Allowed<'_> {
    fn eq(&self, other: &Allowed<'_>) -> bool {
        **self == **other
    }
}

impl Eq for Allowed<'_> {}

impl<'b> IntoIterator for &'b Allowed<'_> {
    type Item = &'b TokenId;
    type IntoIter = std::slice::Iter<'b, TokenId>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
