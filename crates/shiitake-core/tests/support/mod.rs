//! What the core tests share: the in-process fixture ([`harness`]: a core Agent on a
//! fresh SQLite file with the scripted model) and a test extension whose commands
//! exercise every part of the extension host ([`probe`]).
//!
//! [`harness`] is included by `#[path]` in the tests of `shiitake-server` and
//! `shiitake-store-sqlite`, and both modules in the `timer_harness` example.

pub mod harness;
pub mod probe;
