//! What watching an Agent costs (docs/operations.md), as ratios within one run of this
//! bench. `cargo bench -p shiitake --bench operations` prints, each beside its target:
//!
//! - **the scrape at 10,000 open Sessions**: the median and p99 time of rendering the
//!   Prometheus text (what `GET /metrics` answers) while 10,000 Sessions have an
//!   owner in memory, after runs with tool calls filled every series core records;
//!   target < 1 ms. The open Sessions gauge is one series whatever the count (no
//!   label names a Session), so what grows the scrape is the number of series, not
//!   of Sessions: the figure is measured with every series a run makes;
//! - **recording cost**: sequential runs/s with the recorder recording vs with it
//!   answering every metric with a no-op handle, in interleaved rounds of the same
//!   process and database (50 adjacent pairs of 10 runs each, the median of the pairs'
//!   time ratios, so a burst of load elsewhere on the machine moves one pair, not the
//!   figure); target ≤ 3 % slower. A run is one new Session, one prompt
//!   and ten calls of an instant scripted model (nine `files__read` tool calls, then
//!   a text answer) on `Durability::Normal`, so no fsync hides the recording's CPU.
//!
//! With `SHIITAKE_BENCH_OPS_COUNT=on:N` (or `off:N`) it only makes N runs, for counting
//! instructions under cachegrind (`docs/benchmarks.md`, "Operations").
//!
//! The recorder is `metrics-exporter-prometheus`'s with the buckets `serve --metrics`
//! sets, behind a switch: a global recorder cannot be uninstalled, so "without" is
//! the switch off (the facade still calls the recorder, which hands out no-op
//! handles: the cost of no recorder at all plus one atomic load).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use shiitake_core::telemetry;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_protocol::{AgentApi, ReadOptions, RequestId, SessionApi};
use shiitake_store_sqlite::{Durability, SqliteStore};

const OPEN_SESSIONS: usize = 10_000;
const SCRAPES: usize = 1_000;
const ROUNDS: usize = 50;
const RUNS_PER_ROUND: usize = 10;

/// `on:N` or `off:N`: only N runs, recording or not, then exit; for counting
/// instructions under cachegrind, which load elsewhere on the machine does not move
/// (the difference of two run counts gives the instructions of one run).
const COUNT_VAR: &str = "SHIITAKE_BENCH_OPS_COUNT";

/// The runs of [`COUNT_VAR`]'s mode.
async fn counted_runs(agent: &Agent, on: &AtomicBool, mode: &str) {
    let (recording, runs) = mode
        .split_once(':')
        .and_then(|(switch, runs)| Some((switch == "on", runs.parse::<usize>().ok()?)))
        .unwrap_or_else(|| panic!("{COUNT_VAR}: want on:N or off:N, got {mode:?}"));
    on.store(recording, Ordering::SeqCst);
    for n in 0..runs {
        support::one_run(agent, format!("counted-{n}")).await;
    }
    println!("{runs} runs, recording {recording}");
}

/// The Prometheus recorder, or no-op handles while `on` is false.
struct Switch {
    on: Arc<AtomicBool>,
    inner: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description);
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

fn percentile(values: &mut [Duration], at: f64) -> Duration {
    values.sort();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((values.len() - 1) as f64 * at).round() as usize;
    values[index]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let inner = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".to_owned()),
            telemetry::SECONDS_BUCKETS,
        )
        .unwrap()
        .set_buckets_for_metric(
            Matcher::Full(telemetry::STORE_COMMIT_GROUP.to_owned()),
            telemetry::GROUP_BUCKETS,
        )
        .unwrap()
        .build_recorder();
    let handle = inner.handle();
    let on = Arc::new(AtomicBool::new(true));
    metrics::set_global_recorder(Switch {
        on: on.clone(),
        inner,
    })
    .unwrap();
    telemetry::describe();
    // As `serve --metrics` does: histograms' samples drained every 5 s.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open(&dir.path().join("ops.db"), Durability::Normal)
            .await
            .unwrap(),
    );
    let mut config = AgentConfig::new(Arc::new(FixedModel(Arc::new(support::model()))));
    config.owner_idle = Duration::from_secs(3600);
    let agent = Agent::open(store, support::catalog().await, config)
        .await
        .unwrap();

    // Recording cost: interleaved rounds, recording and not.
    for n in 0..RUNS_PER_ROUND {
        support::one_run(&agent, format!("warm-{n}")).await;
    }
    if let Ok(mode) = std::env::var(COUNT_VAR) {
        counted_runs(&agent, &on, &mode).await;
        agent.close().await.unwrap();
        return;
    }
    // Each round is a pair of adjacent chunks, one recording and one not (in turn
    // first), and gives one ratio; the median ratio is what a burst of load on the
    // machine does not move.
    let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
    let mut ratios = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let mut pair = [Duration::ZERO; 2];
        for recording in [round % 2 == 0, round % 2 != 0] {
            on.store(recording, Ordering::SeqCst);
            let started = Instant::now();
            for n in 0..RUNS_PER_ROUND {
                support::one_run(&agent, format!("r{round}-{recording}-{n}")).await;
            }
            pair[usize::from(recording)] = started.elapsed();
        }
        without += pair[0];
        with += pair[1];
        ratios.push(pair[1].as_secs_f64() / pair[0].as_secs_f64());
    }
    on.store(true, Ordering::SeqCst);
    ratios.sort_by(f64::total_cmp);
    #[allow(clippy::cast_precision_loss)]
    let runs = (ROUNDS * RUNS_PER_ROUND) as f64;
    let (with_rate, without_rate) = (runs / with.as_secs_f64(), runs / without.as_secs_f64());
    println!(
        "runs/s recording: {with_rate:.1}, not recording: {without_rate:.1} ({ROUNDS} pairs of {RUNS_PER_ROUND} runs); \
         cost: median of the pairs {:.2} %, of the totals {:.2} % (target ≤ 3 %)",
        (ratios[ROUNDS / 2] - 1.0) * 100.0,
        (without_rate / with_rate - 1.0) * 100.0
    );

    // The scrape at 10,000 open Sessions.
    let ids: Vec<_> = futures::stream::iter(0..OPEN_SESSIONS)
        .map(|n| {
            let agent = agent.clone();
            async move {
                agent
                    .create_session(RequestId::new(format!("open-{n}")).unwrap())
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    futures::stream::iter(ids)
        .map(|id| {
            let agent = agent.clone();
            async move {
                agent
                    .session(id)
                    .read(ReadOptions::default())
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    let scrape = handle.render();
    let open = scrape
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{} ", telemetry::OPEN_SESSIONS)))
        .unwrap_or("?")
        .to_owned();
    let series = scrape.lines().filter(|line| !line.starts_with('#')).count();
    let mut times = Vec::with_capacity(SCRAPES);
    for _ in 0..SCRAPES {
        let started = Instant::now();
        let text = handle.render();
        times.push(started.elapsed());
        std::hint::black_box(text);
    }
    let (median, p99) = (percentile(&mut times, 0.5), percentile(&mut times, 0.99));
    println!(
        "scrape with {open} open Sessions ({series} samples, {} bytes): median {:.0} µs, p99 {:.0} µs (target < 1,000 µs)",
        scrape.len(),
        micros(median),
        micros(p99)
    );
    agent.close().await.unwrap();
}
