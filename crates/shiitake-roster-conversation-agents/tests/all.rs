//! The roster's composition on in-process Agents over a test directory: the shared set
//! and conversation agents working together.
//!
//! One test binary: each capability is a module of `suite/`, the shared helpers are
//! `support/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod suite {
    mod goal_of_sent_work;
}
