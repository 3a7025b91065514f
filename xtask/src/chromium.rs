//! `cargo xtask chromium`: the headless Chromium the browser tests drive.
//!
//! Finds the browser the way the tests do (`crates/shiitake-chromium`): the file
//! `SHIITAKE_CHROMIUM` names, else `chromium`, `chromium-browser`, `google-chrome`
//! or `google-chrome-stable` on `PATH`. When there is none it installs Debian's
//! `chromium` package with apt-get (as root; otherwise it says what to install).
//! Progress goes to stderr; the last line on stdout is the binary's path, so
//! `export SHIITAKE_CHROMIUM=$(cargo xtask chromium | tail -1)` works.

use std::path::{Path, PathBuf};

/// The variable the browser tests read; when set it must name a runnable file.
pub const ENV_VAR: &str = "SHIITAKE_CHROMIUM";
/// Names tried on `PATH`, Debian's first (the same list as the tests').
const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];
/// The Debian package that provides `chromium`.
const PACKAGE: &str = "chromium";

const USAGE: &str = "usage: cargo xtask chromium

  finds the headless Chromium the browser tests use ($SHIITAKE_CHROMIUM, else
  chromium on PATH), installs Debian's `chromium` with apt-get when it is
  missing, and prints the binary's path";

/// Runs `chromium`.
pub fn run(args: &[String]) -> Result<(), String> {
    crate::debian::print_found(args, USAGE, ensure)
}

/// The browser's path, installing Debian's package first when there is none.
pub fn ensure() -> Result<PathBuf, String> {
    if let Some(path) = find()? {
        return Ok(path);
    }
    install()?;
    find()?.ok_or_else(|| format!("installed `{PACKAGE}` but found no browser on PATH"))
}

fn find() -> Result<Option<PathBuf>, String> {
    if let Some(value) = std::env::var_os(ENV_VAR).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(Some(path))
        } else {
            Err(format!(
                "{ENV_VAR}={} is not an executable file",
                path.display()
            ))
        };
    }
    let Some(path) = std::env::var_os("PATH") else {
        return Ok(None);
    };
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    Ok(CANDIDATES.iter().find_map(|name| {
        dirs.iter()
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    }))
}

pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn install() -> Result<(), String> {
    crate::debian::install(PACKAGE, &format!("or set {ENV_VAR} to a Chromium binary"))
}
