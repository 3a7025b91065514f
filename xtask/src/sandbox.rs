//! `cargo xtask sandbox`: the command sandbox the Computer tests use (knapsack's
//! `exec::Sandbox`): bubblewrap's `bwrap` and util-linux's `prlimit` on `PATH`.
//! Installs Debian's `bubblewrap` with apt-get when it is missing (as root;
//! otherwise it says what to install) and prints where `bwrap` is.

use std::path::PathBuf;

/// The Debian package that provides `bwrap`.
const PACKAGE: &str = "bubblewrap";

const USAGE: &str = "usage: cargo xtask sandbox

  finds bubblewrap (`bwrap`) on PATH, installs Debian's `bubblewrap` with apt-get
  when it is missing, and prints the binary's path";

/// Runs the subcommand.
pub fn run(args: &[String]) -> Result<(), String> {
    crate::debian::print_found(args, USAGE, ensure)
}

/// The path of `bwrap`, installed first when missing.
pub fn ensure() -> Result<PathBuf, String> {
    if let Some(path) = find("bwrap") {
        return Ok(path);
    }
    crate::debian::install(PACKAGE, "to run the sandboxed command tests")?;
    find("bwrap").ok_or_else(|| format!("installed `{PACKAGE}` but found no bwrap on PATH"))
}

/// The first executable `name` on `PATH`.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| crate::chromium::is_executable(candidate))
}
