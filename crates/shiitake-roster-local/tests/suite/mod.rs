//! One module per capability, named for the behaviour it tests.

mod addresses;
mod agents_over_http;
mod approvals;
mod command_scope;
mod extensions_as_a_client;
