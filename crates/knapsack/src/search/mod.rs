//! Search visibility and the local walk behind list, glob and grep.

mod visibility;
pub(crate) mod walk;

pub use visibility::{IgnoreSource, SearchVisibility};
