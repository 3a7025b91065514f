//! The footer on real Agents: each child state maps to its status (unavailable
//! included), `/agents` collapses and expands the rows, and a watcher of the parent
//! sees rows change without the parent changing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use serde_json::json;
use shiitake_conformance::support::*;
use shiitake_core::LocalSession;
use shiitake_core::extension::Sender;
use shiitake_ext_question::contract::{AskView, QuestionContract};
use shiitake_ext_subagents::contract::{
    AnswerAction, ChildRow, ChildStatus, FooterSummary, FooterView, NeedsYouQuestion,
    SubagentsContract, ToggleRows, Toggled, Tone,
};
use shiitake_ext_testkit::projection;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

fn ask_turn(mode: &str) -> Turn {
    Turn::tool_call(
        "question__ask",
        json!({
            "mode": mode,
            "questions": [{
                "header": "Database",
                "question": "Which database should the service use?",
                "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]
            }]
        }),
    )
}

/// The open Asks once there are some: in the watch's baseline, or in an update after
/// it (an Ask raised after the watch began shows only there).
async fn open_asks(session: &impl SessionApi) -> Vec<AskView> {
    projection::until::<QuestionContract>(session, |p| !p.asks.is_empty())
        .await
        .asks
}

/// Waits until the parent's footer satisfies `done`.
async fn footer_where(session: &impl SessionApi, done: impl Fn(&FooterView) -> bool) -> FooterView {
    projection::until::<SubagentsContract>(session, done).await
}

/// A parent Agent and one of its Sessions whose one child, in the Agent `idle`, did
/// its work (`Build it`); and the child's Session.
async fn parent_of_an_idle_child(dir: &tempfile::TempDir) -> (Parent, LocalSession, LocalSession) {
    let parent = parent(dir).await;
    let idle = child(dir, "idle", vec![Turn::text("Done.")]).await;
    let session = new_session(&idle).await;
    let sent = send(&session, "Build it").await;
    terminal_of(&session, &sent).await;
    parent.source.add_agent("idle", &idle);
    let parent_session = new_session(&parent.agent).await;
    parent
        .source
        .add_child(parent_session.session_id(), "idle", session.session_id());
    (parent, parent_session, session)
}

#[tokio::test]
async fn each_child_state_shows_its_status_and_an_unreadable_child_is_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let sender = Sender {
        agent: "Planner".into(),
        session_id: SessionId::new("parent-session").unwrap(),
    };
    // Working: a run that is still thinking.
    let working = child(&dir, "working", vec![busy()]).await;
    // Idle: a run that completed.
    let idle = child(&dir, "idle", vec![Turn::text("Done.")]).await;
    // Failed: the model refused the call.
    let failed = child(&dir, "failed", vec![Turn::fail(400)]).await;
    // Waiting on the sender: work another Agent sent asks a question.
    let waiting = child(
        &dir,
        "waiting",
        vec![ask_turn("wait"), Turn::text("Asked.")],
    )
    .await;
    // Needs you: a person is asked.
    let asking = child(
        &dir,
        "asking",
        vec![ask_turn("continue"), Turn::text("Asked.")],
    )
    .await;

    let mut sessions = Vec::new();
    for (name, agent) in [
        ("working", &working),
        ("idle", &idle),
        ("failed", &failed),
        ("waiting", &waiting),
        ("asking", &asking),
    ] {
        let session = new_session(agent).await;
        let accepted = if name == "waiting" {
            agent
                .session(session.session_id().clone())
                .send_from(sender.clone(), text("Build it"), SendOptions::default())
                .await
                .unwrap()
        } else {
            session
                .send(text("Build it"), SendOptions::default())
                .await
                .unwrap()
        };
        if name != "working" {
            terminal_of(&session, &accepted.command_id).await;
        }
        parent.source.add_agent(name, agent);
        sessions.push((name, session.session_id().clone()));
    }
    let asked = open_asks(&asking.session(sessions[4].1.clone())).await;
    let parent_session = new_session(&parent.agent).await;
    let parent_id = parent_session.session_id().clone();
    for (name, session_id) in &sessions {
        parent.source.add_child(&parent_id, name, session_id);
    }
    let gone = SessionId::new("session-of-a-deleted-agent").unwrap();
    parent.source.add_child(&parent_id, "gone", &gone);

    let shown = footer_where(&parent_session, |f| f.rows.len() == 6).await;
    let row = |name: &str, session_id: &SessionId, status: ChildStatus| ChildRow {
        agent: name.into(),
        session_id: session_id.as_str().into(),
        // A Session's title is its first prompt; an unreadable child has none.
        title: if name == "gone" {
            String::new()
        } else {
            "Build it".into()
        },
        status,
    };
    let ask_id = asked[0].ask_id.as_str().to_owned();
    let expected = vec![
        row(
            "gone",
            &gone,
            ChildStatus::Unavailable {
                reason: "no Agent named gone".into(),
            },
        ),
        row(
            "asking",
            &sessions[4].1,
            ChildStatus::NeedsYou {
                approval: None,
                question: Some(NeedsYouQuestion {
                    ask_id: ask_id.clone(),
                    text: "Which database should the service use?".into(),
                    answer: AnswerAction {
                        label: "Answer".into(),
                        agent: "asking".into(),
                        session_id: sessions[4].1.as_str().into(),
                        extension_id: "botanical-session-question".into(),
                        flow: "answer_flow".into(),
                        call: "answer".into(),
                        ask_id,
                    },
                }),
            },
        ),
        row(
            "waiting",
            &sessions[3].1,
            ChildStatus::WaitingOn {
                agent: "Planner".into(),
            },
        ),
        row("failed", &sessions[2].1, ChildStatus::Failed),
        row("idle", &sessions[1].1, ChildStatus::Idle),
        row("working", &sessions[0].1, ChildStatus::Working),
    ];
    assert_eq!(shown.rows, expected);
    assert_eq!(
        shown.summary,
        FooterSummary {
            total: 6,
            working: 1,
            waiting: 1,
            needs_you: 1,
            idle: 1,
            failed: 1,
            unavailable: 1,
            tone: Tone::Amber,
        }
    );
    assert_eq!((shown.collapsed, shown.more), (false, 0));
    assert_eq!(shown.refreshed_at, Some(START));
    parent.refresher.abort();
}

