//! The Hub composition on SQLite: the shared set, Home, Subagents and the roster's
//! tools run, and an Ask raised during work another Agent sent goes to a person.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::extension::Sender;
use shiitake_core::{AgentConfig, FixedModel};
use shiitake_ext_question::contract::QuestionContract;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::view;
use shiitake_protocol::*;
use shiitake_roster_hub::{
    AgentDirectory, DirectoryError, HubAgent, HubOptions, SoleAgentDirectory,
};
use shiitake_store_sqlite::{Durability, SqliteStore};

#[tokio::test]
async fn the_hub_sends_every_ask_to_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("hub.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call(
            "question__ask",
            json!({"questions": [{"header": "Database", "question": "Which one?",
                                  "options": [{"label": "SQLite"}]}]}),
        ),
        Turn::text("Asked."),
    ])));
    let name = AgentName::new("hub").unwrap();
    let directory = SoleAgentDirectory::new(name.clone(), "the Hub admits Agents elsewhere");
    assert!(
        directory.agent(&name).is_none(),
        "nothing is reachable before it opens"
    );
    let hub = HubAgent::open(HubOptions {
        name: name.clone(),
        store: Arc::new(store),
        tools: Arc::new(shiitake_capabilities::Catalog::new()),
        config: AgentConfig::new(Arc::new(FixedModel(model))),
        skills: None,
        computers: Arc::new(shiitake_ext_home::ComputerList::default()),
        directory: directory.clone(),
        approval: shiitake_ext_approval::policy::Policy::asks_before_edits(),
    })
    .await
    .unwrap();
    directory.set(hub.agent().clone());
    assert!(directory.agent(&name).is_some());
    assert!(directory.agent(&AgentName::new("other").unwrap()).is_none());
    assert_eq!(directory.names(), std::slice::from_ref(&name));
    let refused = directory.create(&AgentName::new("more").unwrap()).await;
    assert!(
        matches!(&refused, Err(DirectoryError::Refused { reason, .. }) if reason == "the Hub admits Agents elsewhere"),
        "{refused:?}"
    );
    let mut running: Vec<String> = hub
        .agent()
        .list_extensions()
        .await
        .unwrap()
        .into_iter()
        .map(|status| status.extension_id.as_str().to_owned())
        .collect();
    running.sort();
    assert_eq!(
        running,
        [
            "botanical-agent-almanac",
            "botanical-agent-home",
            "botanical-session-agents",
            "botanical-session-goal",
            "botanical-session-loop",
            "botanical-session-plan",
            "botanical-session-question",
            "botanical-session-subagents",
            "shiitake-session-approval",
        ]
    );
    let session = new_session(hub.agent()).await;
    let accepted = hub
        .agent()
        .session(session.session_id().clone())
        .send_from(
            Sender {
                agent: "other".into(),
                session_id: SessionId::new("other-session").unwrap(),
            },
            text("Build it"),
            SendOptions::default(),
        )
        .await
        .unwrap();
    // The Ask waits in-turn for a person (wait mode): the command stays running, so
    // read until the Ask shows.
    let _ = accepted;
    let mut asks = None;
    for _ in 0..150 {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if let Ok(ExtensionViewV0::Running { value: Some(found) }) =
            view::<QuestionContract>(&snapshot.extensions)
            && !found.asks.is_empty()
        {
            asks = Some(found);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let asks = asks.expect("the Ask shows within 15 s");
    assert_eq!(asks.asks.len(), 1);
    assert!(
        asks.asks[0].waiting_on.is_none(),
        "never waits on the sender"
    );
    assert!(asks.asks[0].needs_person());
    hub.close().await.unwrap();
}
