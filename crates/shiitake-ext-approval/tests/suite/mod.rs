//! One module per capability, named for the behaviour it tests.

mod crash_points;
mod over_http;
mod state_machine;
