//! The memory of open Agents in the real product: one `shiitake serve --database
//! postgres://… --model none` process (the release binary, which `cargo xtask bench
//! hub tenants` builds), on a database of its own created here and dropped after.
//!
//! Its resident memory (`VmRSS`) and PostgreSQL connections are read at three points:
//! once it serves (its default tenant open, and touched by one request); after
//! [`TENANTS`] tenants are created with `POST /v1/hub/tenants`; and after each of them
//! is opened by one `GET /v1/agents/<tenant>/sessions` with the operator's token. The
//! open tenants are counted in `hub_nodes` (one row per tenant open in a process).
//! These are the Hub directory's Agents with every extension `serve` gives them.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::{AgentApi, AgentName, TenantName};
use sqlx::{Connection, PgConnection};

use crate::Failure;
use crate::tenants::{TENANTS, connections_of, resident_mib};

/// The operator's token of the measured process.
const OPERATOR: &str = "hub-bench-operator-0123456789abcdef";
/// The tenant `serve --agent` names (opened at start).
const DEFAULT_TENANT: &str = "bench-default";
/// How long the process is left alone before each reading, so work started by the
/// last request (a tenant's first sweep, its upkeep beat) has settled.
const SETTLE: Duration = Duration::from_secs(2);

/// `url` with its database replaced by `name` (query parameters kept).
fn with_database(url: &str, name: &str) -> Result<String, Failure> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("the database url has no scheme")?;
    let (rest, query) = rest
        .split_once('?')
        .map_or((rest, None), |(rest, query)| (rest, Some(query)));
    let authority = rest
        .split_once('/')
        .map_or(rest, |(authority, _)| authority);
    let query = query.map(|query| format!("?{query}")).unwrap_or_default();
    Ok(format!("{scheme}://{authority}/{name}{query}"))
}

/// A `serve` child, killed if the phase fails midway.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) && self.0.kill().is_ok() {
            drop(self.0.wait());
        }
    }
}

impl Served {
    /// Sends SIGTERM and waits: the process drains and closes every tenant.
    fn stop(mut self) -> Result<(), Failure> {
        let pid = self.0.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        self.0.wait()?;
        Ok(())
    }
}

/// Starts `product serve` on `database` and waits for its address.
fn start(product: &Path, database: &str, dir: &Path) -> Result<(Served, String), Failure> {
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let mut child = Command::new(product)
        .args(["serve", "--port", "0", "--model", "none"])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--database", database, "--agent", DEFAULT_TENANT])
        .arg("--workspace")
        .arg(dir)
        .env_remove("SHIITAKE_DATABASE")
        .env_remove("SHIITAKE_AGENT")
        .env("SHIITAKE_TOKEN", OPERATOR)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", product.display()))?;
    let stdout = child.stdout.take().ok_or("serve has no stdout")?;
    let served = Served(child);
    let (tell, address) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some(url) = line.strip_prefix("shiitake: listening on ")
                && tell.send(url.trim().to_owned()).is_err()
            {
                return;
            }
        }
    });
    let url = address.recv_timeout(Duration::from_secs(60)).map_err(|_| {
        format!(
            "serve printed no address; see {}",
            dir.join("serve.log").display()
        )
    })?;
    Ok((served, url))
}

/// One reading: open tenants (rows in `hub_nodes`), MiB resident, connections.
struct Reading {
    open: i64,
    mib: f64,
    connections: i64,
}

async fn read(conn: &mut PgConnection, pid: u32, holder: &str) -> Result<Reading, Failure> {
    tokio::time::sleep(SETTLE).await;
    let open: i64 = sqlx::query_scalar("SELECT count(*) FROM hub_nodes WHERE holder = $1")
        .bind(holder)
        .fetch_one(&mut *conn)
        .await?;
    Ok(Reading {
        open,
        mib: resident_mib(pid)?,
        connections: connections_of(conn, holder).await?,
    })
}

/// Measures `serve` at `product` on a throwaway database beside `database`'s.
pub async fn run(product: &Path, database: &str) -> Result<(), Failure> {
    let name = format!(
        "hub_bench_{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let mut admin = PgConnection::connect(database).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await?;
    let measured = measure(product, &with_database(database, &name)?).await;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    measured
}

async fn measure(product: &Path, database: &str) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let (served, url) = start(product, database, dir.path())?;
    let pid = served.0.id();
    let operator = RemoteAgent::new(ClientOptions::new(&url).with_token(OPERATOR))?;
    let mut conn = PgConnection::connect(database).await?;
    let holder: String =
        sqlx::query_scalar("SELECT holder FROM hub_nodes WHERE agent_id = $1 LIMIT 1")
            .bind(DEFAULT_TENANT)
            .fetch_one(&mut conn)
            .await?;
    operator
        .agent(AgentName::new(DEFAULT_TENANT)?)
        .list_sessions(None)
        .await?;
    let at_start = read(&mut conn, pid, &holder).await?;
    let run = ulid::Ulid::generate().to_string().to_lowercase();
    let tenants: Vec<TenantName> = (0..TENANTS)
        .map(|t| TenantName::new(format!("t{t:03}-{run}")))
        .collect::<Result<_, _>>()?;
    for tenant in &tenants {
        operator.create_tenant(tenant.clone()).await?;
    }
    let created = read(&mut conn, pid, &holder).await?;
    for tenant in &tenants {
        operator
            .agent(tenant.first_agent())
            .list_sessions(None)
            .await?;
    }
    let opened = read(&mut conn, pid, &holder).await?;
    conn.close().await?;
    served.stop()?;
    println!();
    println!(
        "shiitake serve --database postgres://… --model none (release), one process; load {}",
        crate::load_average()
    );
    println!("| when | open tenants | VmRSS | PostgreSQL connections |");
    println!("| --- | --- | --- | --- |");
    let rows = [
        (
            "serving (the default tenant open and touched)".to_owned(),
            &at_start,
        ),
        (format!("{TENANTS} tenants created"), &created),
        (
            "each opened by GET /v1/agents/<tenant>/sessions".to_owned(),
            &opened,
        ),
    ];
    for (when, reading) in rows {
        println!(
            "| {when} | {} | {:.1} MiB | {} |",
            reading.open, reading.mib, reading.connections
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let extra = (opened.open - at_start.open).max(1) as f64;
    println!(
        "per extra open Agent: ({:.1} - {:.1}) MiB / {extra:.0} = {:.2} MiB",
        opened.mib,
        at_start.mib,
        (opened.mib - at_start.mib) / extra
    );
    Ok(())
}
