//! The integration tests of `shiitake-roster-hub`, in one test binary.
//!
//! Each capability is a module of `suite/`, named for the behaviour it tests;
//! `support/` holds what the directory's tests share.

mod suite;
mod support;
