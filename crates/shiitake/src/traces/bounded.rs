//! The bound in front of the SDK's batch queue and the count of what it loses: the SDK
//! drops a span when its queue is full but tells nobody, so a processor in front keeps
//! its own count of spans in flight (lowered as exports end) and drops at the same bound
//! itself, counting each; the exporter counts what a failed export lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

/// What the export did with the spans it was handed.
#[derive(Debug, Default)]
pub struct Counters {
    /// Handed to the batch queue and not yet through an export.
    in_flight: AtomicUsize,
    /// Accepted by the collector.
    exported: AtomicU64,
    /// Lost with an export the collector refused or did not answer.
    failed: AtomicU64,
    /// Dropped because the queue was full.
    dropped: AtomicU64,
}

impl Counters {
    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped or lost with a failed export.
    pub fn lost(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed)
    }

    /// Spans exported and lost, in words.
    pub fn summary(&self) -> String {
        format!("{} spans exported, {} lost", self.exported(), self.lost())
    }

    fn count_lost(&self, cause: &'static str, spans: u64) {
        metrics::counter!(shiitake_core::telemetry::OTLP_SPANS_DROPPED, "cause" => cause)
            .increment(spans);
    }
}

/// The exporter, counting each batch's fate and giving back its places in flight.
#[derive(Debug)]
pub struct Counting<E> {
    inner: E,
    counters: Arc<Counters>,
}

impl<E> Counting<E> {
    pub fn new(inner: E, counters: Arc<Counters>) -> Self {
        Self { inner, counters }
    }
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        let count = u64::try_from(spans).unwrap_or(u64::MAX);
        match &result {
            Ok(()) => {
                self.counters.exported.fetch_add(count, Ordering::Relaxed);
            }
            Err(_) => {
                self.counters.failed.fetch_add(count, Ordering::Relaxed);
                self.counters.count_lost("export_failed", count);
            }
        }
        self.counters.in_flight.fetch_sub(spans, Ordering::Relaxed);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The batch processor behind a bound of `max` spans in flight.
#[derive(Debug)]
pub struct Bounded<P> {
    inner: P,
    counters: Arc<Counters>,
    max: usize,
}

impl<P> Bounded<P> {
    pub fn new(inner: P, counters: Arc<Counters>, max: usize) -> Self {
        Self {
            inner,
            counters,
            max,
        }
    }
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut Span, context: &Context) {
        self.inner.on_start(span, context);
    }

    fn on_end(&self, span: SpanData) {
        if self.counters.in_flight.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            self.counters.count_lost("queue_full", 1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A processor that keeps what it is handed.
    #[derive(Debug, Default)]
    struct Keeping(Mutex<usize>);

    impl SpanProcessor for Keeping {
        fn on_start(&self, _span: &mut Span, _context: &Context) {}
        fn on_end(&self, _span: SpanData) {
            *self.0.lock().unwrap() += 1;
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    fn span() -> SpanData {
        use opentelemetry::trace::{SpanContext, SpanKind, Status};
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn the_bound_takes_exactly_its_count_and_drops_one_more() {
        let counters = Arc::new(Counters::default());
        let bounded = Bounded::new(Keeping::default(), counters.clone(), 2);
        bounded.on_end(span());
        bounded.on_end(span());
        assert_eq!(*bounded.inner.0.lock().unwrap(), 2);
        assert_eq!(counters.lost(), 0);
        bounded.on_end(span());
        assert_eq!(*bounded.inner.0.lock().unwrap(), 2, "one past the bound");
        assert_eq!(counters.lost(), 1);
        assert_eq!(counters.summary(), "0 spans exported, 1 lost");
    }
}
