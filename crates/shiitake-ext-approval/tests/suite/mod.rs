//! One module per capability, named for the behaviour it tests.

mod over_http;
mod state_machine;
