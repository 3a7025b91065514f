//! `serve` + piped `chat` against the real bundled local model, as a person
//! runs the README's command. Runs when `SHIITAKE_TEST_LOCAL_MODEL_URL` names
//! the server (`cargo xtask test` starts it and sets it); otherwise prints one
//! `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`. Asserts what was committed, read back over HTTP, not wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::{Serve, free_port, stdout};
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_protocol::message::{AssistantMessage, Message, Usage};
use shiitake_protocol::{AgentApi, ReadOptions, SessionApi, SessionId, TerminalOutcome};
use shiitake_test_services::Service;

/// The model server runs one request at a time: one conversation at a time.
static SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The spec of the bundled model, or `None` after the `SKIPPED` line when no server
/// is configured or it does not answer (a failure when `SHIITAKE_REQUIRE_SERVICES=1`).
fn local_spec() -> Option<String> {
    let url = Service::LocalModel.url()?;
    Some(shiitake_local_model::spec(
        &url,
        shiitake_local_model::Weights::default(),
    ))
}

/// What one piped conversation committed: its messages and its run's outcome.
struct Conversation {
    printed: String,
    messages: Vec<Message>,
    outcomes: Vec<TerminalOutcome>,
}

/// Runs `chat` with `prompt` piped in against a fresh `serve` over `workspace`.
fn converse(spec: &str, workspace: &std::path::Path, prompt: &str) -> Conversation {
    let _one_at_a_time = SERVER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("data"), workspace, free_port(), Some(spec));
    let output = serve.chat(&format!("{prompt}\n"), Duration::from_secs(900));
    let printed = stdout(&output);
    assert!(output.status.success(), "{printed}");
    let session = printed
        .lines()
        .find_map(|line| line.strip_prefix("[session ")?.split(']').next())
        .unwrap_or_else(|| panic!("no session line in:\n{printed}"))
        .to_owned();
    let token = std::fs::read_to_string(dir.path().join("data/token")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let snapshot = runtime.block_on(async {
        let agent =
            RemoteAgent::new(ClientOptions::new(serve.url.clone()).with_token(token.trim()))
                .unwrap();
        let session = agent.session(SessionId::new(session).unwrap());
        session.read(ReadOptions::default()).await.unwrap()
    });
    Conversation {
        printed,
        messages: snapshot.messages.into_iter().map(|m| m.value).collect(),
        outcomes: snapshot.terminals.iter().map(|t| t.outcome).collect(),
    }
}

/// Every assistant message records usage: counted (adding up, and non-zero for an
/// answer in words; a tool call whose arguments the handler determined without the
/// model reads nothing and writes nothing) or, from a server that reports none,
/// explicitly unknown; never a false zero.
fn assert_usage_recorded(messages: &[Message]) {
    for message in messages {
        let Message::Assistant(assistant) = message else {
            continue;
        };
        let usage = &assistant.usage;
        if usage.is_known() {
            if !assistant.text().trim().is_empty() {
                assert!(
                    usage.input + usage.cache_read > 0 && usage.output > 0,
                    "{usage:?}"
                );
            }
            assert_eq!(
                usage.total_tokens,
                usage.input + usage.output + usage.cache_read + usage.cache_write
            );
        } else {
            assert_eq!(*usage, Usage::unknown());
        }
    }
}

fn last_assistant(messages: &[Message]) -> Option<&AssistantMessage> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant(assistant) => Some(assistant),
        _ => None,
    })
}

#[test]
fn a_plain_question_gets_a_completed_run_with_text() {
    let Some(spec) = local_spec() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let talk = converse(&spec, workspace.path(), "Hello, who are you?");
    assert_eq!(
        talk.outcomes,
        [TerminalOutcome::Completed],
        "{}",
        talk.printed
    );
    let answer = last_assistant(&talk.messages).expect("an assistant message");
    assert!(
        !answer.text().trim().is_empty(),
        "{answer:?}\n{}",
        talk.printed
    );
    assert!(talk.printed.contains("assistant: "), "{}", talk.printed);
    assert!(!talk.printed.contains("(no text)"), "{}", talk.printed);
    // A greeting is answered in words: no tool call, so nothing durable is created.
    assert!(
        talk.messages.iter().all(
            |message| !matches!(message, Message::Assistant(a) if a.tool_calls().next().is_some())
        ),
        "{}",
        talk.printed
    );
    assert_usage_recorded(&talk.messages);
}

#[test]
fn reading_a_file_calls_the_tool_and_answers_after_its_result() {
    let Some(spec) = local_spec() else { return };
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(
        workspace.path().join("notes.txt"),
        "The launch is on Tuesday at 10 am in room 4.\n",
    )
    .unwrap();
    let talk = converse(
        &spec,
        workspace.path(),
        "Read the file notes.txt and tell me what it says.",
    );
    assert_eq!(
        talk.outcomes,
        [TerminalOutcome::Completed],
        "{}",
        talk.printed
    );
    let call_at = talk
        .messages
        .iter()
        .position(|message| {
            matches!(message, Message::Assistant(a) if a.tool_calls().any(|c| c.name == "files__read"))
        })
        .unwrap_or_else(|| panic!("no files__read call:\n{}", talk.printed));
    let result_at = talk.messages[call_at..]
        .iter()
        .position(|message| matches!(message, Message::ToolResult(r) if r.tool_name == "files__read" && !r.is_error))
        .map(|at| call_at + at)
        .unwrap_or_else(|| panic!("no successful toolResult after the call:\n{}", talk.printed));
    let last = talk.messages.last().expect("messages");
    assert!(
        matches!(last, Message::Assistant(a) if a.tool_calls().next().is_none()),
        "the run ends with an answer: {last:?}"
    );
    assert!(talk.messages.len() > result_at + 1);
    assert!(
        talk.printed.contains("[tool call] files__read("),
        "{}",
        talk.printed
    );
    assert!(
        talk.printed.contains("[tool result] files__read:"),
        "{}",
        talk.printed
    );
    assert_usage_recorded(&talk.messages);
}
