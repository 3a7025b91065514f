//! The operator's calls to a Hub: its processes (`GET /v1/hub/nodes`, in `agent.rs`)
//! and its tenants with their tokens (`/v1/hub/tenants`). Each needs the operator's
//! bearer token; a tenant's token finds no such route (`not_found`), and so does a
//! server that is not a Hub.

use reqwest::{Method, Response};
use serde::Serialize;
use shiitake_protocol::{
    CreateTenant, IssueToken, IssuedToken, ShiitakeError, TenantList, TenantName, TokenId,
};

use crate::RemoteAgent;

impl RemoteAgent {
    /// Creates the tenant `name` with its first Agent (`POST /v1/hub/tenants`): its
    /// first token, whose secret is shown only here.
    pub async fn create_tenant(&self, name: TenantName) -> Result<IssuedToken, ShiitakeError> {
        let body = CreateTenant { name };
        let response = self
            .hub_call(Method::POST, &["tenants"], Some(&body))
            .await?;
        crate::http::decode(response).await
    }

    /// Every tenant of the Hub with its Agents and live tokens (`GET /v1/hub/tenants`).
    pub async fn tenants(&self) -> Result<TenantList, ShiitakeError> {
        let response = self.hub_call::<()>(Method::GET, &["tenants"], None).await?;
        crate::http::decode(response).await
    }

    /// Deletes the tenant `name` (`DELETE /v1/hub/tenants/{tenant}`): its tokens stop
    /// working and its Agents stop serving.
    pub async fn delete_tenant(&self, name: &TenantName) -> Result<(), ShiitakeError> {
        self.hub_call::<()>(Method::DELETE, &["tenants", name.as_str()], None)
            .await?;
        Ok(())
    }

    /// Issues another token of `tenant` (`POST /v1/hub/tenants/{tenant}/tokens`); with
    /// `revoke_others`, a rotation that ends the tenant's other tokens.
    pub async fn issue_token(
        &self,
        tenant: &TenantName,
        request: IssueToken,
    ) -> Result<IssuedToken, ShiitakeError> {
        let response = self
            .hub_call(
                Method::POST,
                &["tenants", tenant.as_str(), "tokens"],
                Some(&request),
            )
            .await?;
        crate::http::decode(response).await
    }

    /// Revokes the token `id` of `tenant` (`DELETE /v1/hub/tenants/{tenant}/tokens/{id}`).
    pub async fn revoke_token(
        &self,
        tenant: &TenantName,
        id: &TokenId,
    ) -> Result<(), ShiitakeError> {
        let segments = ["tenants", tenant.as_str(), "tokens", id.as_str()];
        self.hub_call::<()>(Method::DELETE, &segments, None).await?;
        Ok(())
    }

    /// One call under `/v1/hub/`, which has no Agent segment.
    async fn hub_call<B: Serialize>(
        &self,
        method: Method,
        tail: &[&str],
        body: Option<&B>,
    ) -> Result<Response, ShiitakeError> {
        let segments: Vec<&str> = ["v1", "hub"].iter().chain(tail).copied().collect();
        let url = self.inner.url_in(&segments, &Vec::new(), false)?;
        let body = crate::http::encode(body)?;
        self.inner.send(method, url, body, "application/json").await
    }
}
