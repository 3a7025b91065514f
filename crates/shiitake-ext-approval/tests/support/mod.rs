//! Approval's fixture on the extension test kit: a host tool with a side effect that
//! must happen at most once (`notes.write`, not replay-safe, appending a line to a file),
//! a read-only one (`notes.read`, replay-safe), the Agent with the approval extension,
//! and the waiting approvals of the projection.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
    ToolError,
};
use shiitake_ext_approval::contract::{ApprovalContract, ApprovalView};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_testkit::projection;
use shiitake_model::Turn;
use shiitake_protocol::SessionApi;

pub use shiitake_ext_testkit::tool_texts;

/// The file `notes.write` appends each note to, one line per run of the tool.
pub fn notes_file(dir: &Path) -> PathBuf {
    dir.join("notes.txt")
}

/// The lines written to `notes.txt`: how many times the side effect happened.
pub fn notes(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(notes_file(dir))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `notes.write {text}` appends `text` to `notes.txt` (synced, then answers `written`);
/// `notes.read` answers the lines. When `hold` is set, `notes.write` prints
/// `TOOL_RUNNING` after its write and never answers (a crash harness kills it there).
pub async fn catalog(dir: &Path, hold: bool) -> Arc<Catalog> {
    let file = notes_file(dir);
    let written = file.clone();
    let write = Operation::from_fn(
        OperationName::new("write").unwrap(),
        "Appends a note to the notes file.",
        move |input: Value, _ctx| {
            let file = written.clone();
            async move {
                let text = input["text"].as_str().unwrap_or_default().to_owned();
                let mut notes = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .map_err(|error| ToolError::fatal(error.to_string()))?;
                writeln!(notes, "{text}").map_err(|error| ToolError::fatal(error.to_string()))?;
                notes
                    .sync_all()
                    .map_err(|error| ToolError::fatal(error.to_string()))?;
                if hold {
                    println!("TOOL_RUNNING");
                    std::future::pending::<()>().await;
                }
                Ok(Value::from("written"))
            }
        },
    )
    .with_input_schema(json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    }))
    .with_replay(Replay::Unsafe);
    let read = Operation::from_fn(
        OperationName::new("read").unwrap(),
        "Reads the notes.",
        move |_input: Value, _ctx| {
            let file = file.clone();
            async move {
                Ok(Value::from(
                    std::fs::read_to_string(&file).unwrap_or_default(),
                ))
            }
        },
    )
    .with_replay(Replay::Safe);
    let module = Module::new(ModulePath::new("notes").unwrap(), "Notes.")
        .with_operation(write)
        .unwrap()
        .with_operation(read)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("notes"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

/// The tests' policy: ask before every tool not marked safe to repeat.
pub fn ask_policy() -> Policy {
    Policy::new(Ruling::Ask)
}

/// The model writes `text` with `notes.write`, then says `then`.
pub fn write_then(text: &str, then: &str) -> Vec<Turn> {
    vec![
        Turn::tool_call("notes__write", json!({"text": text})),
        Turn::text(then),
    ]
}

/// The waiting approvals of the Session, as the projection shows them.
pub async fn waiting(session: &impl SessionApi) -> Vec<ApprovalView> {
    projection::read::<ApprovalContract>(session)
        .await
        .unwrap_or_default()
        .approvals
}

/// Follows the Session until `count` approvals wait, and returns them.
pub async fn until_waiting(session: &impl SessionApi, count: usize) -> Vec<ApprovalView> {
    projection::until::<ApprovalContract>(session, |p| p.approvals.len() == count)
        .await
        .approvals
}
