//! The inbox: bounded pages with an opaque `next`, and unreadable Sessions listed as unavailable.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::collections::HashSet;
use std::str::FromStr;

use shiitake_conformance::Fixture;
use shiitake_conformance::support::*;
use shiitake_model::Script;
use shiitake_protocol::*;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Executor};

#[tokio::test]
async fn pages_cover_every_session_once() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let agent = fixture.agent();
    let mut created = HashSet::new();
    for _ in 0..(SessionSummaryPage::MAX_ROWS + 7) {
        created.insert(new_session(agent).await.session_id().clone());
    }
    let first = agent.list_sessions(None).await.unwrap();
    assert_eq!(first.sessions.len(), SessionSummaryPage::MAX_ROWS);
    let next = first.next.clone().expect("a second page");
    let second = agent.list_sessions(Some(&next)).await.unwrap();
    assert_eq!((second.sessions.len(), second.next.clone()), (7, None));
    let listed: Vec<_> = first
        .sessions
        .iter()
        .chain(&second.sessions)
        .map(|row| row.session_id().clone())
        .collect();
    assert_eq!(listed.iter().cloned().collect::<HashSet<_>>(), created);
    assert_eq!(listed.len(), created.len(), "no Session is listed twice");
}

#[tokio::test]
async fn a_page_holds_exactly_max_rows_and_one_more_session_makes_a_next_page() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let agent = fixture.agent();
    for _ in 0..SessionSummaryPage::MAX_ROWS {
        new_session(agent).await;
    }
    let full = agent.list_sessions(None).await.unwrap();
    assert_eq!(
        (full.sessions.len(), full.next.is_none()),
        (SessionSummaryPage::MAX_ROWS, true),
        "exactly one full page: no next"
    );
    new_session(agent).await;
    let first = agent.list_sessions(None).await.unwrap();
    assert_eq!(first.sessions.len(), SessionSummaryPage::MAX_ROWS);
    let second = agent
        .list_sessions(Some(
            &first.next.expect("one more Session makes a next page"),
        ))
        .await
        .unwrap();
    assert_eq!((second.sessions.len(), second.next), (1, None));
}

#[tokio::test]
async fn an_unreadable_session_is_listed_as_unavailable() {
    let fixture = harness::Local::start(Script::new(vec![])).await;
    let agent = fixture.agent();
    let good = new_session(agent).await;
    let broken = new_session(agent).await;
    let path = fixture.dir.path().join("agent.db");
    let mut conn = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    conn.execute(
        sqlx::query("UPDATE sessions SET model_preference = '{not json' WHERE id = ?")
            .bind(broken.session_id().as_str()),
    )
    .await
    .unwrap();
    let page = agent.list_sessions(None).await.unwrap();
    assert_eq!(page.sessions.len(), 2);
    assert!(page.sessions.contains(&SessionSummaryRow::Unavailable {
        session_id: broken.session_id().clone()
    }));
    assert!(page.sessions.iter().any(|row| matches!(row,
        SessionSummaryRow::Available { session_id, .. } if session_id == good.session_id())));
}
