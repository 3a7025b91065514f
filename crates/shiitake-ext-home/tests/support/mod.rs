//! Home's fixtures on the extension test kit: two local-disk Computers the host
//! attaches and detaches, the Agent with Home and a host tool over them, and Home's view.

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
use shiitake_core::{Agent, LocalSession};
use shiitake_ext_home::contract::*;
use shiitake_ext_home::{Attachment, ComputerList, add_home};
use shiitake_ext_testkit::{TestAgent, TestAgentBuilder, projection};
use shiitake_model::{ScriptedModel, Step, Turn};
use tempfile::TempDir;

pub use shiitake_ext_testkit::{ToolOutput as Outcome, tool_names};

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

/// A real Agent on SQLite in `world`'s directory with Home over `world`'s list, the
/// host tool, and the scripted model.
pub async fn agent(world: &World, turns: Vec<Turn>) -> (Agent, Arc<ScriptedModel>) {
    agent_over(world, world.list.clone(), turns).await
}

/// The same Agent (on the same file, with the host tool over `world`'s list) with
/// Home over another list: the host after a restart.
pub async fn agent_over(
    world: &World,
    list: Arc<ComputerList>,
    turns: Vec<Turn>,
) -> (Agent, Arc<ScriptedModel>) {
    let kit = builder(world, turns)
        .await
        .compose(move |builder| add_home(builder, list))
        .open()
        .await;
    (kit.agent, kit.model)
}

/// The kit's builder `agent` uses (the file, the turns, the host tool), for tests that
/// compose Home with more extensions.
pub async fn builder(world: &World, turns: Vec<Turn>) -> TestAgentBuilder {
    TestAgent::builder()
        .file(world.path("agent.db"))
        .turns(turns)
        .tools(host_tools(world).await)
}

/// The host's tool `host__detach_all`, which detaches every Computer of `world`.
async fn host_tools(world: &World) -> Arc<Catalog> {
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
    Arc::new(catalog)
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

/// The kind of a failed tool call's error.
pub trait ErrorKind {
    fn kind(&self) -> &str;
}

impl ErrorKind for Outcome {
    fn kind(&self) -> &str {
        self.err()["details"]["kind"].as_str().unwrap_or("")
    }
}

/// Sends one prompt, waits for its terminal and returns the tool results of that run.
pub async fn run(session: &LocalSession, prompt: &str) -> Vec<Outcome> {
    shiitake_ext_testkit::run(session, prompt)
        .await
        .tool_results
}

pub async fn session(agent: &Agent) -> LocalSession {
    shiitake_conformance::support::new_session(agent).await
}

/// A person's `/home <name>` in `session`: the attachment `name` becomes Home.
pub async fn choose(session: &LocalSession, name: &str) -> HomeChoice {
    shiitake_protocol::extension::bind_session_extension::<_, HomeContract>(session)
        .call(&Choose { name: name.into() })
        .await
        .unwrap()
}

/// Home's view in `session` now.
pub async fn view(session: &LocalSession) -> HomeView {
    match projection::read::<HomeContract>(session).await {
        Some(view) => view,
        None => panic!("Home published no view"),
    }
}

pub const FILE_TOOLS: [&str; 4] = ["files__read", "files__list", "files__glob", "files__grep"];

pub fn id(text: &str) -> AttachmentId {
    AttachmentId::new(text).unwrap()
}

pub fn name(text: &str) -> AttachmentName {
    AttachmentName::new(text).unwrap()
}
