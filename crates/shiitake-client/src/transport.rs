//! The transport seam: how the client's HTTP requests leave the process.
//!
//! The client builds each request (URL, method, headers, JSON body, bearer
//! token) and hands it to a [`Transport`]. The default, [`ReqwestTransport`],
//! sends it with a `reqwest::Client`. A host that must add headers (a proxy
//! credential, a trace id) wraps a transport; a host with its own HTTP stack
//! implements the trait and converts its response with
//! `reqwest::Response::from(http::Response<_>)`. Server-Sent Event streams go
//! through the same seam, so whatever the transport adds reaches them too.

use std::sync::Arc;

use async_trait::async_trait;

/// A failure to exchange a request, before any HTTP status was seen.
pub type TransportError = Box<dyn std::error::Error + Send + Sync>;

/// Sends one HTTP request and returns the response head with a streaming body.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Sends `request`; an HTTP error status is a response, not an `Err`.
    async fn send(&self, request: reqwest::Request) -> Result<reqwest::Response, TransportError>;
}

/// The default transport: a `reqwest::Client` (with its connection pool).
#[derive(Clone, Debug, Default)]
pub struct ReqwestTransport {
    client: reqwest::Client,
}

impl ReqwestTransport {
    /// Sends through `client`, which carries the host's TLS, proxy and timeout settings.
    pub fn new(client: reqwest::Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl Transport for ReqwestTransport {
    async fn send(&self, request: reqwest::Request) -> Result<reqwest::Response, TransportError> {
        Ok(self.client.execute(request).await?)
    }
}

/// Adds fixed headers to every request, then sends it through another transport.
///
/// The common case of the seam: a host that only needs extra headers wraps the
/// default transport rather than writing its own.
#[derive(Clone)]
pub struct WithHeaders {
    headers: reqwest::header::HeaderMap,
    next: Arc<dyn Transport>,
}

impl std::fmt::Debug for WithHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithHeaders")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl WithHeaders {
    /// Adds `headers` to each request before `next` sends it.
    pub fn new(headers: reqwest::header::HeaderMap, next: Arc<dyn Transport>) -> Self {
        Self { headers, next }
    }
}

#[async_trait]
impl Transport for WithHeaders {
    async fn send(
        &self,
        mut request: reqwest::Request,
    ) -> Result<reqwest::Response, TransportError> {
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        self.next.send(request).await
    }
}
