//! `cargo xtask test`: the one test command of the README.
//!
//! Starts what the tests need (the bundled local model, reused when it already
//! runs or when `SHIITAKE_TEST_LOCAL_MODEL_URL` names another server; headless
//! Chromium for the browser tests, found or installed by `cargo xtask chromium`
//! and named in `SHIITAKE_CHROMIUM`, so those tests run rather than skip; bubblewrap
//! for the sandboxed command tests, found or installed by `cargo xtask sandbox`; the
//! protocols' official clients from PyPI, by `cargo xtask clients`, and the trace
//! receiver Arize Phoenix, by `cargo xtask phoenix`; a
//! throwaway PostgreSQL unless `SHIITAKE_TEST_POSTGRES_URL` names one), then runs
//! `cargo test --workspace` with the extra arguments given and
//! `SHIITAKE_REQUIRE_SERVICES=1`, so a test whose service is missing fails instead
//! of skipping (`crates/shiitake-test-services`). The model server is left running
//! for the next run; `cargo xtask local-model stop` ends it. The PostgreSQL this
//! command started is stopped and deleted afterwards.

use std::process::Command;

use crate::util::{cargo, run_checked};
use crate::{chromium, clients, local_model, postgres, sandbox};

/// The variable the real-model tests read.
const MODEL_URL_VAR: &str = "SHIITAKE_TEST_LOCAL_MODEL_URL";
/// Set, a test whose service is missing fails instead of skipping.
const REQUIRE_VAR: &str = "SHIITAKE_REQUIRE_SERVICES";

/// Runs the workspace tests with their services up.
pub fn run(args: &[String]) -> Result<(), String> {
    let url = match std::env::var(MODEL_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => local_model::ensure_running(shiitake_local_model::DEFAULT_PORT)?,
    };
    eprintln!("test: {MODEL_URL_VAR}={url}");
    let browser = chromium::ensure()?;
    eprintln!("test: {}={}", chromium::ENV_VAR, browser.display());
    let bwrap = sandbox::ensure()?;
    eprintln!("test: the command sandbox's bwrap is {}", bwrap.display());
    let python = clients::ensure()?;
    eprintln!("test: {}={}", clients::ENV_VAR, python.display());
    let phoenix = clients::phoenix()?;
    eprintln!("test: {}={}", clients::PHOENIX_VAR, phoenix.display());
    let (database, started) = match std::env::var(postgres::URL_VAR) {
        Ok(database) if !database.trim().is_empty() => (database, false),
        _ => {
            // A server that already answers was started by someone else: leave it running.
            let reused = postgres::answers(postgres::DEFAULT_PORT);
            (postgres::start(postgres::DEFAULT_PORT)?, !reused)
        }
    };
    eprintln!("test: {}={database}", postgres::URL_VAR);
    eprintln!("test: {REQUIRE_VAR}=1");
    let tested = run_checked(
        Command::new(cargo())
            .args(["test", "--workspace"])
            .args(args)
            .env(MODEL_URL_VAR, url)
            .env(chromium::ENV_VAR, browser)
            .env(clients::ENV_VAR, python)
            .env(clients::PHOENIX_VAR, phoenix)
            .env(postgres::URL_VAR, database)
            .env(REQUIRE_VAR, "1"),
    );
    if started {
        postgres::stop(postgres::DEFAULT_PORT)?;
    }
    tested
}
