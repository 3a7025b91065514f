//! What exporting runs as traces costs (`serve --otlp-endpoint`, docs/operations.md,
//! "Traces"), as ratios within one run of this bench. `cargo bench -p shiitake --bench
//! traces` prints the time of sequential runs with the export against a collector that
//! answers at once, one that is down (the connection refused) and one that accepts and
//! never answers, each beside runs with no export at all, in interleaved rounds of the
//! same process and database (the median of the rounds' ratios, so a burst of load
//! elsewhere moves one round, not the figure). The target: a down or slow collector
//! costs a run no more than a live one does (it is never waited for).
//!
//! A run is one new Session, one prompt and ten calls of an instant scripted model
//! (`support`). The export is the CLI's own (`src/traces`), compiled in here.
//!
//! With `SHIITAKE_BENCH_TRACES_COUNT=off:N` (or `live:N`) it only makes N runs, for
//! counting instructions under cachegrind (`docs/benchmarks.md`, "Traces").

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;
#[path = "../src/traces/mod.rs"]
#[allow(dead_code, unreachable_pub, unused_imports)]
mod traces;

use std::sync::Arc;
use std::time::{Duration, Instant};

use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_protocol::AgentApi;
use shiitake_store_sqlite::{Durability, SqliteStore};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

const ROUNDS: usize = 30;
const RUNS_PER_ROUND: usize = 10;
const COUNT_VAR: &str = "SHIITAKE_BENCH_TRACES_COUNT";

/// Where the spans go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collector {
    /// No export: no layer at all.
    Off,
    /// A collector that answers every export at once.
    Live,
    /// Nothing listens: every export is refused.
    Down,
    /// A collector that accepts the connection and never answers.
    Hanging,
}

impl Collector {
    const ALL: [Collector; 4] = [Self::Off, Self::Live, Self::Down, Self::Hanging];
}

/// A collector that answers `200` to every request, at once.
fn live_collector() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || answer_all(stream));
        }
    });
    format!("http://{address}")
}

/// Reads requests off `stream` and answers each `200` with an empty body.
fn answer_all(mut stream: std::net::TcpStream) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if stream.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A collector that takes connections and never answers.
fn hanging_collector() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    format!("http://{address}")
}

/// The subscriber of `collector`, and the export to stop at the end.
fn dispatch(collector: Collector) -> (Dispatch, Option<traces::Traces>) {
    let endpoint = match collector {
        Collector::Off => return (Dispatch::none(), None),
        Collector::Live => live_collector(),
        Collector::Down => "http://127.0.0.1:1".to_owned(),
        Collector::Hanging => hanging_collector(),
    };
    let config = traces::TraceConfig {
        endpoint: Some(endpoint),
        content: false,
    };
    let (layer, handle) = traces::layer(&config).unwrap().unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    (Dispatch::new(subscriber), Some(handle))
}

/// `runs` runs under `dispatch`, on this thread (so every task the Agent spawns for
/// them records into it); how long they took.
fn timed_runs(
    runtime: &tokio::runtime::Runtime,
    agent: &Agent,
    dispatch: &Dispatch,
    name: &str,
    runs: usize,
) -> Duration {
    tracing::dispatcher::with_default(dispatch, || {
        runtime.block_on(async {
            let started = Instant::now();
            for n in 0..runs {
                support::one_run(agent, format!("{name}-{n}")).await;
            }
            started.elapsed()
        })
    })
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = runtime.block_on(async {
        let store = Arc::new(
            SqliteStore::open(&dir.path().join("traces.db"), Durability::Normal)
                .await
                .unwrap(),
        );
        let mut config = AgentConfig::new(Arc::new(FixedModel(Arc::new(support::model()))));
        config.owner_idle = Duration::from_secs(3600);
        Agent::open(store, support::catalog().await, config)
            .await
            .unwrap()
    });
    let collectors: Vec<(Collector, Dispatch, Option<traces::Traces>)> = Collector::ALL
        .into_iter()
        .map(|collector| {
            let (dispatch, handle) = dispatch(collector);
            (collector, dispatch, handle)
        })
        .collect();
    if let Ok(mode) = std::env::var(COUNT_VAR) {
        let (which, runs) = mode
            .split_once(':')
            .and_then(|(which, runs)| Some((which, runs.parse::<usize>().ok()?)))
            .unwrap_or_else(|| panic!("{COUNT_VAR}: want off:N or live:N, got {mode:?}"));
        let wanted = if which == "live" {
            Collector::Live
        } else {
            Collector::Off
        };
        let (_, dispatch, _) = collectors.iter().find(|(c, ..)| *c == wanted).unwrap();
        timed_runs(&runtime, &agent, dispatch, "counted", runs);
        println!("{runs} runs, collector {wanted:?}");
        return;
    }
    for (collector, dispatch, _) in &collectors {
        timed_runs(
            &runtime,
            &agent,
            dispatch,
            &format!("warm-{collector:?}"),
            RUNS_PER_ROUND,
        );
    }
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); Collector::ALL.len()];
    let mut totals = [Duration::ZERO; 4];
    for round in 0..ROUNDS {
        let mut times = [Duration::ZERO; 4];
        // Each round starts with another collector, so none is always first.
        for k in 0..collectors.len() {
            let index = (round + k) % collectors.len();
            let (collector, dispatch, _) = &collectors[index];
            let name = format!("r{round}-{collector:?}");
            times[index] = timed_runs(&runtime, &agent, dispatch, &name, RUNS_PER_ROUND);
        }
        for index in 0..times.len() {
            totals[index] += times[index];
            ratios[index].push(times[index].as_secs_f64() / times[0].as_secs_f64());
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let runs = (ROUNDS * RUNS_PER_ROUND) as f64;
    for (index, (collector, ..)) in collectors.iter().enumerate() {
        let mut own = ratios[index].clone();
        own.sort_by(f64::total_cmp);
        println!(
            "{collector:?}: {:.0} runs/s; against no export: median of the rounds {:+.2} %",
            runs / totals[index].as_secs_f64(),
            (own[ROUNDS / 2] - 1.0) * 100.0
        );
    }
    runtime.block_on(agent.close()).unwrap();
    // What each export lost is said as it stops.
    for (collector, _, handle) in collectors {
        if let Some(handle) = handle {
            eprintln!("{collector:?}: stopping the export");
            handle.shutdown();
        }
    }
}
