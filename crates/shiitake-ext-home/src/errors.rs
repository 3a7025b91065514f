//! A tool's failure as the model reads it: a message and a `kind` in its details, for
//! the file tools and the command tools alike.

use serde_json::json;
use shiitake_capabilities::{ForModelError, ForModelKind, ToolError};

/// A failed call of `kind`, in `message`'s words.
pub(crate) fn failed(kind: &str, message: String) -> ToolError {
    ToolError::ForModel(
        ForModelError::new(ForModelKind::Failed, message).with_details(json!({ "kind": kind })),
    )
}

#[cfg(unix)]
/// A command that could not run, as the model reads it.
pub(crate) fn exec_error(error: knapsack::exec::ExecError) -> ToolError {
    let kind = match &error {
        knapsack::exec::ExecError::Invalid { .. } => {
            return ToolError::ForModel(
                ForModelError::new(ForModelKind::InvalidInput, error.to_string())
                    .with_details(json!({"kind": "invalid_command"})),
            );
        }
        knapsack::exec::ExecError::OutsideRoot { .. } => "outside_root",
        knapsack::exec::ExecError::NotADirectory { .. } => "not_a_directory",
        knapsack::exec::ExecError::TooManyJobs { .. } => "too_many_jobs",
        knapsack::exec::ExecError::NoSuchJob { .. } => "no_such_job",
        knapsack::exec::ExecError::Spawn { .. } => "spawn_failed",
    };
    failed(kind, error.to_string())
}
