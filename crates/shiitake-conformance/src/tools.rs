//! The standard test tools: `test.echo` (replay-safe) and `test.slow` (waits until cancelled).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};

/// What the test tools did, counted.
#[derive(Debug, Default)]
pub struct TestTools {
    /// Calls of `test.echo`.
    pub echo_calls: AtomicUsize,
    /// Calls of `test.slow` that started.
    pub slow_started: AtomicUsize,
    /// Calls of `test.slow` that saw their cancellation token fire.
    pub slow_cancelled: AtomicUsize,
}

impl TestTools {
    /// Reads a counter.
    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

/// Bumps `slow_cancelled` when a `test.slow` call ends without finishing its sleep.
struct CountStop {
    tools: Arc<TestTools>,
    armed: bool,
}

impl Drop for CountStop {
    fn drop(&mut self) {
        if self.armed {
            self.tools.slow_cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A catalog with the two test tools, counting into `counters`.
pub async fn catalog(counters: Arc<TestTools>) -> Arc<Catalog> {
    let echo_counter = counters.clone();
    let echo = Operation::from_fn(
        OperationName::new("echo").unwrap(),
        "Echoes its input.",
        move |input, _ctx| {
            let counter = echo_counter.clone();
            async move {
                counter.echo_calls.fetch_add(1, Ordering::SeqCst);
                Ok(json!({ "echo": input }))
            }
        },
    )
    .with_replay(Replay::Safe);
    let slow_counter = counters;
    let slow = Operation::from_fn(
        OperationName::new("slow").unwrap(),
        "Waits a long time.",
        move |_input, ctx| {
            let counter = slow_counter.clone();
            let token = ctx.cancellation().clone();
            async move {
                counter.slow_started.fetch_add(1, Ordering::SeqCst);
                // Counts a stop however it comes: the token fires, or the call is dropped.
                let mut stopped = CountStop {
                    tools: counter,
                    armed: true,
                };
                tokio::select! {
                    () = token.cancelled() => Ok(Value::from("cancelled")),
                    () = tokio::time::sleep(Duration::from_secs(30)) => {
                        stopped.armed = false;
                        Ok(Value::from("done"))
                    }
                }
            }
        },
    );
    let module = Module::new(ModulePath::new("test").unwrap(), "Test tools.")
        .with_operation(echo)
        .unwrap()
        .with_operation(slow)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("test"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}
