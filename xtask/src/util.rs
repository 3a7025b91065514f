//! Small helpers shared by the xtask commands.

use std::path::PathBuf;
use std::process::Command;

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
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
