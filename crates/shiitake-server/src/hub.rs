//! The operator's view of a Hub: `GET /v1/hub/nodes`, the processes that serve the
//! Agent, each with its heartbeat, the Sessions it holds and its runs in progress.
//!
//! The server knows nothing of the database behind it: a host that runs a Hub hands
//! it a [`HubNodes`] (the `shiitake serve` host asks its PostgreSQL store). The
//! route is the operator's: the bearer token only, never a browser's cookie.

use std::sync::Arc;

use async_trait::async_trait;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use shiitake_protocol::{HubNodeList, ShiitakeError};

use crate::error::HttpError;
use crate::web_auth::Via;

/// Where the server reads the processes of the Hub it serves.
#[async_trait]
pub trait HubNodes: Send + Sync + std::fmt::Debug + 'static {
    /// Every process serving the Agent, oldest first.
    async fn nodes(&self) -> Result<HubNodeList, ShiitakeError>;
}

/// `GET /v1/hub/nodes`: the Hub's processes, for the bearer token only.
pub(crate) async fn nodes(
    State(hub): State<Arc<dyn HubNodes>>,
    via: Option<axum::Extension<Via>>,
) -> Response {
    if !matches!(via, Some(axum::Extension(Via::Bearer))) {
        let refused = ShiitakeError::not_granted(
            "only the operator's bearer token lists the Hub's processes",
        );
        return HttpError(refused).into_response();
    }
    match hub.nodes().await {
        Ok(list) => Json(list).into_response(),
        Err(error) => HttpError(error).into_response(),
    }
}
