//! `cargo xtask soak [--rounds N] [--sessions N] [--prompts N]`: the reliability soak
//! against the release binary.
//!
//! Runs `crates/shiitake/tests/suite/soak.rs` (the `suite::soak::` tests of the crate's
//! one test binary, `tests/all.rs`) in the release profile (so it drives the
//! release `shiitake` binary) with its sizes from the flags: each round loads the
//! server with prompts, SIGKILLs it and restarts it, and the end prints and checks
//! lost, doubled and unsettled prompts, tool calls with two results and tool calls
//! executed twice. `cargo xtask test` runs the same test in its short form (2 rounds).

use std::process::Command;

use crate::util::{cargo, run_checked, workspace_root};

/// Parses the flags and runs the soak.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = "10".to_owned();
    let mut sessions = "4".to_owned();
    let mut prompts = "3".to_owned();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--rounds" => &mut rounds,
            "--sessions" => &mut sessions,
            "--prompts" => &mut prompts,
            other => return Err(format!("soak: unknown option `{other}`")),
        };
        let value = args
            .next()
            .filter(|value| value.parse::<u32>().is_ok_and(|n| n > 0))
            .ok_or_else(|| format!("soak: {flag} takes a positive number"))?;
        value.clone_into(slot);
    }
    eprintln!("soak: {rounds} rounds of {sessions} sessions x {prompts} prompts (release build)");
    run_checked(
        Command::new(cargo())
            .current_dir(workspace_root())
            .args(["test", "--release", "-p", "shiitake", "--test", "all"])
            .args(["--", "suite::soak::", "--nocapture"])
            .env("SHIITAKE_SOAK_ROUNDS", rounds)
            .env("SHIITAKE_SOAK_SESSIONS", sessions)
            .env("SHIITAKE_SOAK_PROMPTS", prompts),
    )
}
