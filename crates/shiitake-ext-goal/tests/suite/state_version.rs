//! State version 6 discards the disposable preview rows of versions 4 and 5 instead
//! of reading them: an Agent whose file holds a version-5 preview goal opens with the
//! goal extension running, no goal, and a new revision.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use crate::support::*;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_core::extension::{Extension, ExtensionDefinition, Grants, HookError, StateScope, Tx};
use shiitake_core::store::Store;
use shiitake_ext_goal::contract::{GoalStatus, STATE_VERSION};
use shiitake_ext_goal::extension_id;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// The goal extension as a version-5 preview build wrote it: another row shape.
struct Preview(ExtensionDefinition);

impl Preview {
    fn new() -> Self {
        Self(ExtensionDefinition {
            id: extension_id().unwrap(),
            namespace: "goal".into(),
            scopes: vec![StateScope::Session],
            schema_version: 5,
            migrations: Vec::new(),
            configuration: json!({}),
        })
    }
}

impl Extension for Preview {
    fn definition(&self) -> &ExtensionDefinition {
        &self.0
    }

    fn command(&self, tx: &mut Tx<'_>, _command: &str, input: Value) -> Result<Value, HookError> {
        // The preview kept a bare objective string and a free-text state.
        tx.put(
            StateScope::Session,
            "goal",
            "current",
            &json!({
                "text": input["text"], "state": "active", "turnsLeft": 3
            }),
        )?;
        tx.put(StateScope::Session, "preview_turns", "1", &json!("cmd_old"))?;
        Ok(Value::Null)
    }
}

async fn rows(store: &SqliteStore) -> Vec<(String, String)> {
    let id = extension_id().unwrap();
    store
        .extension_rows(Some(&id), None)
        .await
        .unwrap()
        .into_iter()
        .map(|stored| (stored.row.collection, stored.row.key))
        .collect()
}

#[tokio::test]
async fn version_6_discards_preview_rows_of_version_5() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let config = || support::config(model.clone(), shiitake_core::clock::ManualClock::new(START));

    let store = Arc::new(SqliteStore::open(&path, Durability::Normal).await.unwrap());
    let preview = Agent::builder(
        store.clone(),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config(),
    )
    .extension(Preview::new(), Grants::all())
    .open()
    .await
    .unwrap();
    let session = new_session(&preview).await;
    let session_id = session.session_id().clone();
    session
        .call_extension(
            &extension_id().unwrap(),
            "set",
            json!({"text": "Old preview goal"}),
        )
        .await
        .unwrap();
    let old_revision = preview.list_extensions().await.unwrap()[0].revision.clone();
    preview.close().await.unwrap();
    // Closing the Agent closed its store: read the file again.
    let store = Arc::new(SqliteStore::open(&path, Durability::Normal).await.unwrap());
    assert_eq!(
        rows(&store).await,
        vec![
            ("goal".to_owned(), "current".to_owned()),
            ("preview_turns".to_owned(), "1".to_owned())
        ]
    );

    let agent = Agent::builder(
        store.clone(),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config(),
    )
    .kit_extension(shiitake_ext_goal::extension().unwrap())
    .open()
    .await
    .unwrap();
    let status = agent.list_extensions().await.unwrap().remove(0);
    assert_eq!(
        status.state,
        ExtensionRunState::Running,
        "the old rows were not read"
    );
    assert_ne!(status.revision, old_revision);
    assert_eq!(
        rows(&store).await,
        vec![],
        "every preview row was discarded"
    );
    assert_eq!(
        store.extension_statuses().await.unwrap()[0].schema_version,
        STATE_VERSION
    );

    let session = agent.session(session_id);
    let p = projection(&session).await;
    assert_eq!(p.goal, None);
    let goal = set_goal(&session, "A version-6 goal").await;
    assert_eq!((goal.status, goal.revision), (GoalStatus::Live, 1));
    agent.close().await.unwrap();
}
