//! What the benches of `serve`'s operations share: an Agent whose runs are ten calls of
//! an instant scripted model (nine `files__read` calls of a tool that answers at once,
//! then a text answer), and one run in a new Session watched to its terminal.

#![allow(clippy::unwrap_used, dead_code)]

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_core::Agent;
use shiitake_model::{Recording, Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{
    AgentApi, PromptText, RequestId, SendOptions, SessionApi, SessionFrame, SubscribeOptions,
    TerminalOutcome,
};

/// Tool calls in one run.
pub const TOOL_CALLS: usize = 9;

/// The `files.read` tool: answers at once with a fixed small file.
pub async fn catalog() -> Arc<Catalog> {
    let read = Operation::from_fn(
        OperationName::new("read").unwrap(),
        "Reads a file.",
        |_input, _ctx| async move { Ok(json!({"path": "src/lib.rs", "text": "pub mod run;\n"})) },
    )
    .with_replay(Replay::Safe);
    let module = Module::new(ModulePath::new("files").unwrap(), "Files.")
        .with_operation(read)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("bench"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

/// Nine reads, then an answer, over and over: one run's ten calls in sequence.
pub fn model() -> ScriptedModel {
    let read = Turn::new(vec![Step::tool_call(
        "files__read",
        json!({"path": "src/lib.rs"}),
    )]);
    let mut turns = vec![read; TOOL_CALLS];
    turns.push(Turn::text("The file holds the crate root."));
    ScriptedModel::new(Script::new(turns).cycle(true)).with_recording(Recording::Off)
}

/// One run in a new Session, watched to its terminal.
pub async fn one_run(agent: &Agent, name: String) {
    let id = agent
        .create_session(RequestId::new(name).unwrap())
        .await
        .unwrap();
    let session = agent.session(id);
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let text = PromptText::new("Read src/lib.rs.".to_owned()).unwrap();
    let command_id = session
        .send(text, SendOptions::default())
        .await
        .unwrap()
        .command_id;
    while let Some(frame) = frames.next().await {
        if let SessionFrame::Update(update) = frame.unwrap()
            && let Some(terminal) = update
                .terminals
                .iter()
                .find(|terminal| terminal.command_id == command_id)
        {
            assert_eq!(terminal.outcome, TerminalOutcome::Completed);
            return;
        }
    }
    panic!("the stream ended before the terminal");
}
