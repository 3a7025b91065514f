//! One module per capability, named for the behaviour it tests.

mod hub_approvals;
mod hub_on_sqlite;
