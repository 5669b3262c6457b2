//! An LRU of compiled values with in-flight deduplication.
//!
//! Invariants:
//! - one compile per key at a time: the first caller of a missing key compiles it (outside the lock); the others
//!   wait for that compile's result instead of compiling again;
//! - every entry carries a generation number; the cleanup after a failed compile removes the entry only when it
//!   is still the one that compile created (never an entry that now holds the key: bug B8);
//! - failures of the set itself (not UTF-8, empty, unreachable, over a bound) are kept like results, so a bad set
//!   is not compiled again and again; transient ones (I/O, a caught panic) are forgotten;
//! - at most `capacity` entries are kept (least recently used dropped first); a value dropped from the LRU but
//!   still held elsewhere (a running request) is found again through a weak reference instead of compiled again.

use crate::error::{Error, ErrorKind, Result};
use std::collections::HashMap;
use std::hash::Hash;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

/// The result of one compile, shared by everyone who waits for it.
struct Flight<T> {
    result: Mutex<Option<Result<Arc<T>>>>,
    done: Condvar,
}

impl<T> Flight<T> {
    fn wait(&self) -> Result<Arc<T>> {
        let mut slot = lock(&self.result);
        loop {
            if let Some(r) = slot.as_ref() {
                return r.clone();
            }
            slot = self.done.wait(slot).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn finish(&self, r: Result<Arc<T>>) {
        *lock(&self.result) = Some(r);
        self.done.notify_all();
    }
}

struct Entry<T> {
    generation: u64,
    used: u64,
    flight: Arc<Flight<T>>,
}

struct State<K, T> {
    entries: HashMap<K, Entry<T>>,
    /// Values dropped from the LRU, found again while something else holds them.
    dropped: HashMap<K, Weak<T>>,
    clock: u64,
    stats: Counters,
}

/// What the cache has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Compiles run (failed ones included).
    pub compiles: u64,
    /// Lookups served without compiling (waits for another caller's compile included).
    pub hits: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The LRU (see the module doc). Thread-safe.
pub(crate) struct Lru<K, T> {
    state: Mutex<State<K, T>>,
    capacity: usize,
}

/// Whether a failed compile is forgotten (tried again next time) rather than kept.
fn transient(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Io | ErrorKind::Panic)
}

impl<K: Hash + Eq + Clone, T> Lru<K, T> {
    pub fn new(capacity: usize) -> Self {
        let state = State { entries: HashMap::new(), dropped: HashMap::new(), clock: 0, stats: Counters::default() };
        Lru { state: Mutex::new(state), capacity: capacity.max(1) }
    }

    /// The value of `key`: cached, being compiled by another caller (waits for it), or compiled by `compile` in
    /// this thread. The flag is true when this call ran `compile`. A panic in `compile` is an error, not a hang.
    pub fn get(&self, key: &K, compile: impl FnOnce() -> Result<Arc<T>>) -> (Result<Arc<T>>, bool) {
        let (flight, generation) = {
            let mut st = lock(&self.state);
            st.clock += 1;
            let now = st.clock;
            if let Some(e) = st.entries.get_mut(key) {
                e.used = now;
                let flight = e.flight.clone();
                st.stats.hits += 1;
                drop(st);
                return (flight.wait(), false);
            }
            let flight = Arc::new(Flight { result: Mutex::new(None), done: Condvar::new() });
            if let Some(value) = st.dropped.remove(key).and_then(|w| w.upgrade()) {
                flight.finish(Ok(value.clone()));
                self.insert(&mut st, key.clone(), flight, now);
                st.stats.hits += 1;
                return (Ok(value), false);
            }
            self.insert(&mut st, key.clone(), flight.clone(), now);
            (flight, now)
        };
        let result = catch_unwind(AssertUnwindSafe(compile)).unwrap_or_else(|payload| {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            std::mem::forget(payload);
            Err(Error::new(ErrorKind::Panic, format!("compiling the set panicked (a bug: please report it): {msg}")))
        });
        {
            let mut st = lock(&self.state);
            st.stats.compiles += 1;
            if matches!(&result, Err(e) if transient(e)) {
                // Only our own entry: the key may have been dropped and claimed again meanwhile.
                if st.entries.get(key).is_some_and(|e| e.generation == generation) {
                    st.entries.remove(key);
                }
            }
        }
        flight.finish(result.clone());
        (result, true)
    }

