//! Who a request is: the operator, or one tenant of a Hub, and the [`Credentials`]
//! that tell them apart.
//!
//! The gate (`auth.rs`) asks the server's credentials about every bearer token and puts
//! the [`Caller`] it answers in the request's extensions; the directory routes
//! (`directory.rs`) hand it to the [`crate::AgentDirectoryApi`], which answers
//! `not_found` for an Agent of another tenant, and the operator's routes (`hub.rs`)
//! exist for the operator only. A host with one token ([`Token`]) has only the operator.

use std::fmt::Debug;

use async_trait::async_trait;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shiitake_protocol::{ShiitakeError, TenantName};

use crate::auth::Token;
use crate::error::HttpError;
use crate::web_auth::Via;

/// Who a request is, as the credentials decided.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The host's operator: every Agent, and the Hub's own routes.
    Operator,
    /// A tenant of a Hub: its own Agents only.
    Tenant(TenantName),
}

/// What a bearer token stands for: the host's check of every request's credential.
///
/// A Hub keeps its tenants' tokens hashed in its database; a Local host has one token,
/// the operator's ([`Token`] implements this trait).
#[async_trait]
pub trait Credentials: Send + Sync + Debug + 'static {
    /// The caller `bearer` (the text after `Bearer `) stands for; `None` when it stands
    /// for nobody (a bare `401`), an error when it cannot be checked now (`503`).
    async fn verify(&self, bearer: &str) -> Result<Option<Caller>, ShiitakeError>;
}

#[async_trait]
impl Credentials for Token {
    async fn verify(&self, bearer: &str) -> Result<Option<Caller>, ShiitakeError> {
        Ok(self.matches(bearer).then_some(Caller::Operator))
    }
}

/// A check of a credential or a login that failed, as the `503` it is answered with
/// whatever the host called it: the request is neither let in nor taken for a stranger.
pub(crate) fn check_failed(error: &ShiitakeError) -> ShiitakeError {
    ShiitakeError::unavailable(format!(
        "the credential could not be checked: {}",
        error.message
    ))
}

/// Middleware: lets the operator's bearer token through, before anything of the
/// request is read; a tenant finds no such route, the operator's cookie is refused
/// with `what` it may not do.
pub(crate) async fn operator_token(
    State(what): State<&'static str>,
    request: Request,
    next: Next,
) -> Response {
    let via = request.extensions().get::<Via>();
    let caller = request.extensions().get::<Caller>();
    let refused = match (via, caller) {
        (Some(Via::Bearer), Some(Caller::Operator)) => return next.run(request).await,
        (_, Some(Caller::Tenant(_))) => ShiitakeError::not_found("no such route; see docs/http.md"),
        _ => ShiitakeError::not_granted(format!("only the operator's bearer token {what}")),
    };
    HttpError(refused).into_response()
}

/// Middleware of [`crate::router`]: its one Agent belongs to no tenant, so a tenant
/// caller finds nothing there (`not_found`, as another tenant's Agent would be).
pub(crate) async fn operator_only(request: Request, next: Next) -> Response {
    match request.extensions().get::<Caller>() {
        Some(Caller::Operator) => next.run(request).await,
        _ => HttpError(ShiitakeError::not_found(
            "no such route for this caller; see docs/http.md",
        ))
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn a_token_stands_for_the_operator_and_nothing_else_for_anyone() {
        let token = Token::new("caller-token-0123456789").unwrap();
        assert_eq!(
            token.verify("caller-token-0123456789").await.unwrap(),
            Some(Caller::Operator)
        );
        assert_eq!(token.verify("caller-token-012345678").await.unwrap(), None);
        assert_eq!(token.verify("").await.unwrap(), None);
    }
}
