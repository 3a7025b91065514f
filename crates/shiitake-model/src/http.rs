//! What both HTTP providers share: the client, sending with cancellation, and
//! turning a failed response into a classified [`ModelError`].

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, RequestBuilder, Response};
use tokio_util::sync::CancellationToken;

use crate::error::{ModelError, ModelErrorKind, parse_retry_after, parse_retry_after_ms};

/// How much of an error body is read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Connection and idle limits of a provider's HTTP client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time allowed to open the connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed between two reads of the response (local models can be slow).
    pub idle_timeout: Duration,
    /// Largest single SSE event accepted, in bytes (and largest whole answer, when not streamed).
    pub max_event_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_event_bytes: 4 * 1024 * 1024,
        }
    }
}

/// Builds the one client a provider reuses for every call.
pub(crate) fn client(limits: &HttpLimits) -> Result<Client, ModelError> {
    Client::builder()
        .connect_timeout(limits.connect_timeout)
        .read_timeout(limits.idle_timeout)
        .build()
        .map_err(|error| {
            ModelError::new(
                ModelErrorKind::Config,
                format!("cannot build HTTP client: {error}"),
            )
        })
}

/// The configured base URL without trailing `/`; it must start with `http://` or `https://`.
pub(crate) fn base_url(configured: &str) -> Result<&str, ModelError> {
    let base = configured.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(ModelError::new(
            ModelErrorKind::Config,
            format!("base URL `{configured}` must start with http:// or https://"),
        ));
    }
    Ok(base)
}

/// Turns configured `(name, value)` pairs into headers, naming the bad one.
pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, ModelError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|error| {
            ModelError::new(
                ModelErrorKind::Config,
                format!("header name `{name}`: {error}"),
            )
        })?;
        let value = HeaderValue::from_str(value).map_err(|error| {
            ModelError::new(
                ModelErrorKind::Config,
                format!("value of header `{name}`: {error}"),
            )
        })?;
        map.append(header, value);
    }
    Ok(map)
}

/// Sends a request; answers `Ok` only for a 2xx status, else a classified error.
pub(crate) async fn send(
    request: RequestBuilder,
    cancel: &CancellationToken,
) -> Result<Response, ModelError> {
    let response = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(aborted()),
        response = request.send() => response.map_err(|error| transport_error(&error))?,
    };
    if response.status().is_success() {
        return Ok(response);
    }
    Err(tokio::select! {
        biased;
        () = cancel.cancelled() => aborted(),
        error = error_from_response(response) => error,
    })
}

/// The error for a cancellation before streaming started.
pub(crate) fn aborted() -> ModelError {
    ModelError::new(
        ModelErrorKind::Aborted,
        "the request was aborted before the model answered",
    )
}

/// Classifies a transport failure (no HTTP status).
pub(crate) fn transport_error(error: &reqwest::Error) -> ModelError {
    let kind = if error.is_timeout() {
        ModelErrorKind::Timeout
    } else if error.is_builder() {
        ModelErrorKind::Config
    } else if error.is_decode() {
        ModelErrorKind::InvalidResponse
    } else {
        ModelErrorKind::Connect
    };
    ModelError::new(kind, describe(error))
}

/// A reqwest error with its causes, which carry the useful part ("connection refused").
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Reads (a bounded part of) an error response and classifies it by status.
async fn error_from_response(response: Response) -> ModelError {
    let status = response.status().as_u16();
    let headers = response.headers();
    let retry_after = header_text(headers, "retry-after-ms")
        .and_then(parse_retry_after_ms)
        .or_else(|| {
            header_text(headers, "retry-after")
                .and_then(|v| parse_retry_after(v, SystemTime::now()))
        });
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    let text = String::from_utf8_lossy(&body);
    let message = error_message_from_body(&text).unwrap_or_else(|| {
        if text.trim().is_empty() {
            "(empty body)".to_owned()
        } else {
            text.trim().to_owned()
        }
    });
    ModelError::from_status(status, message).with_retry_after(retry_after)
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The `error.message` (or `message`) of a JSON error body, as OpenAI and Anthropic send it.
pub(crate) fn error_message_from_body(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    error_message(&value)
}

/// The `error.message` (or `message`, or an `error` string) of a parsed JSON error.
pub(crate) fn error_message(value: &serde_json::Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    match error {
        serde_json::Value::String(text) => Some(text.clone()),
        _ => error
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_owned),
    }
}
