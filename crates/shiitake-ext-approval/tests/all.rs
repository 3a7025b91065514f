//! The approval extension's behaviour tests, in one binary.

mod suite;
mod support;
