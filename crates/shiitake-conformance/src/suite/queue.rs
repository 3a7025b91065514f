//! The queue and the runner: order, steering, tools, retries, failure.

use futures::StreamExt;
use serde_json::json;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

use crate::Fixture;
use crate::support::*;
use crate::tools::TestTools;

/// Follow-ups run one at a time, in the order they were accepted.
pub async fn follow_ups_run_in_acceptance_order<F: Fixture>() {
    let script = Script::new(vec![
        Turn::new(vec![Step::DelayMs(200), Step::Text("one".into())]),
        Turn::text("two"),
        Turn::text("three"),
    ]);
    let fixture = F::start(script).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "p1").await;
    let second = send(&session, "p2").await;
    let third = send(&session, "p3").await;
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    let pending: Vec<_> = snapshot
        .pending
        .prompts
        .iter()
        .map(|p| p.command_id.clone())
        .collect();
    assert_eq!(pending, vec![second.clone(), third.clone()]);
    for command in [&first, &second, &third] {
        assert_eq!(
            terminal_of(&session, command).await.outcome,
            TerminalOutcome::Completed
        );
    }
    assert_eq!(
        outline(&transcript(&session).await),
        vec![
            "user: p1",
            "assistant: one",
            "user: p2",
            "assistant: two",
            "user: p3",
            "assistant: three"
        ]
    );
}

/// A steer waits for the tool calls in flight, skips those not started, and
/// enters the running work before its next model call.
pub async fn a_steer_enters_at_the_next_boundary<F: Fixture>() {
    let script = Script::new(vec![
        Turn::new(vec![
            Step::DelayMs(500),
            Step::tool_call("test__echo", json!({"n": 1})),
            Step::tool_call("test__echo", json!({"n": 2})),
        ]),
        Turn::text("steered"),
    ]);
    let fixture = F::start(script).await;
    let session = new_session(fixture.agent()).await;
    let run = send(&session, "start").await;
    // Steer while the model streams its first answer, not before the first call.
    eventually(|| fixture.model().calls() == 1).await;
    let steered = steer(&session, "change of plan").await;
    assert_eq!(
        terminal_of(&session, &run).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        terminal_of(&session, &steered).await.outcome,
        TerminalOutcome::Completed
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec![
            "user: start",
            "assistant: -> test__echo,test__echo",
            "tool test__echo (error): skipped: a newer message arrived",
            "tool test__echo (error): skipped: a newer message arrived",
            "user: change of plan",
            "assistant: steered",
        ]
    );
    assert_eq!(TestTools::count(&fixture.tools().echo_calls), 0);
    assert_eq!(fixture.model().calls(), 2, "one run, two model calls");
}

/// Tool calls run through the execute door and their results reach the next model call.
pub async fn tools_run_and_their_results_reach_the_model<F: Fixture>() {
    let script = Script::new(vec![
        Turn::tool_call("test__echo", json!({"word": "hi"})),
        Turn::text("done"),
    ]);
    let fixture = F::start(script).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "echo hi").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    let expected = vec![
        "user: echo hi",
        "assistant: -> test__echo",
        r#"tool test__echo: {"echo":{"word":"hi"}}"#,
        "assistant: done",
    ];
    assert_eq!(outline(&transcript(&session).await), expected);
    let requests = fixture.model().requests();
    assert_eq!(outline(&requests[1].messages), expected[..3]);
    assert_eq!(TestTools::count(&fixture.tools().echo_calls), 1);
}

/// A retryable failure before the first byte backs off (visible in activity), then succeeds.
pub async fn retryable_failures_back_off_then_succeed<F: Fixture>() {
    let fixture = F::start(Script::new(vec![
        Turn::fail(503),
        Turn::text("after retry"),
    ]))
    .await;
    let session = new_session(fixture.agent()).await;
    let mut frames = session
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    let command = send(&session, "try").await;
    let retry_seen = tokio::time::timeout(PATIENCE, async {
        let mut retry_seen = None;
        while let Some(frame) = frames.next().await {
            if let SessionFrame::Update(update) = frame.unwrap() {
                if let Some(retry) = &update.activity.retry {
                    retry_seen = Some((retry.attempt, retry.max_attempts));
                }
                if update.terminals.iter().any(|t| t.command_id == command) {
                    assert_eq!(update.terminals[0].outcome, TerminalOutcome::Completed);
                    return retry_seen;
                }
            }
        }
        panic!("the frame stream ended before the command's terminal");
    })
    .await
    .expect("the command's terminal arrived in time");
    let (attempt, max_attempts) = retry_seen.expect("a retry was published");
    assert_eq!(attempt, 2);
    assert!(max_attempts >= 2);
    assert_eq!(fixture.model().calls(), 2);
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: try", "assistant: after retry"]
    );
}

/// A failure that retrying cannot fix ends the run `failed` with a diagnostic.
pub async fn a_failing_model_ends_the_run_failed<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::fail(400)])).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "doomed").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Failed);
    let diagnostic = terminal.diagnostic.expect("a failed run says why");
    assert!(diagnostic.contains("400"), "{diagnostic}");
    assert_eq!(fixture.model().calls(), 1, "a 400 is not retried");
    let page = fixture.agent().list_sessions(None).await.unwrap();
    let state = page.sessions.iter().find_map(|row| match row {
        SessionSummaryRow::Available {
            session_id,
            summary,
        } if session_id == session.session_id() => Some(summary.state),
        _ => None,
    });
    assert_eq!(state, Some(SessionInboxState::Errored));
}
