//! A PostgreSQL cluster a test owns, so it may restart, stop and fill it: the shared
//! server of the other tests (`cargo xtask postgres start`) is never touched.
//!
//! Debian's server binaries (`/usr/lib/postgresql/<version>/bin`, found as
//! `xtask/src/postgres.rs` finds them; installing them is xtask's job), `initdb` into a
//! temp dir as the `postgres` user when the test runs as root (initdb and the server
//! refuse root; `runuser`, as xtask does), trust authentication on 127.0.0.1, a port
//! outside the kernel's ephemeral range (below). Without `initdb` the test prints one
//! `SKIPPED` line and passes, or fails under `SHIITAKE_REQUIRE_SERVICES=1`, by
//! `shiitake-test-services`' rule. Dropping the cluster stops it (`-m immediate`) and
//! deletes it, also when the test fails.
//!
//! Two roles: `postgres`, the superuser, for the test's own reads and the fault's
//! commands; `hub`, an ordinary role owning the database `shiitake`, for the Hub
//! processes, as in production (so PostgreSQL's slots reserved for superusers do not
//! serve them when the server is full).
//!
//! Ports: a client that retries a refused loopback connection thousands of times a
//! second can be handed its own destination port as its source port and connect to
//! itself (TCP simultaneous open), which then holds the port the server must bind on
//! restart (issue 46 saw it). A port below the ephemeral range is never handed out as
//! a source port, so the cluster and the proxy of the tests take theirs there.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};

use shiitake_test_services::{Missing, Service};
use sqlx::{Connection, Executor, PgConnection};

/// The Hub processes' role.
pub const HUB_ROLE: &str = "hub";
/// The Hub's database.
pub const DATABASE: &str = "shiitake";

/// A running cluster of the test's own.
pub struct OwnCluster {
    bin: PathBuf,
    /// Holds the data directory, the socket and the server's log; deleted on drop.
    dir: tempfile::TempDir,
    port: u16,
    /// The server's options (`-o`), given again at each start.
    options: String,
    as_postgres: bool,
}

/// The newest installed server binaries (`/usr/lib/postgresql/<version>/bin`).
fn server_bin() -> Result<PathBuf, Missing> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|error| Missing::new(format!("/usr/lib/postgresql cannot be read ({error})")))?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| Missing::new("no /usr/lib/postgresql/<version>/bin/initdb is installed"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A loopback port nothing listens on, below the ephemeral range (see the module
/// doc); distinct within this test process.
pub fn quiet_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Spread processes apart (several test binaries may run at once), then walk.
    let base = 20_000 + u16::try_from(std::process::id() % 1000).unwrap() * 12;
    for _ in 0..2000 {
        let offset = NEXT.fetch_add(1, Ordering::SeqCst) % 12_000;
        let port = 20_000 + (base - 20_000 + offset) % 12_000;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between 20000 and 32000");
}

impl OwnCluster {
    /// Creates and starts a cluster accepting `max_connections`, with the role
    /// `hub` owning the database `shiitake`; `None` after the `SKIPPED` line when
    /// PostgreSQL's server binaries are not installed.
    pub async fn start(max_connections: u32) -> Option<Self> {
        let bin = Service::Postgres.check(server_bin())?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("shiitake-own-pg-")
            .tempdir()
            .unwrap();
        if as_postgres {
            run(Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path()));
        }
        let port = quiet_port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections={max_connections} \
             -c log_line_prefix='%m [%p] %u '",
            dir.path().display()
        );
        let cluster = Self {
            bin,
            dir,
            port,
            options,
            as_postgres,
        };
        run(cluster
            .server_command("initdb")
            .arg("-D")
            .arg(cluster.data())
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ]));
        cluster.start_server();
        let mut admin = PgConnection::connect(&cluster.url("postgres", "postgres"))
            .await
            .unwrap();
        admin
            .execute(format!("CREATE ROLE {HUB_ROLE} LOGIN").as_str())
            .await
            .unwrap();
        admin
            .execute(format!("CREATE DATABASE {DATABASE} OWNER {HUB_ROLE}").as_str())
            .await
            .unwrap();
        admin.close().await.unwrap();
        Some(cluster)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `role`'s URL of `database` on this server.
    pub fn url(&self, role: &str, database: &str) -> String {
        format!("postgres://{role}@127.0.0.1:{}/{database}", self.port)
    }

    /// The Hub's URL: the role `hub`, the database `shiitake`, through `port` (the
    /// server's own, or a proxy's in front of it).
    pub fn hub_url_via(&self, port: u16) -> String {
        format!("postgres://{HUB_ROLE}@127.0.0.1:{port}/{DATABASE}")
    }

    /// The Hub's URL, straight to the server.
    pub fn hub_url(&self) -> String {
        self.hub_url_via(self.port)
    }

    /// The superuser's URL of the Hub's database, for the test's own reads.
    pub fn admin_url(&self) -> String {
        self.url("postgres", DATABASE)
    }

    /// `pg_ctl restart -m <mode>`, returning once the server accepts connections again.
    pub fn restart(&self, mode: &str) {
        self.pg_ctl(&["-m", mode, "restart"], true);
    }

    /// `pg_ctl stop -m <mode>`, returning once the server is down.
    pub fn stop(&self, mode: &str) {
        self.pg_ctl(&["-m", mode, "stop"], false);
    }

    /// Starts the server again after [`OwnCluster::stop`], returning once it accepts
    /// connections.
    pub fn start_server(&self) {
        self.pg_ctl(&["start"], true);
    }

    /// What the server logged so far.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Copies the server's log to `dir` (the scratch directory a failed test keeps).
    pub fn keep_log_in(&self, dir: &Path) {
        // Best effort: the log is for a person reading a failure, nothing checks it.
        if let Err(error) = std::fs::write(dir.join("postgres.log"), self.server_log()) {
            eprintln!(
                "could not keep the server's log in {}: {error}",
                dir.display()
            );
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs `pg_ctl -D <data> -w -t 60 <args>`; `start` also gives the log file and
    /// the options (a restart reads the options back from `postmaster.opts`).
    fn pg_ctl(&self, args: &[&str], starts: bool) {
        let mut command = self.server_command("pg_ctl");
        command.arg("-D").arg(self.data()).args(["-w", "-t", "60"]);
        if starts {
            command
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-o", &self.options]);
        }
        command.args(args);
        run(&mut command);
    }

    /// A server binary, run as `postgres` when this process is root.
    fn server_command(&self, program: &str) -> Command {
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join(program));
            command
        } else {
            Command::new(self.bin.join(program))
        }
    }
}

impl Drop for OwnCluster {
    /// Stops the server, also when the test failed; the temp dir then goes with it.
    fn drop(&mut self) {
        if !self.data().join("postmaster.pid").exists() {
            return;
        }
        let mut command = self.server_command("pg_ctl");
        command
            .arg("-D")
            .arg(self.data())
            .args(["-w", "-t", "30", "-m", "immediate", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match command.status() {
            Ok(status) if status.success() => {}
            other => eprintln!(
                "could not stop the test's PostgreSQL at {}: {other:?}",
                self.data().display()
            ),
        }
    }
}

/// Runs `command` to its end, its output kept off the test's pipes (a server started
/// by `pg_ctl` inherits them and would hold them open), and fails with that output
/// when it fails.
fn run(command: &mut Command) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let status = command
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(out.reopen().unwrap())
        .status()
        .unwrap();
    let said = std::fs::read_to_string(out.path()).unwrap_or_default();
    assert!(status.success(), "{command:?} failed ({status}):\n{said}");
}
