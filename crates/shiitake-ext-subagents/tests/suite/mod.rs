//! One module per capability, named for the behaviour it tests.

mod approval_row;
mod footer;
mod refresh_timing;
