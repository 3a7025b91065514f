//! Failures before streaming starts, classified so the runner knows whether to back off.

use std::fmt;
use std::time::{Duration, SystemTime};

/// Why a model call failed before its stream started.
///
/// The kind decides [`ModelError::retryable`]: rate limits, server errors,
/// connection failures and timeouts are worth another try; the rest are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelErrorKind {
    /// HTTP 429: too many requests; retryable, often with `Retry-After`.
    RateLimited,
    /// HTTP 5xx (including Anthropic's 529 "overloaded"); retryable.
    Server,
    /// The connection could not be made or broke before an answer; retryable.
    Connect,
    /// No answer in time (or HTTP 408); retryable.
    Timeout,
    /// HTTP 400/413/422 and other 4xx: the request itself is wrong; not retryable.
    BadRequest,
    /// HTTP 401/403: missing or wrong credentials; not retryable.
    Unauthorized,
    /// HTTP 404: unknown model or endpoint; not retryable.
    NotFound,
    /// The server answered with something that is not the expected stream; not retryable.
    InvalidResponse,
    /// The cancellation token fired before streaming started; not retryable.
    Aborted,
    /// A scripted model ran out of turns; not retryable.
    ScriptExhausted,
    /// The provider's configuration is unusable (a bad header, URL or key); not retryable.
    Config,
}

impl ModelErrorKind {
    /// Whether another attempt may succeed.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Connect
                | ModelErrorKind::Timeout
        )
    }

    /// The kind an HTTP error status maps to.
    pub fn from_status(status: u16) -> Self {
        match status {
            429 => ModelErrorKind::RateLimited,
            408 => ModelErrorKind::Timeout,
            401 | 403 => ModelErrorKind::Unauthorized,
            404 => ModelErrorKind::NotFound,
            500..=599 => ModelErrorKind::Server,
            _ => ModelErrorKind::BadRequest,
        }
    }
}

impl fmt::Display for ModelErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ModelErrorKind::RateLimited => "rate limited",
            ModelErrorKind::Server => "server error",
            ModelErrorKind::Connect => "connection failed",
            ModelErrorKind::Timeout => "timed out",
            ModelErrorKind::BadRequest => "bad request",
            ModelErrorKind::Unauthorized => "unauthorized",
            ModelErrorKind::NotFound => "not found",
            ModelErrorKind::InvalidResponse => "invalid response",
            ModelErrorKind::Aborted => "aborted",
            ModelErrorKind::ScriptExhausted => "script exhausted",
            ModelErrorKind::Config => "bad configuration",
        };
        f.write_str(text)
    }
}

/// A model call that failed before its stream started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct ModelError {
    kind: ModelErrorKind,
    message: String,
    status: Option<u16>,
    retry_after: Option<Duration>,
}

impl ModelError {
    /// An error of `kind` with a human-readable message.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    /// An error for an HTTP status, classified by [`ModelErrorKind::from_status`].
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        Self {
            kind: ModelErrorKind::from_status(status),
            message: message.into(),
            status: Some(status),
            retry_after: None,
        }
    }

    /// Attaches the delay the server asked for.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The classification.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// The message, without the kind prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status, when the server answered with one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether the runner should back off and try again.
    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    /// The delay the server asked for (`Retry-After` or `retry-after-ms`), if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

/// Parses a `Retry-After` value: delay seconds (`"120"`, `"1.5"`) or an HTTP date
/// in any of its three forms.
///
/// A date in the past gives zero. Returns `None` for anything unreadable.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::try_from_secs_f64(seconds).ok())
            .flatten();
    }
    // All three forms RFC 9110 lets a recipient meet: IMF-fixdate, RFC 850, asctime.
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses `retry-after-ms` (OpenAI's millisecond variant).
pub(crate) fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let millis = value.trim().parse::<f64>().ok()?;
    (millis.is_finite() && millis >= 0.0)
        .then(|| Duration::try_from_secs_f64(millis / 1000.0).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        // The obsolete forms a server may still send: RFC 850 and asctime.
        assert_eq!(
            parse_retry_after("Sunday, 06-Nov-94 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun Nov  6 08:50:07 1994", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
        assert_eq!(
            parse_retry_after_ms("250"),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn statuses_classify() {
        assert!(ModelError::from_status(429, "x").retryable());
        assert!(ModelError::from_status(503, "x").retryable());
        assert!(ModelError::from_status(529, "x").retryable());
        assert!(ModelError::from_status(408, "x").retryable());
        assert!(!ModelError::from_status(400, "x").retryable());
        assert!(!ModelError::from_status(401, "x").retryable());
        assert!(!ModelError::from_status(404, "x").retryable());
        assert_eq!(
            ModelError::from_status(422, "x").kind(),
            ModelErrorKind::BadRequest
        );
    }
}
