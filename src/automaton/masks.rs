//! Bitmask fills: one row, a batch of states of one automaton, rows of several automata.

use super::*;

impl Automaton {
    /// Writes the bitmask of `state` into `row` (at least [`Automaton::mask_words`] words; every word of `row`
    /// is written, bits past the vocabulary zero). [`ErrorKind::BufferTooSmall`] leaves `row` untouched.
    #[inline]
    pub fn fill_bitmask(&self, state: State, row: &mut [u32]) -> Result<()> {
        self.check(state)?;
        let words = self.mask_words();
        if row.len() < words {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("the bitmask has {} words but needs {words} (ceil({} / 32))", row.len(), self.vocab.n_vocab()),
            ));
        }
        self.fill_row(state, row);
        Ok(())
    }

    #[inline]
    pub(super) fn fill_row(&self, state: State, row: &mut [u32]) {
        if state == State::FINISHED {
            return fill_sparse(self.vocab.eog_ids(), row);
        }
        match self.kind(state) {
            Kind::Explicit(s) if self.is_derived(s) => fill_sparse(&self.derived_list(s), row),
            Kind::Explicit(s) => {
                let allowed = self.tokens.slice(self.range(s));
                if allowed.len() >= self.dense_threshold() {
                    if let Ok(i) = self.dense_states.binary_search(&(s as u32)) {
                        let words = self.mask_words();
                        row[..words].copy_from_slice(&self.dense_rows[i * words..(i + 1) * words]);
                        row[words..].fill(0);
                        return;
                    }
                }
                fill_sparse_packed(allowed, row);
            }
            Kind::Chain(m, d) => {
                row.fill(0);
                let rest = self.member_rest(m, d);
                self.prefix_tokens(rest, |t, _| set_bits(t, row));
                if rest.is_empty() && !self.is_open() {
                    set_bits(self.vocab.eog_ids(), row);
                }
            }
        }
    }

    /// States with at least this many allowed tokens get a precomputed row (see [`dense_threshold`]).
    pub(super) fn dense_threshold(&self) -> usize {
        dense_threshold(self.mask_words())
    }

    /// Fills one row per state: row `i` is `out[i * row_words..(i + 1) * row_words]`, `row_words` at least
    /// [`Automaton::mask_words`]. Rows are filled in parallel when there are many. All states are checked before
    /// anything is written.
    pub fn fill_bitmask_batch(&self, states: &[State], out: &mut [u32], row_words: usize) -> Result<()> {
        let words = self.mask_words();
        if row_words < words {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("rows of {row_words} words are too short: {words} needed"),
            ));
        }
        let out = batch_buffer(out, states.len(), row_words)?;
        for &s in states {
            self.check(s)?;
        }
        fill_rows(out, row_words, states, |row, &s| self.fill_row(s, row));
        Ok(())
    }

    /// Fills one row per `(automaton, state)` pair, for batches whose sequences follow different sets (a serving
    /// engine's batch): row `i` is `out[i * row_words..(i + 1) * row_words]`. A `None` automaton marks an
    /// unconstrained sequence: its row is all ones. `row_words` must be at least every automaton's
    /// [`Automaton::mask_words`]. Every pair is checked before anything is written. Parallel for large batches.
    pub fn fill_bitmask_rows(rows: &[(Option<&Automaton>, State)], out: &mut [u32], row_words: usize) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        if row_words == 0 {
            return Err(Error::invalid("row_words is 0: a bitmask row needs at least one word"));
        }
        let out = batch_buffer(out, rows.len(), row_words)?;
        for (i, &(a, s)) in rows.iter().enumerate() {
            if let Some(a) = a {
                if row_words < a.mask_words() {
                    return Err(Error::new(
                        ErrorKind::BufferTooSmall,
                        format!("rows of {row_words} words are too short for row {i}: {} needed", a.mask_words()),
                    ));
                }
                a.check(s).map_err(|e| Error::new(e.kind(), format!("row {i}: {}", e.message())))?;
            }
        }
        fill_rows(out, row_words, rows, |row, &(a, s)| match a {
            Some(a) => a.fill_row(s, row),
            None => row.fill(u32::MAX),
        });
        Ok(())
    }
}

/// The first `n_rows * row_words` words of `out`, or `BufferTooSmall` naming the sizes.
/// The one dense-row threshold: an explicit state allowing at least this many tokens has a precomputed row, for a
/// mask of `mask_words` words (used when rows are built and when they are looked up).
pub(crate) fn dense_threshold(mask_words: usize) -> usize {
    (mask_words / 4).max(64)
}

pub(super) fn batch_buffer(out: &mut [u32], n_rows: usize, row_words: usize) -> Result<&mut [u32]> {
    let need = n_rows.checked_mul(row_words).ok_or_else(|| Error::invalid("batch size overflows"))?;
    if out.len() < need {
        return Err(Error::new(
            ErrorKind::BufferTooSmall,
            format!("the batch buffer has {} words but {n_rows} rows of {row_words} need {need}", out.len()),
        ));
    }
    Ok(&mut out[..need])
}

/// Fills row `i` of `out` (rows of `row_words`, `row_words > 0`) from `items[i]`; in parallel for 64 rows or more.
pub(super) fn fill_rows<T: Sync>(out: &mut [u32], row_words: usize, items: &[T], fill: impl Fn(&mut [u32], &T) + Sync) {
    if items.len() >= 64 {
        out.par_chunks_mut(row_words).zip(items.par_iter()).with_min_len(32).for_each(|(row, it)| fill(row, it));
    } else {
        out.chunks_mut(row_words).zip(items).for_each(|(row, it)| fill(row, it));
    }
}
