//! The Hub benchmark (`cargo xtask bench hub`; `docs/benchmarks.md` records the
//! figures), in three phases, each on processes of `hub_node` (built with
//! `--release` next to this binary, which starts them):
//!
//! - `throughput [rounds]` (the default): acceptances/s and 10-step runs/s with 1, 2
//!   and 3 processes, as ratios to one (`throughput.rs`);
//! - `takeover [kills]`: three processes under load, one SIGKILLed and started again
//!   `kills` times; per Session the dead process held, the time from the kill to the
//!   first commit by its new owner (`takeover.rs`);
//! - `rolling [rounds]`: three processes under load, each in turn sent SIGTERM,
//!   waited for and started again; the longest stall of a Session with work, and
//!   whether subscribers on the other processes missed a frame (`rolling.rs`);
//! - `profile [rounds]`: one process, the statements, round trips and commits of a
//!   10-step run, counted by the server (`profile.rs`; not part of `all`);
//! - `tenants [rounds]`: three processes serving 1 tenant and three serving 100, the
//!   same load spread over the tenants, as ratios 100 / 1; the resident memory of
//!   `hub_node` with 100 open Agents and with 1 (`tenants.rs`), and of the real
//!   `shiitake serve` (the release binary beside `examples/`) before and after
//!   opening 100 tenants (`serve_memory.rs`).
//!
//! Usage: `hub_bench <database url> [throughput [rounds] | takeover [kills] |
//! rolling [rounds] | profile [rounds] | tenants [rounds] | all]`; a bare number is
//! the throughput phase's rounds, as before the phases.

#[path = "../../tests/support/cluster.rs"]
mod cluster;
mod machine;
mod pgstat;
mod profile;
mod rolling;
mod serve_memory;
mod takeover;
mod tenants;
mod throughput;

use std::path::PathBuf;
use std::time::Duration;

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The release `hub_node` next to this binary.
fn node_binary() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or("the benchmark binary has no directory")?;
    Ok(dir.join("hub_node"))
}

/// The release `shiitake` binary, beside the `examples/` directory of this one.
fn product_binary() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()?;
    let release = exe
        .parent()
        .and_then(std::path::Path::parent)
        .ok_or("the benchmark binary has no target directory")?;
    Ok(release.join("shiitake"))
}

/// The one-minute load average, to print next to latencies measured on a shared machine.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split(' ').next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The `q`-quantile of `samples` (nearest rank), `None` when there are none.
fn quantile(samples: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// A latency for the tables: seconds with two decimals, or `-`.
fn secs(duration: Option<Duration>) -> String {
    duration.map_or_else(|| "-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
}

const USAGE: &str = "usage: hub_bench <database url> [throughput [rounds] | takeover [kills] | rolling [rounds] | profile [rounds] | tenants [rounds] | all]";

/// Rounds of the tenants phase by default.
const TENANT_ROUNDS: usize = 5;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let database = args.first().ok_or(USAGE)?;
    let count = |index: usize, default: usize| -> Result<usize, Failure> {
        args.get(index)
            .map_or(Ok(default), |n| n.parse().map_err(|_| USAGE.into()))
    };
    let binary = node_binary()?;
    match args.get(1).map(String::as_str) {
        None => throughput::run(&binary, database, 5).await,
        Some("throughput") => throughput::run(&binary, database, count(2, 5)?).await,
        Some("takeover") => takeover::run(&binary, database, count(2, 10)?).await,
        Some("rolling") => rolling::run(&binary, database, count(2, 3)?).await,
        Some("profile") => profile::run(&binary, database, count(2, 2)?).await,
        Some("tenants") => {
            tenants::run(
                &binary,
                &product_binary()?,
                database,
                count(2, TENANT_ROUNDS)?,
            )
            .await
        }
        Some("all") => {
            throughput::run(&binary, database, 5).await?;
            takeover::run(&binary, database, 10).await?;
            rolling::run(&binary, database, 3).await?;
            tenants::run(&binary, &product_binary()?, database, TENANT_ROUNDS).await
        }
        Some(rounds) => match rounds.parse() {
            Ok(rounds) => throughput::run(&binary, database, rounds).await,
            Err(_) => Err(USAGE.into()),
        },
    }
}
