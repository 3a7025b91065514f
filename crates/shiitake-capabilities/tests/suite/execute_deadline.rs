//! The execute door under deadlines, cancellation and failures, with real slow operations.
#![allow(clippy::expect_used)] // fixture helpers outside #[test] functions

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, ExecutionId, ForModelError, ForModelKind, InvocationContext, Module, ModulePath,
    Operation, OperationName, OperationPath, SourceId, StaticSource, ToolError,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Generous bound for "promptly": the slow operations sleep for 10 s.
const PROMPT: Duration = Duration::from_secs(2);

struct Fixture {
    catalog: Catalog,
    calls: Arc<AtomicUsize>,
    child_cancelled: mpsc::UnboundedReceiver<String>,
}

fn name(text: &str) -> OperationName {
    OperationName::new(text).expect("valid name")
}

fn path(text: &str) -> OperationPath {
    OperationPath::parse(text).expect("valid path")
}

async fn fixture() -> Fixture {
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, child_cancelled) = mpsc::unbounded_channel();
    let counter = calls.clone();
    // Sleeps 10 s and ignores its token, but lends the token to a helper task.
    let slow = Operation::from_fn(name("slow"), "Takes ten seconds.", move |_, ctx| {
        counter.fetch_add(1, Ordering::SeqCst);
        let tx = tx.clone();
        async move {
            let token = ctx.cancellation().clone();
            let id = ctx.execution_id().to_string();
            tokio::spawn(async move {
                token.cancelled().await;
                let _ignored_if_test_ended = tx.send(id);
            });
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(json!("finished"))
        }
    });
    let echo = Operation::from_fn(
        name("echo"),
        "Echoes its input with its execution id.",
        |input, ctx| async move {
            Ok(json!({ "input": input, "executionId": ctx.execution_id().as_str() }))
        },
    )
    .with_input_schema(json!({
        "type": "object",
        "properties": {
            "text": { "type": "string", "maxLength": 5 },
            "times": { "type": "integer", "default": 1 }
        },
        "required": ["text"]
    }));
    let refuse = Operation::from_fn(
        name("refuse"),
        "Always fails for the model.",
        |_, _| async { Err(ToolError::for_model("note not found")) },
    );
    let broken = Operation::from_fn(name("broken"), "Always fails fatally.", |_, _| async {
        Err(ToolError::fatal("store is gone"))
    });
    let panics = Operation::from_fn(name("panics"), "Panics.", |_, _| async {
        panic!("handler bug");
        #[allow(unreachable_code)]
        Ok(Value::Null)
    });
    let module = Module::new(ModulePath::new("test").expect("path"), "Test operations.")
        .with_operation(slow)
        .and_then(|m| m.with_operation(echo))
        .and_then(|m| m.with_operation(refuse))
        .and_then(|m| m.with_operation(broken))
        .and_then(|m| m.with_operation(panics))
        .expect("module");
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("test"),
            vec![module],
        )))
        .await
        .expect("source added");
    Fixture {
        catalog,
        calls,
        child_cancelled,
    }
}

fn context(id: &str) -> InvocationContext {
    InvocationContext::new(ExecutionId::new(id), CancellationToken::new())
}

#[tokio::test]
async fn a_deadline_ends_a_slow_call_promptly_and_cancels_its_token() {
    let mut fx = fixture().await;
    let ctx = context("call-1").with_timeout(Duration::from_millis(100));
    let started = Instant::now();
    let result = fx
        .catalog
        .execute(&path("test.slow"), json!({}), &ctx)
        .await;
    let elapsed = started.elapsed();
    assert!(elapsed < PROMPT, "took {elapsed:?}");
    assert!(
        elapsed >= Duration::from_millis(100),
        "returned before the deadline: {elapsed:?}"
    );
    match result {
        Err(ToolError::ForModel(error)) => assert_eq!(
            error,
            ForModelError::new(
                ForModelKind::DeadlineExceeded,
                "`test.slow` did not finish before its deadline"
            )
        ),
        other => panic!("expected deadline_exceeded, got {other:?}"),
    }
    let seen = tokio::time::timeout(PROMPT, fx.child_cancelled.recv()).await;
    assert_eq!(
        seen,
        Ok(Some("call-1".to_owned())),
        "the operation's token was cancelled"
    );
    assert!(
        !ctx.is_cancelled(),
        "the run's token is untouched by one call's deadline"
    );
}

