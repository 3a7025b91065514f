//! One module per capability, named for the behaviour it tests.

mod browser_bridge;
mod run_borrow;
