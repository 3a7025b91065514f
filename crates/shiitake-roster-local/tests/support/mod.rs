//! A Local directory in a temp dir with one gated scripted model per Agent, served
//! over real HTTP on 127.0.0.1, and clients of it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_core::clock::Clock;
use shiitake_core::{AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_subagents::contract::{FooterView, SubagentsContract};
use shiitake_model::{
    AssistantStream, Model, ModelContext, ModelError, ModelErrorKind, ModelInfo, ModelOptions,
    Script, ScriptedModel, Turn,
};
use shiitake_protocol::extension::{ExtensionViewV0, view};
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::*;
use shiitake_roster_local::{LocalDirectory, LocalOptions};
use shiitake_server::{ServerConfig, Token, directory_router};
use shiitake_store_sqlite::Durability;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A scripted model that takes one permit per call, so a test decides when each
/// model call happens.
pub struct Gated {
    pub script: ScriptedModel,
    pub permits: Semaphore,
}

impl Gated {
    pub fn new(turns: Vec<Turn>, open: usize) -> Arc<Self> {
        Arc::new(Self {
            script: ScriptedModel::new(Script::new(turns)),
            permits: Semaphore::new(open),
        })
    }

    /// Lets `calls` more model calls happen.
    pub fn release(&self, calls: usize) {
        self.permits.add_permits(calls);
    }
}

#[async_trait]
impl Model for Gated {
    fn describe(&self) -> ModelInfo {
        self.script.describe()
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        tokio::select! {
            () = cancel.cancelled() => {
                return Err(ModelError::new(ModelErrorKind::Aborted, "cancelled at the gate"));
            }
            permit = self.permits.acquire() => permit.unwrap().forget(),
        }
        self.script.stream(context, options, cancel).await
    }
}

pub fn name(value: &str) -> AgentName {
    AgentName::new(value).unwrap()
}

/// The directory served on a free port, with clients.
pub struct Served {
    pub directory: LocalDirectory,
    pub models: HashMap<String, Arc<Gated>>,
    pub url: String,
    pub token: String,
    pub server: tokio::task::JoinHandle<()>,
    pub dir: tempfile::TempDir,
}

impl Served {
    /// Opens Agents `A` (the default) and `B`, each with its own model, on `clock`.
    pub async fn start(models: Vec<(&str, Arc<Gated>)>, clock: Arc<dyn Clock>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let by_name: HashMap<String, Arc<Gated>> = models
            .into_iter()
            .map(|(name, model)| (name.to_owned(), model))
            .collect();
        let for_config = by_name.clone();
        let fallback = Gated::new(Vec::new(), 0);
        let mut options = LocalOptions::new(
            dir.path().join("data"),
            Arc::new(FixedModel(fallback.clone())),
        );
        options.durability = Durability::Normal;
        options.default_agent = name("A");
        options.config = Arc::new(move |agent: &AgentName| {
            let model = for_config
                .get(agent.as_str())
                .cloned()
                .unwrap_or_else(|| fallback.clone());
            let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
            config.retry = RetryPolicy {
                max_attempts: 1,
                initial_delay: Duration::from_millis(10),
                max_delay: Duration::from_millis(20),
            };
            config.clock = clock.clone();
            config
        });
        options.skills = Some(Arc::new(shiitake_ext_skills::SkillLibrary::default()));
        let directory = LocalDirectory::open(options).await.unwrap();
        for agent in by_name.keys().filter(|agent| agent.as_str() != "A") {
            directory.create(&name(agent)).await.unwrap();
        }
        let token = "test-token-0123456789abcdef".to_owned();
        let app = directory_router(
            Arc::new(directory.clone()),
            ServerConfig::new(Token::new(token.clone()).unwrap()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            directory,
            models: by_name,
            url,
            token,
            server,
            dir,
        }
    }

    /// A client of the directory's default routes.
    pub fn client(&self) -> RemoteAgent {
        RemoteAgent::new(ClientOptions::new(self.url.clone()).with_token(self.token.clone()))
            .unwrap()
    }

    /// A client of one Agent.
    pub fn remote(&self, agent: &str) -> RemoteAgent {
        self.client().agent(name(agent))
    }

    pub fn model(&self, agent: &str) -> &Gated {
        &self.models[agent]
    }

    pub async fn stop(self) {
        self.server.abort();
        self.directory.close().await;
    }
}

/// The footer of a snapshot, if it shows one.
pub fn footer(snapshot: &SessionSnapshot) -> Option<FooterView> {
    match view::<SubagentsContract>(&snapshot.extensions).unwrap() {
        ExtensionViewV0::Running { value } => value,
        other => panic!("subagents is not running: {other:?}"),
    }
}

/// Reads the Session (as a person looking at it would) until its footer satisfies `done`.
pub async fn footer_until(
    session: &impl SessionApi,
    done: impl Fn(&FooterView) -> bool,
) -> FooterView {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if let Some(footer) = footer(&snapshot).filter(|f| done(f)) {
            return footer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the footer never got there; last: {:?}",
            footer(&snapshot)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The inbox state of one Session.
pub async fn inbox_state(agent: &impl AgentApi, session_id: &SessionId) -> SessionInboxState {
    let page = agent.list_sessions(None).await.unwrap();
    page.sessions
        .into_iter()
        .find_map(|row| match row {
            SessionSummaryRow::Available {
                session_id: id,
                summary,
            } if &id == session_id => Some(summary.state),
            _ => None,
        })
        .unwrap()
}

/// The Agent's only Session (the child a send created).
pub async fn only_session(agent: &impl AgentApi) -> SessionId {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = agent.list_sessions(None).await.unwrap();
        if let Some(SessionSummaryRow::Available { session_id, .. }) = page.sessions.first() {
            return session_id.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Session appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text of every user message, oldest first.
pub fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::User(user) => match &user.content {
                UserContent::Text(text) => Some(text.clone()),
                other => Some(format!("{other:?}")),
            },
            _ => None,
        })
        .collect()
}

/// The database question the children ask.
pub fn ask_turn() -> Turn {
    Turn::tool_call(
        "question__ask",
        serde_json::json!({"questions": [{
            "header": "Database",
            "question": "Which database should the service use?",
            "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]
        }]}),
    )
}
