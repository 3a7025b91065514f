//! Building requests and reading answers: the one place HTTP statuses become `ShiitakeError`s.

use std::sync::Arc;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Response, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use shiitake_protocol::{AddressOrigin, ErrorCode, ShiitakeError, parse_shiitake_error};

use crate::ClientOptions;
use crate::transport::Transport;

/// What every handle of one client shares.
pub(crate) struct Inner {
    pub(crate) base: Url,
    /// The base as the origin of this client's Session addresses.
    pub(crate) origin: AddressOrigin,
    pub(crate) token: Option<HeaderValue>,
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) options: ClientOptions,
}

/// The body of a request that sends none, typed for [`Inner::call`].
pub(crate) const NO_BODY: Option<&()> = None;

/// Query pairs of one request.
pub(crate) type QueryPairs = Vec<(&'static str, String)>;

impl Inner {
    /// The URL of `segments` under the base, each segment percent-encoded; a route
    /// `v1/...` of a client bound to an Agent of a directory gains its Agent segment
    /// (`v1/agents/{agent}/...`).
    pub(crate) fn url(&self, segments: &[&str], query: &QueryPairs) -> Result<Url, ShiitakeError> {
        self.url_in(segments, query, true)
    }

    /// [`Self::url`], with `agent_segment: false` for the directory's own routes.
    pub(crate) fn url_in(
        &self,
        segments: &[&str],
        query: &QueryPairs,
        agent_segment: bool,
    ) -> Result<Url, ShiitakeError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| ShiitakeError::invalid("the base URL cannot carry a path"))?;
            path.pop_if_empty();
            match (&self.options.agent, segments.split_first()) {
                (Some(agent), Some((&"v1", rest))) if agent_segment => {
                    path.extend(["v1", "agents", agent.as_str()]).extend(rest);
                }
                _ => {
                    path.extend(segments);
                }
            }
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in query {
                pairs.append_pair(name, value);
            }
        }
        Ok(url)
    }

    fn request(&self, method: Method, url: Url, body: Option<Vec<u8>>) -> reqwest::Request {
        let mut request = reqwest::Request::new(method, url);
        let headers = request.headers_mut();
        if let Some(token) = &self.token {
            headers.insert(AUTHORIZATION, token.clone());
        }
        if let Some(body) = body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            *request.body_mut() = Some(body.into());
        }
        request
    }

    /// Sends a request and returns the response if its status is a success.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        accept: &'static str,
    ) -> Result<Response, ShiitakeError> {
        let mut request = self.request(method, url, body);
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(accept));
        let response = self.transport.send(request).await.map_err(|error| {
            ShiitakeError::unavailable(format!("cannot reach the Shiitake server: {error}"))
        })?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(failure(response).await)
        }
    }

    /// A JSON call: encodes `body`, decodes the answer.
    pub(crate) async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &QueryPairs,
        body: Option<&B>,
    ) -> Result<T, ShiitakeError> {
        let response = self.call_raw(method, segments, query, body).await?;
        decode(response).await
    }

    /// A JSON call whose answer the caller reads (for `204 No Content`).
    pub(crate) async fn call_raw<B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        query: &QueryPairs,
        body: Option<&B>,
    ) -> Result<Response, ShiitakeError> {
        let url = self.url(segments, query)?;
        self.send(method, url, encode(body)?, "application/json")
            .await
    }
}

/// A request body as JSON bytes.
pub(crate) fn encode<B: Serialize>(body: Option<&B>) -> Result<Option<Vec<u8>>, ShiitakeError> {
    body.map(|body| {
        serde_json::to_vec(body).map_err(|error| {
            ShiitakeError::invalid(format!("the request does not encode: {error}"))
        })
    })
    .transpose()
}

/// Decodes a success body.
pub(crate) async fn decode<T: DeserializeOwned>(response: Response) -> Result<T, ShiitakeError> {
    let bytes = response
        .bytes()
        .await
        .map_err(|error| ShiitakeError::unavailable(format!("the answer was cut off: {error}")))?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ShiitakeError::internal(format!("the server's answer does not decode: {error}"))
    })
}

/// The error a failed response stands for: its `ShiitakeError` body, or one from its status.
pub(crate) async fn failure(response: Response) -> ShiitakeError {
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED {
        return ShiitakeError::not_granted(
            "the server refused the token (401): check the token the client was given",
        );
    }
    let text = response.text().await.unwrap_or_default();
    if let Ok(error) = parse_shiitake_error(&text) {
        return error;
    }
    let code = match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::CONFLICT => ErrorCode::Conflict,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
        StatusCode::FORBIDDEN => ErrorCode::NotGranted,
        status if status.is_server_error() => ErrorCode::Unavailable,
        status if status.is_client_error() => ErrorCode::Invalid,
        _ => ErrorCode::Internal,
    };
    let mut excerpt: String = text.chars().take(200).collect();
    if excerpt.is_empty() {
        excerpt = "no body".to_owned();
    }
    ShiitakeError::new(code, format!("HTTP {status}: {excerpt}"))
}
