//! What an operator can measure of an Agent: the metrics core and the stores record,
//! through the `metrics` crate's facade.
//!
//! Core depends on no exporter. Each function here records through the facade's
//! macros, which do nothing but read one atomic until a host installs a recorder
//! (`shiitake serve --metrics` installs the Prometheus one). The names, kinds and
//! labels are listed once, in [`METRICS`] (`docs/operations.md` has one row per entry),
//! and every label is bounded: command kinds, outcomes, providers and tools the host
//! configured, extension ids; never a Session id or a tenant.

use std::time::Duration;

use shiitake_protocol::{SessionCommand, TerminalOutcome};

/// How a metric is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Only grows (`_total`).
    Counter,
    /// Goes up and down; the value now.
    Gauge,
    /// Observations in buckets (durations in seconds, sizes).
    Histogram,
}

/// One metric: its name, kind, labels and meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metric {
    /// The Prometheus name.
    pub name: &'static str,
    /// How it is read.
    pub kind: MetricKind,
    /// Its labels (each with a bounded set of values).
    pub labels: &'static [&'static str],
    /// What it means, for `# HELP` and the operator's page.
    pub help: &'static str,
}

/// Commands an owner accepted, by `kind`.
pub const COMMANDS_ACCEPTED: &str = "shiitake_commands_accepted_total";
/// Runs started (a resumed run counts again).
pub const RUNS_STARTED: &str = "shiitake_runs_started_total";
/// Work settled, by `outcome`.
pub const RUNS_SETTLED: &str = "shiitake_runs_settled_total";
/// Prompts waiting in the queues of the Sessions live in this process.
pub const QUEUED_PROMPTS: &str = "shiitake_queued_prompts";
/// Sessions with an owner in memory in this process.
pub const OPEN_SESSIONS: &str = "shiitake_open_sessions";
/// Time from handing a commit to the store's writer to its answer.
pub const STORE_COMMIT_SECONDS: &str = "shiitake_store_commit_seconds";
/// Commits the writer made durable in one transaction (one fsync).
pub const STORE_COMMIT_GROUP: &str = "shiitake_store_commit_group_size";
/// Time from a model call's start to its first streamed event.
pub const MODEL_FIRST_TOKEN_SECONDS: &str = "shiitake_model_first_token_seconds";
/// Time of one whole model call, retries included.
pub const MODEL_CALL_SECONDS: &str = "shiitake_model_call_seconds";
/// Tokens the provider reported, by `provider` and `direction`.
pub const MODEL_TOKENS: &str = "shiitake_model_tokens_total";
/// Time of one tool call, by `tool` and `outcome`.
pub const TOOL_CALL_SECONDS: &str = "shiitake_tool_call_seconds";
/// Extension timers fired, by `extension`.
pub const TIMER_FIRINGS: &str = "shiitake_extension_timer_firings_total";
/// Extensions stopped now (by a failure, or state this build cannot read).
pub const EXTENSIONS_STOPPED: &str = "shiitake_extensions_stopped";
/// Session leases this process holds on a shared store.
pub const HUB_LEASES_HELD: &str = "shiitake_hub_leases_held";
/// Sessions taken from a process that went away without handing them over.
pub const HUB_TAKEOVERS: &str = "shiitake_hub_takeovers_total";
/// Commits refused because another process holds the Session's lease now.
pub const HUB_FENCED_COMMITS: &str = "shiitake_hub_fenced_commits_total";
/// Times the store's `LISTEN` connection was opened again after it broke.
pub const HUB_NOTIFY_RECONNECTS: &str = "shiitake_hub_notify_reconnects_total";
/// This process's connections to a shared store that are lost now, by `connection`.
pub const HUB_CONNECTIONS_DOWN: &str = "shiitake_hub_connections_down";
/// Sessions freed because their holder did not come back within its grace after the
/// database restarted.
pub const HUB_RESTART_RELEASES: &str = "shiitake_hub_restart_releases_total";
/// Sessions whose owner waits for the store to take writes again.
pub const SESSIONS_WAITING_FOR_STORE: &str = "shiitake_sessions_waiting_for_store";
/// Times an owner paused because a commit failed for a reason that passes.
pub const STORE_PAUSES: &str = "shiitake_store_pauses_total";

