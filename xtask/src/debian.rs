//! Installing a Debian package a test service needs (Chromium, bubblewrap) with
//! apt-get, as root; otherwise saying what to install. And the one shape of the
//! subcommands that find or install such a program and print its path.

use std::process::Command;

use crate::util::{output_checked, run_checked};

/// Installs `package` with apt-get when running as root; otherwise an error naming
/// the package and `otherwise`, what the user may do instead.
pub fn install(package: &str, otherwise: &str) -> Result<(), String> {
    let uid = output_checked(Command::new("id").arg("-u"))?;
    if uid.trim() != "0" {
        return Err(format!(
            "`{package}` is missing; install Debian's `{package}` (apt-get install \
             {package}) {otherwise}"
        ));
    }
    eprintln!("xtask: installing Debian's `{package}` with apt-get");
    run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
    run_checked(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

/// A subcommand that takes no argument but `--help`: prints the path `ensure` finds (or
/// installs).
pub fn print_found(
    args: &[String],
    usage: &str,
    ensure: impl FnOnce() -> Result<std::path::PathBuf, String>,
) -> Result<(), String> {
    match args {
        [] => {
            println!("{}", ensure()?.display());
            Ok(())
        }
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{usage}");
            Ok(())
        }
        _ => Err(format!("unexpected arguments {args:?}\n\n{usage}")),
    }
}
