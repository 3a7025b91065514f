//! On the Hub, approvals go to a person, like Asks: a call the host's policy asks
//! about, made during work another Agent sent, waits for a person (the Session's inbox
//! state is `needs_you`) and runs once when the person allows it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_core::extension::Sender;
use shiitake_core::{AgentConfig, FixedModel};
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension, view};
use shiitake_protocol::*;
use shiitake_roster_hub::{HubAgent, HubOptions, SoleAgentDirectory};
use shiitake_store_sqlite::{Durability, SqliteStore};

/// `deploy.run`: a tool with a side effect (counted), not safe to repeat.
async fn tools(runs: Arc<AtomicUsize>) -> Arc<Catalog> {
    let run = Operation::from_fn(
        OperationName::new("run").unwrap(),
        "Deploys.",
        move |_input: Value, _ctx| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(Value::from("deployed"))
            }
        },
    )
    .with_replay(Replay::Unsafe);
    let module = Module::new(ModulePath::new("deploy").unwrap(), "Deploys.")
        .with_operation(run)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("deploy"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

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
    let runs = Arc::new(AtomicUsize::new(0));
    let name = AgentName::new("hub").unwrap();
    let directory = SoleAgentDirectory::new(name.clone(), "the Hub admits Agents elsewhere");
    let hub = HubAgent::open(HubOptions {
        name: name.clone(),
        store: Arc::new(store),
        tools: tools(runs.clone()).await,
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
    let mut waiting = Vec::new();
    for _ in 0..150 {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if let Ok(ExtensionViewV0::Running { value: Some(found) }) =
            view::<ApprovalContract>(&snapshot.extensions)
            && !found.approvals.is_empty()
        {
            waiting = found.approvals;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(waiting.len(), 1, "the approval shows within 15 s");
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
    assert_eq!(runs.load(Ordering::SeqCst), 0);
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
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    hub.close().await.unwrap();
}
