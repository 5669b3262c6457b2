//! The compile's memory bound ([`crate::CompileOptions::max_bytes`]): large allocations are charged here before
//! they are made, so exceeding the bound is an [`crate::ErrorKind::LimitExceeded`] error, never an abort.
//!
//! Invariant: `used` only grows; once a charge fails, every later charge fails too (parallel workers stop early).

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) struct Budget {
    limit: Option<usize>,
    used: AtomicUsize,
}

impl Budget {
    pub(crate) fn new(limit: Option<usize>) -> Budget {
        Budget { limit, used: AtomicUsize::new(0) }
    }

    /// Charges `bytes` for `what`; fails when the total would pass the limit.
    pub(crate) fn charge(&self, bytes: usize, what: &str) -> Result<()> {
        let Some(limit) = self.limit else { return Ok(()) };
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        let total = before.saturating_add(bytes);
        if total > limit {
            self.used.store(usize::MAX, Ordering::Relaxed);
            return Err(Error::limit(format!(
                "compiling needs more than the {limit} bytes allowed by max_bytes ({what} would bring it to {} \
                 bytes); raise max_bytes or split the set",
                if before == usize::MAX { "more".to_string() } else { total.to_string() }
            )));
        }
        Ok(())
    }

    /// Whether a charge has failed (workers check it to stop early).
    pub(crate) fn exhausted(&self) -> bool {
        self.limit.is_some() && self.used.load(Ordering::Relaxed) == usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_to_the_limit() {
        let b = Budget::new(Some(100));
        b.charge(60, "a").unwrap();
        b.charge(40, "b").unwrap();
        let e = b.charge(1, "c").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::LimitExceeded);
        assert!(e.message().contains("max_bytes"), "{e}");
        assert!(b.exhausted());
        assert!(b.charge(0, "d").is_err());
        let free = Budget::new(None);
        free.charge(usize::MAX, "x").unwrap();
        assert!(!free.exhausted());
    }
}
