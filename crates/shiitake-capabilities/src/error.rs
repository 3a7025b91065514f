//! The errors of an operation call, split into "tell the model", "cancelled" and "fatal".

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::schema::ValidationError;

/// How an operation call failed, as the runner must treat it.
///
/// `ForModel` becomes a tool error result and the run goes on; `Cancelled`
/// means the run's token fired and the run settles as cancelled; `Fatal`
/// fails the run. Operation handlers return the same type.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Tell the model: a tool error result it can read and react to.
    #[error(transparent)]
    ForModel(#[from] ForModelError),
    /// The run's cancellation token fired before the call finished.
    #[error("the call was cancelled")]
    Cancelled,
    /// Something is broken beyond what the model can fix; the run fails.
    #[error(transparent)]
    Fatal(#[from] FatalError),
}

impl ToolError {
    /// An operation's own failure for the model (kind [`ForModelKind::Failed`]).
    pub fn for_model(message: impl Into<String>) -> Self {
        Self::ForModel(ForModelError::new(ForModelKind::Failed, message))
    }

    /// A fatal error with a message only.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::Fatal(FatalError::new(message))
    }

    /// A fatal error that keeps its cause for diagnostics.
    pub fn fatal_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Fatal(FatalError::with_source(message, source))
    }

    /// Whether this is the door's deadline error.
    pub fn is_deadline_exceeded(&self) -> bool {
        matches!(self, Self::ForModel(e) if e.kind == ForModelKind::DeadlineExceeded)
    }

    pub(crate) fn invalid_input(error: ValidationError) -> Self {
        let message = error.to_string();
        let details = serde_json::to_value(error.errors()).ok();
        Self::ForModel(ForModelError {
            kind: ForModelKind::InvalidInput,
            message,
            details,
        })
    }
}

/// Which kind of model-facing error; serialises as `snake_case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForModelKind {
    /// The model named a tool that is not in the catalog (any more).
    UnknownOperation,
    /// The input broke the operation's schema; `details` lists the errors.
    InvalidInput,
    /// The call did not finish before its deadline.
    DeadlineExceeded,
    /// The operation could not be reached (its source is gone or failed).
    Unavailable,
    /// The operation ran and reported a failure.
    Failed,
    /// A sandbox around the operation refused it (network, path, permission);
    /// the Session records a sandbox failure event besides the tool result.
    SandboxDenied,
}

impl fmt::Display for ForModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::UnknownOperation => "unknown_operation",
            Self::InvalidInput => "invalid_input",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::Unavailable => "unavailable",
            Self::Failed => "failed",
            Self::SandboxDenied => "sandbox_denied",
        })
    }
}

/// An error the model should see, as a tool error result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{kind}: {message}")]
pub struct ForModelError {
    /// What went wrong, for programs.
    pub kind: ForModelKind,
    /// What went wrong, for the model.
    pub message: String,
    /// Structured detail, e.g. the schema errors of an invalid input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ForModelError {
    /// An error of `kind` with a message.
    pub fn new(kind: ForModelKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            details: None,
        }
    }

    /// Adds structured detail.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The JSON body of the tool error result: `{ "error", "message", "details"? }`.
    pub fn to_result_json(&self) -> Value {
        let mut body = json!({ "error": self.kind, "message": self.message });
        if let (Some(details), Some(map)) = (&self.details, body.as_object_mut()) {
            map.insert("details".to_owned(), details.clone());
        }
        body
    }
}

/// An error that fails the run; it carries its cause but is never shown to the model.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FatalError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl FatalError {
    /// A fatal error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A fatal error with its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}
