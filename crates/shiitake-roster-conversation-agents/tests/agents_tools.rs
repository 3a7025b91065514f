//! The `agents.*` tools on in-process Agents over a test directory: a send waits for
//! the reply and is recorded, creation goes through the directory's admission, and
//! answering with no question waiting tells the model so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::clock::SystemClock;
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_ext_subagents::{SubagentsExtension, subagents_grants};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::message::{InputContent, Message};
use shiitake_protocol::*;
use shiitake_roster_conversation_agents::contract::{ChildRecord, EXTENSION_ID, Via};
use shiitake_roster_conversation_agents::{
    AgentDirectory, ConversationAgents, DirectoryError, SharedSet, add_shared_set, agents_grants,
};
use shiitake_store_sqlite::{Durability, SqliteStore};

#[derive(Default)]
struct TestDirectory {
    agents: RwLock<BTreeMap<AgentName, Agent>>,
    refuse: bool,
}

#[async_trait]
impl AgentDirectory for TestDirectory {
    fn agent(&self, name: &AgentName) -> Option<Agent> {
        self.agents.read().unwrap().get(name).cloned()
    }

    fn names(&self) -> Vec<AgentName> {
        self.agents.read().unwrap().keys().cloned().collect()
    }

    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        if self.refuse {
            return Err(DirectoryError::Refused {
                name: name.clone(),
                reason: "this host creates no Agents".into(),
            });
        }
        Err(DirectoryError::Exists(name.clone()))
    }
}

fn name(value: &str) -> AgentName {
    AgentName::new(value).unwrap()
}

async fn open(
    dir: &tempfile::TempDir,
    me: &str,
    turns: Vec<Turn>,
    directory: Arc<TestDirectory>,
) -> (Agent, Vec<tokio::task::JoinHandle<()>>) {
    let store = SqliteStore::open(&dir.path().join(format!("{me}.db")), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 1,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    };
    let roster = ConversationAgents::new(name(me), directory.clone()).unwrap();
    let subagents =
        SubagentsExtension::new(Arc::new(roster.source()), Arc::new(SystemClock)).unwrap();
    roster.notify(subagents.handle());
    let refresher = subagents.refresher();
    let builder = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    );
    let builder = add_shared_set(
        builder,
        &SharedSet {
            waits_on_sender: true,
            skills: None,
        },
    )
    .unwrap();
    let agent = builder
        .extension(subagents, subagents_grants())
        .extension(roster.extension().unwrap(), agents_grants())
        .open()
        .await
        .unwrap();
    directory
        .agents
        .write()
        .unwrap()
        .insert(name(me), agent.clone());
    let mut tasks = vec![refresher.spawn(agent.clone())];
    tasks.extend(roster.start(agent.clone()));
    (agent, tasks)
}

fn tool_values(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        InputContent::Text(text) => Some(text.text.clone()),
                        _ => None,
                    })
                    .collect();
                Some(serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            _ => None,
        })
        .collect()
}

async fn records(agent: &Agent, session: &SessionId) -> Vec<ChildRecord> {
    let id = ExtensionId::new(EXTENSION_ID).unwrap();
    let rows = agent
        .session(session.clone())
        .host_transaction(&id, |tx| {
            Ok(json!(shiitake_roster_conversation_agents::record::load(
                tx
            )?))
        })
        .await
        .unwrap();
    serde_json::from_value(rows).unwrap()
}

