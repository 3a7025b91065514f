//! The SQL of the Shiitake stores, written once for SQLite and PostgreSQL.
//!
//! `shiitake-core` speaks to storage through its `Store` trait, in rows and ops, never
//! SQL. The two stores that implement it (`shiitake-store-sqlite`, `shiitake-store-postgres`)
//! keep the same tables, so what is SQL is written here, once:
//!
//! - **Statements** (`statements.rs`): every write and read as one `Statement` with
//!   the tenant key in brackets, rendered once per [`Dialect`] (`?1` for SQLite, `$1`
//!   and the tenant for PostgreSQL) and kept, so a commit never formats SQL.
//! - **Ops to statements** ([`encode()`]): each of core's `Op`s becomes [`Stmt`]s with
//!   driver-neutral [`Bind`] values and what they must find ([`Expect`]: a timer claim
//!   changes one row, a fence finds its lease); JSON and packed messages are made on
//!   the committing task.
//! - **Reads** ([`Reads`]): the nineteen reads of `Store`, generic over any sqlx
//!   database, and row decoding (`rows.rs`: a bad column is `StoreError::Corrupt`,
//!   never a panic).
//! - **Messages** ([`packed`]): zstd against a versioned dictionary, as both stores
//!   keep them.
//! - **The `Store` itself** ([`impl_store!`]): written once over a store's small
//!   [`SqlBackend`]; and the hand-off of commits to a store's one writer ([`queue`]).
//!
//! What this crate does not own: connections, pools and migrations, the writers that
//! execute statements (SQLite's group-commit thread on rusqlite, PostgreSQL's task on
//! sqlx), leases and notifications. It enables no sqlx database: each store crate
//! brings its own driver, so a SQLite build compiles no PostgreSQL and the reverse.

mod backend;
mod dialect;
mod encode;
mod error;
pub mod packed;
pub mod queue;
mod reads;
mod rows;
mod statements;
mod stmt;

#[doc(hidden)]
pub use backend::__private;
pub use backend::SqlBackend;
pub use dialect::Dialect;
pub use encode::{encode, per_session};
pub use error::{code_passes, db, sqlite_code_passes, sqlstate_passes};
pub use reads::Reads;
pub use rows::{int, uint};
pub use stmt::{Bind, Expect, Stmt, TextKey};
