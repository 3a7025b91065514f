//! `cargo xtask bench`: every benchmark of the workspace, each printing its ratios.
//!
//! Runs the bench targets (`cargo bench --workspace`: the core's acceptance,
//! observation and whole-run benches) and the server's SSE latency example in release mode. Each
//! prints ratios measured within its own run; `docs/benchmarks.md` records them.

use std::process::Command;

use crate::util::{cargo, run_checked, workspace_root};

/// Runs the benchmarks; extra arguments go to `cargo bench`.
pub fn run(args: &[String]) -> Result<(), String> {
    let cargo = cargo();
    let root = workspace_root();
    run_checked(
        Command::new(&cargo)
            .current_dir(&root)
            .args(["bench", "--workspace"])
            .args(args),
    )?;
    run_checked(Command::new(&cargo).current_dir(&root).args([
        "run",
        "--release",
        "-p",
        "shiitake-server",
        "--example",
        "sse_latency",
    ]))
}
