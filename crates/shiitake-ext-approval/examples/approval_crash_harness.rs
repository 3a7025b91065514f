//! A child process for `tests/suite/crash_points.rs`: an Agent whose model calls
//! `notes.write`, which the approval policy asks about; the harness stops at one crash
//! point and prints a line there, so the test can SIGKILL it exactly at that point.
//!
//! `approval_crash_harness <point> <dir>` (the database is `<dir>/agent.db`, the side
//! effects go to `<dir>/notes.txt`); it prints `SESSION <id>`, then:
//!
//! - `pending`: `WAITING` once the call waits for a person (nobody answers);
//! - `approved`: answers allow once, then holds the gate's transaction that would
//!   record the call's start (the answer is committed, the call has not run): `HELD`;
//! - `running`: answers allow once; the tool writes its note and never answers (its
//!   result is never committed): `TOOL_RUNNING`;
//! - `denied`: answers deny with a reason, then holds the gate's transaction that
//!   would hand the call its refusal: `HELD`.

#[path = "../tests/support/notes.rs"]
mod notes;

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::kit::KitExtension;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, GateMoment, GateVerdict, GatedCall, HookError,
    RunContext, Settled, StateScope, StateView, Tx,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, ApprovalView, Decision};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::catalog::Catalog;
use shiitake_protocol::extension::{ExtensionViewV0, bind_session_extension, view};
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::{
    AgentApi, CommandScope, PromptText, ReadOptions, RequestId, SendOptions, SessionApi,
    SessionExtensionSlots, SessionFrame,
};
use shiitake_store_sqlite::{Durability, SqliteStore};

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The real approval extension, except that its gate never finishes a transaction
/// after the first one when `hold` is set.
struct Holding {
    inner: KitExtension<ApprovalContract>,
    hold: bool,
}

impl Extension for Holding {
    fn definition(&self) -> &ExtensionDefinition {
        self.inner.definition()
    }
    fn command_scope(&self, command: &str) -> Option<CommandScope> {
        self.inner.command_scope(command)
    }
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        self.inner.command(tx, command, input)
    }
    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        self.inner.on_settled(tx, settled)
    }
    fn gate(&self, tx: &mut Tx<'_>, call: &GatedCall) -> Result<GateVerdict, HookError> {
        if self.hold && call.moment == GateMoment::Changed && answered(tx)? {
            // The person's answer is committed; this transaction never will be.
            println!("HELD");
            loop {
                std::thread::park();
            }
        }
        self.inner.gate(tx, call)
    }
    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        self.inner.projection(state)
    }
    fn footer(&self, state: &StateView<'_>) -> Vec<FooterRowV0> {
        self.inner.footer(state)
    }
    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        self.inner.contribute(run, tools)
    }
    fn catalog(&self) -> Option<Catalog> {
        self.inner.catalog()
    }
}

/// Whether a person's answer is committed and waits for the call to take it.
fn answered(tx: &Tx<'_>) -> Result<bool, HookError> {
    let approvals = tx.scan::<Value>(StateScope::Session, "approvals")?;
    Ok(approvals
        .iter()
        .any(|(_, approval)| approval["stage"]["stage"] == "answered"))
}

/// The first waiting approval in an observation's slots.
fn waiting(slots: &SessionExtensionSlots) -> Option<ApprovalView> {
    match view::<ApprovalContract>(slots) {
        Ok(ExtensionViewV0::Running { value: Some(p) }) => p.approvals.first().cloned(),
        _ => None,
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: approval_crash_harness pending|approved|running|denied <dir>";
    let point = args.next().ok_or(usage)?;
    let dir = PathBuf::from(args.next().ok_or(usage)?);
    let (answer, hold, hold_tool) = match point.as_str() {
        "pending" => (None, false, false),
        "approved" => (Some(Decision::AllowOnce), true, false),
        "running" => (Some(Decision::AllowOnce), false, true),
        "denied" => (Some(Decision::Deny), true, false),
        _ => return Err(usage.into()),
    };
    let script = Script::new(vec![
        Turn::tool_call("notes__write", json!({"text": "once"})),
        Turn::text("never reached"),
    ]);
    let config = AgentConfig::new(Arc::new(FixedModel(Arc::new(ScriptedModel::new(script)))));
    let store = SqliteStore::open(&dir.join("agent.db"), Durability::Full).await?;
    let approval = shiitake_ext_approval::extension(Policy::new(Ruling::Ask))?;
    let grants = approval.grants();
    let agent = Agent::builder(
        Arc::new(store),
        notes::catalog(&dir, hold_tool).await,
        config,
    )
    .extension(
        Holding {
            inner: approval,
            hold,
        },
        grants,
    )
    .open()
    .await?;
    let session = agent.session(agent.create_session(RequestId::new("crash")?).await?);
    println!("SESSION {}", session.session_id());
    session
        .send(PromptText::new("Write a note")?, SendOptions::default())
        .await?;
    let mut watch = session.watch(ReadOptions::default()).await?;
    let mut found = waiting(&watch.snapshot.extensions);
    while found.is_none() {
        match watch.changes.next().await {
            Some(Ok(SessionFrame::Update(update))) => found = waiting(&update.extensions),
            Some(_) => {}
            None => return Err("the frame stream ended".into()),
        }
    }
    let found = found.ok_or("no approval")?;
    match answer {
        None => println!("WAITING"),
        Some(decision) => {
            let reason = (decision == Decision::Deny).then(|| "not before the review".to_owned());
            bind_session_extension::<_, ApprovalContract>(&session)
                .call(&AnswerApproval {
                    approval_id: found.approval_id,
                    request_id: "before-the-crash".into(),
                    decision,
                    reason,
                })
                .await?;
        }
    }
    // Killed here, at the point the test asked for.
    std::future::pending::<()>().await;
    Ok(())
}
