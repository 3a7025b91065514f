//! One module per capability, named for the behaviour it tests.

mod schedules;
mod two_processes;
