//! Extensions whose projection shows what they read elsewhere: they learn when a
//! client reads a Session (`on_observed`), and the host publishes their slots again
//! without a change (`LocalSession::republish_extensions`). One Session's inbox row
//! is read without paging (`Agent::session_summary`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::harness;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_core::extension::{Extension, ExtensionDefinition, Grant, Grants, StateView};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// Shows a number kept in memory (as if read from elsewhere) and records who was observed.
struct Mirror {
    definition: ExtensionDefinition,
    shown: Arc<AtomicU64>,
    observed: Arc<Mutex<Vec<SessionId>>>,
    panics: bool,
}

impl Extension for Mirror {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn projection(&self, _state: &StateView<'_>) -> Option<Value> {
        Some(json!({"shown": self.shown.load(Ordering::SeqCst)}))
    }

    fn on_observed(&self, session_id: &SessionId) {
        self.observed.lock().unwrap().push(session_id.clone());
        assert!(!self.panics, "a mirror that panics when observed");
    }
}

struct Setup {
    agent: Agent,
    shown: Arc<AtomicU64>,
    observed: Arc<Mutex<Vec<SessionId>>>,
    _dir: tempfile::TempDir,
}

fn id() -> ExtensionId {
    ExtensionId::new("example-mirror").unwrap()
}

async fn setup(grants: Grants, panics: bool, turns: Vec<Turn>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let shown = Arc::new(AtomicU64::new(0));
    let observed = Arc::new(Mutex::new(Vec::new()));
    let mirror = Mirror {
        definition: ExtensionDefinition {
            id: id(),
            namespace: "mirror".into(),
            scopes: Vec::new(),
            schema_version: 1,
            migrations: Vec::new(),
            configuration: json!({}),
        },
        shown: shown.clone(),
        observed: observed.clone(),
        panics,
    };
    let store = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        harness::config(model),
    )
    .extension(mirror, grants)
    .open()
    .await
    .unwrap();
    Setup {
        agent,
        shown,
        observed,
        _dir: dir,
    }
}

fn shown(slots: &SessionExtensionSlots) -> Option<u64> {
    match slots.get(&id()) {
        Some(ExtensionSlotV0::Running { value }) => value["shown"].as_u64(),
        _ => None,
    }
}

#[tokio::test]
async fn every_kind_of_read_tells_the_extension_which_session_was_observed() {
    let setup = setup(Grants::none().with(Grant::Projection), false, vec![]).await;
    let session = new_session(&setup.agent).await;
    let other = new_session(&setup.agent).await;
    assert!(
        setup.observed.lock().unwrap().is_empty(),
        "creating reads nothing"
    );
    session.read(ReadOptions::default()).await.unwrap();
    let watch = session.watch(WatchOptions::default()).await.unwrap();
    let frames = other.subscribe(SubscribeOptions::default()).await.unwrap();
    assert_eq!(
        *setup.observed.lock().unwrap(),
        vec![
            session.session_id().clone(),
            session.session_id().clone(),
            other.session_id().clone()
        ]
    );
    drop((watch, frames));
}

#[tokio::test]
async fn without_the_projection_grant_nothing_is_observed() {
    let setup = setup(Grants::all().without(Grant::Projection), false, vec![]).await;
    let session = new_session(&setup.agent).await;
    session.read(ReadOptions::default()).await.unwrap();
    assert!(setup.observed.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_panic_while_observed_never_fails_the_read() {
    let setup = setup(Grants::none().with(Grant::Projection), true, vec![]).await;
    let session = new_session(&setup.agent).await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        shown(&snapshot.extensions),
        Some(0),
        "its slot is still shown"
    );
    assert_eq!(setup.observed.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn republishing_shows_watchers_the_slots_as_they_read_now() {
    let setup = setup(Grants::none().with(Grant::Projection), false, vec![]).await;
    let session = new_session(&setup.agent).await;
    let session = setup.agent.session(session.session_id().clone());
    setup.shown.store(1, Ordering::SeqCst);
    assert!(
        !session.republish_extensions().await.unwrap(),
        "nobody watches: nothing is published"
    );
    let watch = session.watch(WatchOptions::default()).await.unwrap();
    assert_eq!(shown(&watch.snapshot.extensions), Some(1));
    let mut changes = watch.changes;
    setup.shown.store(2, Ordering::SeqCst);
    assert!(session.republish_extensions().await.unwrap());
    let frame = tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let SessionFrame::Update(update) = frame else {
        panic!("an update, got {frame:?}")
    };
    assert_eq!(shown(&update.extensions), Some(2));
    assert!(update.messages.is_empty() && update.terminals.is_empty());
    assert_eq!(
        update.cursor, watch.snapshot.cursor,
        "nothing was committed, so the cursor stays"
    );
    let again = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(again.cursor, watch.snapshot.cursor);
}

#[tokio::test]
async fn republishing_an_unknown_session_is_not_found() {
    let setup = setup(Grants::none().with(Grant::Projection), false, vec![]).await;
    let missing = setup
        .agent
        .session(SessionId::new("no-such-session").unwrap());
    let error = missing.republish_extensions().await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn one_sessions_summary_is_its_inbox_row() {
    let setup = setup(Grants::none(), false, vec![Turn::text("Hello.")]).await;
    assert_eq!(
        setup
            .agent
            .session_summary(&SessionId::new("no-such-session").unwrap())
            .await
            .unwrap(),
        None
    );
    let session = new_session(&setup.agent).await;
    let fresh = setup
        .agent
        .session_summary(session.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fresh.state, SessionInboxState::Done);
    let accepted = session
        .send(PromptText::new("Hi").unwrap(), SendOptions::default())
        .await
        .unwrap();
    terminal_of(&session, &accepted.command_id).await;
    let summary = setup
        .agent
        .session_summary(session.session_id())
        .await
        .unwrap()
        .unwrap();
    let page = setup.agent.list_sessions(None).await.unwrap();
    let listed = page.sessions.into_iter().find_map(|row| match row {
        SessionSummaryRow::Available {
            session_id,
            summary,
        } if &session_id == session.session_id() => Some(summary),
        _ => None,
    });
    assert_eq!(Some(summary.clone()), listed);
    assert_eq!(summary.state, SessionInboxState::Done);
    assert!(summary.settled_at.is_some());
}
