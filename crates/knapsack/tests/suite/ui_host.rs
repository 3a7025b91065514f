//! The browser bridge's host through its public API, a tab being a
//! `BrowserStream` read in the test: the bounds at their edges (a description of
//! 4096 and 4097 bytes, 16 and 17 unread events, the claim timeout on a paused
//! clock 1 ms before and at its end) and a tab that connects while a request waits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use knapsack::ui::limits::{DEFAULT_CLAIM_TIMEOUT, EVENT_BUFFER, MAX_DESCRIPTION_BYTES};
use knapsack::ui::{
    BrowserEvent, BrowserOutcome, BrowserRequest, BrowserStream, ClaimBody, Refusal, ResultBody,
    UiBridge, UiOptions,
};
use serde_json::{Value, json};
use shiitake_capabilities::{
    ExecutionId, ForModelKind, InvocationContext, Module, OperationName, OperationPath, ToolError,
    execute_operation,
};
use shiitake_protocol::SessionId;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a tab waits for an event before the test fails (rather than hangs).
const EVENT_WAIT: Duration = Duration::from_secs(5);

fn session() -> SessionId {
    SessionId::new("s-ui-host").unwrap()
}

/// Calls `ui.<name>` of `module` as the execute door would, on its own task.
fn call(module: &Module, name: &str, input: Value) -> JoinHandle<Result<Value, ToolError>> {
    let module = module.clone();
    let name = name.to_owned();
    tokio::spawn(async move {
        let operation = module
            .operation(&OperationName::new(&name).unwrap())
            .unwrap()
            .clone();
        let path = OperationPath::parse(&format!("ui.{name}")).unwrap();
        // Far past every bound here, so only the bridge decides the outcome.
        let ctx = InvocationContext::new(ExecutionId::generate(), CancellationToken::new())
            .with_timeout(Duration::from_secs(3600));
        execute_operation(&path, &operation, input, &ctx).await
    })
}

