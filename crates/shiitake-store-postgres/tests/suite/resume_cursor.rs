//! A subscriber never goes back. A process whose owner of a Session is behind the
//! store (another process took the Session over and committed, and this one has not
//! heard yet: its renewal is not due, or the database was restarting) must not answer
//! a client's newer cursor with a reset to its older view, nor replay what the client
//! already had: it finds the store ahead, stops that owner, and the client's request
//! goes on through a stand-in that follows the real owner from the client's cursor.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shiitake_conformance::support::{PATIENCE, new_session, send, terminal_of};
use shiitake_conformance::{TestTools, tools};
use shiitake_core::{Agent, LocalSession};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::{
    AgentApi, CommandId, ReadOptions, SessionApi, SessionFrame, SubscribeOptions, TerminalOutcome,
};
use support::{config, fresh_key, sql, store};

/// An Agent of `key` on a process of its own whose leases last a minute (its renewal,
/// every 20 s, cannot notice a takeover while the test looks).
async fn process(key: &shiitake_store_postgres::AgentKey, answer: &str) -> Agent {
    let model = Arc::new(ScriptedModel::new(
        Script::new(vec![Turn::text(answer)]).cycle(true),
    ));
    let store = store(key, Duration::from_secs(60)).await;
    Agent::builder(
        Arc::new(store),
        tools::catalog(Arc::new(TestTools::default())).await,
        config(model),
    )
    .open()
    .await
    .unwrap()
}

/// Two processes of a fresh tenant and a Session the first owns, its prompt "one"
/// completed there.
async fn started() -> (Agent, Agent, LocalSession) {
    let key = fresh_key();
    let (first, second) = (
        process(&key, "from the first").await,
        process(&key, "from the second").await,
    );
    let on_first = new_session(&first).await;
    let one = send(&on_first, "one").await;
    assert_eq!(
        terminal_of(&on_first, &one).await.outcome,
        TerminalOutcome::Completed
    );
    (first, second, on_first)
}

/// The second process takes the Session over behind the first one's back (its lease
/// made to lapse) and completes the prompt "two" there: its handle and the command.
async fn take_over(second: &Agent, on_first: &LocalSession) -> (LocalSession, CommandId) {
    sql(
        "UPDATE session_leases SET expires_at = clock_timestamp() - interval '1 millisecond' \
         WHERE session_id = $1",
        on_first.session_id(),
    )
    .await;
    let on_second = second.session(on_first.session_id().clone());
    let two = send(&on_second, "two").await;
    assert_eq!(
        terminal_of(&on_second, &two).await.outcome,
        TerminalOutcome::Completed
    );
    (on_second, two)
}

#[tokio::test]
async fn a_cursor_past_a_stale_owners_view_is_not_sent_back() {
    if !support::ready() {
        return;
    }
    let (first, second, on_first) = started().await;
    // A watcher keeps the first process's owner in memory, with its view of the Session.
    let _kept = on_first.watch(ReadOptions::default()).await.unwrap();

    // The second process takes the Session over behind the first one's back and commits.
    let (on_second, _) = take_over(&second, &on_first).await;
    let seen = on_second.read(ReadOptions::default()).await.unwrap();
    let cursor = seen.cursor.clone().unwrap();
    let last_seen = seen.messages.last().unwrap().sequence;

    // A client that saw all that resumes on the first process.
    let mut frames = on_first
        .subscribe(SubscribeOptions {
            after: Some(cursor),
            include_sandbox_failures: None,
        })
        .await
        .unwrap();
    let three = send(&on_second, "three").await;
    let mut sequences = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(frame) = frames.next().await {
            match frame.unwrap() {
                SessionFrame::Reset(reset) => {
                    panic!("the client was sent back to {:?}", reset.cursor)
                }
                SessionFrame::Update(update) => {
                    sequences.extend(update.messages.iter().map(|m| m.sequence));
                    if update.terminals.iter().any(|t| t.command_id == three) {
                        return;
                    }
                }
                SessionFrame::Progress(_) => {}
            }
        }
        panic!("the frames ended before the third prompt settled");
    })
    .await
    .expect("the third prompt's frames arrived in time");
    assert!(
        sequences.iter().all(|sequence| *sequence > last_seen),
        "entries the client had were sent again: {sequences:?} after {last_seen}"
    );
    let mut unique = sequences.clone();
    unique.dedup();
    assert_eq!(sequences, unique, "an entry came twice");
    assert_eq!(
        sequences.len(),
        2,
        "the third prompt and its answer: {sequences:?}"
    );
    first.close().await.unwrap();
    second.close().await.unwrap();
}

