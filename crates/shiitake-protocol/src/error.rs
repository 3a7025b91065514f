//! The canonical failure every API and the HTTP surface return.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bounded::BoundError;

/// The closed set of failure kinds; a client branches on these, never on messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The Session, command, entry or extension does not exist.
    NotFound,
    /// The request contradicts stored state, such as a reused request id with a new payload.
    Conflict,
    /// The request is malformed or breaks a rule.
    Invalid,
    /// A value is larger than its documented bound.
    TooLarge,
    /// The Agent cannot serve the request now (storage down, shutting down); retry later.
    Unavailable,
    /// The extension or Agent addressed has stopped.
    Stopped,
    /// The caller (or extension) was not granted what it tried to use.
    NotGranted,
    /// A bug or an unexpected failure inside the Agent.
    Internal,
}

impl ErrorCode {
    /// The wire string, such as `not_found`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Invalid => "invalid",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Stopped => "stopped",
            ErrorCode::NotGranted => "not_granted",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with a code and a human-readable message: `{"code": "...", "message": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ShiitakeError {
    /// What kind of failure this is.
    pub code: ErrorCode,
    /// What happened, for a person.
    pub message: String,
}

impl ShiitakeError {
    /// A failure of the given kind.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Something addressed does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// The request contradicts stored state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// The request is malformed.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, message)
    }

    /// A value is over its bound.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }

    /// The Agent cannot serve this now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// The addressed extension or Agent has stopped.
    pub fn stopped(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Stopped, message)
    }

    /// The caller was not granted this.
    pub fn not_granted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotGranted, message)
    }

    /// An unexpected failure inside the Agent.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

impl From<BoundError> for ShiitakeError {
    fn from(error: BoundError) -> Self {
        let code = match error {
            BoundError::TooLong { .. } => ErrorCode::TooLarge,
            BoundError::Empty { .. }
            | BoundError::BadCharacter { .. }
            | BoundError::OutOfRange { .. } => ErrorCode::Invalid,
        };
        Self::new(code, error.to_string())
    }
}
