//! Request shapes that name a finite set.
pub mod recognize;
