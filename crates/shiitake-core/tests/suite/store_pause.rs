//! A commit that fails for a reason that passes (a full disk, a lost connection)
//! pauses the work where its last commit left it; once the store takes writes again
//! the work goes on by itself, with no restart and no new prompt, and nothing that may
//! have run runs twice. The store here is a real SQLite file behind a switch
//! (`shiitake_conformance::flaky_store`); the real full filesystem is `shiitake`'s
//! `serve_disk_full` test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code outside #[test] functions

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
    ToolError,
};
use shiitake_conformance::support::*;
use shiitake_core::Agent;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use shiitake_store_sqlite::{Durability, SqliteStore};

use crate::support::harness;
use shiitake_conformance::flaky_store::{Fault, FlakyStore};

/// What the tools did.
#[derive(Default)]
struct Effects {
    /// Executions of `jobs.charge` (not replay-safe).
    charged: AtomicUsize,
}

/// `jobs.charge` (not replay-safe) turns the store's switch to `fault` as it runs, so
/// the commit of its own result is the first to meet it; `jobs.wait` waits until the
/// run is cancelled.
async fn catalog(effects: Arc<Effects>, store: Arc<FlakyStore>, fault: Fault) -> Arc<Catalog> {
    let charge = Operation::from_fn(
        OperationName::new("charge").unwrap(),
        "Charges once.",
        move |_input: Value, _ctx| {
            let (effects, store) = (effects.clone(), store.clone());
            async move {
                effects.charged.fetch_add(1, Ordering::SeqCst);
                store.set(fault);
                Ok(Value::from("charged"))
            }
        },
    )
    .with_replay(Replay::Unsafe);
    let wait = Operation::from_fn(
        OperationName::new("wait").unwrap(),
        "Waits until cancelled.",
        move |_input: Value, ctx| async move {
            ctx.cancellation().cancelled().await;
            Err::<Value, _>(ToolError::Cancelled)
        },
    )
    .with_replay(Replay::Unsafe);
    let module = Module::new(ModulePath::new("jobs").unwrap(), "Jobs.")
        .with_operation(charge)
        .unwrap()
        .with_operation(wait)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("jobs"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

struct Paused {
    agent: Agent,
    store: Arc<FlakyStore>,
    effects: Arc<Effects>,
    _dir: tempfile::TempDir,
}

async fn open(turns: Vec<Turn>, fault: Fault) -> Paused {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let store = FlakyStore::new(Arc::new(sqlite));
    let effects = Arc::new(Effects::default());
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let tools = catalog(effects.clone(), store.clone(), fault).await;
    let agent = Agent::builder(store.clone(), tools, harness::config(model))
        .open()
        .await
        .unwrap();
    Paused {
        agent,
        store,
        effects,
        _dir: dir,
    }
}

/// Waits until a frame of `changes` shows the work waiting for its store.
async fn storage_wait(changes: &mut FrameStream) -> StorageWait {
    tokio::time::timeout(PATIENCE, async {
        while let Some(frame) = changes.next().await {
            let activity = match frame.unwrap() {
                SessionFrame::Update(update) => update.activity,
                SessionFrame::Progress(progress) => progress.activity,
                SessionFrame::Reset(reset) => reset.baseline.activity,
            };
            if let Some(wait) = activity.storage_wait {
                return wait;
            }
        }
        panic!("the frames ended before the wait showed");
    })
    .await
    .expect("the wait showed in time")
}

/// Every update frame until `command` settles, and its terminal.
async fn frames_until_settled(
    changes: &mut FrameStream,
    command: &CommandId,
) -> (Vec<UpdateFrame>, SessionTerminal) {
    tokio::time::timeout(PATIENCE, async {
        let mut updates = Vec::new();
        while let Some(frame) = changes.next().await {
            match frame.unwrap() {
                SessionFrame::Update(update) => {
                    let settled = update
                        .terminals
                        .iter()
                        .find(|terminal| &terminal.command_id == command)
                        .cloned();
                    updates.push(update);
                    if let Some(terminal) = settled {
                        return (updates, terminal);
                    }
                }
                SessionFrame::Reset(_) => panic!("a watcher was reset"),
                SessionFrame::Progress(_) => {}
            }
        }
        panic!("the frames ended before the command settled");
    })
    .await
    .expect("the command settled in time")
}

/// The disk fills as the unsafe tool runs, so its result cannot be committed: the run
/// waits (visibly), commands are refused `unavailable`, and when space returns the work
/// goes on without a restart or a new prompt. The tool is not run again: its outcome is
/// unknown, as after a kill, and the model answers.
#[tokio::test]
async fn a_run_whose_commit_fails_waits_and_goes_on_by_itself() {
    let turns = vec![
        Turn::tool_call("jobs__charge", json!({})),
        Turn::text("charged, I think"),
    ];
    let paused = open(turns, Fault::Refuse).await;
    let session = new_session(&paused.agent).await;
    let watch = session.watch(ReadOptions::default()).await.unwrap();
    let mut changes = watch.changes;
    let command = send(&session, "charge it").await;
    let wait = storage_wait(&mut changes).await;
    assert!(wait.error_message.contains("disk is full"), "{wait:?}");
    assert!(paused.store.failed() >= 1);

    // While it waits, a command is refused with a reason, and reads still answer.
    let refused = session
        .send(text("another"), SendOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Unavailable, "{refused:?}");
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(snapshot.activity.storage_wait.is_some());
    assert!(
        !snapshot.terminals.iter().any(|t| t.command_id == command),
        "the work did not settle while its store failed"
    );

    paused.store.set(Fault::None);
    let (_, terminal) = frames_until_settled(&mut changes, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed, "{terminal:?}");
    let lines = outline(&transcript(&session).await);
    assert_eq!(
        lines[..2],
        ["user: charge it", "assistant: -> jobs__charge"]
    );
    assert!(
        lines[2].starts_with("tool jobs__charge (error): outcome unknown"),
        "{lines:?}"
    );
    assert_eq!(lines[3], "assistant: charged, I think");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(paused.effects.charged.load(Ordering::SeqCst), 1);
    let after = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(after.activity.storage_wait, None);
    paused.agent.close().await.unwrap();
}

/// The run cannot read its Session (the pool has no connection to spare): it does not
/// end `failed` with the store's words; the owner pauses as for a failed commit and the
/// work goes on once a read succeeds, each message once. The Session has a lineage and
/// a fresh owner, so its run reads that lineage from the store.
#[tokio::test]
async fn a_run_whose_read_fails_waits_and_goes_on_by_itself() {
    let first = open(vec![Turn::text("one")], Fault::None).await;
    let session = new_session(&first.agent).await;
    let id = session.session_id().clone();
    let command = send(&session, "first").await;
    let mut changes = session.watch(ReadOptions::default()).await.unwrap().changes;
    frames_until_settled(&mut changes, &command).await;
    first.agent.close().await.unwrap();

    // A fresh owner of the same file, whose first read of the lineage fails twice.
    let sqlite = SqliteStore::open(&first._dir.path().join("agent.db"), Durability::Normal)
        .await
        .unwrap();
    let store = FlakyStore::new(Arc::new(sqlite));
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("read it")])));
    let tools = catalog(first.effects.clone(), store.clone(), Fault::None).await;
    let agent = Agent::builder(store.clone(), tools, harness::config(model))
        .open()
        .await
        .unwrap();
    let session = agent.session(id);
    let mut changes = session.watch(ReadOptions::default()).await.unwrap().changes;
    store.fail_lineage_reads(2);
    let command = send(&session, "go").await;
    let (_, terminal) = frames_until_settled(&mut changes, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed, "{terminal:?}");
    assert_eq!(store.lineage_failures_left(), 0, "the run read again");
    assert_eq!(
        outline(&transcript(&session).await),
        [
            "user: first",
            "assistant: one",
            "user: go",
            "assistant: read it"
        ]
    );
    let after = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(after.activity.storage_wait, None);
    agent.close().await.unwrap();
}

