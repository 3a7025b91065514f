//! `cargo xtask bench`: every benchmark of the workspace, each printing its ratios.
//!
//! Runs the bench targets (`cargo bench --workspace`: the core's acceptance,
//! observation and whole-run benches, the approval gate, knapsack's commands and their
//! sandbox, `serve`'s operations and traces: recording, the scrape, the trace export
//! against a live, a down and a hanging collector), the server's SSE latency example and the Hub
//! benchmark (`shiitake-store-postgres`'s `hub_bench` example, every phase: 1, 2 and 3
//! processes on one PostgreSQL database; takeover after a kill; a rolling restart; 1
//! and 100 tenants) in
//! release mode. Each prints ratios or latencies measured within its own run;
//! `docs/benchmarks.md` records them. `cargo xtask bench hub [PHASE] [N]` runs the Hub
//! benchmark alone: `throughput [ROUNDS]` (the default), `takeover [KILLS]`,
//! `rolling [ROUNDS]`, `profile [ROUNDS]` (one process's statements and commits per
//! run, not in `all`), `tenants [ROUNDS]` (1 and 100 tenants on three processes, and
//! the memory of 100 open Agents, in `hub_node` and in a release `shiitake serve`,
//! which is built for it) or `all`.

use std::process::Command;

use crate::postgres;
use crate::util::{cargo, run_checked, workspace_root};

/// Runs the benchmarks; extra arguments go to `cargo bench`.
pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(("hub", rest)) = args
        .split_first()
        .map(|(first, rest)| (first.as_str(), rest))
    {
        return hub(rest);
    }
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
    ]))?;
    hub(&["all".to_owned()])
}

/// The Hub benchmark on the PostgreSQL of `SHIITAKE_TEST_POSTGRES_URL`, or on a
/// throwaway one started (and stopped) here.
fn hub(args: &[String]) -> Result<(), String> {
    let cargo = cargo();
    let root = workspace_root();
    // `hub_bench` starts `hub_node` from its own directory: build both.
    run_checked(Command::new(&cargo).current_dir(&root).args([
        "build",
        "--release",
        "-p",
        "shiitake-store-postgres",
        "--example",
        "hub_node",
        "--example",
        "hub_bench",
    ]))?;
    // The tenants phase (alone or in `all`) measures the real `serve` too.
    if matches!(args.first().map(String::as_str), Some("tenants" | "all")) {
        run_checked(Command::new(&cargo).current_dir(&root).args([
            "build",
            "--release",
            "-p",
            "shiitake",
        ]))?;
    }
    let (database, started) = match std::env::var(postgres::URL_VAR) {
        Ok(database) if !database.trim().is_empty() => (database, false),
        _ => {
            let reused = postgres::answers(postgres::DEFAULT_PORT);
            (postgres::start(postgres::DEFAULT_PORT)?, !reused)
        }
    };
    let benched = run_checked(
        Command::new(&cargo)
            .current_dir(&root)
            .args([
                "run",
                "--release",
                "-p",
                "shiitake-store-postgres",
                "--example",
                "hub_bench",
                "--",
            ])
            .arg(&database)
            .args(args),
    );
    if started {
        postgres::stop(postgres::DEFAULT_PORT)?;
    }
    benched
}
