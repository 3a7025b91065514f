//! The tenants phase: 3 processes serving 1 tenant, then the same 3 serving 100 (each
//! process all of them on its one `PostgresHub`), under the same load; and the
//! resident memory of a process holding 100 open Agents.
//!
//! Two clusters of three `hub_node` processes on one database, up at once: one
//! serving a single tenant, one serving [`TENANTS`] tenants (one port per tenant in
//! each process). The load is the throughput phase's, spread round-robin over the
//! tenants:
//!
//! - **Acceptance.** `CALLERS` callers, each on a held Session (its run never gets an
//!   answer) of tenant `i % T` created through process `i % 3`, send `PER_CALLER`
//!   prompts one after the other.
//! - **Runs.** `RUNS` fresh Sessions at once, run `j` of round `r` on tenant
//!   `(r * RUNS + j) % T` through process `j % 3`, each one prompt of `STEPS` tool
//!   calls to its terminal.
//!
//! The clusters take turns within each round (which goes first alternates), and each
//! figure is the median of the rounds' rates. After the rounds every tenant of every
//! process is touched (its Sessions listed), then each process's `VmRSS` is read
//! from `/proc/<pid>/status` and its PostgreSQL connections counted by
//! `application_name`. The real product's figure is `serve_memory.rs`'s.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;
use shiitake_client::{RemoteAgent, RemoteSession};
use shiitake_protocol::{AgentApi, RequestId, SessionId};
use sqlx::Connection;

use crate::Failure;
use crate::cluster::{Node, NodeSpec, client, scratch, spawn_node_at};
use crate::throughput::{
    CALLERS, LEASE_MS, PER_CALLER, RUNS, STEPS, accept_all, held_session, rate, run_to_terminal,
};

/// Tenants of the many-tenant cluster.
pub(crate) const TENANTS: usize = 100;
/// Processes of each cluster.
const PROCESSES: usize = 3;

/// Three processes serving the same tenants, and the rates of each round.
struct Tenants {
    nodes: Vec<Node>,
    /// `clients[process][tenant]`: each tenant has a port of its own in each process.
    clients: Vec<Vec<RemoteAgent>>,
    /// Per caller: its tenant and its held Session.
    held: Vec<(usize, SessionId)>,
    accepted: Vec<f64>,
    ran: Vec<f64>,
    /// The runs phase's total time over all rounds.
    ran_for: Duration,
    round: usize,
}

impl Tenants {
    async fn start(
        binary: &Path,
        database: &str,
        logs: &Path,
        tenants: usize,
    ) -> Result<Self, Failure> {
        let run = ulid::Ulid::generate().to_string().to_lowercase();
        let keys: Vec<String> = (0..tenants).map(|t| format!("t{t:03}-{run}")).collect();
        let spec = NodeSpec {
            marks: false,
            ..NodeSpec::new(LEASE_MS, STEPS)
        };
        let mut nodes = Vec::with_capacity(PROCESSES);
        let mut clients = Vec::with_capacity(PROCESSES);
        for process in 0..PROCESSES {
            let node = spawn_node_at(
                binary,
                database,
                &keys.join(","),
                logs,
                &format!("tenants{tenants}-{process}"),
                spec,
            );
            clients.push(tenant_clients(&node, &keys)?);
            nodes.push(node);
        }
        let mut cluster = Self {
            nodes,
            clients,
            held: Vec::with_capacity(CALLERS),
            accepted: Vec::new(),
            ran: Vec::new(),
            ran_for: Duration::ZERO,
            round: 0,
        };
        for caller in 0..CALLERS {
            let tenant = caller % tenants;
            let client = cluster.client(caller, tenant);
            let session = held_session(&client, caller).await?;
            cluster.held.push((tenant, session));
        }
        Ok(cluster)
    }

    fn tenants(&self) -> usize {
        self.clients.first().map_or(1, Vec::len)
    }

    /// The client of `tenant` on the process of caller (or run) `index`.
    fn client(&self, index: usize, tenant: usize) -> RemoteAgent {
        self.clients[index % self.clients.len()][tenant].clone()
    }

