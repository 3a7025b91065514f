//! `cargo xtask test`: the one test command of the README.
//!
//! Starts what the tests need (today: the bundled local model, reused when it
//! already runs or when `SHIITAKE_TEST_LOCAL_MODEL_URL` names another server),
//! then runs `cargo test --workspace` with the extra arguments given. The model
//! server is left running for the next run; `cargo xtask local-model stop` ends it.

use std::process::Command;

use crate::local_model;
use crate::util::{cargo, run_checked};

/// The variable the real-model tests read.
const MODEL_URL_VAR: &str = "SHIITAKE_TEST_LOCAL_MODEL_URL";

/// Runs the workspace tests with their services up.
pub fn run(args: &[String]) -> Result<(), String> {
    let url = match std::env::var(MODEL_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => local_model::ensure_running(shiitake_local_model::DEFAULT_PORT)?,
    };
    eprintln!("test: {MODEL_URL_VAR}={url}");
    run_checked(
        Command::new(cargo())
            .args(["test", "--workspace"])
            .args(args)
            .env(MODEL_URL_VAR, url),
    )
}
