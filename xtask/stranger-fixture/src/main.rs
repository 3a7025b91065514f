//! The stranger: a program that knows Shiitake-rs only through its packaged crates.
//!
//! `cargo xtask stranger` builds it outside the workspace against the unpacked
//! `.crate` files and runs it. Each check pushes wire JSON through a packaged crate
//! and back. To cover a new crate, add a module with its checks and list them in
//! [`CHECKS`]; the crate is already a dependency (every packaged library is).

mod local;
mod protocol;

use std::process::ExitCode;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// One named check.
type Check = (&'static str, fn() -> Result<(), String>);

/// Every check, in the order they run.
const CHECKS: &[Check] = &[
    (
        "shiitake-protocol SessionCommand",
        protocol::session_command,
    ),
    (
        "shiitake-protocol SessionSnapshot",
        protocol::session_snapshot,
    ),
    ("shiitake-protocol Message", protocol::message),
    (
        "Local roster: a tool call and an answered question, read back over HTTP",
        local::local_roster,
    ),
];

fn main() -> ExitCode {
    let mut failed = 0;
    for (name, check) in CHECKS {
        if let Err(problem) = check() {
            eprintln!("stranger fixture: {name}: {problem}");
            failed += 1;
        }
    }
    if failed == 0 {
        println!(
            "stranger fixture: {} checks passed against the packaged crates",
            CHECKS.len()
        );
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "stranger fixture: {failed} of {} checks failed",
            CHECKS.len()
        );
        ExitCode::FAILURE
    }
}

/// Decodes `json` as a `T`, encodes it again and demands the very same bytes.
pub fn round_trip<T: Serialize + DeserializeOwned>(json: &str) -> Result<(), String> {
    let value: T = serde_json::from_str(json).map_err(|error| format!("decode: {error}"))?;
    let encoded = serde_json::to_string(&value).map_err(|error| format!("encode: {error}"))?;
    if encoded == json {
        Ok(())
    } else {
        Err(format!(
            "re-encoded bytes differ\n  sent: {json}\n  got:  {encoded}"
        ))
    }
}
