//! On the Hub, approvals go to a person, like Asks: a call the host's policy asks
//! about, made during work another Agent sent, waits for a person (the Session's inbox
//! state is `needs_you`) and runs once when the person allows it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::extension::Sender;
use shiitake_core::{AgentConfig, FixedModel};
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_testkit::{projection, side_effect};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;
use shiitake_roster_hub::{HubAgent, HubOptions, SoleAgentDirectory};
use shiitake_store_sqlite::{Durability, SqliteStore};

#[tokio::test]
async fn a_hub_approval_raised_during_sent_work_goes_to_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("hub.db"), Durability::Normal)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![
        Turn::tool_call("deploy__run", json!({"target": "staging"})),
        Turn::text("Deployed."),
    ])));
    let (tools, runs) = side_effect::counted("deploy", "run").await.unwrap();
    let name = AgentName::new("hub").unwrap();
    let directory = SoleAgentDirectory::new(name.clone(), "the Hub admits Agents elsewhere");
    let hub = HubAgent::open(HubOptions {
        name: name.clone(),
        store: Arc::new(store),
        tools,
        config: AgentConfig::new(Arc::new(FixedModel(model))),
        skills: None,
        computers: Arc::new(shiitake_ext_home::ComputerList::default()),
        directory: directory.clone(),
        approval: Policy::parse(Ruling::Allow, ["deploy__*=ask"]).unwrap(),
    })
    .await
    .unwrap();
    directory.set(hub.agent().clone());
    let session = new_session(hub.agent()).await;
    let accepted = hub
        .agent()
        .session(session.session_id().clone())
        .send_from(
            Sender {
                agent: "other".into(),
                session_id: SessionId::new("other-session").unwrap(),
            },
            text("Deploy to staging"),
            SendOptions::default(),
        )
        .await
        .unwrap();
    let waiting = projection::until::<ApprovalContract>(&session, |p| !p.approvals.is_empty())
        .await
        .approvals;
    assert_eq!(waiting.len(), 1, "one waits");
    assert_eq!(
        waiting[0].why,
        "the host asks before deploy__run (deploy__*=ask)"
    );
    let summary = hub
        .agent()
        .session_summary(session.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        summary.state,
        SessionInboxState::NeedsYou,
        "a person is asked"
    );
    assert_eq!(runs.count(), 0);
    bind_session_extension::<_, ApprovalContract>(&session)
        .call(&AnswerApproval {
            approval_id: waiting[0].approval_id.clone(),
            request_id: "hub-1".into(),
            decision: Decision::AllowOnce,
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        terminal_of(&session, &accepted.command_id).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(runs.count(), 1);
    hub.close().await.unwrap();
}
