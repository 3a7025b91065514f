//! A child process for `tests/suite/crash_between_answer_and_outcome.rs`: an Agent whose
//! model asks a question in wait mode; the harness answers it through the contract
//! and then holds the commit of the tool outcome, printing `HELD`, so the test can
//! SIGKILL it exactly between the answer and the outcome.
//!
//! `question_crash_harness <database file>`; prints `SESSION <id>` then `HELD`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::kit::KitExtension;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, FiredTimer, HookError, RunContext, Settled,
    StateView, ToolOutcome, Tx,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_ext_question::contract::{AnswerAsk, AskView, QuestionAnswer, QuestionContract};
use shiitake_ext_question::{AskRun, QuestionConfig};
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

/// The real question extension, except that committing a tool outcome never finishes.
struct Holding(KitExtension<QuestionContract, AskRun>);

impl Extension for Holding {
    fn definition(&self) -> &ExtensionDefinition {
        self.0.definition()
    }
    fn command_scope(&self, command: &str) -> Option<CommandScope> {
        self.0.command_scope(command)
    }
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        self.0.command(tx, command, input)
    }
    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        self.0.on_settled(tx, settled)
    }
    fn on_tool_result(&self, _tx: &mut Tx<'_>, _outcome: &ToolOutcome) -> Result<(), HookError> {
        println!("HELD");
        loop {
            std::thread::park();
        }
    }
    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        self.0.on_timer(tx, timer)
    }
    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        self.0.projection(state)
    }
    fn footer(&self, state: &StateView<'_>) -> Vec<FooterRowV0> {
        self.0.footer(state)
    }
    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        self.0.contribute(run, tools)
    }
    fn catalog(&self) -> Option<Catalog> {
        self.0.catalog()
    }
}

/// The first open Ask in an observation's slots.
fn open(slots: &SessionExtensionSlots) -> Option<AskView> {
    match view::<QuestionContract>(slots) {
        Ok(ExtensionViewV0::Running { value: Some(p) }) => p.asks.first().cloned(),
        _ => None,
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: question_crash_harness <db>")?,
    );
    let script = Script::new(vec![
        Turn::tool_call(
            "question__ask",
            json!({"questions": [{"header": "Database", "question": "Which database?",
                                  "options": [{"label": "SQLite"}, {"label": "PostgreSQL"}]}]}),
        ),
        Turn::text("never reached"),
    ]);
    let config = AgentConfig::new(Arc::new(FixedModel(Arc::new(ScriptedModel::new(script)))));
    let store = SqliteStore::open(&path, Durability::Full).await?;
    let question = shiitake_ext_question::extension(QuestionConfig::default())?;
    let grants = question.grants();
    let agent = Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension(Holding(question), grants)
    .open()
    .await?;
    let session = agent.session(agent.create_session(RequestId::new("crash")?).await?);
    println!("SESSION {}", session.session_id());
    session
        .send(
            PromptText::new("Set up the service")?,
            SendOptions::default(),
        )
        .await?;
    let mut watch = session.watch(ReadOptions::default()).await?;
    let mut ask = open(&watch.snapshot.extensions);
    while ask.is_none() {
        use futures::StreamExt;
        match watch.changes.next().await {
            Some(Ok(SessionFrame::Update(update))) => ask = open(&update.extensions),
            Some(_) => {}
            None => return Err("the frame stream ended".into()),
        }
    }
    let ask = ask.ok_or("no Ask")?;
    bind_session_extension::<_, QuestionContract>(&session)
        .call(&AnswerAsk {
            ask_id: ask.ask_id,
            request_id: "before-the-crash".into(),
            answers: vec![QuestionAnswer {
                selected: vec!["PostgreSQL".into()],
                text: None,
            }],
        })
        .await?;
    // The waiter now delivers the answer; its outcome's commit holds until the kill.
    std::future::pending::<()>().await;
    Ok(())
}
