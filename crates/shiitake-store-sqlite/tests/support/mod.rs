//! What the SQLite store's tests share: the database file itself ([`schema`]: a
//! plain connection, and the schema as an older release left it) and core's
//! in-process fixture ([`harness`]: an Agent on a fresh SQLite file with the
//! scripted model), for the tests that run an Agent on what the store wrote.

/// Core's in-process fixture, shared with core's own tests.
#[path = "../../../shiitake-core/tests/support/harness.rs"]
pub mod harness;
pub mod schema;
