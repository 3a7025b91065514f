//! Fixtures for the Home tests: two local-disk Computers the host attaches and detaches, a
//! real Agent on SQLite with the scripted model, and the tool results of a run.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use knapsack::{
    EntriesOutput, Files, FilesError, GlobInput, GrepInput, GrepOutput, ListInput, LocalFiles,
    ReadInput, ReadOutput, ReplaceRequest,
};
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, SourceId, StaticSource,
};
use shiitake_conformance::support::{new_session, send, terminal_of, transcript};
use shiitake_core::{Agent, AgentBuilder, AgentConfig, FixedModel, LocalSession};
use shiitake_ext_home::contract::*;
use shiitake_ext_home::{Attachment, ComputerList, add_home};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension};
use shiitake_protocol::message::{InputContent, Message};
use shiitake_protocol::{ReadOptions, SessionApi};
use shiitake_store_sqlite::{Durability, SqliteStore};
use tempfile::TempDir;

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A Files port without a patch engine: a local port that does not offer its engine.
pub struct NoPatch(pub LocalFiles);

#[async_trait]
impl Files for NoPatch {
    async fn read(&self, input: ReadInput) -> Result<ReadOutput, FilesError> {
        self.0.read(input).await
    }
    async fn list(&self, input: ListInput) -> Result<EntriesOutput, FilesError> {
        self.0.list(input).await
    }
    async fn glob(&self, input: GlobInput) -> Result<EntriesOutput, FilesError> {
        self.0.glob(input).await
    }
    async fn grep(&self, input: GrepInput) -> Result<GrepOutput, FilesError> {
        self.0.grep(input).await
    }
    async fn replace(&self, request: ReplaceRequest) -> Result<(), FilesError> {
        self.0.replace(request).await
    }
}

/// Two local-disk Computers, `work` and `notes`, each a directory with one file, and a
/// secret beside them that neither jail reaches.
pub struct World {
    pub dir: TempDir,
    pub list: Arc<ComputerList>,
    pub work: Attachment,
    pub notes: Attachment,
}

pub fn attachment(name: &str, id: &str, port: Arc<dyn Files>) -> Attachment {
    Attachment::new(
        AttachmentName::new(name).unwrap(),
        AttachmentId::new(id).unwrap(),
        port,
    )
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("work/src/lib.rs"), "fn work() {}\n");
        write(&dir.path().join("notes/todo.md"), "- buy milk\n");
        write(&dir.path().join("secret.txt"), "secret\n");
        let work = attachment(
            "work",
            "att-work",
            Arc::new(LocalFiles::new(dir.path().join("work")).unwrap()),
        );
        let notes = attachment(
            "notes",
            "att-notes",
            Arc::new(LocalFiles::new(dir.path().join("notes")).unwrap()),
        );
        Self {
            list: Arc::new(ComputerList::new(Vec::new())),
            dir,
            work,
            notes,
        }
    }

    pub fn path(&self, rest: &str) -> PathBuf {
        self.dir.path().join(rest)
    }

    /// `notes` again, over a port without a patch engine.
    pub fn notes_without_patch(&self) -> Attachment {
        attachment(
            "notes",
            "att-notes",
            Arc::new(NoPatch(LocalFiles::new(self.path("notes")).unwrap())),
        )
    }

    pub fn attach(&self, attachments: &[&Attachment]) {
        self.list
            .set(attachments.iter().map(|a| (*a).clone()).collect());
    }
}

/// A real Agent on SQLite in `dir` with Home over `world`'s list, the host tool, and the
/// scripted model.
pub async fn agent(world: &World, turns: Vec<Turn>) -> (Agent, Arc<ScriptedModel>) {
    let (builder, model) = builder(world, turns).await;
    (
        add_home(builder, world.list.clone())
            .unwrap()
            .open()
            .await
            .unwrap(),
        model,
    )
}

/// The builder `agent` uses, for tests that add more extensions.
pub async fn builder(world: &World, turns: Vec<Turn>) -> (AgentBuilder, Arc<ScriptedModel>) {
    let store = SqliteStore::open(&world.path("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let config = AgentConfig::new(Arc::new(FixedModel(model.clone())));
    let catalog = Catalog::new();
    let detach = Operation::from_fn(
        OperationName::new("detach_all").unwrap(),
        "Detaches every Computer.",
        {
            let list = world.list.clone();
            move |_input, _ctx| {
                let list = list.clone();
                async move {
                    list.set(Vec::new());
                    Ok(json!("detached"))
                }
            }
        },
    );
    let module = Module::new(ModulePath::new("host").unwrap(), "Host controls.")
        .with_operation(detach)
        .unwrap();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("host"),
            vec![module],
        )))
        .await
        .unwrap();
    let builder = Agent::builder(Arc::new(store), Arc::new(catalog), config);
    (builder, model)
}

/// One turn making these calls in order, then a closing text turn.
pub fn calls(calls: &[(&str, Value)]) -> Turn {
    Turn::new(
        calls
            .iter()
            .map(|(name, input)| Step::tool_call(*name, input.clone()))
            .collect(),
    )
}

/// What a tool call gave: its JSON output, or its error JSON (`{error, message, details?}`).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ok(Value),
    Err(Value),
}

impl Outcome {
    pub fn ok(&self) -> &Value {
        match self {
            Outcome::Ok(value) => value,
            Outcome::Err(error) => panic!("expected a result, got {error}"),
        }
    }

    pub fn err(&self) -> &Value {
        match self {
            Outcome::Err(error) => error,
            Outcome::Ok(value) => panic!("expected an error, got {value}"),
        }
    }

    pub fn kind(&self) -> &str {
        self.err()["details"]["kind"].as_str().unwrap_or("")
    }
}

/// Sends one prompt, waits for its terminal and returns the tool results of that run.
pub async fn run(session: &LocalSession, prompt: &str) -> Vec<Outcome> {
    let before = transcript(session).await.len();
    let command = send(session, prompt).await;
    terminal_of(session, &command).await;
    transcript(session)
        .await
        .into_iter()
        .skip(before)
        .filter_map(|message| match message {
            Message::ToolResult(result) if result.is_error => {
                Some(Outcome::Err(result.details.unwrap_or(Value::Null)))
            }
            Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .map(|c| match c {
                        InputContent::Text(t) => t.text.clone(),
                        InputContent::Image(_) => String::new(),
                    })
                    .collect();
                Some(Outcome::Ok(
                    serde_json::from_str(&text).unwrap_or(Value::String(text)),
                ))
            }
            _ => None,
        })
        .collect()
}

pub async fn session(agent: &Agent) -> LocalSession {
    new_session(agent).await
}

/// Home's view in `session` now.
pub async fn view(session: &LocalSession) -> HomeView {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match bind_session_extension::<_, HomeContract>(session)
        .view(&snapshot.extensions)
        .unwrap()
    {
        ExtensionViewV0::Running { value: Some(view) } => view,
        other => panic!("Home is not running: {other:?}"),
    }
}

/// The tool names a model request offered.
pub fn tool_names(model: &ScriptedModel, request: usize) -> Vec<String> {
    model.requests()[request]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

pub const FILE_TOOLS: [&str; 4] = ["files__read", "files__list", "files__glob", "files__grep"];

pub fn id(text: &str) -> AttachmentId {
    AttachmentId::new(text).unwrap()
}

pub fn name(text: &str) -> AttachmentName {
    AttachmentName::new(text).unwrap()
}