    /// The value of `key` if it is ready (or its kept failure), without compiling; `None` when it is missing or
    /// being compiled.
    pub fn peek(&self, key: &K) -> Option<Result<Arc<T>>> {
        let mut st = lock(&self.state);
        st.clock += 1;
        let now = st.clock;
        if let Some(e) = st.entries.get_mut(key) {
            let ready = lock(&e.flight.result).clone()?;
            e.used = now;
            st.stats.hits += 1;
            return Some(ready);
        }
        let value = st.dropped.remove(key).and_then(|w| w.upgrade())?;
        let flight = Arc::new(Flight { result: Mutex::new(Some(Ok(value.clone()))), done: Condvar::new() });
        self.insert(&mut st, key.clone(), flight, now);
        st.stats.hits += 1;
        Some(Ok(value))
    }

    fn insert(&self, st: &mut State<K, T>, key: K, flight: Arc<Flight<T>>, now: u64) {
        st.entries.insert(key, Entry { generation: now, used: now, flight });
        while st.entries.len() > self.capacity {
            let Some(oldest) = st.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else {
                break;
            };
            let e = st.entries.remove(&oldest).expect("present");
            let weak = match lock(&e.flight.result).as_ref() {
                Some(Ok(v)) => Some(Arc::downgrade(v)),
                _ => None,
            };
            if let Some(weak) = weak {
                st.dropped.insert(oldest, weak);
            }
        }
        if st.dropped.len() > 2 * self.capacity {
            st.dropped.retain(|_, w| w.strong_count() > 0);
        }
    }

    pub fn counters(&self) -> Counters {
        lock(&self.state).stats
    }

    pub fn len(&self) -> usize {
        lock(&self.state).entries.len()
    }

