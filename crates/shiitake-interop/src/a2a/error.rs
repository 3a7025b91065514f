//! The errors of the A2A JSON-RPC binding: JSON-RPC's own codes and A2A's, each with
//! the `google.rpc.ErrorInfo` reason the official clients map to a typed exception.
//! They always travel with HTTP 200: a client reads the typed error only then.

use serde_json::{Value, json};
use shiitake_protocol::{ErrorCode, ShiitakeError};

/// What went wrong with one call, as the client is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum A2aError {
    /// The body is not JSON (-32700).
    #[error("Parse error: {0}")]
    Parse(String),
    /// The body is JSON but not one JSON-RPC request (-32600).
    #[error("Invalid request: {0}")]
    InvalidRequest(String),
    /// No such method (-32601).
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// The params do not fit the method (-32602).
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    /// The Agent failed (-32603).
    #[error("Internal error: {0}")]
    Internal(String),
    /// No such task here (-32001).
    #[error("Task not found: {0}")]
    TaskNotFound(String),
    /// The task has ended, or can no longer be stopped (-32002).
    #[error("Task cannot be canceled: {0}")]
    TaskNotCancelable(String),
    /// Push notifications are not offered (-32003).
    #[error("Push notifications are not supported")]
    PushNotificationNotSupported,
    /// A method or a use this server does not offer (-32004).
    #[error("Unsupported operation: {0}")]
    UnsupportedOperation(String),
    /// A part this agent cannot read (-32005).
    #[error("Content type not supported: {0}")]
    ContentTypeNotSupported(String),
    /// There is no extended card (-32007).
    #[error("There is no extended agent card")]
    ExtendedAgentCardNotConfigured,
    /// The client speaks another A2A version (-32009).
    #[error("A2A version {0:?} is not supported; this agent speaks 1.0")]
    VersionNotSupported(String),
}

impl A2aError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        match self {
            Self::Parse(_) => -32700,
            Self::InvalidRequest(_) => -32600,
            Self::MethodNotFound(_) => -32601,
            Self::InvalidParams(_) => -32602,
            Self::Internal(_) => -32603,
            Self::TaskNotFound(_) => -32001,
            Self::TaskNotCancelable(_) => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation(_) => -32004,
            Self::ContentTypeNotSupported(_) => -32005,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::VersionNotSupported(_) => -32009,
        }
    }

    /// The `ErrorInfo` reason of A2A's error model; none for a parse error.
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            Self::Parse(_) => return None,
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::MethodNotFound(_) => "METHOD_NOT_FOUND",
            Self::InvalidParams(_) => "INVALID_PARAMS",
            Self::Internal(_) => "INTERNAL_ERROR",
            Self::TaskNotFound(_) => "TASK_NOT_FOUND",
            Self::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
        })
    }

    /// The JSON-RPC `error` object.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code(), "message": self.to_string()});
        if let Some(reason) = self.reason() {
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }]);
        }
        error
    }

    /// An Agent's failure while acting on a named task: a Session or run it does not
    /// know is that task not found.
    pub fn from_task(error: ShiitakeError) -> Self {
        match error.code {
            ErrorCode::NotFound => Self::TaskNotFound(error.message),
            _ => Self::from_agent(error),
        }
    }

    /// An Agent's failure: what the caller got wrong is invalid params, the rest is
    /// internal.
    pub fn from_agent(error: ShiitakeError) -> Self {
        match error.code {
            ErrorCode::Invalid
            | ErrorCode::TooLarge
            | ErrorCode::Conflict
            | ErrorCode::NotFound => Self::InvalidParams(error.message),
            ErrorCode::Unavailable
            | ErrorCode::Stopped
            | ErrorCode::NotGranted
            | ErrorCode::Internal => Self::Internal(format!("{}: {}", error.code, error.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_the_code_and_reason_the_clients_map() {
        let cases = [
            (A2aError::Parse("x".into()), -32700, None),
            (
                A2aError::InvalidRequest("x".into()),
                -32600,
                Some("INVALID_REQUEST"),
            ),
            (
                A2aError::MethodNotFound("x".into()),
                -32601,
                Some("METHOD_NOT_FOUND"),
            ),
            (
                A2aError::InvalidParams("x".into()),
                -32602,
                Some("INVALID_PARAMS"),
            ),
            (
                A2aError::Internal("x".into()),
                -32603,
                Some("INTERNAL_ERROR"),
            ),
            (
                A2aError::TaskNotFound("x".into()),
                -32001,
                Some("TASK_NOT_FOUND"),
            ),
            (
                A2aError::TaskNotCancelable("x".into()),
                -32002,
                Some("TASK_NOT_CANCELABLE"),
            ),
            (
                A2aError::PushNotificationNotSupported,
                -32003,
                Some("PUSH_NOTIFICATION_NOT_SUPPORTED"),
            ),
            (
                A2aError::UnsupportedOperation("x".into()),
                -32004,
                Some("UNSUPPORTED_OPERATION"),
            ),
            (
                A2aError::ContentTypeNotSupported("x".into()),
                -32005,
                Some("CONTENT_TYPE_NOT_SUPPORTED"),
            ),
            (
                A2aError::ExtendedAgentCardNotConfigured,
                -32007,
                Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
            ),
            (
                A2aError::VersionNotSupported("0.3".into()),
                -32009,
                Some("VERSION_NOT_SUPPORTED"),
            ),
        ];
        for (error, code, reason) in cases {
            assert_eq!((error.code(), error.reason()), (code, reason), "{error}");
            let json = error.to_json();
            assert_eq!(json["code"], code);
            assert_eq!(json["data"][0]["reason"].as_str(), reason);
        }
    }

    #[test]
    fn agent_failures_map_to_what_the_caller_can_do() {
        let unknown = ShiitakeError::not_found("no Session ses_x");
        assert_eq!(
            A2aError::from_task(unknown.clone()),
            A2aError::TaskNotFound("no Session ses_x".into())
        );
        assert_eq!(A2aError::from_agent(unknown).code(), -32602);
        assert_eq!(
            A2aError::from_task(ShiitakeError::invalid("bad")).code(),
            -32602
        );
        assert_eq!(
            A2aError::from_task(ShiitakeError::too_large("big")).code(),
            -32602
        );
        assert_eq!(
            A2aError::from_task(ShiitakeError::unavailable("later")).code(),
            -32603
        );
        assert_eq!(
            A2aError::from_agent(ShiitakeError::internal("bug")).code(),
            -32603
        );
    }
}