#[tokio::test]
async fn cancelling_the_run_ends_a_slow_call_promptly() {
    let mut fx = fixture().await;
    let run = CancellationToken::new();
    let ctx = InvocationContext::new(ExecutionId::new("call-2"), run.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run.cancel();
    });
    let started = Instant::now();
    let result = fx
        .catalog
        .execute(&path("test.slow"), json!({}), &ctx)
        .await;
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert_eq!(fx.calls.load(Ordering::SeqCst), 1);
    let seen = tokio::time::timeout(PROMPT, fx.child_cancelled.recv()).await;
    assert_eq!(seen, Ok(Some("call-2".to_owned())));
    canceller.await.expect("canceller");
}

#[tokio::test]
async fn a_cancelled_or_expired_context_calls_nothing() {
    let fx = fixture().await;
    let cancelled = context("call-3");
    cancelled.cancellation().cancel();
    let result = fx
        .catalog
        .execute(&path("test.slow"), json!({}), &cancelled)
        .await;
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");

    let expired = context("call-4").with_deadline(Instant::now());
    let result = fx
        .catalog
        .execute(&path("test.slow"), json!({}), &expired)
        .await;
    assert!(
        matches!(&result, Err(e) if e.is_deadline_exceeded()),
        "{result:?}"
    );
    assert_eq!(fx.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn valid_input_is_decoded_with_defaults_and_reaches_the_operation() {
    let fx = fixture().await;
    let ctx = context("call-5").with_timeout(Duration::from_secs(5));
    let output = fx
        .catalog
        .execute_tool("test__echo", json!({ "text": "hi" }), &ctx)
        .await
        .expect("echo");
    assert_eq!(
        output,
        json!({ "input": { "text": "hi", "times": 1 }, "executionId": "call-5" })
    );
}

#[tokio::test]
async fn invalid_input_is_told_to_the_model_without_a_call() {
    let fx = fixture().await;
    let result = fx
        .catalog
        .execute(
            &path("test.echo"),
            json!({ "text": "too long" }),
            &context("call-6"),
        )
        .await;
    match result {
        Err(ToolError::ForModel(error)) => assert_eq!(
            error.to_result_json(),
            json!({
                "error": "invalid_input",
                "message": "invalid input: /text: maxLength: expected at most 5 characters, got 8",
                "details": [{ "path": "/text", "rule": "maxLength", "message": "expected at most 5 characters, got 8" }]
            })
        ),
        other => panic!("expected invalid_input, got {other:?}"),
    }
}

#[tokio::test]
async fn operation_errors_keep_their_class() {
    let fx = fixture().await;
    let ctx = context("call-7");
    let refused = fx
        .catalog
        .execute(&path("test.refuse"), json!({}), &ctx)
        .await;
    assert!(
        matches!(&refused, Err(ToolError::ForModel(e)) if *e == ForModelError::new(ForModelKind::Failed, "note not found")),
        "{refused:?}"
    );
    let broken = fx
        .catalog
        .execute(&path("test.broken"), json!({}), &ctx)
        .await;
    assert!(
        matches!(&broken, Err(ToolError::Fatal(e)) if e.message() == "store is gone"),
        "{broken:?}"
    );
    let panicked = fx
        .catalog
        .execute(&path("test.panics"), json!({}), &ctx)
        .await;
    assert!(
        matches!(&panicked, Err(ToolError::Fatal(e)) if e.message() == "operation `test.panics` panicked"),
        "{panicked:?}"
    );
}

#[tokio::test]
async fn unknown_operations_are_told_to_the_model() {
    let fx = fixture().await;
    let ctx = context("call-8");
    let by_path = fx
        .catalog
        .execute(&path("test.missing"), json!({}), &ctx)
        .await;
    let by_tool = fx
        .catalog
        .execute_tool("test__missing", json!({}), &ctx)
        .await;
    for (result, name) in [(by_path, "test.missing"), (by_tool, "test__missing")] {
        match result {
            Err(ToolError::ForModel(error)) => assert_eq!(
                error,
                ForModelError::new(
                    ForModelKind::UnknownOperation,
                    format!("no tool `{name}` is available")
                )
            ),
            other => panic!("expected unknown_operation, got {other:?}"),
        }
    }
}
