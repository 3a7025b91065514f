//! The integration tests of `shiitake-ext-plan`, in one test binary.
//!
//! Each capability is a module of `suite/`, named for the behaviour it tests.

mod suite;