/// Spans the trace export lost, by cause (`serve --otlp-endpoint`).
pub const OTLP_SPANS_DROPPED: &str = "shiitake_otlp_spans_dropped_total";

/// Every metric core, the stores and the trace export record.
pub const METRICS: &[Metric] = &[
    Metric {
        name: OTLP_SPANS_DROPPED,
        kind: MetricKind::Counter,
        labels: &["cause"],
        help: "Spans the trace export (serve --otlp-endpoint) lost, by cause: queue_full (the collector was slower than the runs), export_failed (it refused or did not answer).",
    },
    Metric {
        name: COMMANDS_ACCEPTED,
        kind: MetricKind::Counter,
        labels: &["kind"],
        help: "Commands accepted by a Session's owner, by kind (prompt, cancel, abort, branch, fork, operator); a retried prompt is not counted again.",
    },
    Metric {
        name: RUNS_STARTED,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Runs started; a run resumed after a restart counts again.",
    },
    Metric {
        name: RUNS_SETTLED,
        kind: MetricKind::Counter,
        labels: &["outcome"],
        help: "Accepted work settled, by outcome (completed, failed, cancelled, interrupted); a prompt cancelled before it ran counts as cancelled.",
    },
    Metric {
        name: QUEUED_PROMPTS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Prompts waiting to run in the Sessions live in this process (the running one not counted).",
    },
    Metric {
        name: OPEN_SESSIONS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Sessions with an owner in memory in this process.",
    },
    Metric {
        name: STORE_COMMIT_SECONDS,
        kind: MetricKind::Histogram,
        labels: &[],
        help: "Seconds from handing a commit to the store's writer to its answer: the wait for the group, the transaction and its fsync.",
    },
    Metric {
        name: STORE_COMMIT_GROUP,
        kind: MetricKind::Histogram,
        labels: &[],
        help: "Commits made durable by one transaction of the store's writer (group commit: one fsync each).",
    },
    Metric {
        name: MODEL_FIRST_TOKEN_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["provider"],
        help: "Seconds from the start of a model call to its first streamed event, retries included.",
    },
    Metric {
        name: MODEL_CALL_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["provider"],
        help: "Seconds of one whole model call, from its start (retries included) to its final message.",
    },
    Metric {
        name: MODEL_TOKENS,
        kind: MetricKind::Counter,
        labels: &["provider", "direction"],
        help: "Tokens the provider reported, by direction (input, output); answers whose provider reported no usage add nothing.",
    },
    Metric {
        name: TOOL_CALL_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["tool", "outcome"],
        help: "Seconds of one tool call, by the tool the model called and its outcome (ok, error).",
    },
    Metric {
        name: TIMER_FIRINGS,
        kind: MetricKind::Counter,
        labels: &["extension"],
        help: "Extension timers fired in this process, by extension.",
    },
    Metric {
        name: EXTENSIONS_STOPPED,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Extensions stopped now, over the Agents of this process (a hook failed or panicked, or this build cannot read their state); an operator resumes them.",
    },
    Metric {
        name: HUB_LEASES_HELD,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Session leases this process holds on a shared PostgreSQL store.",
    },
    Metric {
        name: HUB_TAKEOVERS,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Sessions taken from a process that went away without handing them over: a lapsed lease this process claimed, or leases its heartbeat freed because their holder's connection is gone (summed over the processes: every takeover once).",
    },
    Metric {
        name: HUB_FENCED_COMMITS,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Commits refused because the Session's lease moved to another process (its owner stops).",
    },
    Metric {
        name: HUB_NOTIFY_RECONNECTS,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Times the store's LISTEN/NOTIFY connection was opened again after it broke.",
    },
    Metric {
        name: SESSIONS_WAITING_FOR_STORE,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Sessions of this process whose work waits for the store: a commit failed for a reason that passes (a lost connection, a full disk), and the owner resumes from the store once it takes writes again.",
    },
    Metric {
        name: STORE_PAUSES,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Times a Session's owner paused because a commit failed for a reason that passes; each pause ends when the owner has read its Session back and committed again.",
    },
    Metric {
        name: HUB_CONNECTIONS_DOWN,
        kind: MetricKind::Gauge,
        labels: &["connection"],
        help: "This process's connections to a shared PostgreSQL store that are lost now (1) or up (0), by connection (writer, upkeep, listener).",
    },
    Metric {
        name: HUB_RESTART_RELEASES,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Sessions freed because their holder did not come back within its grace after the database restarted; handed over, not taken over.",
    },
];

