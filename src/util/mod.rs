//! Building blocks with no knowledge of vocabularies or automata: arrays that are owned or mapped from a file,
//! the compile's memory budget, the bitmask layout, integer arrays stored at the width their values need (and
//! ascending ones as block bases plus narrow values), and sorting byte strings.

pub(crate) mod array;
pub(crate) mod blocked;
pub(crate) mod budget;
pub(crate) mod mask;
pub(crate) mod packed;
pub(crate) mod sort;
