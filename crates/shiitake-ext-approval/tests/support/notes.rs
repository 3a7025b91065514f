//! The notes tools, shared by the tests and the crash harness
//! (`examples/approval_crash_harness.rs` includes this file): `notes.write` appends a
//! line to a file (the side effect that must happen at most once; not replay-safe),
//! `notes.read` reads them (replay-safe).

// Test support: a broken fixture should stop the test at once.
#![allow(clippy::expect_used, dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
    ToolError,
};

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
        OperationName::new("write").expect("the notes tools"),
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
        OperationName::new("read").expect("the notes tools"),
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
    let module = Module::new(ModulePath::new("notes").expect("the notes tools"), "Notes.")
        .with_operation(write)
        .expect("the notes tools")
        .with_operation(read)
        .expect("the notes tools");
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("notes"),
            vec![module],
        )))
        .await
        .expect("the notes tools");
    Arc::new(catalog)
}
