//! Stored extension state follows the extension's revision: older state is
//! migrated on open; a failed migration or a newer stored version stops the
//! extension with a reason and leaves the rows as they were.

#![allow(clippy::unwrap_used)]

use crate::support::probe;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_core::extension::{Grants, HookError, Migration};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::*;

async fn open(path: &Path, probe: probe::Probe) -> shiitake_core::Agent {
    probe::agent(
        path,
        Arc::new(ScriptedModel::new(Script::new(vec![]))),
        probe,
        Grants::all(),
    )
    .await
}

fn double(value: &Value) -> Result<Option<Value>, HookError> {
    Ok(Some(json!(value.as_i64().unwrap_or(0) * 2)))
}

const DOUBLE: Migration = Migration {
    to_version: 2,
    name: "double counts, drop settled records",
    apply: |tx| {
        tx.rewrite("counts", double)?;
        tx.discard("settled");
        Ok(())
    },
};

const BROKEN: Migration = Migration {
    to_version: 3,
    name: "broken",
    apply: |_| Err(HookError::Failed("cannot read version 2".into())),
};

async fn added(agent: &shiitake_core::Agent, session: &SessionId) -> Option<ExtensionSlotV0> {
    let snapshot = agent
        .session(session.clone())
        .read(ReadOptions::default())
        .await
        .unwrap();
    snapshot.extensions.get(&probe::id()).cloned()
}

fn running_added(slot: Option<ExtensionSlotV0>) -> Value {
    match slot {
        Some(ExtensionSlotV0::Running { value }) => value["added"].clone(),
        other => panic!("expected a running slot, got {other:?}"),
    }
}

#[tokio::test]
async fn state_moves_forward_and_refuses_to_be_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");

    let agent = open(&path, probe::Probe::new()).await;
    let id = agent
        .create_session(RequestId::new("s").unwrap())
        .await
        .unwrap();
    let session = agent.session(id.clone());
    session
        .call_extension(&probe::id(), "add", json!({"by": 3}))
        .await
        .unwrap();
    let v1_revision = agent.list_extensions().await.unwrap()[0].revision.clone();
    agent.close().await.unwrap();

    let agent = open(&path, probe::Probe::versioned(2, vec![DOUBLE])).await;
    let status = &agent.list_extensions().await.unwrap()[0];
    assert_eq!(status.state, ExtensionRunState::Running);
    assert_ne!(
        status.revision, v1_revision,
        "a new schema version is a new revision"
    );
    assert_eq!(
        running_added(added(&agent, &id).await),
        json!(6),
        "migrated on open"
    );
    agent.close().await.unwrap();

    let agent = open(&path, probe::Probe::versioned(3, vec![DOUBLE, BROKEN])).await;
    let status = &agent.list_extensions().await.unwrap()[0];
    assert_eq!(
        status.state,
        ExtensionRunState::Stopped {
            reason: "migration `broken` failed: cannot read version 2".into()
        }
    );
    assert_eq!(
        added(&agent, &id).await,
        Some(ExtensionSlotV0::Stopped {
            reason: "migration `broken` failed: cannot read version 2".into()
        })
    );
    let resumed = agent.resume_extension(&probe::id()).await.unwrap_err();
    assert_eq!(
        resumed.code,
        ErrorCode::Conflict,
        "resuming cannot make unreadable state readable"
    );
    agent.close().await.unwrap();

    // The failed migration left version 2 state untouched.
    let agent = open(&path, probe::Probe::versioned(2, vec![DOUBLE])).await;
    assert_eq!(
        agent.list_extensions().await.unwrap()[0].state,
        ExtensionRunState::Running
    );
    assert_eq!(running_added(added(&agent, &id).await), json!(6));
    agent.close().await.unwrap();

    // An older build refuses state written by a newer one.
    let agent = open(&path, probe::Probe::new()).await;
    let ExtensionRunState::Stopped { reason } =
        agent.list_extensions().await.unwrap()[0].state.clone()
    else {
        panic!("an older build stops the extension");
    };
    assert_eq!(
        reason,
        "stored state is schema version 2, newer than this build's 1"
    );
}
