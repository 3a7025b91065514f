//! Decoders for serialized answers, each with a typed error.

use std::cell::Cell;

use crate::command::{Accepted, CancelResult};
use crate::error::ShiitakeError;
use crate::frame::SessionFrame;
use crate::snapshot::SessionSnapshot;
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

thread_local! {
    /// Whether a length bound refused a value in the decode running on this thread.
    static TOO_LONG: Cell<bool> = const { Cell::new(false) };
}

/// Records a length refusal for the decode running on this thread.
pub(crate) fn note_too_long() {
    TOO_LONG.with(|flag| flag.set(true));
}

/// Runs one synchronous decode of untrusted input and turns its failure into the
/// canonical error: `too_large` when a length bound of this crate refused a value
/// during it, `invalid` otherwise. The decision comes from the bound itself, not from
/// the error text, which an input can imitate (an unknown variant is echoed back).
/// Servers use it for bodies, paths and queries.
pub fn decode_bounded<T, E: std::fmt::Display>(
    what: &str,
    decode: impl FnOnce() -> Result<T, E>,
) -> Result<T, ShiitakeError> {
    TOO_LONG.with(|flag| flag.set(false));
    let result = decode();
    let too_long = TOO_LONG.with(|flag| flag.replace(false));
    result.map_err(|error| {
        let message = format!("{what} does not decode: {error}");
        if too_long {
            ShiitakeError::too_large(message)
        } else {
            ShiitakeError::invalid(message)
        }
    })
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

/// Parses one serialized Session snapshot (`GET .../snapshot`, a `watch`'s first event).
pub fn parse_session_snapshot(value: &str) -> Result<SessionSnapshot, DecodeError> {
    parse("SessionSnapshot", value)
}

/// Parses one serialized frame (the data of one `events` or `watch` event).
pub fn parse_session_frame(value: &str) -> Result<SessionFrame, DecodeError> {
    parse("SessionFrame", value)
}