fn code_of(result: &Result<Value, ToolError>) -> (ForModelKind, String) {
    match result {
        Err(ToolError::ForModel(error)) => (
            error.kind,
            error.details.as_ref().unwrap()["code"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        other => panic!("not a tool error for the model: {other:?}"),
    }
}

/// A tab: its stream, past `hello`, and its connection id.
struct Tab {
    stream: BrowserStream,
    connection: knapsack::ui::ConnectionId,
}

impl Tab {
    async fn open(bridge: &UiBridge) -> Self {
        let stream = bridge.connect(&session()).unwrap();
        let connection = stream.connection_id().clone();
        let mut tab = Self { stream, connection };
        assert!(matches!(tab.next().await, Some(BrowserEvent::Hello { .. })));
        tab
    }

    async fn next(&mut self) -> Option<BrowserEvent> {
        tokio::time::timeout(EVENT_WAIT, self.stream.next())
            .await
            .expect("no event in time")
    }

    async fn request(&mut self) -> BrowserRequest {
        match self.next().await {
            Some(BrowserEvent::Request(request)) => request,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn claim(&self, bridge: &UiBridge, request: &BrowserRequest) -> Result<(), Refusal> {
        bridge.claim(
            &session(),
            &ClaimBody {
                request_id: request.request_id.clone(),
                connection_id: self.connection.clone(),
            },
        )
    }

    fn answer(
        &self,
        bridge: &UiBridge,
        request: &BrowserRequest,
        value: Value,
    ) -> Result<(), Refusal> {
        bridge.answer(
            &session(),
            ResultBody {
                request_id: request.request_id.clone(),
                connection_id: self.connection.clone(),
                outcome: BrowserOutcome::Ok(value),
            },
        )
    }

    /// Claims the next request and answers it with `value`.
    async fn serve(&mut self, bridge: &UiBridge, value: Value) {
        let request = self.request().await;
        self.claim(bridge, &request).unwrap();
        self.answer(bridge, &request, value).unwrap();
    }
}

#[tokio::test]
async fn a_description_of_4096_bytes_passes_and_4097_is_an_invalid_result() {
    let bridge = UiBridge::default();
    let module = bridge.lend(&session()).unwrap();
    let mut tab = Tab::open(&bridge).await;
    for (len, accepted) in [
        (MAX_DESCRIPTION_BYTES, true),
        (MAX_DESCRIPTION_BYTES + 1, false),
    ] {
        let run = call(&module, "discover", json!({}));
        let request = tab.request().await;
        tab.claim(&bridge, &request).unwrap();
        let list = json!({ "commands": [{ "name": "add", "description": "d".repeat(len) }] });
        let answered = tab.answer(&bridge, &request, list);
        let result = run.await.unwrap();
        if accepted {
            answered.unwrap();
            let description = &result.unwrap()["commands"][0]["description"];
            assert_eq!(description.as_str().unwrap().len(), len);
        } else {
            assert_eq!(answered, Err(Refusal::InvalidResult));
            assert_eq!(
                code_of(&result),
                (ForModelKind::Failed, "browser_invalid_result".to_owned())
            );
        }
    }
}

#[tokio::test]
async fn a_tab_with_16_unread_events_stays_and_the_17th_disconnects_it() {
    let bridge = UiBridge::default();
    let module = bridge.lend(&session()).unwrap();
    let mut reader = Tab::open(&bridge).await;
    // This tab said hello and then stopped reading.
    let mut idle = Tab::open(&bridge).await;
    for served in 1..=EVENT_BUFFER + 1 {
        let run = call(&module, "execute", json!({ "command": "tick" }));
        reader.serve(&bridge, json!({ "served": served })).await;
        assert_eq!(run.await.unwrap().unwrap(), json!({ "served": served }));
        let expected = if served <= EVENT_BUFFER { 2 } else { 1 };
        assert_eq!(
            bridge.connections(&session()),
            expected,
            "after {served} unread events"
        );
    }
    // The idle tab still gets the 16 it was sent, then its stream ends (it would reconnect).
    for _ in 0..EVENT_BUFFER {
        idle.request().await;
    }
    assert!(idle.next().await.is_none());
}

#[tokio::test]
async fn a_tab_connecting_while_a_request_is_unclaimed_is_sent_it_and_not_once_claimed() {
    let bridge = UiBridge::default();
    let module = bridge.lend(&session()).unwrap();
    let mut first = Tab::open(&bridge).await;
    let run = call(&module, "execute", json!({ "command": "add" }));
    let sent = first.request().await;
    // Unclaimed: a newcomer gets it right after hello, and may win the claim.
    let mut late = Tab::open(&bridge).await;
    let resent = late.request().await;
    assert_eq!(resent.request_id, sent.request_id);
    late.claim(&bridge, &resent).unwrap();
    assert_eq!(first.claim(&bridge, &sent), Err(Refusal::ClaimedByAnother));
    // Claimed: a tab connecting now is not sent it.
    let mut later = Tab::open(&bridge).await;
    late.answer(&bridge, &resent, json!("done")).unwrap();
    assert_eq!(run.await.unwrap().unwrap(), json!("done"));
    let run = call(&module, "discover", json!({}));
    let next = later.request().await;
    assert_ne!(
        next.request_id, sent.request_id,
        "the claimed one was never sent"
    );
    later.claim(&bridge, &next).unwrap();
    later
        .answer(&bridge, &next, json!({ "commands": [] }))
        .unwrap();
    assert_eq!(run.await.unwrap().unwrap(), json!({ "commands": [] }));
}

/// Moves the paused clock by `by` and lets every task whose timer fired run.
async fn pass(by: Duration) {
    tokio::time::advance(by).await;
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_claim_1_ms_before_the_claim_timeout_wins_and_at_it_the_run_is_not_connected() {
    let bridge = UiBridge::new(UiOptions::default());
    let module = bridge.lend(&session()).unwrap();
    let mut tab = Tab::open(&bridge).await;
    let just_in_time = DEFAULT_CLAIM_TIMEOUT - Duration::from_millis(1);

    let run = call(&module, "execute", json!({ "command": "add" }));
    let request = tab.request().await;
    pass(just_in_time).await;
    tab.claim(&bridge, &request).unwrap();
    // Claimed in time: the result may take longer than the claim timeout.
    pass(DEFAULT_CLAIM_TIMEOUT).await;
    tab.answer(&bridge, &request, json!(1)).unwrap();
    assert_eq!(run.await.unwrap().unwrap(), json!(1));

    let run = call(&module, "execute", json!({ "command": "add" }));
    let request = tab.request().await;
    pass(DEFAULT_CLAIM_TIMEOUT).await;
    let result = run.await.unwrap();
    assert_eq!(
        code_of(&result),
        (
            ForModelKind::Unavailable,
            "browser_not_connected".to_owned()
        )
    );
    assert_eq!(tab.claim(&bridge, &request), Err(Refusal::NotOutstanding));
}
