//! One Hub process for the multi-process tests and benchmark: an Agent on
//! PostgreSQL served over HTTP on a free loopback port.
//!
//! Usage: `hub_node <database url> <agent key> <lease ms> <effects dir> <steps>`.
//! Prints `READY <base url> <lease holder>` on stdout once it serves, then runs
//! until killed. Its parts, chosen so a test can see what happened across
//! crashes:
//!
//! - The model (`StepModel`) answers each run with `<steps>` calls of the tool
//!   `hub.mark` then the text `done`, deciding from the run's own context, so any
//!   process can resume any run.
//!   A run whose prompt starts with `hold` never gets an answer (the benchmark
//!   measures acceptance behind it).
//! - `hub.mark` is not replay-safe: it appends its execution id to
//!   `<effects dir>/marks` (fsynced) before a short wait, so a test can count how
//!   often each call really ran, whichever process ran it. With `-` as the effects
//!   dir (the benchmark) it records nothing and answers at once.
//! - The `example-ticker` extension (Agent scope): its `arm {count, cadence}`
//!   command sets `count` timers on a cron cadence; each firing records a row
//!   `<timer>@<due_at>@<process>` in the transaction that claims the occurrence, so a
//!   firing claimed by two processes would show as two rows.
//!
//! Logs go to stderr (`RUST_LOG`, default `warn`), including the line a fenced
//! owner writes when another process took its Session over.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, SourceId, StaticSource, ToolError,
};
use shiitake_core::extension::{
    Due, Extension, ExtensionDefinition, FiredTimer, Grant, Grants, HookError, StateScope, Tx,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::scripted::ScriptToolCall;
use shiitake_model::{
    AssistantStream, Model, ModelContext, ModelError, ModelInfo, ModelOptions, Script,
    ScriptedModel, Step, Turn,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::message::{Message, UserContent};
use shiitake_server::{ServerConfig, Token, router};
use shiitake_store_postgres::{AgentKey, PostgresOptions, PostgresStore};
use tokio_util::sync::CancellationToken;

/// The token of every Hub node.
const TOKEN: &str = "hub-test-token-0123456789abcdef";

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Calls `hub.mark` `steps` times in a run, then answers `done`.
struct StepModel {
    steps: usize,
}

impl StepModel {
    /// Tool results since the run's prompt (the last user message).
    fn done_in_run(context: &ModelContext) -> usize {
        context
            .messages
            .iter()
            .rev()
            .take_while(|message| !matches!(message, Message::User(_)))
            .filter(|message| matches!(message, Message::ToolResult(_)))
            .count()
    }

    /// Whether the run's prompt asks for no answer at all.
    fn held(context: &ModelContext) -> bool {
        context
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::User(user) => Some(
                    matches!(&user.content, UserContent::Text(text) if text.starts_with("hold")),
                ),
                _ => None,
            })
            == Some(true)
    }
}

/// Long enough to outlast any benchmark; the pause is cancellable.
const HOLD_MS: u64 = 24 * 60 * 60 * 1000;

#[async_trait]
impl Model for StepModel {
    fn describe(&self) -> ModelInfo {
        ModelInfo::new("scripted", "scripted", "step-model")
    }

    async fn stream(
        &self,
        context: ModelContext,
        options: ModelOptions,
        cancel: CancellationToken,
    ) -> Result<AssistantStream, ModelError> {
        let done = Self::done_in_run(&context);
        let turn = if Self::held(&context) {
            Turn::new(vec![Step::DelayMs(HOLD_MS)])
        } else if done < self.steps {
            Turn::new(vec![
                Step::DelayMs(5),
                Step::ToolCall(ScriptToolCall {
                    // One id per step of the run, so the execution id (command and
                    // call) names one logical call, whichever process makes it.
                    id: Some(format!("call_step_{done}")),
                    name: "hub__mark".to_owned(),
                    arguments: [("step".to_owned(), json!(done))].into_iter().collect(),
                }),
            ])
        } else {
            Turn::new(vec![Step::DelayMs(5), Step::Text("done".to_owned())])
        };
        ScriptedModel::new(Script::new(vec![turn]))
            .stream(context, options, cancel)
            .await
    }
}

