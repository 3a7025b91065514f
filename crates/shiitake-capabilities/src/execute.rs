//! The execute door: validate, then race the operation against cancellation and deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::task::{JoinError, JoinHandle};
use tracing::Instrument;

use crate::context::InvocationContext;
use crate::error::{ForModelError, ForModelKind, ToolError};
use crate::names::OperationPath;
use crate::operation::Operation;

/// Runs `operation` (found at `path`) once with `input`, under `ctx`.
///
/// In order: a cancelled context answers [`ToolError::Cancelled`] and an
/// expired one `deadline_exceeded` without calling anything; the input is
/// decoded by the operation's schema (defaults applied), an invalid input
/// answering `invalid_input`; then the handler runs on its own Tokio task with
/// a child cancellation token, raced (biased, in this order) against the
/// run's token and the deadline. Whichever ends first wins; a losing handler
/// task is aborted and its token cancelled, so the door returns promptly even
/// if the handler ignores both. A handler panic is [`ToolError::Fatal`].
/// Must be called inside a Tokio runtime.
pub async fn execute_operation(
    path: &OperationPath,
    operation: &Operation,
    input: Value,
    ctx: &InvocationContext,
) -> Result<Value, ToolError> {
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    if ctx.is_expired() {
        return Err(deadline_exceeded(path));
    }
    let input = operation
        .input_schema()
        .decode(input)
        .map_err(ToolError::invalid_input)?;

    let call_token = ctx.cancellation().child_token();
    let _cancel_call_on_return = call_token.clone().drop_guard();
    let call_ctx = ctx.with_token(call_token);
    let handler = operation.handler().clone();
    let span = tracing::debug_span!("operation", %path, execution_id = %ctx.execution_id());
    let task = AbortOnDrop(tokio::spawn(
        async move { handler.call(input, &call_ctx).await }.instrument(span),
    ));
    let deadline = async {
        match ctx.deadline() {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };

    let outcome = tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => Err(ToolError::Cancelled),
        () = deadline => Err(deadline_exceeded(path)),
        joined = task => joined.unwrap_or_else(|e| Err(join_failure(path, e))),
    };
    match &outcome {
        Ok(_) => tracing::debug!(%path, execution_id = %ctx.execution_id(), "operation succeeded"),
        Err(error) => {
            tracing::debug!(%path, execution_id = %ctx.execution_id(), %error, "operation failed");
        }
    }
    outcome
}

fn deadline_exceeded(path: &OperationPath) -> ToolError {
    ToolError::ForModel(ForModelError::new(
        ForModelKind::DeadlineExceeded,
        format!("`{path}` did not finish before its deadline"),
    ))
}

fn join_failure(path: &OperationPath, error: JoinError) -> ToolError {
    if error.is_panic() {
        ToolError::fatal(format!("operation `{path}` panicked"))
    } else {
        ToolError::fatal_from(format!("operation `{path}` was aborted"), error)
    }
}

/// A spawned handler that is aborted when the door stops waiting for it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
