//! Why a browser request failed (what the run sees), and why a tab's claim or
//! result was refused (what the tab sees).

use serde_json::json;
use shiitake_capabilities::{ForModelError, ForModelKind, NameError, ToolError};

/// Why `ui.discover` or `ui.execute` failed, or why a run could not borrow `ui`.
///
/// Each has a stable [`code`](UiError::code) that reaches the model in the tool
/// error's `details.code`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UiError {
    /// Another request of this Session is outstanding.
    #[error("the browser is busy with another request of this Session")]
    Busy,
    /// No tab of the App is connected to this Session (or the last one left before
    /// claiming): the command did not run.
    #[error("no browser is connected to this Session")]
    NotConnected,
    /// Tabs are connected but none claimed the request in time: it did not run.
    #[error("no browser claimed the request within {millis} ms")]
    Unclaimed {
        /// The claim timeout.
        millis: u64,
    },
    /// The tab that claimed the request disconnected before answering: the command
    /// may or may not have run.
    #[error("the browser disconnected after it claimed the request; the command may have run")]
    ExecutionIndeterminate,
    /// The bridge was closed.
    #[error("the browser bridge is closed")]
    Closed,
    /// The App's command threw.
    #[error("the App's command `{command}` failed: {message}")]
    CommandFailed {
        /// The command.
        command: String,
        /// What it said (at most 4 KiB).
        message: String,
    },
    /// The tab answered something the host cannot pass on (a `discover` list out of
    /// bounds, a command name too long).
    #[error("the browser answered with an invalid result: {0}")]
    InvalidResult(String),
    /// The `ui` module could not be built (a bug).
    #[error("the ui module could not be built: {0}")]
    Module(String),
}

impl From<NameError> for UiError {
    fn from(error: NameError) -> Self {
        Self::Module(error.to_string())
    }
}

impl UiError {
    /// The stable code: `browser_busy`, `browser_not_connected`,
    /// `browser_execution_indeterminate`, `browser_closed`, `browser_command_failed`,
    /// `browser_invalid_result` or `browser_internal`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Busy => "browser_busy",
            Self::NotConnected | Self::Unclaimed { .. } => "browser_not_connected",
            Self::ExecutionIndeterminate => "browser_execution_indeterminate",
            Self::Closed => "browser_closed",
            Self::CommandFailed { .. } => "browser_command_failed",
            Self::InvalidResult(_) => "browser_invalid_result",
            Self::Module(_) => "browser_internal",
        }
    }

    /// The tool error the model reads: `unavailable` when the command did not run
    /// (busy, not connected, closed), `failed` otherwise; `details.code` is [`Self::code`].
    pub fn to_tool_error(&self) -> ToolError {
        let kind = match self {
            Self::Busy | Self::NotConnected | Self::Unclaimed { .. } | Self::Closed => {
                ForModelKind::Unavailable
            }
            Self::ExecutionIndeterminate
            | Self::CommandFailed { .. }
            | Self::InvalidResult(_)
            | Self::Module(_) => ForModelKind::Failed,
        };
        ToolError::ForModel(
            ForModelError::new(kind, self.to_string()).with_details(json!({ "code": self.code() })),
        )
    }
}

/// Why a tab's claim or result was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The bridge was closed (HTTP 410).
    #[error("the browser bridge is closed")]
    Closed,
    /// The connection id names no open stream of this Session (HTTP 409).
    #[error("no open events stream of this Session has that connection id")]
    UnknownConnection,
    /// The request is not the outstanding one: unknown, settled or given up (HTTP 409).
    #[error("that request is not outstanding")]
    NotOutstanding,
    /// Another tab claimed it first (HTTP 409).
    #[error("another browser claimed that request")]
    ClaimedByAnother,
    /// A result for a request nobody claimed (HTTP 409).
    #[error("that request was not claimed; claim it before answering")]
    NotClaimed,
    /// The result itself is out of bounds; the run is told so and the request is
    /// settled (HTTP 400).
    #[error("the result is invalid")]
    InvalidResult,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_kinds_follow_whether_the_command_may_have_run() {
        let cases = [
            (UiError::Busy, "browser_busy", ForModelKind::Unavailable),
            (
                UiError::NotConnected,
                "browser_not_connected",
                ForModelKind::Unavailable,
            ),
            (
                UiError::Unclaimed { millis: 10 },
                "browser_not_connected",
                ForModelKind::Unavailable,
            ),
            (
                UiError::ExecutionIndeterminate,
                "browser_execution_indeterminate",
                ForModelKind::Failed,
            ),
            (UiError::Closed, "browser_closed", ForModelKind::Unavailable),
        ];
        for (error, code, kind) in cases {
            assert_eq!(error.code(), code);
            match error.to_tool_error() {
                ToolError::ForModel(e) => {
                    assert_eq!(e.kind, kind, "{error:?}");
                    assert_eq!(e.details, Some(json!({ "code": code })));
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
