//! `cargo xtask postgres start|stop|status`: a throwaway PostgreSQL for the tests.
//!
//! Debian's `postgresql` package (installed with apt-get when absent and xtask runs
//! as root), `initdb` into a fresh directory under the temp dir as the `postgres`
//! user (`runuser`; initdb refuses to run as root), trust authentication, and a
//! server on a loopback port only. Nothing of it survives `stop`: the data
//! directory is deleted. The last line `start` prints is the URL, which
//! `cargo xtask test` exports as [`URL_VAR`] for the PostgreSQL tests.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::{output_checked, run_checked};

/// The variable the PostgreSQL tests read; they skip with a note when it is unset.
pub const URL_VAR: &str = "SHIITAKE_TEST_POSTGRES_URL";
/// The loopback port unless `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 54329;

const USAGE: &str = "usage: cargo xtask postgres <start | stop | status> [--port N]

  start   install PostgreSQL if needed (apt-get, as root), initdb a fresh cluster in
          the temp dir and start it on 127.0.0.1 (default port 54329); prints its URL
  stop    stop that server and delete its data directory
  status  print the URL if the server answers, fail otherwise";

/// Runs `postgres <subcommand>`.
pub fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_owned())?;
    let port = parse_port(rest)?;
    match command.as_str() {
        "start" => {
            let url = start(port)?;
            println!("{url}");
            Ok(())
        }
        "stop" => stop(port),
        "status" => {
            if answers(port) {
                println!("{}", url(port));
                Ok(())
            } else {
                Err(format!("no PostgreSQL answers on 127.0.0.1:{port}"))
            }
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn parse_port(rest: &[String]) -> Result<u16, String> {
    match rest {
        [] => Ok(DEFAULT_PORT),
        [flag, port] if flag == "--port" => port
            .parse()
            .map_err(|_| format!("not a port: {port}\n\n{USAGE}")),
        _ => Err(USAGE.to_owned()),
    }
}

/// The URL of the server on `port`: the `postgres` superuser, trust authentication.
pub fn url(port: u16) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/postgres")
}

/// The data directory of the server on `port`.
fn data_dir(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("shiitake-postgres-{port}"))
}

/// Whether a server answers on the loopback `port`.
pub fn answers(port: u16) -> bool {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&address, Duration::from_millis(300)).is_ok()
}

fn is_root() -> bool {
    output_checked(Command::new("id").arg("-u")).is_ok_and(|uid| uid.trim() == "0")
}

/// The newest installed server binaries (`/usr/lib/postgresql/<version>/bin`).
fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn install() -> Result<PathBuf, String> {
    if !is_root() {
        return Err(
            "PostgreSQL is not installed and xtask is not root: install Debian's `postgresql` package"
                .to_owned(),
        );
    }
    eprintln!("postgres: installing Debian's postgresql package (apt-get)");
    run_checked(Command::new("apt-get").args(["update", "-qq"]))?;
    run_checked(
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "postgresql",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    server_bin().ok_or_else(|| "apt-get installed postgresql but no initdb was found".to_owned())
}

/// Runs a server binary as the `postgres` user when xtask is root (initdb and the
/// server refuse root), as xtask's own user otherwise.
fn as_server_user(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(bin.join(program));
        command
    } else {
        Command::new(bin.join(program))
    }
}

/// Starts a fresh server on `port` (or reuses one that answers) and returns its URL.
pub fn start(port: u16) -> Result<String, String> {
    if answers(port) {
        eprintln!("postgres: something already answers on 127.0.0.1:{port}; reusing it");
        return Ok(url(port));
    }
    let bin = match server_bin() {
        Some(bin) => bin,
        None => install()?,
    };
    let data = data_dir(port);
    if data.exists() {
        // A cluster left by a run that did not stop it: start clean.
        fs::remove_dir_all(&data)
            .map_err(|error| format!("removing {}: {error}", data.display()))?;
    }
    fs::create_dir_all(&data).map_err(|error| format!("creating {}: {error}", data.display()))?;
    if is_root() {
        run_checked(Command::new("chown").args(["postgres:postgres"]).arg(&data))?;
    }
    eprintln!("postgres: initdb {}", data.display());
    run_checked(
        as_server_user(&bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .arg("--no-instructions"),
    )?;
    let mut options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300",
        data.display()
    );
    // `pg_stat_statements` (in Debian's package) lets `hub_bench profile` count the
    // statements of a run; it only loads at start.
    if bin
        .parent()
        .is_some_and(|version| version.join("lib/pg_stat_statements.so").exists())
    {
        options.push_str(" -c shared_preload_libraries=pg_stat_statements");
    }
    run_checked(
        as_server_user(&bin, "pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(data.join("server.log"))
            .args(["-w", "-t", "30", "-o", &options, "start"]),
    )?;
    if !answers(port) {
        return Err(format!(
            "PostgreSQL started but does not answer on 127.0.0.1:{port}; see {}",
            data.join("server.log").display()
        ));
    }
    eprintln!("postgres: ready on 127.0.0.1:{port}");
    Ok(url(port))
}

/// Stops the server on `port` started by [`start`] and deletes its data directory.
pub fn stop(port: u16) -> Result<(), String> {
    let data = data_dir(port);
    if !data.join("PG_VERSION").exists() {
        eprintln!(
            "postgres: no cluster at {}; nothing to stop",
            data.display()
        );
        return Ok(());
    }
    if let Some(bin) = server_bin() {
        let stopped = run_checked(as_server_user(&bin, "pg_ctl").arg("-D").arg(&data).args([
            "-m",
            "immediate",
            "-w",
            "stop",
        ]));
        if let Err(error) = stopped {
            eprintln!("postgres: {error} (deleting the data directory anyway)");
        }
    }
    fs::remove_dir_all(&data).map_err(|error| format!("removing {}: {error}", data.display()))?;
    eprintln!("postgres: stopped and removed {}", data.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_parse_at_their_edges() {
        assert_eq!(parse_port(&[]), Ok(DEFAULT_PORT));
        let args = |port: &str| vec!["--port".to_owned(), port.to_owned()];
        assert_eq!(parse_port(&args("65535")), Ok(65535));
        assert!(parse_port(&args("65536")).is_err());
        assert!(parse_port(&args("-1")).is_err());
        assert!(parse_port(&["--port".to_owned()]).is_err());
    }

    #[test]
    fn the_url_names_the_loopback_port() {
        assert_eq!(url(54329), "postgres://postgres@127.0.0.1:54329/postgres");
    }
}