#[tokio::test]
async fn a_send_waits_for_the_reply_and_is_recorded_and_continued() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory::default());
    let (a, _a_tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call("agents__send", json!({"agent": "B", "text": "Say hello."})),
            Turn::tool_call("agents__send", json!({"agent": "B", "text": "Again."})),
            Turn::text("Done."),
        ],
        directory.clone(),
    )
    .await;
    let (b, _b_tasks) = open(
        &dir,
        "B",
        vec![Turn::text("Hello from B."), Turn::text("Hello again.")],
        directory.clone(),
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Talk to B.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["status"], "replied", "{results:?}");
    assert_eq!(results[0]["reply"], "Hello from B.");
    assert_eq!(results[1]["reply"], "Hello again.");
    assert_eq!(
        results[0]["sessionId"], results[1]["sessionId"],
        "a later send continues the Session"
    );
    let child = SessionId::new(results[0]["sessionId"].as_str().unwrap()).unwrap();
    let rows = records(&a, session.session_id()).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].agent.as_str(),
            rows[0].session_id.as_str(),
            rows[0].via
        ),
        ("B", child.as_str(), Via::Sent)
    );
    assert_eq!(
        rows[0].last_command_id.as_deref(),
        results[1]["commandId"].as_str()
    );
    let b_texts: Vec<String> = transcript(&b.session(child))
        .await
        .iter()
        .filter_map(|m| match m {
            Message::User(user) => match &user.content {
                shiitake_protocol::message::UserContent::Text(text) => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(b_texts, ["Say hello.", "Again."]);
}

#[tokio::test]
async fn tool_errors_tell_the_model_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory {
        refuse: true,
        ..TestDirectory::default()
    });
    let (a, _tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call("agents__send", json!({"agent": "Nobody", "text": "Hi"})),
            Turn::tool_call(
                "agents__answer",
                json!({"agent": "A", "answers": [{"text": "x"}]}),
            ),
            Turn::tool_call("agents__create", json!({"name": "Helper"})),
            Turn::tool_call("agents__send", json!({"agent": "bad name", "text": "Hi"})),
            Turn::text("Done."),
        ],
        directory,
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Try things.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    assert!(
        text(&results[0]).contains("no Agent named Nobody; the Agents here are: A"),
        "{results:?}"
    );
    assert!(
        text(&results[1]).contains("no question of A waits on you"),
        "{results:?}"
    );
    assert!(
        text(&results[2])
            .contains("creating Agent Helper is not allowed: this host creates no Agents"),
        "{results:?}"
    );
    assert!(text(&results[3]).contains("Agent name"), "{results:?}");
}

/// The sub-agent commands the Session's goal holds as live (`GoalProjection.waitingOn`).
async fn goal_waiting_on(session: &impl SessionApi) -> Vec<String> {
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    match shiitake_protocol::extension::view::<shiitake_ext_goal::contract::GoalContract>(
        &snapshot.extensions,
    )
    .unwrap()
    {
        shiitake_protocol::extension::ExtensionViewV0::Running { value: Some(goal) } => goal
            .waiting_on
            .into_iter()
            .map(|command| format!("{}:{}", command.agent, command.command_id))
            .collect(),
        other => panic!("goal runs in the shared set: {other:?}"),
    }
}

#[tokio::test]
async fn the_senders_goal_holds_a_sent_command_live_until_the_child_replies() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory::default());
    let (a, _a_tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call(
                "agents__send",
                json!({"agent": "B", "text": "Build it.", "mode": "continue"}),
            ),
            Turn::text("Sent."),
            Turn::text("Noted B's reply."),
        ],
        directory.clone(),
    )
    .await;
    let (_b, _b_tasks) = open(
        &dir,
        "B",
        vec![Turn::new(vec![
            shiitake_model::Step::DelayMs(1_500),
            shiitake_model::Step::Text("Built.".into()),
        ])],
        directory.clone(),
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Have B build it.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    assert_eq!(results[0]["status"], "working", "{results:?}");
    let command = results[0]["commandId"].as_str().unwrap();
    assert_eq!(
        goal_waiting_on(&session).await,
        [format!("B:{command}")],
        "the goal knows the work it sent is live"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !goal_waiting_on(&session).await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply never reached the goal"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reply reaches the sender too (as a message of its own).
    loop {
        let texts: Vec<String> = transcript(&session)
            .await
            .iter()
            .filter_map(|m| match m {
                Message::User(user) => match &user.content {
                    shiitake_protocol::message::UserContent::Text(text) => Some(text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        if texts.iter().any(|text| text.starts_with("Agent B replied")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply never reached A: {texts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