/// Bucket bounds of the `_seconds` histograms: 1 ms to 2 min.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Bucket bounds of [`STORE_COMMIT_GROUP`], up to the writer's group bound (256).
pub const GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Registers the help text of every metric in [`METRICS`] with the installed recorder,
/// and the gauges every Agent keeps at 0.
pub fn describe() {
    for metric in METRICS {
        describe_one(metric);
    }
    // Scraped as 0 before anything moves them (a Session whose prompts never wait
    // leaves the queue gauge untouched), so a query finds a series, not nothing.
    for gauge in [
        QUEUED_PROMPTS,
        OPEN_SESSIONS,
        EXTENSIONS_STOPPED,
        SESSIONS_WAITING_FOR_STORE,
    ] {
        metrics::gauge!(gauge).increment(0.0);
    }
}

/// Registers one metric's help text (for a host's own lists too).
pub fn describe_one(metric: &Metric) {
    match metric.kind {
        MetricKind::Counter => metrics::describe_counter!(metric.name, metric.help),
        MetricKind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
        MetricKind::Histogram => metrics::describe_histogram!(metric.name, metric.help),
    }
}

fn command_kind(command: &SessionCommand) -> &'static str {
    match command {
        SessionCommand::Prompt { .. } => "prompt",
        SessionCommand::Cancel { .. } => "cancel",
        SessionCommand::Abort => "abort",
        SessionCommand::Branch { .. } => "branch",
        SessionCommand::Fork { .. } => "fork",
        SessionCommand::Operator { .. } => "operator",
    }
}

/// A command of this kind was accepted.
pub(crate) fn command_accepted(command: &SessionCommand) {
    metrics::counter!(COMMANDS_ACCEPTED, "kind" => command_kind(command)).increment(1);
}

/// A prompt was accepted (also one an extension admitted).
pub(crate) fn prompt_accepted() {
    metrics::counter!(COMMANDS_ACCEPTED, "kind" => "prompt").increment(1);
}

/// A run started.
pub(crate) fn run_started() {
    metrics::counter!(RUNS_STARTED).increment(1);
}

/// Work settled with `outcome`.
pub(crate) fn run_settled(outcome: TerminalOutcome) {
    metrics::counter!(RUNS_SETTLED, "outcome" => outcome.as_str()).increment(1);
}

/// The part of a gauge one holder reported, taken back when the holder goes: a queue's
/// length, a registry's owners. The gauge is the sum over the live holders.
#[derive(Debug)]
pub(crate) struct GaugeShare {
    name: &'static str,
    reported: usize,
}

impl GaugeShare {
    /// A share of the gauge `name`, reporting nothing yet.
    pub(crate) fn new(name: &'static str) -> Self {
        Self { name, reported: 0 }
    }

    /// This holder's part is `value` now.
    pub(crate) fn set(&mut self, value: usize) {
        if value != self.reported {
            let gauge = metrics::gauge!(self.name);
            // Counts far below 2^53: exact as f64.
            #[allow(clippy::cast_precision_loss)]
            if value > self.reported {
                gauge.increment((value - self.reported) as f64);
            } else {
                gauge.decrement((self.reported - value) as f64);
            }
            self.reported = value;
        }
    }
}

impl Drop for GaugeShare {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// The start of a model call, to record its first event and its end.
#[derive(Debug)]
pub(crate) struct ModelCall {
    provider: String,
    started: std::time::Instant,
    first: bool,
}

impl ModelCall {
    pub(crate) fn start(provider: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            started: std::time::Instant::now(),
            first: false,
        }
    }

