//! One module per capability, named for the behaviour it tests.

mod footer;
mod refresh_timing;
