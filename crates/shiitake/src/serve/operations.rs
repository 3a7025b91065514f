//! What an operator asks of `serve` to watch it run (`docs/operations.md`): metrics at
//! `GET /metrics` (`--metrics`) and the log format (`--log-format`).
//!
//! Core, the stores and the server record through the `metrics` facade; this is the one
//! place that installs a recorder: `metrics-exporter-prometheus`'s, without its HTTP
//! listener (the server's own `/metrics` route, behind the bearer token, renders it).
//! Without `--metrics` nothing is installed and every recording is a no-op.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use shiitake_core::telemetry;
use shiitake_server::MetricsText;

use crate::error::CliError;

/// The operator's options of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct OperationsArgs {
    /// Serve metrics in the Prometheus text format at `GET /metrics` (the bearer
    /// token only; docs/operations.md lists them).
    #[arg(long)]
    metrics: bool,
    /// Refused: it labelled every metric with the one tenant a Hub process served;
    /// a Hub process now serves every tenant, so no label can name one.
    #[arg(long, hide = true)]
    metrics_tenant_label: bool,
    /// How log lines are written on stderr: `text` (colour only on a terminal) or
    /// `json`, one object a line with the fields of its spans (request id, Session,
    /// run, Agent), for a log shipper.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Export every run as an OpenTelemetry trace over OTLP/HTTP protobuf to this
    /// collector (a base URL such as `http://127.0.0.1:4318`; `/v1/traces` is added).
    /// Without it, `OTEL_EXPORTER_OTLP_ENDPOINT` turns the export on; with neither,
    /// nothing is exported (docs/operations.md, "Traces").
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Put message content (prompts, answers, tool input and output) in the exported
    /// traces; left out unless asked for, as the GenAI conventions advise.
    #[arg(long)]
    otlp_content: bool,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human lines, coloured only on a terminal.
    Text,
    /// One JSON object a line, with the current span and every span above it.
    Json,
}

impl OperationsArgs {
    /// The log format asked for.
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }

    /// What the trace export is asked to do.
    pub fn trace_config(&self) -> crate::traces::TraceConfig {
        crate::traces::TraceConfig {
            endpoint: self.otlp_endpoint.clone(),
            content: self.otlp_content,
        }
    }

    /// Installs the Prometheus recorder when `--metrics` asks for it; the exporter for
    /// the server's `/metrics` route.
    pub fn exporter(&self) -> Result<Option<Arc<dyn MetricsText>>, CliError> {
        if self.metrics_tenant_label {
            return Err(CliError::Setup(
                "--metrics-tenant-label is gone: a Hub process serves every tenant of its \
                 database, so one label cannot name a tenant (and one per tenant would be \
                 unbounded); label by the scrape target instead (docs/operations.md)"
                    .to_owned(),
            ));
        }
        if !self.metrics {
            return Ok(None);
        }
        let handle = install()?;
        // Histograms keep their samples until drained: drain them even if nobody scrapes.
        let upkeep = handle.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(5));
            loop {
                every.tick().await;
                upkeep.run_upkeep();
            }
        });
        Ok(Some(Arc::new(Prometheus(handle))))
    }
}

/// Installs the Prometheus recorder for this process with the buckets of core's
/// histograms and every metric described.
pub fn install() -> Result<PrometheusHandle, CliError> {
    let failed = |error: metrics_exporter_prometheus::BuildError| {
        CliError::Setup(format!("--metrics: {error}"))
    };
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".to_owned()),
            telemetry::SECONDS_BUCKETS,
        )
        .map_err(failed)?
        .set_buckets_for_metric(
            Matcher::Full(telemetry::STORE_COMMIT_GROUP.to_owned()),
            telemetry::GROUP_BUCKETS,
        )
        .map_err(failed)?;
    let handle = builder.install_recorder().map_err(failed)?;
    telemetry::describe();
    shiitake_server::telemetry::describe();
    Ok(handle)
}

/// The installed recorder, rendered at each scrape.
#[derive(Clone)]
struct Prometheus(PrometheusHandle);

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prometheus(..)")
    }
}

impl MetricsText for Prometheus {
    fn render(&self) -> String {
        self.0.render()
    }
}

#[cfg(test)]
mod tests {
    use shiitake_core::telemetry::{METRICS, MetricKind};

    /// The metric rows of docs/operations.md: (name, kind, labels).
    fn documented() -> Vec<(String, String, Vec<String>)> {
        include_str!("../../../../docs/operations.md")
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let name = cells
                    .get(1)?
                    .strip_prefix("`shiitake_")?
                    .strip_suffix('`')?;
                let labels = cells
                    .get(3)?
                    .split(',')
                    .map(|label| label.trim().trim_matches('`').to_owned())
                    .filter(|label| !label.is_empty())
                    .collect();
                Some((
                    format!("shiitake_{name}"),
                    (*cells.get(2)?).to_owned(),
                    labels,
                ))
            })
            .collect()
    }

    #[test]
    fn the_operations_page_lists_every_metric_with_its_kind_and_labels() {
        let mut recorded: Vec<(String, String, Vec<String>)> = METRICS
            .iter()
            .map(|metric| {
                let kind = match metric.kind {
                    MetricKind::Counter => "counter",
                    MetricKind::Gauge => "gauge",
                    MetricKind::Histogram => "histogram",
                };
                let labels = metric.labels.iter().map(|l| (*l).to_owned()).collect();
                (metric.name.to_owned(), kind.to_owned(), labels)
            })
            .collect();
        for (name, kind, labels, _) in shiitake_server::telemetry::METRICS {
            let labels = labels.iter().map(|l| (*l).to_owned()).collect();
            recorded.push(((*name).to_owned(), (*kind).to_owned(), labels));
        }
        let mut documented = documented();
        recorded.sort();
        documented.sort();
        assert_eq!(documented, recorded);
    }
}