#[tokio::test]
async fn agents_collapses_the_rows_to_one_summary_and_expands_them() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, parent_session, _child) = parent_of_an_idle_child(&dir).await;
    let expanded = footer_where(&parent_session, |f| f.rows.len() == 1).await;
    assert_eq!(expanded.rows[0].status, ChildStatus::Idle);

    let agents = bind_session_extension::<_, SubagentsContract>(&parent_session);
    let toggled = agents.call(&ToggleRows::default()).await.unwrap();
    assert_eq!(toggled, Toggled { collapsed: true });
    let collapsed = footer_where(&parent_session, |f| f.collapsed).await;
    assert_eq!(
        collapsed,
        FooterView {
            collapsed: true,
            rows: Vec::new(),
            summary: FooterSummary {
                total: 1,
                idle: 1,
                ..FooterSummary::default()
            },
            more: 0,
            refreshed_at: expanded.refreshed_at,
        }
    );
    // Explicit values are idempotent; no value toggles back.
    let again = agents
        .call(&ToggleRows {
            collapsed: Some(true),
        })
        .await
        .unwrap();
    assert_eq!(again, Toggled { collapsed: true });
    let back = agents.call(&ToggleRows::default()).await.unwrap();
    assert_eq!(back, Toggled { collapsed: false });
    let shown = footer_where(&parent_session, |f| !f.collapsed).await;
    assert_eq!(shown.rows, expanded.rows);
    // Another Session's rows are its own.
    let other = new_session(&parent.agent).await;
    let other_toggled = bind_session_extension::<_, SubagentsContract>(&other)
        .call(&ToggleRows::default())
        .await
        .unwrap();
    assert_eq!(other_toggled, Toggled { collapsed: true });
    parent.refresher.abort();
}

#[tokio::test]
async fn a_session_that_sent_work_to_nobody_shows_no_footer() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let session = new_session(&parent.agent).await;
    session.read(ReadOptions::default()).await.unwrap();
    eventually(|| parent.source.reads() == 1).await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(footer(&snapshot.extensions), None);
    parent.refresher.abort();
}

#[tokio::test]
async fn rows_beyond_the_bound_are_counted_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(&dir).await;
    let session = new_session(&parent.agent).await;
    let bound = shiitake_ext_subagents::contract::MAX_ROWS;
    for index in 0..=bound {
        parent.source.add_child(
            session.session_id(),
            "gone",
            &SessionId::new(format!("s-{index}")).unwrap(),
        );
    }
    let shown = footer_where(&session, |f| !f.rows.is_empty()).await;
    assert_eq!((shown.rows.len(), shown.more), (bound, 1));
    assert_eq!(
        shown.rows[0].session_id,
        format!("s-{bound}"),
        "newest first"
    );
    parent.refresher.abort();
}

#[tokio::test]
async fn the_snapshot_carries_the_footer_rows_of_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, parent_session, session) = parent_of_an_idle_child(&dir).await;
    let shown = footer_where(&parent_session, |f| f.rows.len() == 1).await;
    let snapshot = parent_session.read(ReadOptions::default()).await.unwrap();
    let id = ExtensionId::new(shiitake_ext_subagents::contract::EXTENSION_ID).unwrap();
    let rows: Vec<_> = snapshot
        .footer
        .iter()
        .filter(|row| row.extension_id == id)
        .cloned()
        .collect();
    assert_eq!(rows, shown.footer_rows(&id));
    assert_eq!(rows[0].text, "agent idle (Build it): idle");
    assert_eq!(rows[0].key, session.session_id().as_str());
    assert_eq!(rows[1].kind, "subagents-more");
    parent.refresher.abort();
}