/// The tools: `hub.mark`, which records each execution before a short wait (or,
/// without an effects dir, does nothing).
async fn catalog(effects: Option<PathBuf>) -> Result<Arc<Catalog>, Failure> {
    let mark = Operation::from_fn(
        OperationName::new("mark")?,
        "Records that this call ran; must not run twice.",
        move |_input, context| {
            let file = effects.as_ref().map(|effects| effects.join("marks"));
            let execution = context.execution_id().to_string();
            async move {
                let Some(file) = file else {
                    return Ok(Value::from("marked"));
                };
                let mut marks = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .map_err(|error| ToolError::fatal(error.to_string()))?;
                // One write(2) of the whole line: with O_APPEND, lines of several
                // processes never interleave (`writeln!` may write the newline apart).
                marks
                    .write_all(format!("{execution}\n").as_bytes())
                    .map_err(|error| ToolError::fatal(error.to_string()))?;
                marks
                    .sync_data()
                    .map_err(|error| ToolError::fatal(error.to_string()))?;
                tokio::time::sleep(Duration::from_millis(30)).await;
                Ok(Value::from("marked"))
            }
        },
    );
    let module = Module::new(ModulePath::new("hub")?, "Hub test tools.").with_operation(mark)?;
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("hub"),
            vec![module],
        )))
        .await?;
    Ok(Arc::new(catalog))
}

/// Agent-scope timers whose firings are recorded per process.
struct Ticker {
    definition: ExtensionDefinition,
    process: String,
}

impl Extension for Ticker {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "arm" => {
                let count = input["count"].as_u64().unwrap_or(1);
                let cadence = input["cadence"]
                    .as_str()
                    .unwrap_or("* * * * * *")
                    .to_owned();
                let mut ids = Vec::new();
                for _ in 0..count {
                    let id = tx.set_timer(Due::Cron(cadence.clone()), json!({}))?;
                    ids.push(id.as_str().to_owned());
                }
                Ok(json!(ids))
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        let key = format!("{}@{}@{}", timer.id.as_str(), timer.due_at, self.process);
        tx.put(StateScope::Agent, "fired", &key, &timer.due_at)
    }
}

fn arg(args: &[String], index: usize, what: &str) -> Result<String, Failure> {
    args.get(index)
        .cloned()
        .ok_or_else(|| format!("missing {what}; usage: hub_node <database url> <agent key> <lease ms> <effects dir> <steps>").into())
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = arg(&args, 0, "the database url")?;
    let key = AgentKey::new(arg(&args, 1, "the agent key")?)?;
    let lease_ms: u64 = arg(&args, 2, "the lease in ms")?.parse()?;
    let effects = Some(arg(&args, 3, "the effects dir")?)
        .filter(|dir| dir != "-")
        .map(PathBuf::from);
    let steps: usize = arg(&args, 4, "the steps of a run")?.parse()?;

    let mut options = PostgresOptions::new(url, key);
    options.lease_ttl = Duration::from_millis(lease_ms);
    let store = PostgresStore::open(options).await?;
    let holder = store.holder().to_owned();
    let mut config = AgentConfig::new(Arc::new(FixedModel(Arc::new(StepModel { steps }))));
    config.tool_timeout = Duration::from_secs(30);
    let ticker = Ticker {
        definition: ExtensionDefinition {
            id: ExtensionId::new("example-ticker")?,
            namespace: "ticker".into(),
            scopes: vec![StateScope::Agent],
            schema_version: 1,
            migrations: Vec::new(),
            configuration: json!({}),
        },
        process: holder.clone(),
    };
    let agent = Agent::builder(Arc::new(store), catalog(effects).await?, config)
        .extension(
            ticker,
            [Grant::State, Grant::Timers, Grant::Commands]
                .into_iter()
                .collect::<Grants>(),
        )
        .open()
        .await?;
    let app = router(Arc::new(agent), ServerConfig::new(Token::new(TOKEN)?));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "READY http://{address} {holder}")?;
        out.flush()?;
    }
    axum::serve(listener, app).await?;
    Ok(())
}
