//! One Hub process for the multi-process tests and benchmark: an Agent on
//! PostgreSQL served over HTTP on a free loopback port.
//!
//! Usage: `hub_node <database url> <agent key> <lease ms> <effects dir> <steps>
//! [heartbeat ms]`. Prints `READY <base url> <lease holder>` on stdout once it
//! serves, then runs until killed. With several keys (`a,b,c`) it serves them all on
//! one `PostgresHub`, one port per tenant, and prints `TENANT <key> <base url>` for
//! each after `READY` (whose url is the first tenant's); on SIGTERM it drains (`Agent::close`: it takes no
//! more Sessions and hands its own over), prints `DRAINED` and exits. Its parts,
//! chosen so a test can see what happened across crashes:
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
//! - The real Loop (`shiitake-ext-loop`) and Almanac (`shiitake-ext-almanac`)
//!   extensions, each wrapped (`Recorded`) so every timer firing writes a row
//!   `<due_at>@<timer>@<process>` (its value: when it fired) in the collection `fired`
//!   of the extension's own state, in the transaction that claims it; Almanac's
//!   admissions likewise write `<request id>@<when>@<process>` in `admitted`.
//!
//! Logs go to stderr (`RUST_LOG`, default `warn`), including the line a fenced
//! owner writes when another process took its Session over. `HUB_NODE_READ_CONNECTIONS`
//! sets the pool's size (the store's default otherwise), for a benchmark that asks
//! what a larger pool changes. `HUB_NODE_METRICS=1` installs the Prometheus recorder
//! (as `shiitake serve --metrics` does) and serves it at `GET /metrics` for the
//! node's token, so a test can read the Hub's counters (takeovers, the listener's
//! reconnections); without it nothing is recorded, as the benchmark wants.

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
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Admitted, CommandScope, Contribution, Due, Extension, ExtensionDefinition, FiredTimer, Grant,
    Grants, HookError, RunContext, Settled, StateScope, StateView, ToolOutcome, Tx,
};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::scripted::ScriptToolCall;
use shiitake_model::{
    AssistantStream, Model, ModelContext, ModelError, ModelInfo, ModelOptions, Script,
    ScriptedModel, Step, Turn,
};
use shiitake_protocol::catalog::Catalog as FlowCatalog;
use shiitake_protocol::footer::FooterRowV0;
use shiitake_protocol::message::{Message, UserContent};
use shiitake_protocol::{AgentApi, ExtensionId, SessionId};
use shiitake_server::{ServerConfig, Token, router};
use shiitake_store_postgres::{AgentKey, HubOptions, PostgresHub, PostgresOptions, PostgresStore};
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

    fn settled_uses_agent_state(&self) -> bool {
        // No settled hook: settles need not take the Agent lock for this extension.
        false
    }
}

/// A real extension whose timer firings (and admissions) are also recorded in its own
/// state, in the transaction that claims each: an occurrence fired twice shows as two
/// rows. Everything else is the extension's own.
struct Recorded<E> {
    inner: E,
    /// The state scope the extension keeps rows in.
    scope: StateScope,
    process: String,
}

impl<E: Extension> Extension for Recorded<E> {
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

    fn settled_uses_agent_state(&self) -> bool {
        self.inner.settled_uses_agent_state()
    }

    fn on_tool_result(&self, tx: &mut Tx<'_>, outcome: &ToolOutcome) -> Result<(), HookError> {
        self.inner.on_tool_result(tx, outcome)
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        let key = format!("{}@{}@{}", timer.due_at, timer.id.as_str(), self.process);
        let fired_at = tx.now();
        tx.put(self.scope, "fired", &key, &fired_at)?;
        self.inner.on_timer(tx, timer)
    }

    fn on_admission(&self, tx: &mut Tx<'_>, admitted: &Admitted) -> Result<(), HookError> {
        let now = tx.now();
        let key = format!("{}@{now}@{}", admitted.request_id.as_str(), self.process);
        tx.put(StateScope::Agent, "admitted", &key, &now)?;
        self.inner.on_admission(tx, admitted)
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        self.inner.projection(state)
    }

    fn footer(&self, state: &StateView<'_>) -> Vec<FooterRowV0> {
        self.inner.footer(state)
    }

    fn on_observed(&self, session_id: &SessionId) {
        self.inner.on_observed(session_id);
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        self.inner.contribute(run, tools)
    }

    fn catalog(&self) -> Option<FlowCatalog> {
        self.inner.catalog()
    }
}

const USAGE: &str = "usage: hub_node <database url> <agent key[,key...]> <lease ms> <effects dir> <steps> [heartbeat ms]";

fn arg(args: &[String], index: usize, what: &str) -> Result<String, Failure> {
    args.get(index)
        .cloned()
        .ok_or_else(|| format!("missing {what}; {USAGE}").into())
}

