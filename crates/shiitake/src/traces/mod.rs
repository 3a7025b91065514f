//! Runs as OpenTelemetry traces (`serve --otlp-endpoint`, `docs/operations.md`,
//! "Traces"): core's run, model call, tool call and approval-wait spans (`shiitake_core::
//! spans`) and the server's request spans, exported over OTLP/HTTP protobuf.
//!
//! Off unless an endpoint is given (the flag, or `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, as every OTel SDK reads them): then no layer is
//! installed and a span costs what it did before. On, the spans go to the SDK's batch
//! thread through a bounded queue ([`bounded`]): a slow or dead collector never slows a
//! run or grows memory; what does not fit is dropped and counted
//! (`shiitake_otlp_spans_dropped_total`), as are spans a failed export lost.

mod bounded;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, RetryPolicy, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

pub use bounded::Counters;

/// Spans waiting for export at most; one more is dropped and counted.
pub const MAX_QUEUED_SPANS: usize = 2048;
/// Spans in one export request at most.
const MAX_BATCH: usize = 256;
/// How long spans wait to be batched.
const BATCH_DELAY: Duration = Duration::from_millis(1000);
/// Longest one export request may take (connect, send, answer).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest the exit waits for the last spans to leave.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// What the operator asked of the trace export.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceConfig {
    /// `--otlp-endpoint`: the collector's base URL (`/v1/traces` is added unless the path
    /// already ends with it); `None` leaves the endpoint to the environment.
    pub endpoint: Option<String>,
    /// `--otlp-content`: export message content (prompts, answers, tool input and
    /// output) as span events; off by default, as the GenAI conventions advise.
    pub content: bool,
}

impl TraceConfig {
    /// Whether any endpoint is set: the flag, or the SDK's environment variables.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
            || [
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            ]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
    }
}

impl TraceConfig {
    /// What the export does, for `serve`'s start lines; `None` when it is off.
    pub fn describe(&self) -> Option<String> {
        if !self.enabled() {
            return None;
        }
        let to = match &self.endpoint {
            Some(endpoint) => traces_url(endpoint).unwrap_or_else(|_| endpoint.clone()),
            None => "the collector OTEL_EXPORTER_OTLP_ENDPOINT names".to_owned(),
        };
        let content = if self.content {
            "with message content"
        } else {
            "message content left out"
        };
        Some(format!("every run exported over OTLP to {to} ({content})"))
    }
}

/// The trace endpoint of a base URL: `/v1/traces` added unless it is there.
pub fn traces_url(base: &str) -> Result<String, String> {
    url_scheme(base)?;
    let trimmed = base.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        Ok(trimmed.to_owned())
    } else {
        Ok(format!("{trimmed}/v1/traces"))
    }
}

fn url_scheme(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("--otlp-endpoint {url:?} is not an http:// or https:// URL"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("--otlp-endpoint {url:?} names no host"));
    }
    Ok(())
}

/// The export running: flushed and stopped by [`Traces::shutdown`].
pub struct Traces {
    provider: SdkTracerProvider,
    counters: Arc<Counters>,
}

impl Traces {
    /// Sends what is queued and stops, waiting at most [`SHUTDOWN_TIMEOUT`] (a hanging
    /// collector must not hold the exit), on a thread of its own: the SDK blocks.
    pub fn shutdown(self) {
        let counters = self.counters;
        let provider = self.provider;
        let stopping = std::thread::spawn(move || {
            let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        });
        let deadline = std::time::Instant::now() + SHUTDOWN_TIMEOUT + Duration::from_millis(500);
        while !stopping.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if counters.lost() > 0 {
            eprintln!(
                "shiitake: the trace export: {}; shiitake_otlp_spans_dropped_total \
                 counts the lost by cause",
                counters.summary()
            );
        }
    }
}

/// The tracing layer that exports spans to the collector `config` names, and the
/// export's handle; `Ok(None)` when no endpoint is set.
pub fn layer<S>(config: &TraceConfig) -> Result<Option<(impl Layer<S>, Traces)>, String>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    if !config.enabled() {
        return Ok(None);
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(EXPORT_TIMEOUT)
        .with_retry_policy(RetryPolicy::disabled());
    if let Some(endpoint) = &config.endpoint {
        exporter = exporter.with_endpoint(traces_url(endpoint)?);
    }
    let exporter = exporter
        .build()
        .map_err(|error| format!("the OTLP exporter cannot start: {error}"))?;
    let counters = Arc::new(Counters::default());
    let processor = BatchSpanProcessor::builder(bounded::Counting::new(exporter, counters.clone()))
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(MAX_QUEUED_SPANS)
                .with_max_export_batch_size(MAX_BATCH)
                .with_scheduled_delay(BATCH_DELAY)
                .build(),
        )
        .build();
    // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read by the builder; the
    // service is `shiitake` unless they say otherwise.
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("shiitake");
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(bounded::Bounded::new(
            processor,
            counters.clone(),
            MAX_QUEUED_SPANS,
        ))
        .with_resource(resource)
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("shiitake");
    let content = config.content;
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(tracing_subscriber::filter::filter_fn(move |metadata| {
            traced(metadata, content)
        }));
    Ok(Some((layer, Traces { provider, counters })))
}

/// Whether a span or event belongs in a trace: the spans that say their operation
/// (core's, the server's requests), warnings and errors as events of the span they
/// happen in, and content events only when the host opted in.
fn traced(metadata: &tracing::Metadata<'_>, content: bool) -> bool {
    if metadata.is_span() {
        return metadata
            .fields()
            .field(shiitake_core::spans::OPERATION)
            .is_some()
            || metadata.fields().field("otel.kind").is_some();
    }
    if metadata.target() == shiitake_core::spans::CONTENT_TARGET {
        return content;
    }
    *metadata.level() <= tracing::Level::WARN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_url_and_gets_its_path_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://phoenix.example/v1/traces").unwrap(),
            "https://phoenix.example/v1/traces"
        );
        assert!(
            traces_url("collector:4318")
                .unwrap_err()
                .contains("http://")
        );
        assert!(traces_url("http://").unwrap_err().contains("no host"));
    }
}