/// The commit of the tool's result lands but its answer is lost (the connection broke
/// after `COMMIT`): the owner cannot know, reads the Session back, and goes on from what
/// landed. The result is kept (not turned into "outcome unknown"), nothing is
/// committed twice, and the watcher sees each message once.
#[tokio::test]
async fn a_commit_that_landed_though_it_failed_is_read_back_not_repeated() {
    let turns = vec![
        Turn::tool_call("jobs__charge", json!({})),
        Turn::text("charged"),
    ];
    let paused = open(turns, Fault::LandThenFail).await;
    let session = new_session(&paused.agent).await;
    let watch = session.watch(ReadOptions::default()).await.unwrap();
    let mut changes = watch.changes;
    let command = send(&session, "charge it").await;
    let (updates, terminal) = frames_until_settled(&mut changes, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Completed, "{terminal:?}");
    assert_eq!(paused.store.failed(), 1);
    let lines = outline(&transcript(&session).await);
    assert_eq!(
        lines,
        [
            "user: charge it",
            "assistant: -> jobs__charge",
            "tool jobs__charge: charged",
            "assistant: charged"
        ]
    );
    let seen: Vec<u64> = updates
        .iter()
        .flat_map(|update| update.messages.iter().map(|m| m.sequence))
        .collect();
    let mut unique = seen.clone();
    unique.dedup();
    assert_eq!(seen, unique, "a message was published twice: {seen:?}");
    assert_eq!(seen.len(), 4, "the watcher saw every message: {seen:?}");
    assert_eq!(paused.effects.charged.load(Ordering::SeqCst), 1);
    paused.agent.close().await.unwrap();
}