/// A watcher of a process whose owner is taken over is not ended: its stream follows
/// the Session on, through the new owner, from where it was, with nothing missed,
/// repeated or reset.
#[tokio::test]
async fn a_watch_goes_on_when_the_owner_here_is_taken_over() {
    if !support::ready() {
        return;
    }
    let (first, second, on_first) = started().await;
    let watch = on_first.watch(ReadOptions::default()).await.unwrap();
    let last_seen = watch.snapshot.messages.last().unwrap().sequence;
    let mut changes = watch.changes;

    // The second process takes the Session over behind the first one's back and commits.
    let (_, two) = take_over(&second, &on_first).await;
    // A prompt through the first process: its owner's commit is fenced, so it leaves,
    // and the prompt reaches the new owner.
    let three = send(&on_first, "three").await;

    let mut sequences = Vec::new();
    let mut terminals = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(frame) = changes.next().await {
            match frame.unwrap() {
                SessionFrame::Reset(reset) => {
                    panic!("the watcher was reset to {:?}", reset.cursor)
                }
                SessionFrame::Update(update) => {
                    sequences.extend(update.messages.iter().map(|m| m.sequence));
                    terminals.extend(update.terminals.iter().map(|t| t.command_id.clone()));
                    if terminals.contains(&three) {
                        return;
                    }
                }
                SessionFrame::Progress(_) => {}
            }
        }
        panic!("the watch ended when its owner left: saw {sequences:?}, terminals {terminals:?}");
    })
    .await
    .expect("the third prompt's frames arrived in time");
    assert!(
        sequences.iter().all(|sequence| *sequence > last_seen),
        "entries the watcher had were sent again: {sequences:?} after {last_seen}"
    );
    let mut ordered = sequences.clone();
    ordered.sort_unstable();
    ordered.dedup();
    assert_eq!(sequences, ordered, "out of order or twice");
    assert_eq!(
        sequences.len(),
        4,
        "the second and third prompts and their answers: {sequences:?}"
    );
    assert_eq!(terminals, vec![two, three], "each terminal once, in order");
    first.close().await.unwrap();
    second.close().await.unwrap();
}

/// The sequence a cursor (`v<version>.<epoch>.<sequence>`) stands at.
fn sequence_of(cursor: &shiitake_protocol::Cursor) -> u64 {
    cursor.as_str().rsplit('.').next().unwrap().parse().unwrap()
}

/// A stale owner's replay holds nothing past its own cursor, though the store already
/// holds the new owner's entries: a frame carrying entries past its cursor makes the
/// next replay from that cursor send them again (the partitioned process of
/// store_faults.rs did so).
#[tokio::test]
async fn a_stale_owners_replay_holds_nothing_past_its_cursor() {
    if !support::ready() {
        return;
    }
    let (first, second, on_first) = started().await;
    let seen = on_first.read(ReadOptions::default()).await.unwrap();
    let first_message = seen.messages.first().unwrap().sequence;
    let before = seen.cursor.clone().unwrap();

    let _ = take_over(&second, &on_first).await;

    // From the first message on, asked of the first process's owner, which has not
    // heard of the takeover.
    let after = before
        .as_str()
        .rsplit_once('.')
        .map(|(prefix, _)| format!("{prefix}.{first_message}"))
        .unwrap();
    let mut frames = on_first
        .subscribe(SubscribeOptions {
            after: Some(shiitake_protocol::Cursor::new(after).unwrap()),
            include_sandbox_failures: None,
        })
        .await
        .unwrap();
    let frame = tokio::time::timeout(PATIENCE, frames.next())
        .await
        .expect("the replay came")
        .unwrap()
        .unwrap();
    let SessionFrame::Update(update) = frame else {
        panic!("a replay, not {frame:?}");
    };
    let cursor = sequence_of(update.cursor.as_ref().unwrap());
    let sequences: Vec<u64> = update.messages.iter().map(|m| m.sequence).collect();
    assert!(
        !sequences.is_empty() && sequences.iter().all(|sequence| *sequence <= cursor),
        "entries {sequences:?} in a frame whose cursor is at {cursor}"
    );
    first.close().await.unwrap();
    second.close().await.unwrap();
}