/// The Agent of one tenant on `store`: the step model, `hub.mark` and the recorded
/// extensions, each firing named by `holder`.
async fn open_agent(
    store: PostgresStore,
    holder: &str,
    effects: Option<PathBuf>,
    steps: usize,
) -> Result<Agent, Failure> {
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
        process: holder.to_owned(),
    };
    let looping = shiitake_ext_loop::extension()?;
    let loop_grants = looping.grants();
    let almanac = shiitake_ext_almanac::extension()?;
    let almanac_grants = almanac.grants();
    let agent = Agent::builder(Arc::new(store), catalog(effects).await?, config)
        .extension(
            ticker,
            [Grant::State, Grant::Timers, Grant::Commands]
                .into_iter()
                .collect::<Grants>(),
        )
        .extension(
            Recorded {
                inner: looping,
                scope: StateScope::Session,
                process: holder.to_owned(),
            },
            loop_grants,
        )
        .extension(
            Recorded {
                inner: almanac,
                scope: StateScope::Agent,
                process: holder.to_owned(),
            },
            almanac_grants,
        )
        .open()
        .await?;
    Ok(agent)
}

/// The installed Prometheus recorder, rendered at each scrape of `GET /metrics`.
struct Prometheus(metrics_exporter_prometheus::PrometheusHandle);

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prometheus(..)")
    }
}

impl shiitake_server::MetricsText for Prometheus {
    fn render(&self) -> String {
        self.0.render()
    }
}

/// The recorder when `HUB_NODE_METRICS=1` asks for one (installed once, for every
/// tenant's server of this process).
fn metrics() -> Result<Option<Arc<dyn shiitake_server::MetricsText>>, Failure> {
    if std::env::var("HUB_NODE_METRICS").ok().as_deref() != Some("1") {
        return Ok(None);
    }
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    Ok(Some(Arc::new(Prometheus(handle))))
}

/// Serves `agent` on a free loopback port; the address and the serving task.
async fn serve(
    agent: &Agent,
    metrics: Option<Arc<dyn shiitake_server::MetricsText>>,
) -> Result<
    (
        std::net::SocketAddr,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ),
    Failure,
> {
    let mut config = ServerConfig::new(Token::new(TOKEN)?);
    if let Some(exporter) = metrics {
        config = config.with_metrics(exporter);
    }
    let app = router(Arc::new(agent.clone()), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    Ok((
        address,
        // The server's own connection handling, as `shiitake serve --hub` has it
        // (`TCP_NODELAY` on, bounded heads and connections), not bare `axum::serve`.
        tokio::spawn(shiitake_server::serve(
            listener,
            app,
            shiitake_server::ConnectionLimits::default(),
        )),
    ))
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
    let keys = arg(&args, 1, "the agent key")?
        .split(',')
        .map(AgentKey::new)
        .collect::<Result<Vec<_>, _>>()?;
    let lease_ms: u64 = arg(&args, 2, "the lease in ms")?.parse()?;
    let effects = Some(arg(&args, 3, "the effects dir")?)
        .filter(|dir| dir != "-")
        .map(PathBuf::from);
    let steps: usize = arg(&args, 4, "the steps of a run")?.parse()?;
    let lease_ttl = Duration::from_millis(lease_ms);
    let read_connections: Option<u32> = std::env::var("HUB_NODE_READ_CONNECTIONS")
        .ok()
        .map(|n| n.parse())
        .transpose()?;
    let exporter = metrics()?;
    let heartbeat = match args.get(5) {
        Some(ms) => Duration::from_millis(ms.parse()?),
        None => shiitake_store_postgres::default_heartbeat(lease_ttl),
    };

    // One tenant: a store of its own (`PostgresStore::open`). Several: one hub for all.
    let (stores, hub) = match keys.as_slice() {
        [key] => {
            let mut options = PostgresOptions::new(url, key.clone());
            options.lease_ttl = lease_ttl;
            options.heartbeat = heartbeat;
            options.read_connections = read_connections.unwrap_or(options.read_connections);
            (vec![PostgresStore::open(options).await?], None)
        }
        _ => {
            let mut options = HubOptions::new(url);
            options.lease_ttl = lease_ttl;
            options.heartbeat = heartbeat;
            options.read_connections = read_connections.unwrap_or(options.read_connections);
            let hub = PostgresHub::open(options).await?;
            let mut stores = Vec::with_capacity(keys.len());
            for key in &keys {
                stores.push(hub.store(key.clone()).await?);
            }
            (stores, Some(hub))
        }
    };
    let mut agents = Vec::with_capacity(stores.len());
    let mut tenants = Vec::with_capacity(stores.len());
    let mut served = Vec::with_capacity(stores.len());
    let mut holder = String::new();
    for store in stores {
        holder = store.holder().to_owned();
        let key = store.agent().clone();
        let agent = open_agent(store, &holder, effects.clone(), steps).await?;
        let (address, task) = serve(&agent, exporter.clone()).await?;
        tenants.push((key, address));
        served.push(task);
        agents.push(agent);
    }
    // Registered before READY, so a SIGTERM sent at once drains rather than kills.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    {
        let mut out = std::io::stdout().lock();
        let first = tenants.first().map(|(_, address)| *address);
        writeln!(out, "READY http://{} {holder}", first.ok_or("no tenant")?)?;
        if hub.is_some() {
            for (key, address) in &tenants {
                writeln!(out, "TENANT {key} http://{address}")?;
            }
        }
        out.flush()?;
    }
    let ended = futures::future::select_all(served);
    tokio::select! {
        (ended, _, _) = ended => ended??,
        _ = terminate.recv() => {}
    }
    for agent in &agents {
        agent.close().await?;
    }
    if let Some(hub) = hub {
        hub.close().await;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "DRAINED")?;
    out.flush()?;
    Ok(())
}
