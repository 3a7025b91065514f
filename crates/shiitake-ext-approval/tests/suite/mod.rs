//! One module per capability, named for the behaviour it tests.

mod crash_points;
mod over_http;
mod parked;
mod session_commands;
mod state_machine;
mod store_pause;
mod web_page;
