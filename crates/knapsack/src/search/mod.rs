//! Search visibility, the local walk behind list and glob, and grep over it.

pub(crate) mod grep;
mod visibility;
pub(crate) mod walk;

pub use visibility::{IgnoreSource, SearchVisibility};
