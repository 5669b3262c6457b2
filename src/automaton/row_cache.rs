//! A bounded cache of computed rows: the allowed tokens of derived states (see `derived`) whose rows are wide, kept
//! after their first walk so that a mask of such a state, once used, is a copy of a sorted token list.
//!
//! Shared by the threads that use the automaton (it is `Send + Sync`): the rows are spread over [`SHARDS`] shards
//! by state, each behind its own mutex held only to look a row up (an `Arc` clone) or to insert one; the bits are
//! set outside the lock. Each shard keeps at most its share of the byte budget ([`DEFAULT_BUDGET`] unless set with
//! [`Automaton::set_row_cache_budget`]), counting each row as its tokens' bytes plus [`ENTRY_BYTES`] (the map
//! entry and its spare capacity, the queue slot, the row's header); a row over a shard's share is not kept. When a
//! row does not fit, rows are evicted in insertion order, a row used since it was inserted or last passed over
//! getting a second chance (the CLOCK policy). The cache holds no memory until a row is kept, and is not counted in
//! [`Automaton::memory_usage`] (see [`Automaton::row_cache_usage`]).
//!
//! A cached row is the walk's answer (sorted, without repeats), so the answers are the same cached or not.

use super::*;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The cache's byte budget of an automaton unless set otherwise: 4 MiB.
pub(crate) const DEFAULT_BUDGET: usize = 4 << 20;

/// Rows of fewer tokens are not kept (walked again on every use: a few microseconds at most).
pub(crate) const MIN_TOKENS: usize = 16;

/// What a row costs beyond its tokens' bytes: its header (16 bytes), its map entry (24 bytes and a control byte,
/// with the map's spare capacity: up to about twice that) and its queue slot (4 bytes, up to twice).
pub(crate) const ENTRY_BYTES: usize = 96;

/// The number of shards (a power of two).
const SHARDS: usize = 64;

/// A shard's rows (by state, with their used bits), the states in insertion order, and the bytes counted.
#[derive(Default)]
struct Shard {
    rows: HashMap<u32, (Arc<[TokenId]>, bool), BuildHasherDefault<StateHasher>>,
    queue: VecDeque<u32>,
    bytes: usize,
}

/// A hasher for state numbers (a multiplicative hash: the shard takes the top bits, the map the others).
#[derive(Default)]
struct StateHasher(u64);

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The cost counted for a row of `n` tokens.
#[inline]
fn cost(n: usize) -> usize {
    n * std::mem::size_of::<TokenId>() + ENTRY_BYTES
}

/// The shard of state `s` (another multiplier than the maps' hash: the rows of a shard spread over its map).
#[inline]
fn shard_of(s: u32) -> usize {
    (s.wrapping_mul(0x2545_F491) >> 26) as usize % SHARDS
}

/// The cache (see the module doc).
pub(crate) struct RowCache {
    shards: OnceLock<Box<[Mutex<Shard>]>>,
    /// Each shard's share of the budget.
    shard_budget: usize,
}

impl RowCache {
    /// An empty cache of `budget` bytes (0: nothing is kept).
    pub(crate) fn new(budget: usize) -> RowCache {
        RowCache { shards: OnceLock::new(), shard_budget: budget / SHARDS }
    }

    /// The shard of state `s`, `None` before any row was kept.
    #[inline]
    fn shard(&self, s: u32) -> Option<MutexGuard<'_, Shard>> {
        let shards = self.shards.get()?;
        // A poisoned shard (a panic while it was held: none can happen there) is still consistent.
        Some(shards[shard_of(s)].lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The kept row of state `s`, if any (marked used).
    #[inline]
    pub(crate) fn get(&self, s: u32) -> Option<Arc<[TokenId]>> {
        let mut shard = self.shard(s)?;
        let (row, used) = shard.rows.get_mut(&s)?;
        *used = true;
        Some(row.clone())
    }

    /// Keeps `row` as the row of state `s` if it is wide enough and fits a shard's share, evicting others as
    /// needed (see the module doc).
    pub(crate) fn insert(&self, s: u32, row: &Arc<[TokenId]>) {
        let c = cost(row.len());
        if row.len() < MIN_TOKENS || c > self.shard_budget {
            return;
        }
        self.shards.get_or_init(|| (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect());
        let Some(mut guard) = self.shard(s) else { return };
        let Shard { rows, queue, bytes } = &mut *guard;
        if rows.contains_key(&s) {
            return;
        }
        // Each turn evicts a row or clears a used bit: at most two turns a row.
        while *bytes + c > self.shard_budget {
            let Some(k) = queue.pop_front() else { break };
            match rows.get_mut(&k) {
                Some((_, used)) if *used => {
                    *used = false;
                    queue.push_back(k);
                }
                Some(_) => {
                    let (old, _) = rows.remove(&k).expect("present");
                    *bytes -= cost(old.len());
                }
                None => {}
            }
        }
        rows.insert(s, (row.clone(), false));
        queue.push_back(s);
        *bytes += c;
    }

    /// The bytes counted for the rows kept.
    pub(crate) fn usage(&self) -> usize {
        self.shards
            .get()
            .map_or(0, |shards| shards.iter().map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).bytes).sum())
    }

