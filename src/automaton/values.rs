//! Members that carry values: an automaton compiled with values (like the `fst` crate's `Map`) stores one
//! caller-given `u64` per member, by rank, and a member's value travels with it through
//! [`Automaton::with_changes_and_values`] and save / load. Automata compiled without values store nothing.
//!
//! Invariants: `values`, when present, has one entry per member of the member table (dropped members included:
//! their entry is never read); a file holding values is format version 3 (`src/format.rs`), and a values
//! section in a file of an older version is malformed.
//!
//! Which copy's value a member gets: the first copy's in the list compiled (as [`Automaton::member_at`] names
//! the first copy). So `with_changes_and_values`, which gives what a compile of `add ++ (members − remove)`
//! gives, gives an added string the value of its first copy in `add`, also when it was a member already (like a
//! map insert), and every other kept member its old value.

use super::*;

/// Section tag of the member values (optional: absent for automata compiled without values).
const A_VALUES: u32 = 19;
/// The file format version that can hold member values (see `src/format.rs`).
const VALUES_VERSION: u32 = 3;

impl Automaton {
    pub(super) fn write_values(&self, w: &mut Writer) {
        if let Some(values) = &self.values {
            w.section(A_VALUES, values);
            w.require_version(VALUES_VERSION);
        }
    }

    /// The member values of a saved automaton, if it has them (their count is checked with the other arrays).
    pub(super) fn read_values(r: &Reader) -> Result<Option<Array<u64>>> {
        if !r.has(A_VALUES) {
            return Ok(None);
        }
        let version = r.version();
        ensure(version >= VALUES_VERSION, || {
            format!("member values in a format version {version} file (values need version {VALUES_VERSION})")
        })?;
        Ok(Some(r.array(A_VALUES)?))
    }

    /// One value per member, when the automaton has values.
    pub(super) fn validate_values(&self) -> Result<()> {
        let n = self.member_offsets.len() - 1;
        match &self.values {
            Some(v) => ensure(v.len() == n, || format!("{} member values for {n} members", v.len())),
            None => Ok(()),
        }
    }

    /// Whether the members carry values (the automaton was compiled or updated with values).
    pub fn has_values(&self) -> bool {
        self.values.is_some()
    }

    /// The value of the member whose segment (or string) is complete in `state` (where [`Automaton::member_at`]
    /// names it); `None` elsewhere, for `FINISHED` and invalid states, and for an automaton without values.
    pub fn member_value(&self, state: State) -> Option<u64> {
        self.rank_value(self.rank_at(state)?)
    }

    /// The value of the member of rank `rank` (byte order, as for [`Automaton::member_bytes`] and
    /// [`Automaton::member_id`]); `None` past the last rank, for a dropped member and without values.
    pub fn rank_value(&self, rank: usize) -> Option<u64> {
        let values = self.values.as_ref()?;
        self.member_id(rank)?;
        values.get(rank).copied()
    }

    /// The values of the members still possible in `state`, in the order of [`Automaton::possible_members`] (one
    /// each); empty without values, for `FINISHED` and invalid states.
    pub fn possible_values(&self, state: State) -> Vec<u64> {
        if self.values.is_none() {
            return Vec::new();
        }
        self.member_range(state).filter_map(|r| self.rank_value(r)).collect()
    }
}
