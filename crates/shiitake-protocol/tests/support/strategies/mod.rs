//! proptest strategies for every wire type, shared by the property tests.

#![allow(dead_code, clippy::unwrap_used)]

mod ids;
mod inbox;
mod message;
mod observation;

pub use ids::*;
pub use inbox::*;
pub use message::*;
pub use observation::*;
