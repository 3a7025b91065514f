//! The lineage: operator lines, branch, fork.

use shiitake_model::{Script, Turn};
use shiitake_protocol::message::Message;
use shiitake_protocol::*;

use crate::Fixture;
use crate::support::*;

/// An operator line enters the lineage without a run; a retry adds nothing.
pub async fn operator_lines_need_no_run<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let session = new_session(fixture.agent()).await;
    session
        .operator(request("line-1"), OperatorAuthor::Party, text("I agree."))
        .await
        .unwrap();
    session
        .operator(request("line-1"), OperatorAuthor::Party, text("I agree."))
        .await
        .unwrap();
    let changed = session
        .operator(
            request("line-1"),
            OperatorAuthor::Operator,
            text("I agree."),
        )
        .await;
    assert_eq!(changed.unwrap_err().code, ErrorCode::Conflict);
    let messages = transcript(&session).await;
    assert_eq!(outline(&messages), vec!["user: I agree."]);
    let Message::User(line) = &messages[0] else {
        panic!("an operator line is a user message")
    };
    assert_eq!(
        line.extra.get("author"),
        Some(&serde_json::Value::from("party"))
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        snapshot.messages[0].command_id, None,
        "a line outside work has no command"
    );
    assert!(snapshot.terminals.is_empty());
    assert_eq!(fixture.model().calls(), 0);
}

async fn two_exchanges<F: Fixture>(
    fixture: &F,
) -> (<F::Agent as AgentApi>::Session, Vec<SessionMessage>) {
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    terminal_of(&session, &first).await;
    let second = send(&session, "p2").await;
    terminal_of(&session, &second).await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    (session, snapshot.messages)
}

/// Branching selects an earlier entry; later work continues from there.
pub async fn branch_selects_an_earlier_leaf<F: Fixture>() {
    let script = Script::new(vec![
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ]);
    let fixture = F::start(script).await;
    let (session, messages) = two_exchanges(&fixture).await;
    assert_eq!(messages.len(), 4);
    session.branch(messages[1].id.clone()).await.unwrap();
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: p1", "assistant: one"]
    );
    let third = send(&session, "p3").await;
    terminal_of(&session, &third).await;
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: p1", "assistant: one", "user: p3", "assistant: three"]
    );
    let requests = fixture.model().requests();
    assert_eq!(
        outline(&requests[2].messages),
        vec!["user: p1", "assistant: one", "user: p3"]
    );
    let missing = session
        .branch(EntryId::new("ent_missing").unwrap())
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
}

/// Forking copies the lineage root→entry into a new Session and leaves the original alone.
pub async fn fork_copies_one_lineage<F: Fixture>() {
    let script = Script::new(vec![Turn::text("one"), Turn::text("two")]);
    let fixture = F::start(script).await;
    let (session, messages) = two_exchanges(&fixture).await;
    let forked = session.fork(messages[1].id.clone()).await.unwrap();
    let copy = fixture.agent().session(forked.session_id.clone());
    assert_eq!(
        outline(&transcript(&copy).await),
        vec!["user: p1", "assistant: one"]
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: p1", "assistant: one", "user: p2", "assistant: two"]
    );
    assert_ne!(&forked.session_id, session.session_id());
    let missing = session
        .fork(EntryId::new("ent_missing").unwrap())
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
}
