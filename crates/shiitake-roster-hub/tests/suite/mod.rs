//! One module per capability, named for the behaviour it tests.

mod hub_on_sqlite;