    #[cfg(test)]
    fn contains(&self, key: &K) -> bool {
        lock(&self.state).entries.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;
    use std::time::Duration;

    fn ok(v: u32) -> Result<Arc<u32>> {
        Ok(Arc::new(v))
    }

    #[test]
    fn hits_and_lru_order() {
        let lru: Lru<u32, u32> = Lru::new(2);
        assert_eq!(*lru.get(&1, || ok(10)).0.unwrap(), 10);
        assert_eq!(lru.get(&1, || ok(99)), (ok(10), false));
        lru.get(&2, || ok(20)).0.unwrap();
        lru.get(&1, || ok(99)).0.unwrap(); // 1 is now the most recent
        lru.get(&3, || ok(30)).0.unwrap(); // drops 2 (nobody holds it)
        assert!(lru.contains(&1) && lru.contains(&3) && !lru.contains(&2));
        assert_eq!(lru.get(&2, || ok(21)), (ok(21), true), "dropped and held by nobody: compiled again");
        assert_eq!(lru.counters(), Counters { compiles: 4, hits: 2 });
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn peek_finds_ready_values_only() {
        let lru: Arc<Lru<u32, u32>> = Arc::new(Lru::new(4));
        assert_eq!(lru.peek(&1), None);
        lru.get(&1, || ok(10)).0.unwrap();
        assert_eq!(lru.peek(&1), Some(ok(10)));
        lru.get(&2, || Err(Error::new(ErrorKind::EmptySet, "empty"))).0.unwrap_err();
        assert_eq!(lru.peek(&2).unwrap().unwrap_err().kind(), ErrorKind::EmptySet, "a kept failure");
        let (started, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let t = {
            let (lru, started, release) = (lru.clone(), started.clone(), release.clone());
            std::thread::spawn(move || {
                lru.get(&3, || {
                    started.wait();
                    release.wait();
                    ok(30)
                })
            })
        };
        started.wait();
        assert_eq!(lru.peek(&3), None, "compiling: not ready");
        release.wait();
        t.join().unwrap().0.unwrap();
        assert_eq!(lru.peek(&3), Some(ok(30)));
        assert_eq!(lru.counters().compiles, 3);
    }

    #[test]
    fn a_dropped_value_still_in_use_is_found_again() {
        let lru: Lru<u32, u32> = Lru::new(1);
        let held = lru.get(&1, || ok(10)).0.unwrap();
        lru.get(&2, || ok(20)).0.unwrap(); // drops 1 from the LRU; `held` keeps it alive
        let (again, compiled) = lru.get(&1, || ok(11));
        assert!(!compiled);
        assert!(Arc::ptr_eq(&held, &again.unwrap()));
    }

    #[test]
    fn concurrent_gets_of_one_key_compile_once() {
        let lru: Arc<Lru<u32, u32>> = Arc::new(Lru::new(4));
        let runs = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (lru, runs, start) = (lru.clone(), runs.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    lru.get(&7, || {
                        runs.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(200)); // the others arrive meanwhile
                        ok(70)
                    })
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(results.iter().filter(|(_, compiled)| *compiled).count(), 1);
        let first = results[0].0.as_ref().unwrap();
        assert!(results.iter().all(|(r, _)| Arc::ptr_eq(r.as_ref().unwrap(), first)), "one value for all");
        assert_eq!(lru.counters(), Counters { compiles: 1, hits: 7 });
    }

    #[test]
    fn failures_of_the_set_are_kept_transient_ones_are_not() {
        let lru: Lru<u32, u32> = Lru::new(4);
        let bad = || Err(Error::new(ErrorKind::EmptySet, "empty"));
        assert_eq!(lru.get(&1, bad).0.unwrap_err().kind(), ErrorKind::EmptySet);
        let (r, compiled) = lru.get(&1, || ok(1));
        assert_eq!((r.unwrap_err().kind(), compiled), (ErrorKind::EmptySet, false), "kept: not compiled again");
        // A transient failure (I/O, a panic) is forgotten: the next get compiles, and succeeds.
        assert_eq!(lru.get(&2, || Err(Error::new(ErrorKind::Io, "disk"))).0.unwrap_err().kind(), ErrorKind::Io);
        assert!(!lru.contains(&2));
        assert_eq!(lru.get(&2, || ok(2)), (ok(2), true));
        let (r, _) = lru.get(&3, || panic!("boom"));
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Panic);
        assert!(e.message().contains("boom"));
        assert_eq!(lru.get(&3, || ok(3)), (ok(3), true));
    }

    #[test]
    fn a_failed_compile_removes_only_its_own_entry() {
        // B8: key 1 is claimed (a slow compile that will fail), dropped from the LRU by key 2, then claimed again
        // and compiled by another caller. The first compile's cleanup must not remove the second entry.
        let lru: Arc<Lru<u32, u32>> = Arc::new(Lru::new(1));
        let (started, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let slow = {
            let (lru, started, release) = (lru.clone(), started.clone(), release.clone());
            std::thread::spawn(move || {
                lru.get(&1, || {
                    started.wait();
                    release.wait();
                    Err(Error::new(ErrorKind::Io, "the disk went away"))
                })
            })
        };
        started.wait();
        lru.get(&2, || ok(20)).0.unwrap(); // drops the pending entry of key 1
        assert_eq!(lru.get(&1, || ok(11)), (ok(11), true), "claimed again, compiled");
        release.wait();
        assert_eq!(slow.join().unwrap().0.unwrap_err().kind(), ErrorKind::Io);
        assert_eq!(lru.get(&1, || ok(12)), (ok(11), false), "the newer entry survived the old cleanup");
    }

    #[test]
    fn waiters_get_the_error_of_the_compile_they_waited_for() {
        let lru: Arc<Lru<u32, u32>> = Arc::new(Lru::new(4));
        let start = Arc::new(Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lru, start) = (lru.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    lru.get(&5, || {
                        std::thread::sleep(Duration::from_millis(200));
                        Err(Error::new(ErrorKind::Io, "transient"))
                    })
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap().0.unwrap_err().message(), "transient");
        }
        assert_eq!(lru.get(&5, || ok(5)), (ok(5), true), "then compiled again");
    }
}
