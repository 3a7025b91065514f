//! A child process for the kill-and-restart test (`tests/suite/kill_and_restart.rs`).
//!
//! Usage: `crash_harness <phase> <dir>`. Each phase opens the Agent on
//! `<dir>/agent.db` with its own model script, does its part, and reports
//! progress as lines on stdout so the parent knows when to SIGKILL it:
//!
//! - `accept`: runs p1 to completion, then accepts p2 (whose run calls the
//!   unsafe tool) and p3; prints `TOOL_RUNNING` once the tool is in progress.
//! - `stream`: reopens; recovery answers the unsafe call `outcome unknown` and
//!   calls the model again, which streams slowly; prints `STREAMING`.
//! - `finish`: reopens; recovery completes p2 and the queue runs p3; prints
//!   `DONE <json>` with the transcript and terminals, then exits.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, SourceId, StaticSource, ToolError,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::message::Message;
use shiitake_protocol::{
    AgentApi, PageLimit, PromptText, ReadOptions, RequestId, SendOptions, SessionApi, SessionFrame,
    SessionId, SubscribeOptions,
};
use shiitake_store_sqlite::{Durability, SqliteStore};

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The parent reads these lines; a closed pipe means it is gone and so can we be.
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// The unsafe tool: appends one line to `side-effects` (the effect that must happen
/// at most once), then waits as if it were slow.
async fn catalog(dir: PathBuf) -> Result<Arc<Catalog>, Failure> {
    let side_effect = Operation::from_fn(
        OperationName::new("side_effect")?,
        "Records a side effect that must not happen twice.",
        move |_input, _ctx| {
            let file = dir.join("side-effects");
            async move {
                let mut effects = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .map_err(|e| ToolError::fatal(e.to_string()))?;
                writeln!(effects, "effect").map_err(|e| ToolError::fatal(e.to_string()))?;
                effects
                    .sync_all()
                    .map_err(|e| ToolError::fatal(e.to_string()))?;
                say("TOOL_RUNNING");
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(Value::from("effect recorded"))
            }
        },
    );
    let module =
        Module::new(ModulePath::new("crash")?, "Crash test tools.").with_operation(side_effect)?;
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("crash"),
            vec![module],
        )))
        .await?;
    Ok(Arc::new(catalog))
}

async fn open(dir: &Path, script: Script) -> Result<Agent, Failure> {
    let store = SqliteStore::open(&dir.join("agent.db"), Durability::Full).await?;
    let model = Arc::new(ScriptedModel::new(script));
    let config = AgentConfig::new(Arc::new(FixedModel(model)));
    Ok(Agent::open(Arc::new(store), catalog(dir.to_path_buf()).await?, config).await?)
}

fn session_id(dir: &Path) -> Result<SessionId, Failure> {
    Ok(SessionId::new(
        std::fs::read_to_string(dir.join("session-id"))?.trim(),
    )?)
}

async fn accept(dir: &Path) -> Result<(), Failure> {
    let script = Script::new(vec![
        Turn::text("first done"),
        Turn::tool_call("crash__side_effect", json!({})),
    ]);
    let agent = open(dir, script).await?;
    let id = agent
        .create_session(RequestId::new("crash-session")?)
        .await?;
    std::fs::write(dir.join("session-id"), id.as_str())?;
    let session = agent.session(id);
    let first = session
        .send(PromptText::new("p1")?, send_options("p1")?)
        .await?;
    wait_settled(&session, &first.command_id).await?;
    say("P1_SETTLED");
    session
        .send(PromptText::new("p2")?, send_options("p2")?)
        .await?;
    session
        .send(PromptText::new("p3")?, send_options("p3")?)
        .await?;
    say("ACCEPTED");
    std::future::pending::<()>().await;
    Ok(())
}

fn send_options(request: &str) -> Result<SendOptions, Failure> {
    Ok(SendOptions {
        delivery: None,
        request_id: Some(RequestId::new(request)?),
    })
}

async fn wait_settled(
    session: &impl SessionApi,
    command: &shiitake_protocol::CommandId,
) -> Result<(), Failure> {
    let watch = session.watch(ReadOptions::default()).await?;
    if watch
        .snapshot
        .terminals
        .iter()
        .any(|t| &t.command_id == command)
    {
        return Ok(());
    }
    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        if let SessionFrame::Update(update) = frame?
            && update.terminals.iter().any(|t| &t.command_id == command)
        {
            return Ok(());
        }
    }
    Err("the stream ended before the command settled".into())
}

async fn stream(dir: &Path) -> Result<(), Failure> {
    let mut steps = Vec::new();
    for word in [
        "slowly ",
        "streaming ",
        "words ",
        "that ",
        "never ",
        "finish",
    ] {
        steps.push(Step::Text(word.into()));
        steps.push(Step::DelayMs(400));
    }
    let agent = open(dir, Script::new(vec![Turn::new(steps)])).await?;
    let session = agent.session(session_id(dir)?);
    let mut frames = session.subscribe(SubscribeOptions::default()).await?;
    while let Some(frame) = frames.next().await {
        if let SessionFrame::Progress(_) = frame? {
            say("STREAMING");
            break;
        }
    }
    std::future::pending::<()>().await;
    Ok(())
}

async fn finish(dir: &Path) -> Result<(), Failure> {
    let script = Script::new(vec![Turn::text("p2 recovered"), Turn::text("p3 answer")]);
    let agent = open(dir, script).await?;
    let session = agent.session(session_id(dir)?);
    let p3 = agent_command(&session, "p3").await?;
    wait_settled(&session, &p3).await?;
    let snapshot = session
        .read(ReadOptions {
            limit: Some(PageLimit::new(200)?),
            ..ReadOptions::default()
        })
        .await?;
    let transcript: Vec<Value> = snapshot
        .messages
        .iter()
        .map(|m| outline(&m.value))
        .collect();
    let terminals: Vec<Value> = snapshot
        .terminals
        .iter()
        .map(|t| json!([t.outcome, t.command_id.as_str()]))
        .collect();
    let report = json!({ "transcript": transcript, "terminals": terminals, "pending": snapshot.pending.prompts.len() });
    say(&format!("DONE {report}"));
    agent.close().await?;
    Ok(())
}

/// The command id p3 was accepted under, found by retrying its exact request.
async fn agent_command(
    session: &impl SessionApi,
    request: &str,
) -> Result<shiitake_protocol::CommandId, Failure> {
    Ok(session
        .send(PromptText::new(request)?, send_options(request)?)
        .await?
        .command_id)
}

fn outline(message: &Message) -> Value {
    match message {
        Message::User(user) => json!([
            "user",
            serde_json::to_value(&user.content).unwrap_or(Value::Null)
        ]),
        Message::Assistant(assistant) => {
            let calls: Vec<_> = assistant.tool_calls().map(|c| c.name.clone()).collect();
            json!(["assistant", assistant.text(), calls])
        }
        Message::ToolResult(result) => json!([
            "tool",
            result.tool_name,
            result.is_error,
            serde_json::to_value(&result.content).unwrap_or(Value::Null)
        ]),
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let (Some(phase), Some(dir)) = (args.next(), args.next()) else {
        return Err("usage: crash_harness <accept|stream|finish> <dir>".into());
    };
    let dir = PathBuf::from(dir);
    match phase.as_str() {
        "accept" => accept(&dir).await,
        "stream" => stream(&dir).await,
        "finish" => finish(&dir).await,
        other => Err(format!("unknown phase {other}").into()),
    }
}
