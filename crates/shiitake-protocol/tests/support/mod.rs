//! What the protocol tests share: proptest strategies for every wire type.

pub mod strategies;
