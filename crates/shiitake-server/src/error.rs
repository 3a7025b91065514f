//! How a [`ShiitakeError`] becomes an HTTP response, and back.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use shiitake_protocol::{ErrorCode, ShiitakeError};

/// The HTTP status that carries each error code; `docs/http.md` lists the same table.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict | ErrorCode::Stopped => StatusCode::CONFLICT,
        ErrorCode::Invalid => StatusCode::BAD_REQUEST,
        ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::NotGranted => StatusCode::FORBIDDEN,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A failed request: its body is the canonical `{"code", "message"}` JSON.
///
/// Handlers return `Result<_, HttpError>` so every failure, the Agent's or the
/// request's own, leaves in the one shape clients parse.
#[derive(Debug)]
pub struct HttpError(pub ShiitakeError);

impl From<ShiitakeError> for HttpError {
    fn from(error: ShiitakeError) -> Self {
        Self(error)
    }
}

impl From<shiitake_protocol::BoundError> for HttpError {
    fn from(error: shiitake_protocol::BoundError) -> Self {
        Self(error.into())
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.code);
        if status.is_server_error() {
            tracing::warn!(code = %self.0.code, message = %self.0.message, "request failed");
        }
        (status, Json(self.0)).into_response()
    }
}

/// The answer to a route that does not exist (after authentication).
pub(crate) async fn no_route() -> HttpError {
    HttpError(ShiitakeError::not_found("no such route; see docs/http.md"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The `| code | status | note |` rows of the Failures table in `docs/http.md`.
    fn documented() -> Vec<(String, u16)> {
        let doc = include_str!("../../../docs/http.md");
        let table = doc.split("## Failures").nth(1).unwrap();
        table
            .lines()
            .skip_while(|line| !line.starts_with("| code |"))
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let code = cells[1].trim_matches('`').to_owned();
                (code, cells[2].parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn every_code_has_the_status_docs_http_md_lists() {
        // A new code fails to compile here until it is added below and to the table.
        let all = |code: ErrorCode| match code {
            ErrorCode::NotFound
            | ErrorCode::Conflict
            | ErrorCode::Invalid
            | ErrorCode::TooLarge
            | ErrorCode::Unavailable
            | ErrorCode::Stopped
            | ErrorCode::NotGranted
            | ErrorCode::Internal => code,
        };
        let codes = [
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::Invalid,
            ErrorCode::TooLarge,
            ErrorCode::Unavailable,
            ErrorCode::Stopped,
            ErrorCode::NotGranted,
            ErrorCode::Internal,
        ]
        .map(all);
        let table = documented();
        assert_eq!(table.len(), codes.len(), "{table:?}");
        for code in codes {
            let row = table.iter().find(|(name, _)| name == code.as_str());
            let (_, status) = row.unwrap_or_else(|| panic!("{code} is not in docs/http.md"));
            assert_eq!(status_of(code).as_u16(), *status, "{code}");
        }
    }
}