/// A cancel asked while the tool ran, whose aborted result could not be committed:
/// when the store is back the work ends cancelled, not run on.
#[tokio::test]
async fn a_cancel_asked_before_the_pause_still_ends_the_work_cancelled() {
    let turns = vec![
        Turn::tool_call("jobs__wait", json!({})),
        Turn::text("should not be asked"),
    ];
    let paused = open(turns, Fault::None).await;
    let session = new_session(&paused.agent).await;
    let command = send(&session, "wait").await;
    assert_eq!(active_tool(&session).await, "jobs__wait");
    let watch = session.watch(ReadOptions::default()).await.unwrap();
    let mut changes = watch.changes;
    paused.store.set(Fault::Refuse);
    let cancel = SessionCommand::Cancel {
        command_id: command.clone(),
        only_if_pending: None,
    };
    session.command(cancel).await.unwrap();
    storage_wait(&mut changes).await;
    paused.store.set(Fault::None);
    let (_, terminal) = frames_until_settled(&mut changes, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Cancelled, "{terminal:?}");
    let lines = outline(&transcript(&session).await);
    assert!(
        !lines
            .iter()
            .any(|line| line.contains("should not be asked")),
        "{lines:?}"
    );
    paused.agent.close().await.unwrap();
}

/// A failure that does not pass (a constraint the data breaks) still fails the command,
/// with what the store said.
#[tokio::test]
async fn a_failure_that_does_not_pass_fails_the_command() {
    let turns = vec![
        Turn::tool_call("jobs__charge", json!({})),
        Turn::text("never committed"),
    ];
    let paused = open(turns, Fault::Permanent).await;
    let session = new_session(&paused.agent).await;
    let command = send(&session, "charge it").await;
    let terminal = terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Failed, "{terminal:?}");
    let diagnostic = terminal.diagnostic.unwrap_or_default();
    assert!(
        diagnostic.contains("CHECK constraint failed"),
        "{diagnostic}"
    );
    paused.agent.close().await.unwrap();
}
