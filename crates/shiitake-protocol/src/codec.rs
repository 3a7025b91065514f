//! Decoders for serialized answers, each with a typed error.

use crate::command::{Accepted, CancelResult};
use crate::error::ShiitakeError;
use crate::summary::SessionSummaryPage;

/// Why a serialized value did not decode.
#[derive(Debug, thiserror::Error)]
#[error("malformed {what}: {source}")]
pub struct DecodeError {
    /// The type being decoded.
    pub what: &'static str,
    /// Where and why decoding failed.
    #[source]
    pub source: serde_json::Error,
}

impl DecodeError {
    /// Line of the failure in the input, from 1.
    pub fn line(&self) -> usize {
        self.source.line()
    }

    /// Column of the failure in the input, from 1.
    pub fn column(&self) -> usize {
        self.source.column()
    }
}

impl From<DecodeError> for ShiitakeError {
    fn from(error: DecodeError) -> Self {
        ShiitakeError::invalid(error.to_string())
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    what: &'static str,
    value: &str,
) -> Result<T, DecodeError> {
    serde_json::from_str(value).map_err(|source| DecodeError { what, source })
}

/// The phrase every length-bound refusal carries ("... more than the 128-byte limit").
pub const TOO_LONG_MARKER: &str = "-byte limit";

/// The canonical failure for input that did not decode: `too_large` when a length
/// bound refused a value (serde keeps only the message of a [`BoundError`](crate::BoundError)),
/// `invalid` otherwise. Servers use it for bodies, paths and queries.
pub fn decode_failure(what: &str, detail: &str) -> ShiitakeError {
    let message = format!("{what} does not decode: {detail}");
    if detail.contains(TOO_LONG_MARKER) {
        ShiitakeError::too_large(message)
    } else {
        ShiitakeError::invalid(message)
    }
}

/// Parses one serialized command acceptance.
pub fn parse_accepted(value: &str) -> Result<Accepted, DecodeError> {
    parse("Accepted", value)
}

/// Parses one serialized cancel outcome: accepted, or too late.
pub fn parse_cancel_result(value: &str) -> Result<CancelResult, DecodeError> {
    parse("CancelResult", value)
}

/// Parses one serialized canonical failure.
pub fn parse_shiitake_error(value: &str) -> Result<ShiitakeError, DecodeError> {
    parse("ShiitakeError", value)
}

/// Parses one serialized inbox page.
pub fn parse_session_summary_page(value: &str) -> Result<SessionSummaryPage, DecodeError> {
    parse("SessionSummaryPage", value)
}
