//! One handler per `AgentApi` / `SessionApi` operation; `docs/http.md` lists them.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiitake_protocol::{
    AgentApi, BoundedId, CommandOutcome, Cursor, ExtensionId, ExtensionStatusV0, ModelPreference,
    ReadOptions, RequestId, SessionApi, SessionCommand, SessionId, SessionSnapshot,
    SessionSummaryPage, ShiitakeError, SubscribeOptions,
};

use crate::error::HttpError;
use crate::extract::{Body, Params, QueryParams};
use crate::sse::{self, EventStream};

/// What every handler shares: the Agent and the SSE settings.
pub(crate) struct Shared<A> {
    pub(crate) agent: Arc<A>,
    pub(crate) keep_alive: Duration,
    pub(crate) subscribers: crate::limits::Subscribers,
}

type AppState<A> = State<Arc<Shared<A>>>;
type Answer<T> = Result<T, HttpError>;

/// Body of `POST /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateSession {
    request_id: RequestId,
}

/// Answer of `POST /v1/sessions`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreatedSession {
    session_id: SessionId,
}

/// Answer of `DELETE /v1/sessions/{id}`.
#[derive(Debug, Serialize)]
pub(crate) struct Deleted {
    deleted: bool,
}

/// Query of `GET /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    after: Option<Cursor>,
}

pub(crate) async fn create_session<A: AgentApi>(
    State(shared): AppState<A>,
    Body(body): Body<CreateSession>,
) -> Answer<Json<CreatedSession>> {
    let session_id = shared.agent.create_session(body.request_id).await?;
    Ok(Json(CreatedSession { session_id }))
}

pub(crate) async fn list_sessions<A: AgentApi>(
    State(shared): AppState<A>,
    QueryParams(query): QueryParams<ListQuery>,
) -> Answer<Json<SessionSummaryPage>> {
    Ok(Json(
        shared.agent.list_sessions(query.after.as_ref()).await?,
    ))
}

pub(crate) async fn delete_session<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
) -> Answer<Json<Deleted>> {
    let deleted = shared.agent.delete_session(&session_id).await?;
    Ok(Json(Deleted { deleted }))
}

pub(crate) async fn command<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
    Body(command): Body<SessionCommand>,
) -> Answer<Response> {
    let outcome = shared.agent.session(session_id).command(command).await?;
    Ok(match outcome {
        CommandOutcome::Accepted(accepted) => Json(accepted).into_response(),
        CommandOutcome::Cancel(result) => Json(result).into_response(),
        CommandOutcome::Forked(forked) => Json(forked).into_response(),
        CommandOutcome::Done => StatusCode::NO_CONTENT.into_response(),
    })
}

pub(crate) async fn snapshot<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
    QueryParams(options): QueryParams<ReadOptions>,
) -> Answer<Json<SessionSnapshot>> {
    Ok(Json(shared.agent.session(session_id).read(options).await?))
}

/// `Last-Event-ID`, when the client sent one: it wins over `after`.
fn last_event_id(headers: &HeaderMap) -> Result<Option<Cursor>, HttpError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| HttpError(ShiitakeError::invalid("Last-Event-ID is not visible ASCII")))?;
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(Cursor::new(text)?))
}

pub(crate) async fn events<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
    QueryParams(mut options): QueryParams<SubscribeOptions>,
    headers: HeaderMap,
) -> Answer<EventStream> {
    if let Some(cursor) = last_event_id(&headers)? {
        options.after = Some(cursor);
    }
    let place = shared.subscribers.enter()?;
    // Subscribing happens before the response head leaves, so a client that has
    // the head is registered: whatever commits next reaches it.
    let frames = shared.agent.session(session_id).subscribe(options).await?;
    Ok(sse::respond(Vec::new(), frames, shared.keep_alive, place))
}

pub(crate) async fn watch<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
    QueryParams(options): QueryParams<ReadOptions>,
) -> Answer<EventStream> {
    let place = shared.subscribers.enter()?;
    let watch = shared.agent.session(session_id).watch(options).await?;
    let first = vec![sse::snapshot_event(&watch.snapshot)];
    Ok(sse::respond(first, watch.changes, shared.keep_alive, place))
}

pub(crate) async fn model_preference<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
) -> Answer<Json<Option<ModelPreference>>> {
    let session = shared.agent.session(session_id);
    Ok(Json(session.model_preference().await?))
}

pub(crate) async fn set_model_preference<A: AgentApi>(
    State(shared): AppState<A>,
    Params(session_id): Params<SessionId>,
    Body(preference): Body<ModelPreference>,
) -> Answer<StatusCode> {
    let session = shared.agent.session(session_id);
    session.set_model_preference(preference).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn session_extension<A: AgentApi>(
    State(shared): AppState<A>,
    Params((session_id, extension_id, command)): Params<(SessionId, ExtensionId, BoundedId)>,
    Body(input): Body<Value>,
) -> Answer<Json<Value>> {
    let session = shared.agent.session(session_id);
    let output = session
        .call_extension(&extension_id, command.as_str(), input)
        .await?;
    Ok(Json(output))
}

pub(crate) async fn catalogs<A: AgentApi>(
    State(shared): AppState<A>,
) -> Answer<Json<shiitake_protocol::catalog::SessionCatalogs>> {
    Ok(Json(shared.agent.catalogs().await?))
}

/// Query of `GET /v1/tools`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolsQuery {
    #[serde(default)]
    profile: shiitake_protocol::ToolProfile,
}

pub(crate) async fn tools<A: AgentApi>(
    State(shared): AppState<A>,
    QueryParams(query): QueryParams<ToolsQuery>,
) -> Answer<Json<shiitake_protocol::ToolList>> {
    Ok(Json(shared.agent.tools(query.profile).await?))
}

pub(crate) async fn list_extensions<A: AgentApi>(
    State(shared): AppState<A>,
) -> Answer<Json<Vec<ExtensionStatusV0>>> {
    Ok(Json(shared.agent.list_extensions().await?))
}

pub(crate) async fn resume_extension<A: AgentApi>(
    State(shared): AppState<A>,
    Params(extension_id): Params<ExtensionId>,
) -> Answer<Json<ExtensionStatusV0>> {
    Ok(Json(shared.agent.resume_extension(&extension_id).await?))
}

pub(crate) async fn agent_extension<A: AgentApi>(
    State(shared): AppState<A>,
    Params((extension_id, command)): Params<(ExtensionId, BoundedId)>,
    Body(input): Body<Value>,
) -> Answer<Json<Value>> {
    let output = shared
        .agent
        .call_extension(&extension_id, command.as_str(), input)
        .await?;
    Ok(Json(output))
}
