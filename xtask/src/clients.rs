//! `cargo xtask clients`: the official clients of the protocols this project speaks,
//! from PyPI, in one virtual environment of their own, so the tests check the wire
//! against code this project did not write: the Agent Client Protocol's Python SDK
//! (`agent-client-protocol`, imported as `acp`) for `shiitake acp`, the MCP Python SDK
//! (`mcp`) for an Agent's MCP endpoint, and the A2A Python SDK (`a2a-sdk`, imported as
//! `a2a`) for its A2A endpoint. Each package is
//! pinned; the environment is made once under `~/.cache/shiitake/clients/` (or
//! `$SHIITAKE_CACHE_DIR/clients/`) and reused while it has them. Prints its Python.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::run_checked;

/// The packages, pinned, and the module each is imported as.
const PACKAGES: &[(&str, &str)] = &[
    ("agent-client-protocol==0.12.1", "acp"),
    ("mcp==2.3.0", "mcp"),
    ("a2a-sdk==1.3.0", "a2a"),
];

/// The variable the tests read the environment's Python from.
pub const ENV_VAR: &str = "SHIITAKE_CLIENTS_PYTHON";

const USAGE: &str = "usage: cargo xtask clients

  makes (or reuses) a Python virtual environment with the protocols' official
  clients from PyPI (the ACP, MCP and A2A SDKs) and prints its python";

/// Runs the subcommand.
pub fn run(args: &[String]) -> Result<(), String> {
    crate::debian::print_found(args, USAGE, ensure)
}

/// The environment's Python, made and filled first when it lacks a package.
pub fn ensure() -> Result<PathBuf, String> {
    let dir = cache_dir()?.join("clients");
    let python = dir.join("venv/bin/python");
    if !python.exists() {
        eprintln!(
            "xtask: making the clients' environment in {}",
            dir.display()
        );
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        run_checked(
            Command::new(system_python()?)
                .args(["-m", "venv"])
                .arg(dir.join("venv")),
        )?;
    }
    if !has_all(&python) {
        eprintln!("xtask: installing the protocols' clients from PyPI");
        run_checked(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(PACKAGES.iter().map(|(package, _)| *package)),
        )?;
        if !has_all(&python) {
            return Err("installed the clients, but Python cannot import them".to_owned());
        }
    }
    Ok(python)
}

/// Whether `python` imports every package at its pinned version.
fn has_all(python: &Path) -> bool {
    let checks: Vec<String> = PACKAGES
        .iter()
        .map(|(package, _)| {
            let (name, version) = package.split_once("==").unwrap_or((package, ""));
            format!("importlib.metadata.version({name:?}) == {version:?}")
        })
        .collect();
    let imports: Vec<&str> = PACKAGES.iter().map(|(_, module)| *module).collect();
    let script = format!(
        "import importlib.metadata, {}\nassert {}",
        imports.join(", "),
        checks.join(" and ")
    );
    Command::new(python)
        .args(["-c", &script])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// A Python 3 of the system that makes environments (with pip in them), Debian's
/// `python3-venv` installed first when it cannot.
fn system_python() -> Result<&'static str, String> {
    let usable = || {
        ["python3", "python"].into_iter().find(|name| {
            Command::new(name)
                .args(["-c", "import venv, ensurepip"])
                .output()
                .is_ok_and(|output| output.status.success())
        })
    };
    if let Some(python) = usable() {
        return Ok(python);
    }
    crate::debian::install("python3-venv", "to make the clients' environment")?;
    usable().ok_or_else(|| "installed `python3-venv`, but no Python makes environments".to_owned())
}

/// `$SHIITAKE_CACHE_DIR`, else `$XDG_CACHE_HOME/shiitake`, else `~/.cache/shiitake`.
fn cache_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("SHIITAKE_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|base| base.join("shiitake"))
        .ok_or_else(|| "no cache directory: set HOME or SHIITAKE_CACHE_DIR".to_owned())
}
