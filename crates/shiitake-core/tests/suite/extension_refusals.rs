//! How a hook's refusals reach the caller: `NotFound` and `Conflict` keep their codes
//! beside `Invalid`, and an Agent-scope command that requires a Session
//! (`Tx::require_session`) commits nothing and answers `not_found` when it is missing.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_core::extension::kit::{ExtensionKit, KitExtension};
use shiitake_core::extension::{HookError, StateScope};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::extension::ExtensionContract;
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

enum Targets {}
impl ExtensionContract for Targets {
    const EXTENSION_ID: &'static str = "test-targets";
    type Projection = ();
}

/// Remembers a Session, which must exist.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    session_id: String,
}

/// Refuses as told, from a Session's route.
#[derive(Serialize, Deserialize)]
struct Refuse {
    how: String,
}

contract_commands!(Targets {
    Target => "target" in AgentScope -> usize,
    Refuse => "refuse" in SessionScope -> (),
});

fn targets() -> KitExtension<Targets> {
    ExtensionKit::<Targets>::new("targets")
        .unwrap()
        .agent_state()
        .session_state()
        .command(|tx, input: Target| {
            let session = SessionId::new(input.session_id.as_str())
                .map_err(|error| HookError::Invalid(error.to_string()))?;
            tx.require_session(&session)?;
            tx.put(StateScope::Agent, "targets", session.as_str(), &true)?;
            Ok(tx.scan::<bool>(StateScope::Agent, "targets")?.len())
        })
        .command(|tx, input: Refuse| match input.how.as_str() {
            "not_found" => Err(HookError::NotFound("no such thing".into())),
            "conflict" => Err(HookError::Conflict("too late".into())),
            _ => {
                // A Session's transaction cannot require a Session.
                let own = tx.session_id().cloned().unwrap();
                tx.require_session(&own)
            }
        })
        .build()
        .unwrap()
}

async fn open(path: &std::path::Path) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        crate::support::harness::config(model),
    )
    .kit_extension(targets())
    .open()
    .await
    .unwrap()
}

fn id() -> ExtensionId {
    ExtensionId::new(Targets::EXTENSION_ID).unwrap()
}

#[tokio::test]
async fn a_required_session_that_does_not_exist_refuses_the_command_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db")).await;
    let session = new_session(&agent).await;
    let deleted = new_session(&agent).await;
    agent.delete_session(deleted.session_id()).await.unwrap();
    let target = |sid: &SessionId| json!({"sessionId": sid.as_str()});

    for missing in [
        deleted.session_id().clone(),
        SessionId::new("ses_01J000000000000000000NEVER").unwrap(),
    ] {
        let refused = agent
            .call_extension(&id(), "target", target(&missing))
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound, "{refused}");
        assert!(refused.message.contains(missing.as_str()), "{refused}");
    }
    // Nothing of the refused commands was kept: the first accepted one counts 1.
    let kept = agent
        .call_extension(&id(), "target", target(session.session_id()))
        .await
        .unwrap();
    assert_eq!(kept, json!(1));
    agent.close().await.unwrap();
}

#[tokio::test]
async fn not_found_and_conflict_keep_their_codes_and_only_agent_commands_require_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let agent = open(&dir.path().join("agent.db")).await;
    let session = new_session(&agent).await;
    let extension = id();
    let refuse = |how: &str| session.call_extension(&extension, "refuse", json!({"how": how}));
    let cases = [
        ("not_found", ErrorCode::NotFound, "no such thing"),
        ("conflict", ErrorCode::Conflict, "too late"),
        ("require", ErrorCode::Invalid, "only an Agent-scope command"),
    ];
    for (how, code, says) in cases {
        let refused = refuse(how).await.unwrap_err();
        assert_eq!(refused.code, code, "{how}: {refused}");
        assert!(refused.message.contains(says), "{how}: {refused}");
    }
    let statuses = agent.list_extensions().await.unwrap();
    assert_eq!(
        statuses[0].state,
        ExtensionRunState::Running,
        "a refusal keeps the extension running"
    );
    agent.close().await.unwrap();
}
