//! The command door: prompts, idempotency, cancel, abort, model preference.

use serde_json::json;
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

use crate::Fixture;
use crate::support::*;
use crate::tools::TestTools;

fn long_turn() -> Turn {
    Turn::new(vec![Step::DelayMs(20_000), Step::Text("too late".into())])
}

/// A prompt is accepted, runs, and settles `completed` with its answer committed.
pub async fn a_prompt_runs_to_completion<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("Hello there, person.")])).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "Say hello").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(
        (terminal.outcome, terminal.diagnostic),
        (TerminalOutcome::Completed, None)
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: Say hello", "assistant: Hello there, person."]
    );
    let requests = fixture.model().requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(outline(&requests[0].messages), vec!["user: Say hello"]);
    let tools: Vec<_> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, vec!["test__echo", "test__slow"]);
}

/// The same request id and payload answers the first acceptance and queues nothing new.
pub async fn an_exact_retry_returns_the_original_acceptance<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("once")])).await;
    let session = new_session(fixture.agent()).await;
    let options = || SendOptions {
        delivery: None,
        request_id: Some(request("retry-me")),
    };
    let first = session.send(text("only once"), options()).await.unwrap();
    let again = session.send(text("only once"), options()).await.unwrap();
    assert_eq!(first, again);
    terminal_of(&session, &first.command_id).await;
    let third = session.send(text("only once"), options()).await.unwrap();
    assert_eq!(
        first, third,
        "a retry after settling still answers the original"
    );
    assert_eq!(
        outline(&transcript(&session).await),
        vec!["user: only once", "assistant: once"]
    );
    assert_eq!(fixture.model().calls(), 1);
}

/// The same request id with another payload is a `conflict`.
pub async fn a_changed_retry_is_a_conflict<F: Fixture>() {
    let fixture = F::start(Script::new(vec![long_turn()])).await;
    let session = new_session(fixture.agent()).await;
    let options = || SendOptions {
        delivery: None,
        request_id: Some(request("reused")),
    };
    session.send(text("first text"), options()).await.unwrap();
    let error = session
        .send(text("second text"), options())
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Conflict);
    let steer = SendOptions {
        delivery: Some(PromptDelivery::Steer),
        request_id: Some(request("reused")),
    };
    let error = session.send(text("first text"), steer).await.unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::Conflict,
        "the delivery is part of the payload"
    );
    session.abort().await.unwrap();
}

/// Cancelling an unknown or settled command is `too_late`, an ordinary answer.
pub async fn cancel_of_unknown_or_settled_is_too_late<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("done")])).await;
    let session = new_session(fixture.agent()).await;
    let unknown = CommandId::new("cmd_unknown").unwrap();
    let result = session
        .cancel(CancelInput {
            command_id: unknown.clone(),
            only_if_pending: None,
        })
        .await;
    assert_eq!(
        result.unwrap(),
        CancelResult::TooLate(TooLate {
            command_id: unknown
        })
    );
    let command = send(&session, "finish").await;
    terminal_of(&session, &command).await;
    let result = session
        .cancel(CancelInput {
            command_id: command.clone(),
            only_if_pending: None,
        })
        .await;
    assert_eq!(
        result.unwrap(),
        CancelResult::TooLate(TooLate {
            command_id: command
        })
    );
}

/// A pending prompt is cancelled without running: its terminal says `cancelled`.
pub async fn cancel_of_a_pending_prompt_settles_it<F: Fixture>() {
    let fixture = F::start(Script::new(vec![long_turn()])).await;
    let session = new_session(fixture.agent()).await;
    let running = send(&session, "long").await;
    let waiting = send(&session, "never runs").await;
    let result = session
        .cancel(CancelInput {
            command_id: waiting.clone(),
            only_if_pending: Some(true),
        })
        .await
        .unwrap();
    assert_eq!(
        result,
        CancelResult::Accepted(Accepted {
            command_id: waiting.clone()
        })
    );
    let terminal = terminal_of(&session, &waiting).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Cancelled);
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(snapshot.pending, SessionPendingPrompts::default());
    session.abort().await.unwrap();
    assert_eq!(
        terminal_of(&session, &running).await.outcome,
        TerminalOutcome::Cancelled
    );
    assert_eq!(
        fixture.model().calls(),
        1,
        "the cancelled prompt never reached the model"
    );
}

/// `onlyIfPending` does not stop started work; a plain cancel does.
pub async fn only_if_pending_is_too_late_for_running_work<F: Fixture>() {
    let fixture = F::start(Script::new(vec![long_turn()])).await;
    let session = new_session(fixture.agent()).await;
    let running = send(&session, "long").await;
    wait_for(
        &session,
        |snapshot| matches!(snapshot.activity.queue, QueueState::Running { .. }).then_some(()),
        |frame| match frame {
            SessionFrame::Update(update) => {
                matches!(update.activity.queue, QueueState::Running { .. }).then_some(())
            }
            _ => None,
        },
    )
    .await;
    let pending_only = CancelInput {
        command_id: running.clone(),
        only_if_pending: Some(true),
    };
    assert_eq!(
        session.cancel(pending_only).await.unwrap(),
        CancelResult::TooLate(TooLate {
            command_id: running.clone()
        })
    );
    let plain = CancelInput {
        command_id: running.clone(),
        only_if_pending: None,
    };
    assert_eq!(
        session.cancel(plain).await.unwrap(),
        CancelResult::Accepted(Accepted {
            command_id: running.clone()
        })
    );
    assert_eq!(
        terminal_of(&session, &running).await.outcome,
        TerminalOutcome::Cancelled
    );
}

/// Abort reaches a running tool through the run's cancellation token.
pub async fn cancel_and_abort_reach_a_running_tool<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::tool_call("test__slow", json!({}))])).await;
    let session = new_session(fixture.agent()).await;
    let command = send(&session, "use the slow tool").await;
    assert_eq!(active_tool(&session).await, "test__slow");
    session.abort().await.unwrap();
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Cancelled);
    assert_eq!(TestTools::count(&fixture.tools().slow_started), 1);
    assert_eq!(TestTools::count(&fixture.tools().slow_cancelled), 1);
    let lines = outline(&transcript(&session).await);
    assert_eq!(
        lines[..2],
        [
            "user: use the slow tool".to_owned(),
            "assistant: -> test__slow".to_owned()
        ]
    );
    assert!(
        lines[2].starts_with("tool test__slow (error): aborted"),
        "{lines:?}"
    );
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        (
            snapshot.activity.active_tool,
            snapshot.activity.cancellation_requested
        ),
        (None, false)
    );
}

/// The model preference is stored and read back.
pub async fn model_preference_is_kept<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let session = new_session(fixture.agent()).await;
    assert_eq!(session.model_preference().await.unwrap(), None);
    let preference = ModelPreference {
        model: ModelSpec::new("openai:gpt-4o-mini").unwrap(),
        reasoning: Some(ReasoningLevel::Low),
    };
    session
        .set_model_preference(preference.clone())
        .await
        .unwrap();
    assert_eq!(session.model_preference().await.unwrap(), Some(preference));
}
