//! End to end over the real server, a person answering through the contract bound on
//! a `RemoteSession`: the model calls a tool the policy asks about, the Session list
//! shows the Session `needs_you`, allow once runs the tool once and the run completes;
//! deny gives the model the person's reason and the run completes without the side
//! effect; allow for this Session lets the next call of the tool run without asking.
//! Answers carry a `requestId`: an exact retry gets the same receipt, a changed
//! payload conflicts, an unknown approval is not found.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_conformance::support::*;
use shiitake_ext_approval::contract::{
    AnswerApproval, ApprovalContract, ApprovalId, Decision, Delivery, ListApprovals,
};
use shiitake_ext_testkit::TestAgent;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, router};

const TOKEN: &str = "approval-test-token-0123456789";

async fn serve(agent: Arc<shiitake_core::Agent>) -> (RemoteAgent, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent, ServerConfig::new(Token::new(TOKEN).unwrap()));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let client = RemoteAgent::new(ClientOptions::new(url).with_token(TOKEN)).unwrap();
    (client, task)
}

/// The Session's row in the Session list, once its state is `state`.
async fn listed_as(remote: &RemoteAgent, session: &SessionId, state: SessionInboxState) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let page = remote.list_sessions(None).await.unwrap();
        let row = page
            .sessions
            .iter()
            .find(|row| row.session_id() == session)
            .and_then(|row| match row {
                SessionSummaryRow::Available { summary, .. } => Some(summary.state),
                SessionSummaryRow::Unavailable { .. } => None,
            });
        if row == Some(state) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Session list never showed {state:?}: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_once_deny_and_allow_for_the_session_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let mut turns = write_then("hello", "Wrote hello.");
    turns.extend(write_then("secret plans", "I did not write it."));
    turns.extend(write_then("first", "Wrote first."));
    turns.extend(write_then("second", "Wrote second."));
    let kit = TestAgent::builder()
        .turns(turns)
        .tools(catalog(dir.path(), false).await)
        .kit_extension(shiitake_ext_approval::extension(ask_policy()).unwrap())
        .open()
        .await;
    let model = kit.model.clone();
    let local = Arc::new(kit.agent);
    let (remote, _server) = serve(local.clone()).await;
    let session = remote.session(new_session(&remote).await.session_id().clone());
    let id = session.session_id().clone();
    let approvals = bind_session_extension::<_, ApprovalContract>(&session);

    // 1. Ask → needs_you in the Session list → allow once → the tool runs once.
    let first = send(&session, "Write hello to the notes").await;
    listed_as(&remote, &id, SessionInboxState::NeedsYou).await;
    let waiting = approvals.call(&ListApprovals {}).await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].tool, "notes__write");
    assert_eq!(waiting[0].arguments, serde_json::json!({"text": "hello"}));
    assert_eq!(
        waiting[0].why,
        "the host asks before every tool not marked safe to repeat"
    );
    assert!(notes(dir.path()).is_empty(), "held, not run");
    let allow = AnswerApproval {
        approval_id: waiting[0].approval_id.clone(),
        request_id: "allow-1".into(),
        decision: Decision::AllowOnce,
        reason: None,
    };
    let receipt = approvals.call(&allow).await.unwrap();
    assert_eq!(
        (receipt.decision, receipt.delivery),
        (Decision::AllowOnce, Delivery::InTurn)
    );
    assert_eq!(
        terminal_of(&session, &first).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["hello"], "ran exactly once");
    assert_eq!(
        approvals.call(&allow).await.unwrap(),
        receipt,
        "an exact retry"
    );
    let changed = AnswerApproval {
        decision: Decision::Deny,
        ..allow.clone()
    };
    assert_eq!(
        approvals.call(&changed).await.unwrap_err().code,
        ErrorCode::Conflict,
        "the same request id with another payload"
    );
    listed_as(&remote, &id, SessionInboxState::Done).await;

    // 2. Deny with a reason → the model reads it → completed without the side effect.
    let second = send(&session, "Write my secret plans").await;
    let waiting = until_waiting(&session, 1).await;
    let receipt = approvals
        .call(&AnswerApproval {
            approval_id: waiting[0].approval_id.clone(),
            request_id: "deny-2".into(),
            decision: Decision::Deny,
            reason: Some("not in the shared notes".into()),
        })
        .await
        .unwrap();
    assert_eq!(receipt.delivery, Delivery::InTurn);
    assert_eq!(
        terminal_of(&session, &second).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["hello"], "no side effect");
    let results = tool_texts(&transcript(&session).await);
    assert_eq!(
        results[1],
        "not run: the person denied this call of notes__write. Their reason: not in the shared notes"
    );
    let seen = model.requests().last().cloned().unwrap();
    assert!(
        format!("{:?}", seen.messages).contains("not in the shared notes"),
        "the model read the reason"
    );

    // 3. Allow for this Session → the next call of the same tool runs without asking.
    let third = send(&session, "Write first").await;
    let waiting = until_waiting(&session, 1).await;
    approvals
        .call(&AnswerApproval {
            approval_id: waiting[0].approval_id.clone(),
            request_id: "session-3".into(),
            decision: Decision::AllowSession,
            reason: None,
        })
        .await
        .unwrap();
    terminal_of(&session, &third).await;
    let fourth = send(&session, "Write second").await;
    assert_eq!(
        terminal_of(&session, &fourth).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(notes(dir.path()), ["hello", "first", "second"]);
    let projection = shiitake_ext_testkit::projection::read::<ApprovalContract>(&session)
        .await
        .unwrap();
    assert_eq!(projection.allowed, ["notes__write"]);
    assert!(
        projection.approvals.is_empty(),
        "nobody was asked the fourth time"
    );
    assert_eq!(
        approvals
            .call(&AnswerApproval {
                approval_id: ApprovalId::new("ap99"),
                request_id: "nobody".into(),
                decision: Decision::AllowOnce,
                reason: None,
            })
            .await
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert_eq!(
        approvals
            .call(&AnswerApproval {
                approval_id: waiting[0].approval_id.clone(),
                request_id: "late".into(),
                decision: Decision::Deny,
                reason: None,
            })
            .await
            .unwrap_err()
            .code,
        ErrorCode::Conflict,
        "answered already"
    );
}
