//! The behaviours every `AgentApi` / `SessionApi` implementation must show.
//!
//! Each function is one test, generic over the [`Fixture`](crate::Fixture);
//! [`conformance_tests!`](crate::conformance_tests) runs them all.

pub mod agent;
pub mod commands;
pub mod extensions;
pub mod lineage;
pub mod observe;
pub mod queue;
