//! Loading a Session reads its open commands from a watermark in the header
//! (`open_from`, the lowest open command id) instead of an index of open
//! commands: the watermark follows every commit, and a database written before
//! it existed gets it from the migration that added it.

#![allow(clippy::unwrap_used)]

use crate::support::harness;
use crate::support::schema::{connect, migrated_to};

use std::path::Path;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_core::store::Store;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

/// The header's watermark, read straight from the file.
async fn open_from(path: &Path, session: &SessionId) -> Option<String> {
    let mut conn = connect(path).await;
    sqlx::query_scalar("SELECT open_from FROM sessions WHERE id = ?")
        .bind(session.as_str())
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_watermark_is_the_lowest_open_command_and_clears_when_all_settle() {
    let gate = Turn::new(vec![Step::DelayMs(400), Step::Text("second".into())]);
    let fixture = harness::Local::start(Script::new(vec![
        Turn::text("first"),
        gate,
        Turn::text("third"),
    ]))
    .await;
    let path = fixture.dir.path().join("agent.db");
    let session = new_session(fixture.agent()).await;
    let id = session.session_id().clone();
    assert_eq!(
        open_from(&path, &id).await,
        None,
        "a new Session has no open work"
    );

    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    assert_eq!(open_from(&path, &id).await, None, "p1 settled");

    let running = send(&session, "p2").await;
    let waiting = send(&session, "p3").await;
    let lowest = running.clone().min(waiting.clone());
    assert_eq!(
        open_from(&path, &id).await.as_deref(),
        Some(lowest.as_str()),
        "p2 runs and p3 waits: the watermark is the lower of their ids"
    );

    terminal_of(&session, &waiting).await;
    assert_eq!(open_from(&path, &id).await, None, "everything settled");
}

#[tokio::test]
async fn a_database_from_before_the_watermark_gets_it_and_resumes_its_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    // The schema as migrations 1 to 4 left it, with one settled prompt and two open ones.
    let mut conn = migrated_to(&path, 4).await;
    sqlx::query(
        "INSERT INTO sessions (id, created_at, last_activity_at, title, head_sequence, \
         inbox_state, inbox_rank) VALUES ('ses_old', 1, 1, 'old', 5, 'running', 1)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    for (id, sequence, state, text) in [
        ("cmd_1", 1, "settled", "p1"),
        ("cmd_2", 4, "pending", "p2"),
        ("cmd_3", 5, "pending", "p3"),
    ] {
        let payload = format!(
            r#"{{"type":"prompt","requestId":"req_{id}","text":"{text}","delivery":"followUp"}}"#
        );
        sqlx::query(
            "INSERT INTO commands (session_id, id, request_id, kind, payload, accepted_sequence, \
             state) VALUES ('ses_old', ?, ?, 'prompt', ?, ?, ?)",
        )
        .bind(id)
        .bind(format!("req_{id}"))
        .bind(payload)
        .bind(sequence)
        .bind(state)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query("INSERT INTO terminals (session_id, command_id, outcome, sequence) VALUES ('ses_old', 'cmd_1', 'completed', 3)")
        .execute(&mut conn)
        .await
        .unwrap();
    drop(conn);

    let store = SqliteStore::open(&path, Durability::Normal).await.unwrap();
    assert_eq!(
        open_from(&path, &SessionId::new("ses_old").unwrap())
            .await
            .as_deref(),
        Some("cmd_2"),
        "the migration set the watermark to the lowest open command"
    );
    store.close().await;

    let (agent, model) =
        harness::open_scripted(&path, vec![Turn::text("two"), Turn::text("three")]).await;
    let id = SessionId::new("ses_old").unwrap();
    let session = agent.session(id.clone());
    for pending in ["cmd_2", "cmd_3"] {
        let terminal = terminal_of(&session, &CommandId::new(pending).unwrap()).await;
        assert_eq!(terminal.outcome, TerminalOutcome::Completed, "{pending}");
    }
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: p2", "assistant: two", "user: p3", "assistant: three"]
    );
    assert_eq!(model.calls(), 2, "the settled prompt did not run again");
    agent.close().await.unwrap();
    assert_eq!(open_from(&path, &id).await, None);
}
