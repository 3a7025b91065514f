//! One module per capability, named for the behaviour it tests.

mod create_checks;
mod schedules;
mod two_processes;
