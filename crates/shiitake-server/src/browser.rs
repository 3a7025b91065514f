//! The browser App bridge's routes (`knapsack::ui`), mounted behind the same
//! bearer token as every other route:
//!
//! - `GET /browser/sessions/{session}/browser/events`: one tab's SSE stream
//!   (`hello`, `request`, `end`), for a stored Session only;
//! - `POST /browser/sessions/{session}/browser/claims`: a tab claims a request;
//! - `POST /browser/sessions/{session}/browser/results`: the claimer answers it;
//! - `GET /browser/knapsack-ui.js`: the browser side, `connectBrowser`.
//!
//! After the bridge closes, the three Session routes answer `410 Gone`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use knapsack::ui::{
    BROWSER_JS, BrowserEvent, ClaimBody, Claimed, Refusal, ResultBody, UiBridge, UiError,
};
use shiitake_protocol::{AgentApi, PageLimit, ReadOptions, SessionApi, SessionId, ShiitakeError};

use crate::error::HttpError;
use crate::extract::{Body, Params};

/// What the browser routes share.
pub(crate) struct BrowserShared<A> {
    pub(crate) agent: Arc<A>,
    pub(crate) bridge: UiBridge,
    pub(crate) keep_alive: Duration,
}

type BrowserState<A> = State<Arc<BrowserShared<A>>>;

/// `410 Gone` with a `stopped` body: the bridge closed, retrying cannot help.
fn gone() -> Response {
    let error = ShiitakeError::stopped("the browser bridge is closed");
    (StatusCode::GONE, Json(error)).into_response()
}

fn refused(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Closed => gone(),
        Refusal::InvalidResult => {
            HttpError(ShiitakeError::invalid(refusal.to_string())).into_response()
        }
        Refusal::UnknownConnection
        | Refusal::NotOutstanding
        | Refusal::ClaimedByAnother
        | Refusal::NotClaimed => {
            HttpError(ShiitakeError::conflict(refusal.to_string())).into_response()
        }
    }
}

fn event_of(event: &BrowserEvent) -> Event {
    Event::default()
        .event(event.name())
        .data(event.data().to_string())
}

pub(crate) async fn events<A: AgentApi>(
    State(shared): BrowserState<A>,
    Params(session_id): Params<SessionId>,
) -> Response {
    if shared.bridge.is_closed() {
        return gone();
    }
    // Only a stored Session has a browser host: reading one entry answers `not_found` otherwise.
    let options = ReadOptions {
        limit: PageLimit::new(1).ok(),
        ..ReadOptions::default()
    };
    if let Err(error) = shared.agent.session(session_id.clone()).read(options).await {
        return HttpError(error).into_response();
    }
    let stream = match shared.bridge.connect(&session_id) {
        Ok(stream) => stream,
        Err(UiError::Closed) => return gone(),
        Err(error) => return HttpError(ShiitakeError::internal(error.to_string())).into_response(),
    };
    // A comment first so the head and a first byte leave at once. The stream holds
    // the tab's connection: when the client goes away, axum drops it and the host
    // sees the tab leave.
    let opening = futures::stream::once(async { Event::default().comment("ok") });
    let events = opening
        .chain(stream.map(|event| event_of(&event)))
        .map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(
            KeepAlive::new()
                .interval(shared.keep_alive)
                .text("keep-alive"),
        )
        .into_response()
}

pub(crate) async fn claims<A: AgentApi>(
    State(shared): BrowserState<A>,
    Params(session_id): Params<SessionId>,
    Body(body): Body<ClaimBody>,
) -> Response {
    match shared.bridge.claim(&session_id, &body) {
        Ok(()) => Json(Claimed { claimed: true }).into_response(),
        Err(refusal) => refused(refusal),
    }
}

pub(crate) async fn results<A: AgentApi>(
    State(shared): BrowserState<A>,
    Params(session_id): Params<SessionId>,
    Body(body): Body<ResultBody>,
) -> Response {
    match shared.bridge.answer(&session_id, body) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refused(refusal),
    }
}

/// The browser side of the bridge, as an ES module.
pub(crate) async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        BROWSER_JS,
    )
        .into_response()
}
