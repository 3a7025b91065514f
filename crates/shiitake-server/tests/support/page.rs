//! What the web page tests share: an Agent with the question and plan extensions,
//! Sessions with a prompt sent, and driving the page in Chromium.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use shiitake_chromium::{Page, eval, wait_for};
use shiitake_core::{Agent, AgentBuilder, AgentConfig, FixedModel};
use shiitake_ext_question::QuestionConfig;
use shiitake_model::ScriptedModel;
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::{AgentApi, PromptText, RequestId, SendOptions, SessionApi};
use shiitake_server::{ServerConfig, Token, WebLogin, router};
use shiitake_store_sqlite::{Durability, SqliteStore};

use super::{Server, TOKEN};

/// How long the page may take to show something.
pub const SHOWN: Duration = Duration::from_secs(20);

/// A new Session of `agent` (created under `request`) with `text` sent to it.
pub async fn session_with_prompt(
    agent: &Agent,
    request: &str,
    text: &str,
) -> shiitake_protocol::SessionId {
    let id = agent
        .create_session(RequestId::new(request).unwrap())
        .await
        .unwrap();
    agent
        .session(id.clone())
        .send(PromptText::new(text).unwrap(), SendOptions::default())
        .await
        .unwrap();
    id
}

/// An Agent on a temporary SQLite file with the question and plan extensions.
pub async fn agent(model: Arc<ScriptedModel>) -> (Arc<Agent>, tempfile::TempDir) {
    agent_with(model, |agent| {
        agent
            .kit_extension(shiitake_ext_question::extension(QuestionConfig::default()).unwrap())
            .kit_extension(shiitake_ext_plan::extension().unwrap())
    })
    .await
}

/// An Agent on a temporary SQLite file with what `extensions` registers.
pub async fn agent_with(
    model: Arc<ScriptedModel>,
    extensions: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> (Arc<Agent>, tempfile::TempDir) {
    agent_with_tools(
        model,
        Arc::new(shiitake_capabilities::Catalog::new()),
        extensions,
    )
    .await
}

/// [`agent_with`], its runs offered the tools of `tools`.
pub async fn agent_with_tools(
    model: Arc<ScriptedModel>,
    tools: Arc<shiitake_capabilities::Catalog>,
    extensions: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> (Arc<Agent>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let builder = Agent::builder(
        Arc::new(store),
        tools,
        AgentConfig::new(Arc::new(FixedModel(model))),
    );
    let agent = extensions(builder).open().await.unwrap();
    (Arc::new(agent), dir)
}

/// `agent` served with the web page mounted as `shiitake serve` mounts it, and the
/// login that mints its links.
pub async fn served_page(agent: Arc<Agent>) -> (Server, WebLogin) {
    let login = WebLogin::default();
    let config = ServerConfig::new(Token::new(TOKEN).unwrap()).with_web(login.clone());
    let server = Server::start(router(agent, config), "127.0.0.1:0".parse().unwrap()).await;
    (server, login)
}

/// Runs `script` in the page (a statement or an expression; its value is dropped).
pub async fn run(page: &Page, script: &str) {
    let _: bool = eval(page, &format!("(() => {{ {script}; return true; }})()"))
        .await
        .unwrap();
}

pub async fn shown(page: &Page, condition: &str) {
    if let Err(error) = wait_for(page, condition, SHOWN).await {
        let body: String = eval(page, "document.querySelectorAll('details').forEach((d) => d.open = true), document.body.innerText")
            .await
            .unwrap_or_default();
        panic!("{error}\n--- the page shows ---\n{body}");
    }
}

/// Types `text` into the prompt box and clicks the button `id`.
pub async fn type_and_click(page: &Page, text: &str, id: &str) {
    let text = serde_json::to_string(text).unwrap();
    run(
        page,
        &format!("document.getElementById('prompt').value = {text}; document.getElementById('{id}').click()"),
    )
    .await;
}

pub fn user_texts(model: &ScriptedModel) -> Vec<Vec<String>> {
    model
        .requests()
        .iter()
        .map(|context| {
            context
                .messages
                .iter()
                .filter_map(|message| match message {
                    Message::User(user) => Some(match &user.content {
                        UserContent::Text(text) => text.clone(),
                        UserContent::Blocks(blocks) => format!("{blocks:?}"),
                    }),
                    _ => None,
                })
                .collect()
        })
        .collect()
}
