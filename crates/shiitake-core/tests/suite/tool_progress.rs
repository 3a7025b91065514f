//! A running tool's progress (a command's latest output) reaches the Session's watchers
//! as `activity.toolOutput` while the call runs, the latest report winning, cut to
//! `TOOL_OUTPUT_BYTES`; once the call's result is committed it is gone, and nothing of
//! it is stored.

#![allow(clippy::unwrap_used)]

use crate::support::harness;

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, ProgressNote, SourceId, StaticSource,
};
use shiitake_conformance::support::*;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use tokio::sync::Notify;

/// `job.run` reports "line 1" … "line 5" (the last one past the bound), then waits for
/// `finish` before it answers.
async fn catalog(finish: Arc<Notify>) -> Arc<Catalog> {
    let run = Operation::from_fn(
        OperationName::new("run").unwrap(),
        "Runs.",
        move |_input, ctx| {
            let finish = finish.clone();
            async move {
                for line in 1..=4 {
                    ctx.progress().report(ProgressNote {
                        text: format!("line {line}\n"),
                        total_bytes: line * 7,
                    });
                    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                }
                let long = format!("{}line 5\n", "x".repeat(TOOL_OUTPUT_BYTES));
                ctx.progress().report(ProgressNote {
                    text: long,
                    total_bytes: 99_999,
                });
                finish.notified().await;
                Ok(json!("ran"))
            }
        },
    );
    let module = Module::new(ModulePath::new("job").unwrap(), "Jobs.")
        .with_operation(run)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("job"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

#[tokio::test]
async fn a_tools_latest_output_shows_while_it_runs_and_goes_with_its_result() {
    let finish = Arc::new(Notify::new());
    let script = Script::new(vec![
        Turn::tool_call("job__run", json!({})),
        Turn::text("done"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(script));
    let agent = harness::open_with(
        &dir.path().join("agent.db"),
        catalog(finish.clone()).await,
        harness::config(model),
    )
    .await;
    let session = new_session(&agent).await;
    let mut changes = session.watch(ReadOptions::default()).await.unwrap().changes;
    let command = send(&session, "run it").await;
    let mut seen: Vec<ToolOutput> = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while let Some(frame) = changes.next().await {
            if let SessionFrame::Update(update) = frame.unwrap()
                && let Some(output) = update.activity.tool_output
            {
                let last = output.text.ends_with("line 5\n");
                seen.push(output);
                if last {
                    return;
                }
            }
        }
    })
    .await
    .expect("the last report showed");
    let last = seen.last().unwrap();
    assert_eq!(last.tool, "job__run");
    assert_eq!(last.total_bytes, 99_999);
    assert_eq!(last.text.len(), TOOL_OUTPUT_BYTES, "cut to its last bytes");
    assert!(
        seen.len() <= 5,
        "at most one frame a report: {}",
        seen.len()
    );
    // While it runs, a read shows it too.
    let snapshot = session.read(ReadOptions::default()).await.unwrap();
    assert!(snapshot.activity.tool_output.is_some());

    finish.notify_one();
    terminal_of(&session, &command).await;
    let after = session.read(ReadOptions::default()).await.unwrap();
    assert_eq!(after.activity.tool_output, None);
    // Nothing of it was stored: the result is the tool's answer.
    let lines = outline(&transcript(&session).await);
    assert!(
        lines.iter().all(|line| !line.contains("line 5")),
        "{lines:?}"
    );
    agent.close().await.unwrap();
}
