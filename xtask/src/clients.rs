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
const PACKAGES: &[(&str, Option<&str>)] = &[
    ("agent-client-protocol==0.12.1", Some("acp")),
    ("mcp==2.3.0", Some("mcp")),
    ("a2a-sdk==1.3.0", Some("a2a")),
];

/// The variable the tests read the environment's Python from.
pub const ENV_VAR: &str = "SHIITAKE_CLIENTS_PYTHON";

/// The trace receiver the OpenTelemetry tests export to: Arize Phoenix, pinned, in an
/// environment of its own (it is large: pyarrow, pandas), checked by its version only
/// (importing it takes seconds).
const PHOENIX: &[(&str, Option<&str>)] = &[("arize-phoenix==20.26.1", None)];

/// The variable the tests read Phoenix's `phoenix` command from.
pub const PHOENIX_VAR: &str = "SHIITAKE_PHOENIX";

const USAGE: &str = "usage: cargo xtask clients

  makes (or reuses) a Python virtual environment with the protocols' official
  clients from PyPI (the ACP, MCP and A2A SDKs) and prints its python";

const PHOENIX_USAGE: &str = "usage: cargo xtask phoenix

  makes (or reuses) a Python virtual environment with Arize Phoenix from PyPI, the
  trace receiver of the OpenTelemetry tests, and prints its `phoenix` command";

/// Runs the subcommand.
pub fn run(args: &[String]) -> Result<(), String> {
    crate::debian::print_found(args, USAGE, ensure)
}

/// Runs `cargo xtask phoenix`.
pub fn run_phoenix(args: &[String]) -> Result<(), String> {
    crate::debian::print_found(args, PHOENIX_USAGE, phoenix)
}

/// The clients' Python, its environment made and filled first when it lacks a package.
pub fn ensure() -> Result<PathBuf, String> {
    environment("clients", PACKAGES)
}

/// Phoenix's `phoenix` command, its environment made and filled first when needed.
pub fn phoenix() -> Result<PathBuf, String> {
    let python = environment("phoenix", PHOENIX)?;
    Ok(python.with_file_name("phoenix"))
}

/// The Python of the environment `name` of the cache, made and given `packages` first
/// when it lacks one.
fn environment(name: &str, packages: &[(&str, Option<&str>)]) -> Result<PathBuf, String> {
    let dir = cache_dir()?.join(name);
    let python = dir.join("venv/bin/python");
    if !python.exists() {
        eprintln!("xtask: making the {name} environment in {}", dir.display());
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        run_checked(
            Command::new(system_python()?)
                .args(["-m", "venv"])
                .arg(dir.join("venv")),
        )?;
    }
    if !has_all(&python, packages) {
        eprintln!("xtask: installing {name}'s packages from PyPI");
        run_checked(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages.iter().map(|(package, _)| *package)),
        )?;
        if !has_all(&python, packages) {
            return Err(format!(
                "installed {name}'s packages, but Python cannot find them"
            ));
        }
    }
    Ok(python)
}

/// Whether `python` has every package at its pinned version (and imports those that
/// name a module).
fn has_all(python: &Path, packages: &[(&str, Option<&str>)]) -> bool {
    let checks: Vec<String> = packages
        .iter()
        .map(|(package, _)| {
            let (name, version) = package.split_once("==").unwrap_or((package, ""));
            format!("importlib.metadata.version({name:?}) == {version:?}")
        })
        .collect();
    let imports: Vec<&str> = std::iter::once("importlib.metadata")
        .chain(packages.iter().filter_map(|(_, module)| *module))
        .collect();
    let script = format!(
        "import {}\nassert {}",
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
