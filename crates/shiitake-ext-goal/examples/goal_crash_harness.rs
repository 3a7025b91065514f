//! A child process for `tests/suite/kill_during_goal_turn.rs`: an Agent on one SQLite file
//! with the goal extension and a replay-safe `crash__step` tool.
//!
//! `goal_crash_harness start <dir>`: sets a goal; its first continuation calls
//! `crash__step`, which prints `IN_TURN` and never returns, so the test can SIGKILL
//! the process in the middle of the goal turn.
//!
//! `goal_crash_harness resume <dir> <session>`: reopens the file; prints `OPEN <goal>`
//! with the goal as found, lets recovery resume the interrupted turn (the step now
//! returns at once) and the goal run to completion, then prints `DONE <report>`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, Replay, SourceId, StaticSource,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_goal::contract::{GoalContract, GoalProjection, GoalStatus, SetGoal};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension, view};
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::{
    AgentApi, PageLimit, ReadOptions, RequestId, SessionApi, SessionExtensionSlots, SessionFrame,
    SessionId,
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

/// `crash__step`: records each execution in `<dir>/steps`; in `start` it then hangs.
async fn tools(dir: PathBuf, hang: bool) -> Result<Arc<Catalog>, Failure> {
    let step = Operation::from_fn(
        OperationName::new("step")?,
        "Takes one step of the work.",
        move |_input, _ctx| {
            let steps = dir.join("steps");
            async move {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&steps)
                    .map_err(|e| shiitake_capabilities::ToolError::fatal(e.to_string()))?;
                writeln!(file, "{}", if hang { "start" } else { "resume" })
                    .and_then(|()| file.sync_all())
                    .map_err(|e| shiitake_capabilities::ToolError::fatal(e.to_string()))?;
                if hang {
                    say("IN_TURN");
                    std::future::pending::<()>().await;
                }
                Ok(json!("step taken"))
            }
        },
    )
    .with_replay(Replay::Safe);
    let catalog = Catalog::new();
    let module =
        Module::new(ModulePath::new("crash")?, "Crash test tools.").with_operation(step)?;
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("crash"),
            vec![module],
        )))
        .await?;
    Ok(Arc::new(catalog))
}

async fn open(dir: &Path, turns: Vec<Turn>, hang: bool) -> Result<Agent, Failure> {
    let model = Arc::new(ScriptedModel::new(Script::new(turns)));
    let config = AgentConfig::new(Arc::new(FixedModel(model)));
    let store = SqliteStore::open(&dir.join("agent.db"), Durability::Full).await?;
    Ok(
        Agent::builder(Arc::new(store), tools(dir.to_owned(), hang).await?, config)
            .kit_extension(shiitake_ext_goal::extension()?)
            .open()
            .await?,
    )
}

fn goal(slots: &SessionExtensionSlots) -> Option<GoalProjection> {
    match view::<GoalContract>(slots) {
        Ok(ExtensionViewV0::Running { value }) => Some(value.unwrap_or_default()),
        _ => None,
    }
}

async fn start(dir: &Path) -> Result<(), Failure> {
    let agent = open(dir, vec![Turn::tool_call("crash__step", json!({}))], true).await?;
    let session = agent.session(agent.create_session(RequestId::new("crash")?).await?);
    say(&format!("SESSION {}", session.session_id()));
    bind_session_extension::<_, GoalContract>(&session)
        .call(&SetGoal {
            objective: "Index the archive".into(),
            replace_revision: None,
            request_id: Some("set".into()),
        })
        .await?;
    // The continuation's step prints IN_TURN and hangs until the kill.
    std::future::pending::<()>().await;
    Ok(())
}

async fn resume(dir: &Path, session_id: SessionId) -> Result<(), Failure> {
    let agent = open(
        dir,
        vec![
            Turn::text("Picked up where I left off."),
            Turn::tool_call("goal__complete", json!({"summary": "Indexed."})),
            Turn::text("Done."),
        ],
        false,
    )
    .await?;
    let session = agent.session(session_id);
    let mut watch = session.watch(ReadOptions::default()).await?;
    let found = goal(&watch.snapshot.extensions).ok_or("no goal slot")?;
    say(&format!("OPEN {}", serde_json::to_string(&found.goal)?));
    let achieved = |p: &GoalProjection| {
        p.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Achieved)
    };
    let mut done = achieved(&found);
    while !done {
        use futures::StreamExt;
        match watch.changes.next().await {
            Some(Ok(SessionFrame::Update(update))) => {
                done = goal(&update.extensions).is_some_and(|p| achieved(&p));
            }
            Some(_) => {}
            None => return Err("the frame stream ended".into()),
        }
    }
    let snapshot = session
        .read(ReadOptions {
            limit: Some(PageLimit::new(200)?),
            ..ReadOptions::default()
        })
        .await?;
    let projection = goal(&snapshot.extensions).ok_or("no goal slot")?;
    let terminals: Vec<Value> = snapshot
        .terminals
        .iter()
        .map(|t| json!([t.command_id, t.outcome]))
        .collect();
    let users: Vec<String> = snapshot
        .messages
        .iter()
        .filter_map(|m| match &m.value {
            Message::User(user) => match &user.content {
                UserContent::Text(text) => Some(text.clone()),
                UserContent::Blocks(_) => None,
            },
            _ => None,
        })
        .collect();
    say(&format!(
        "DONE {}",
        json!({
            "goal": projection.goal,
            "turns": projection.turns,
            "terminals": terminals,
            "users": users,
        })
    ));
    agent.close().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: goal_crash_harness start|resume <dir> [session]";
    let phase = args.next().ok_or(usage)?;
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    match phase.as_str() {
        "start" => start(&dir).await,
        "resume" => resume(&dir, SessionId::new(args.next().ok_or(usage)?)?).await,
        _ => Err(usage.into()),
    }
}
