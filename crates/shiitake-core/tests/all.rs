//! The integration tests of `shiitake-core`, in one test binary.
//!
//! Each capability is a module of `suite/`, named for the behaviour it tests;
//! what they share is in `support/`.

mod suite;
mod support;