    /// The first streamed event arrived (later calls do nothing); recorded on the model
    /// call's span too.
    pub(crate) fn first_event(&mut self) {
        if !self.first {
            self.first = true;
            crate::spans::first_token(&tracing::Span::current(), self.started.elapsed());
            metrics::histogram!(MODEL_FIRST_TOKEN_SECONDS, "provider" => self.provider.clone())
                .record(self.started.elapsed());
        }
    }

    /// The call ended with its final message, whose usage the provider may have reported.
    pub(crate) fn finished(self, usage: &shiitake_protocol::message::Usage) {
        metrics::histogram!(MODEL_CALL_SECONDS, "provider" => self.provider.clone())
            .record(self.started.elapsed());
        if usage.is_known() {
            metrics::counter!(MODEL_TOKENS, "provider" => self.provider.clone(), "direction" => "input")
                .increment(usage.input);
            metrics::counter!(MODEL_TOKENS, "provider" => self.provider, "direction" => "output")
                .increment(usage.output);
        }
    }
}

/// One tool call of `tool` took `elapsed` and ended `ok` or not.
pub(crate) fn tool_call(tool: &str, elapsed: Duration, ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::histogram!(TOOL_CALL_SECONDS, "tool" => tool.to_owned(), "outcome" => outcome)
        .record(elapsed);
}

/// A timer of `extension` fired.
pub(crate) fn timer_fired(extension: &shiitake_protocol::ExtensionId) {
    metrics::counter!(TIMER_FIRINGS, "extension" => extension.as_str().to_owned()).increment(1);
}

/// A store's writer answered a commit handed to it `elapsed` ago.
pub fn store_commit(elapsed: Duration) {
    metrics::histogram!(STORE_COMMIT_SECONDS).record(elapsed);
}

/// A store's writer made `commits` commits durable in one transaction.
pub fn store_group(commits: usize) {
    #[allow(clippy::cast_precision_loss)] // at most the writer's group bound, 256
    metrics::histogram!(STORE_COMMIT_GROUP).record(commits as f64);
}

/// This process took (`taken`) or let go of `count` leases on a shared store.
pub fn leases_held(count: usize, taken: bool) {
    // Counts far below 2^53: exact as f64.
    #[allow(clippy::cast_precision_loss)]
    let count = count as f64;
    let gauge = metrics::gauge!(HUB_LEASES_HELD);
    if taken {
        gauge.increment(count);
    } else {
        gauge.decrement(count);
    }
}

/// This process took `count` Sessions from processes that went away (a lapsed lease
/// it claimed, or leases its heartbeat freed because their holder died).
pub fn takeovers(count: u64) {
    if count > 0 {
        metrics::counter!(HUB_TAKEOVERS).increment(count);
    }
}

/// A commit was fenced: the Session's lease moved on.
pub fn fenced_commit() {
    metrics::counter!(HUB_FENCED_COMMITS).increment(1);
}

/// The store's `LISTEN` connection was opened again.
pub fn notify_reconnect() {
    metrics::counter!(HUB_NOTIFY_RECONNECTS).increment(1);
}

/// This process's `connection` to a shared store (`writer`, `upkeep`, `listener`) was
/// lost (`down`) or is back.
pub fn hub_connection_down(connection: &'static str, down: bool) {
    metrics::gauge!(HUB_CONNECTIONS_DOWN, "connection" => connection).set(if down {
        1.0
    } else {
        0.0
    });
}

/// `count` Sessions were freed because their holder did not come back within its
/// grace after the database restarted.
pub fn restart_releases(count: u64) {
    if count > 0 {
        metrics::counter!(HUB_RESTART_RELEASES).increment(count);
    }
}

/// An owner paused: its commit failed for a reason that passes.
pub(crate) fn store_paused() {
    metrics::counter!(STORE_PAUSES).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_is_named_once_with_its_kind_suffix() {
        let mut names: Vec<&str> = METRICS.iter().map(|metric| metric.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len());
        for metric in METRICS {
            assert!(metric.name.starts_with("shiitake_"), "{}", metric.name);
            let total = metric.name.ends_with("_total");
            assert_eq!(total, metric.kind == MetricKind::Counter, "{}", metric.name);
            assert!(!metric.labels.contains(&"session"), "{}", metric.name);
            assert!(!metric.labels.contains(&"tenant"), "{}", metric.name);
        }
    }
}
