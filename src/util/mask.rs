//! Next-token bitmasks in the layout engines share (XGrammar, LLGuidance, vLLM, SGLang): 32-bit words,
//! `ceil(V / 32)` per row, token `t` is bit `t % 32` of word `t / 32`, 1 = allowed, bits at and past V zero.

use crate::ids::TokenId;
use crate::util::packed::Ints;

/// Writes the row for the sorted token list `tokens` into `row` (every word of `row` is written).
#[inline]
pub(crate) fn fill_sparse(tokens: &[TokenId], row: &mut [u32]) {
    row.fill(0);
    set_bits(tokens, row);
}

/// Sets the bits of `tokens` in `row` (every token below `32 * row.len()`).
#[inline]
pub(crate) fn set_bits(tokens: &[TokenId], row: &mut [u32]) {
    for &t in tokens {
        set_bit(row, t);
    }
}

/// [`fill_sparse`] for a row stored at a packed width (one loop per width: [`Ints::for_each`]; at the full width
/// the slice's loop, as [`fill_sparse`]).
#[inline]
pub(crate) fn fill_sparse_packed(tokens: Ints<'_, TokenId>, row: &mut [u32]) {
    row.fill(0);
    tokens.for_each(|t| set_bit(row, t));
}

/// Sets the bit of `t` in `row` (the one bit-setting expression).
#[inline(always)]
fn set_bit(row: &mut [u32], t: TokenId) {
    row[(t >> 5) as usize] |= 1u32 << (t & 31);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::packed::Packed;

    #[test]
    fn layout_matches_the_engines() {
        let mut row = [u32::MAX; 3];
        fill_sparse(&[0, 31, 32, 65], &mut row);
        assert_eq!(row, [1 | (1 << 31), 1, 1 << 1]);
        for width in [2, 3, 4] {
            let mut packed = [u32::MAX; 3];
            fill_sparse_packed(Packed::with_width(&[0, 31, 32, 65], width).ints(), &mut packed);
            assert_eq!(packed, row, "width {width}");
        }
    }
}
