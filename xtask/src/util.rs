//! Small helpers shared by the xtask commands.

use std::path::PathBuf;
use std::process::Command;

/// The workspace root: the parent of this crate's manifest directory.
///
/// `cargo run` sets `CARGO_MANIFEST_DIR` for the checkout it runs in; the
/// compile-time value is only a fallback, since two checkouts may share one
/// target directory (and so one xtask binary).
pub fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The cargo that runs xtask, so nested runs use the same toolchain.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs a command to completion and fails with its description when it exits non-zero.
pub fn run_checked(command: &mut Command) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|error| format!("could not start {command:?}: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed with {status}"))
    }
}

/// Runs a command and returns its standard output as text.
pub fn output_checked(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|error| format!("could not start {command:?}: {error}"))?;
    if output.status.success() {
        String::from_utf8(output.stdout).map_err(|error| format!("{command:?}: {error}"))
    } else {
        Err(format!(
            "{command:?} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Reads the arguments of a command that takes only `--check`: whether it was given,
/// or `None` when help was asked for (and printed).
pub fn check_flag(args: &[String], usage: &str) -> Result<Option<bool>, String> {
    match args {
        [] => Ok(Some(false)),
        [flag] if flag == "--check" => Ok(Some(true)),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{usage}");
            Ok(None)
        }
        _ => Err(format!("unexpected arguments {args:?}\n\n{usage}")),
    }
}