    async fn accept_round(&mut self) -> Result<(), Failure> {
        let sessions = self
            .held
            .iter()
            .enumerate()
            .map(|(caller, (tenant, session))| {
                self.client(caller, *tenant).session(session.clone())
            })
            .collect();
        let took = accept_all(sessions, self.round).await?;
        self.accepted.push(rate((CALLERS * PER_CALLER, took)));
        Ok(())
    }

    async fn runs_round(&mut self) -> Result<(), Failure> {
        let round = self.round;
        let mut sessions: Vec<RemoteSession> = Vec::with_capacity(RUNS);
        for run in 0..RUNS {
            let tenant = (round * RUNS + run) % self.tenants();
            let client = self.client(run, tenant);
            let id = client
                .create_session(RequestId::new(format!("run-{round}-{run}"))?)
                .await?;
            sessions.push(client.session(id));
        }
        let started = Instant::now();
        for result in join_all(sessions.into_iter().map(run_to_terminal)).await {
            result?;
        }
        self.ran_for += started.elapsed();
        self.ran.push(rate((RUNS, started.elapsed())));
        self.round += 1;
        Ok(())
    }

    /// Lists the Sessions of every tenant through every process, so each one's Agent
    /// has served a request in each.
    async fn touch_all(&self) -> Result<(), Failure> {
        for clients in &self.clients {
            for client in clients {
                client.list_sessions(None).await?;
            }
        }
        Ok(())
    }

    /// Per process: resident memory in MiB and PostgreSQL connections.
    async fn footprint(&self, database: &str) -> Result<Vec<(f64, i64)>, Failure> {
        let mut conn = sqlx::PgConnection::connect(database).await?;
        let mut figures = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let connections = connections_of(&mut conn, &node.holder).await?;
            figures.push((resident_mib(node.child.id())?, connections));
        }
        conn.close().await?;
        Ok(figures)
    }
}

/// The client of each of `keys` on `node`: a node of one tenant serves it at its
/// `READY` address, a node of several prints `TENANT <key> <url>` for each.
fn tenant_clients(node: &Node, keys: &[String]) -> Result<Vec<RemoteAgent>, Failure> {
    if keys.len() == 1 {
        return Ok(vec![client(&node.url)]);
    }
    let mut urls = std::collections::HashMap::with_capacity(keys.len());
    while urls.len() < keys.len() {
        let line = node
            .lines
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| format!("a node printed {} of {} tenants", urls.len(), keys.len()))?;
        let mut parts = line.split(' ');
        if let (Some("TENANT"), Some(key), Some(url)) = (parts.next(), parts.next(), parts.next()) {
            urls.insert(key.to_owned(), url.to_owned());
        }
    }
    keys.iter()
        .map(|key| {
            urls.get(key)
                .map(|url| client(url))
                .ok_or_else(|| format!("no TENANT line for {key}").into())
        })
        .collect()
}

/// `VmRSS` of process `pid`, in MiB.
pub(crate) fn resident_mib(pid: u32) -> Result<f64, Failure> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or("no VmRSS line in /proc/<pid>/status")?
        .parse()?;
    Ok(kib / 1024.0)
}

/// The connections of the process whose lease holder is `holder` (its
/// `application_name` is `shiitake <holder>`).
pub(crate) async fn connections_of(
    conn: &mut sqlx::PgConnection,
    holder: &str,
) -> Result<i64, Failure> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
            .bind(format!("shiitake {holder}"))
            .fetch_one(conn)
            .await?,
    )
}

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

