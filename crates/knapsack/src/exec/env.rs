//! The environment a command gets: built from nothing, never inherited whole, so a
//! host's secrets (its token, `*_API_KEY`, database URLs) reach a command only when the
//! host names them.

use std::ffi::OsString;
use std::path::Path;

/// The `PATH` a command gets when the host's has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Variables every command gets from the host as they are, when set: where programs
/// are, and how text is encoded.
const BASE: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ"];

/// The environment of a command run in `root`: [`BASE`] from the host, `HOME` the root
/// and `TERM=dumb`, then each of `pass` the host names, when the host has it.
pub(crate) fn build(root: &Path, pass: &[String]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for name in BASE.iter().copied().chain(pass.iter().map(String::as_str)) {
        if env.iter().any(|(known, _)| known == name) {
            continue;
        }
        if let Some(value) = std::env::var_os(name) {
            env.push((name.into(), value));
        }
    }
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env.push(("HOME".into(), root.as_os_str().to_owned()));
    env.push(("TERM".into(), "dumb".into()));
    env
}