    /// The budget (a multiple of the shard count, rounded down).
    pub(crate) fn budget(&self) -> usize {
        self.shard_budget * SHARDS
    }
}

/// A derived row: kept in the cache, or walked for this use only.
pub(super) enum DerivedRow {
    Cached(Arc<[TokenId]>),
    Fresh(Vec<TokenId>),
}

impl std::ops::Deref for DerivedRow {
    type Target = [TokenId];
    #[inline]
    fn deref(&self) -> &[TokenId] {
        match self {
            DerivedRow::Cached(a) => a,
            DerivedRow::Fresh(v) => v,
        }
    }
}

impl Automaton {
    /// The allowed tokens of derived state `s`, ascending: from the cache, or walked (and kept when wide).
    #[inline]
    pub(super) fn derived_list(&self, s: usize) -> DerivedRow {
        if let Some(row) = self.row_cache.get(s as u32) {
            return DerivedRow::Cached(row);
        }
        let ids = self.derived_tokens(s);
        if ids.len() < MIN_TOKENS {
            return DerivedRow::Fresh(ids);
        }
        let row: Arc<[TokenId]> = ids.into();
        self.row_cache.insert(s as u32, &row);
        DerivedRow::Cached(row)
    }

    /// Sets the byte budget of the cache of derived rows (see [`Automaton::row_cache_usage`]), emptying it; 0
    /// keeps no row. The default is 4 MiB.
    #[doc(hidden)]
    pub fn set_row_cache_budget(&mut self, bytes: usize) {
        self.row_cache = RowCache::new(bytes);
    }

    /// The bytes the cache of derived rows holds (each row counted as its tokens plus 96 bytes), at most
    /// [`Automaton::row_cache_budget`]. The rows of large automata's states with few stored transitions are
    /// computed on use; the wide ones are kept in this cache, which [`Automaton::memory_usage`] does not count.
    #[doc(hidden)]
    pub fn row_cache_usage(&self) -> usize {
        self.row_cache.usage()
    }

    /// The byte budget of the cache of derived rows.
    #[doc(hidden)]
    pub fn row_cache_budget(&self) -> usize {
        self.row_cache.budget()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: usize, first: u32) -> Arc<[TokenId]> {
        (first..first + n as u32).collect()
    }

    #[test]
    fn stays_within_its_budget_and_gives_used_rows_a_second_chance() {
        let c = RowCache::new(SHARDS * 1000 + 7);
        assert_eq!(c.budget(), SHARDS * 1000);
        // Narrow rows, and rows over a shard's share (250 tokens: 1096 bytes), are not kept.
        c.insert(1, &row(MIN_TOKENS - 1, 0));
        c.insert(2, &row(250, 0));
        assert!(c.get(1).is_none() && c.get(2).is_none() && c.usage() == 0);
        // Two rows of 100 tokens (496 bytes) fit a shard, a third does not: the one used since it was inserted
        // stays, the other goes.
        let same: Vec<u32> = (0..).filter(|&s| shard_of(s) == shard_of(10)).take(3).collect();
        c.insert(same[0], &row(100, 0));
        c.insert(same[1], &row(100, 1));
        assert_eq!(c.usage(), 2 * cost(100));
        assert_eq!(&c.get(same[0]).unwrap()[..], &row(100, 0)[..]);
        c.insert(same[2], &row(100, 2));
        assert!(c.get(same[1]).is_none(), "the unused row is evicted");
        assert_eq!(&c.get(same[0]).unwrap()[..], &row(100, 0)[..]);
        assert_eq!(&c.get(same[2]).unwrap()[..], &row(100, 2)[..]);
        assert_eq!(c.usage(), 2 * cost(100));
        // Many rows of many sizes: never over the budget, every row kept is the one inserted.
        let n = |s: u32| MIN_TOKENS + (s % 200) as usize;
        for s in 0..20_000u32 {
            c.insert(s, &row(n(s), s));
            assert!(c.usage() <= c.budget());
        }
        let kept = (0..20_000u32).filter_map(|s| c.get(s).map(|r| assert_eq!(&r[..], &row(n(s), s)[..]))).count();
        assert!(kept >= SHARDS, "{kept}");
        // A budget of 0 keeps nothing.
        let off = RowCache::new(0);
        off.insert(3, &row(100, 0));
        assert!(off.get(3).is_none() && off.usage() == 0 && off.shards.get().is_none());
    }
}
