//! An Agent over the A2A protocol (v1.0, JSON-RPC binding with SSE): an Agent Card, and
//! `SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`.
//! A2A's `contextId` is a Session, a task one prompt's run, `input-required` an Ask or
//! approval the run waits on. Mounted by `shiitake-server` at `/v1/agents/{agent}/a2a`.
//!
//! Nothing is kept in this process: a task id names its Session and run
//! ([`TaskId`]), and every answer and event is read from the durable Session
//! ([`Delegate`]), so a retry, a reconnect, a restart or
//! another process of a Hub sees the same task.
//!
//! | A2A | Shiitake |
//! | --- | --- |
//! | `contextId` | a Session id; a message without one starts a Session (its `messageId` the idempotency key) |
//! | task id | `<session>.<command>`: the Session and the accepted prompt whose run the task is ([`TaskId`]) |
//! | `messageId` of a new message | the prompt's `requestId`: a retried send starts nothing new |
//! | message with the `taskId` of an input-required task | the answer to its Ask or approval (request id `a2a-<messageId>`) |
//! | `TASK_STATE_SUBMITTED` / `WORKING` | the prompt is queued / its run runs |
//! | `TASK_STATE_INPUT_REQUIRED` | the run waits on an Ask or approval; `status.message` says it |
//! | `TASK_STATE_COMPLETED` | completed; the answer is the artifact `answer` |
//! | `TASK_STATE_FAILED` | failed, or interrupted (the process stopped under it) |
//! | `TASK_STATE_CANCELED` | cancelled (`CancelTask`, or an abort) |
//! | `history` | the run's prompt and its answers in words (tool calls left out) |
//! | `CancelTask` | cancel of that command: off the queue, or its run stopped |

mod card;
mod envelope;
mod error;
mod events;
mod reply;
mod rpc;
mod state;
mod task;
mod task_id;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{OriginalUri, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use shiitake_protocol::AgentApi;

pub use error::A2aError;
pub use rpc::{MAX_BLOCKING_WAIT, MAX_BODY_BYTES};
pub use task_id::{NotATaskId, TaskId};

use crate::delegate::Delegate;

/// Who the Agent is, for its card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentIdentity {
    /// The Agent's name (its directory name).
    pub name: String,
    /// One line on what it does.
    pub description: String,
}

/// What every A2A route of one Agent shares.
struct Shared<A> {
    delegate: Delegate<A>,
    identity: AgentIdentity,
    keep_alive: Duration,
    places: crate::streams::StreamPlaces,
}

/// The A2A routes of `agent`: `POST /v1/a2a` (JSON-RPC), and its card at
/// `GET /v1/a2a/.well-known/agent-card.json` and `GET /.well-known/agent-card.json`.
/// Open streams send a keep-alive comment every `keep_alive`; streams and waits each
/// hold one of `places` while open.
pub fn router<A>(
    agent: Arc<A>,
    identity: AgentIdentity,
    keep_alive: Duration,
    places: crate::streams::StreamPlaces,
) -> axum::Router
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let shared = Arc::new(Shared {
        delegate: Delegate::new(agent),
        identity,
        keep_alive,
        places,
    });
    let card_at_endpoint = format!("{}{}", card::ENDPOINT_PATH, card::CARD_PATH);
    axum::Router::new()
        .route(card::ENDPOINT_PATH, post(rpc::serve::<A>))
        .route(&card_at_endpoint, get(agent_card::<A>))
        .route(card::CARD_PATH, get(agent_card::<A>))
        .with_state(shared)
}

/// `GET …/.well-known/agent-card.json`.
async fn agent_card<A>(State(shared): State<Arc<Shared<A>>>, request: Request) -> Response
where
    A: AgentApi + 'static,
    A::Session: Send + Sync + 'static,
{
    let (parts, _body) = request.into_parts();
    let url = card::endpoint_url(
        &parts.headers,
        parts.extensions.get::<OriginalUri>(),
        &parts.uri,
    );
    // Without its catalogs, the card still offers work in words.
    let catalogs = match shared.delegate.agent().catalogs().await {
        Ok(catalogs) => Some(catalogs),
        Err(error) => {
            tracing::warn!(%error, "the A2A card lists no commands: the catalogs were not read");
            None
        }
    };
    axum::Json(card::card(&shared.identity, url, catalogs.as_ref())).into_response()
}
