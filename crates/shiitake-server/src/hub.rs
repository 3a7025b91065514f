//! The operator's routes of a Hub: `GET /v1/hub/nodes` (the processes that serve it,
//! each with its heartbeat, the Sessions it holds and its runs in progress) and
//! `/v1/hub/tenants` (its tenants and their tokens).
//!
//! The server knows nothing of the database behind them: a host that runs a Hub hands
//! it a [`HubNodes`] and a [`HubTenants`] (the `shiitake serve` host asks its
//! PostgreSQL store). The routes are the operator's bearer token's: for a tenant they
//! do not exist (`not_found`, as another tenant's Agent), and the operator's browser
//! cookie is `not_granted`.

use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use shiitake_protocol::{
    CreateTenant, HubNodeList, IssueToken, IssuedToken, ShiitakeError, TenantList, TenantName,
    TokenId,
};

use crate::caller::operator_token;
use crate::error::HttpError;
use crate::extract::{Body, Params};

/// Where the server reads the processes of the Hub it serves.
#[async_trait]
pub trait HubNodes: Send + Sync + std::fmt::Debug + 'static {
    /// Every process serving the Agent, oldest first.
    async fn nodes(&self) -> Result<HubNodeList, ShiitakeError>;
}

/// Where the server manages the tenants of the Hub it serves and their tokens.
///
/// A token's secret leaves only in the [`IssuedToken`] answered when it is made; an
/// unknown tenant or token is `not_found`, a tenant that exists already `conflict`.
#[async_trait]
pub trait HubTenants: Send + Sync + std::fmt::Debug + 'static {
    /// Creates the tenant `name` (with its first Agent) and its first token.
    async fn create(&self, name: &TenantName) -> Result<IssuedToken, ShiitakeError>;

    /// Every tenant, by name, with its Agents and live tokens.
    async fn list(&self) -> Result<TenantList, ShiitakeError>;

    /// Deletes the tenant `name`: its tokens stop working and its Agents stop serving.
    async fn delete(&self, name: &TenantName) -> Result<(), ShiitakeError>;

    /// Issues another token of `tenant`; with `revoke_others`, its other tokens end in
    /// the same step (a rotation).
    async fn issue_token(
        &self,
        tenant: &TenantName,
        request: &IssueToken,
    ) -> Result<IssuedToken, ShiitakeError>;

    /// Revokes the token `id` of `tenant`.
    async fn revoke_token(&self, tenant: &TenantName, id: &TokenId) -> Result<(), ShiitakeError>;
}

/// The operator's routes `config` asks for, none when it names neither part.
pub(crate) fn routes(config: &crate::ServerConfig) -> Router {
    let mut app = Router::new();
    if let Some(nodes) = config.hub_nodes.clone() {
        app = app.merge(
            Router::new()
                .route("/v1/hub/nodes", get(nodes_route))
                .route_layer(from_fn_with_state(
                    "lists the Hub's processes",
                    operator_token,
                ))
                .with_state(nodes),
        );
    }
    if let Some(tenants) = config.hub_tenants.clone() {
        app = app.merge(
            Router::new()
                .route("/v1/hub/tenants", post(create).get(list))
                .route("/v1/hub/tenants/{tenant}", delete(delete_tenant))
                .route("/v1/hub/tenants/{tenant}/tokens", post(issue))
                .route("/v1/hub/tenants/{tenant}/tokens/{id}", delete(revoke))
                .route_layer(from_fn_with_state("manages tenants", operator_token))
                .with_state(tenants),
        );
    }
    app
}

/// `GET /v1/hub/nodes`: the Hub's processes.
async fn nodes_route(State(hub): State<Arc<dyn HubNodes>>) -> Result<Json<HubNodeList>, HttpError> {
    Ok(Json(hub.nodes().await?))
}

type Tenants = State<Arc<dyn HubTenants>>;

/// `POST /v1/hub/tenants`: `201` with the new tenant's first token.
async fn create(
    State(tenants): Tenants,
    Body(body): Body<CreateTenant>,
) -> Result<(StatusCode, Json<IssuedToken>), HttpError> {
    let issued = tenants.create(&body.name).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

/// `GET /v1/hub/tenants`.
async fn list(State(tenants): Tenants) -> Result<Json<TenantList>, HttpError> {
    Ok(Json(tenants.list().await?))
}

/// `DELETE /v1/hub/tenants/{tenant}`: `204`.
async fn delete_tenant(
    State(tenants): Tenants,
    Params(tenant): Params<TenantName>,
) -> Result<StatusCode, HttpError> {
    tenants.delete(&tenant).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/hub/tenants/{tenant}/tokens`: `201` with the new token.
async fn issue(
    State(tenants): Tenants,
    Params(tenant): Params<TenantName>,
    Body(body): Body<IssueToken>,
) -> Result<(StatusCode, Json<IssuedToken>), HttpError> {
    let issued = tenants.issue_token(&tenant, &body).await?;
    Ok((StatusCode::CREATED, Json(issued)))
}

/// `DELETE /v1/hub/tenants/{tenant}/tokens/{id}`: `204`.
async fn revoke(
    State(tenants): Tenants,
    Params((tenant, id)): Params<(TenantName, TokenId)>,
) -> Result<StatusCode, HttpError> {
    tenants.revoke_token(&tenant, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