/// Runs `rounds` rounds on both clusters, prints the ratios and the memory of
/// `hub_node`, then measures `serve` (`shiitake`, the release binary at `product`).
pub async fn run(
    binary: &Path,
    product: &Path,
    database: &str,
    rounds: usize,
) -> Result<(), Failure> {
    // `SHIITAKE_KEEP_FAILOVER=1` keeps the nodes' logs, as in the failover tests.
    let (logs, _removed) = scratch();
    let started = Instant::now();
    let mut one = Tenants::start(binary, database, &logs, 1).await?;
    let mut many = Tenants::start(binary, database, &logs, TENANTS).await?;
    let ready = started.elapsed();
    let rounds_started = Instant::now();
    for round in 0..rounds {
        // Which cluster goes first alternates, so neither always meets a warmer machine.
        let (first, second) = if round % 2 == 0 {
            (&mut one, &mut many)
        } else {
            (&mut many, &mut one)
        };
        first.accept_round().await?;
        second.accept_round().await?;
        first.runs_round().await?;
        second.runs_round().await?;
        eprintln!("hub_bench tenants: round {} of {rounds} done", round + 1);
    }
    let rounds_took = rounds_started.elapsed();
    one.touch_all().await?;
    many.touch_all().await?;
    let one_footprint = one.footprint(database).await?;
    let many_footprint = many.footprint(database).await?;
    let load = crate::load_average();
    let (accept_one, accept_many) = (median(&one.accepted), median(&many.accepted));
    let (runs_one, runs_many) = (median(&one.ran), median(&many.ran));
    println!(
        "Hub with many tenants, {rounds} rounds, {PROCESSES} processes: {CALLERS} callers x {PER_CALLER} prompts; {RUNS} runs of {STEPS} steps; round-robin over the tenants; medians of rounds; load {load}; clusters up in {:.1} s, rounds {:.1} s",
        ready.as_secs_f64(),
        rounds_took.as_secs_f64()
    );
    println!("| tenants | acceptances/s | ratio | 10-step runs/s | ratio |");
    println!("| --- | --- | --- | --- | --- |");
    println!("| 1 | {accept_one:.0} | 1.00x | {runs_one:.1} | 1.00x |");
    println!(
        "| {TENANTS} | {accept_many:.0} | {:.2}x | {runs_many:.1} | {:.2}x |",
        accept_many / accept_one.max(f64::MIN_POSITIVE),
        runs_many / runs_one.max(f64::MIN_POSITIVE)
    );
    // The medians hide a stalled round; each round's rates show it.
    let listed_rates = |rates: &[f64]| {
        rates
            .iter()
            .map(|rate| format!("{rate:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "each round, acceptances/s: 1 tenant {}; {TENANTS} tenants {}",
        listed_rates(&one.accepted),
        listed_rates(&many.accepted)
    );
    println!(
        "each round, 10-step runs/s: 1 tenant {}; {TENANTS} tenants {}",
        listed_rates(&one.ran),
        listed_rates(&many.ran)
    );
    let (total_one, total_many) = (
        rate((RUNS * one.ran.len(), one.ran_for)),
        rate((RUNS * many.ran.len(), many.ran_for)),
    );
    println!(
        "10-step runs over all rounds (all runs / all their time): 1 tenant {total_one:.1}/s; {TENANTS} tenants {total_many:.1}/s = {:.2}x",
        total_many / total_one.max(f64::MIN_POSITIVE)
    );
    let rss = |figures: &[(f64, i64)]| median(&figures.iter().map(|f| f.0).collect::<Vec<_>>());
    let listed = |figures: &[(f64, i64)]| {
        figures
            .iter()
            .map(|(mib, connections)| format!("{mib:.1} MiB / {connections}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (rss_one, rss_many) = (rss(&one_footprint), rss(&many_footprint));
    println!();
    println!(
        "hub_node after the rounds, every tenant touched: VmRSS (median of {PROCESSES}) and, per process, MiB / PostgreSQL connections"
    );
    println!("| open Agents per process | VmRSS | processes |");
    println!("| --- | --- | --- |");
    println!("| 1 | {rss_one:.1} MiB | {} |", listed(&one_footprint));
    println!(
        "| {TENANTS} | {rss_many:.1} MiB | {} |",
        listed(&many_footprint)
    );
    #[allow(clippy::cast_precision_loss)]
    let extra = (TENANTS - 1) as f64;
    println!(
        "per extra open Agent: ({rss_many:.1} - {rss_one:.1}) / {extra:.0} = {:.2} MiB",
        (rss_many - rss_one) / extra
    );
    // Drained, not killed: no dead process's leases left for the next phase to free.
    for mut node in one.nodes.into_iter().chain(many.nodes) {
        node.drain();
    }
    crate::serve_memory::run(product, database).await
}
