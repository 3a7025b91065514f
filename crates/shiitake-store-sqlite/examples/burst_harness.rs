//! A child process for the group-commit crash test (`tests/suite/group_commit_crash.rs`).
//!
//! Usage: `burst_harness <dir>`. Opens an Agent on `<dir>/agent.db` with full
//! durability and a model that never answers, creates 64 Sessions, and has one
//! caller per Session send prompts as fast as they are accepted, printing
//! `ACK <session> <command>` the moment each `Accepted` comes back. It never
//! stops on its own: the parent SIGKILLs it mid-burst, while group commits are in
//! flight, and then checks that every acknowledged command is in the file.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use shiitake_capabilities::Catalog;
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentApi, PromptText, RequestId, SendOptions, SessionApi};
use shiitake_store_sqlite::{Durability, SqliteStore};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Concurrent callers, one Session each.
const CALLERS: usize = 64;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The parent reads these lines; a closed pipe means it is gone and so can we be.
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

async fn open(dir: &Path) -> Result<Agent, Failure> {
    let store = SqliteStore::open(&dir.join("agent.db"), Durability::Full).await?;
    let never = Turn::new(vec![Step::DelayMs(600_000), Step::Text("late".into())]);
    let model = Arc::new(ScriptedModel::new(Script::new(vec![never]).cycle(true)));
    let config = AgentConfig::new(Arc::new(FixedModel(model)));
    Ok(Agent::open(Arc::new(store), Arc::new(Catalog::new()), config).await?)
}

async fn caller(agent: Agent, n: usize) -> Result<(), Failure> {
    let id = agent
        .create_session(RequestId::new(format!("burst-{n}"))?)
        .await?;
    let session = agent.session(id.clone());
    for prompt in 0.. {
        let accepted = session
            .send(
                PromptText::new(format!("prompt {prompt}"))?,
                SendOptions::default(),
            )
            .await?;
        say(&format!("ACK {id} {}", accepted.command_id));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: burst_harness <dir>")?;
    let agent = open(Path::new(&dir)).await?;
    let callers: Vec<_> = (0..CALLERS)
        .map(|n| tokio::spawn(caller(agent.clone(), n)))
        .collect();
    for caller in callers {
        caller.await??;
    }
    Ok(())
}
