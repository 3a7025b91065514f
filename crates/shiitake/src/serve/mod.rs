//! `shiitake serve`: the Local host (on SQLite), or one process of several sharing
//! a PostgreSQL database (`--database postgres://…`).
//!
//! This folder is everything only serving needs; the client commands never reach it.
//! Here are the options and the start in order (data directory, lock, port, Agents,
//! server, shutdown); its parts:
//!
//! - [`approval`]: which tool calls wait for a person (`--approve`, `--approve-tool`);
//! - [`connections`]: how many HTTP connections may be open and how long a request
//!   head may take;
//! - [`database`]: what `--database` names and the store opened there;
//! - [`datadir`]: the data directory kept private and held by one `serve` at a time;
//! - [`host`]: which roster runs (Local's directory of Agents, or one Hub Agent) and
//!   the router in front of it;
//! - [`models`]: the default model (the bundled local one unless `--model` says
//!   otherwise) and the models a Session may choose;
//! - [`operations`]: what an operator watches: `--metrics` and `--log-format`.

mod approval;
mod commands;
mod connections;
mod database;
mod datadir;
mod host;
#[cfg(feature = "postgres")]
mod hub;
mod models;
mod operations;
#[cfg(feature = "postgres")]
mod tenant_roots;

pub use operations::LogFormat;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use knapsack::Knapsack;
use knapsack::mcp::{
    McpConnected, McpHttp, McpServer, McpServersOptions, McpUnavailable, Redactions,
};
use knapsack::ui::UiBridge;
use shiitake_capabilities::{Catalog, SourceId};
use shiitake_ext_home::{Attachment, ComputerList};
use shiitake_ext_skills::{SkillLibrary, SkillRoot};
use shiitake_server::{Caller, ServerConfig, Token, load_or_create_token};

use crate::error::CliError;
use crate::setup::{Context, DEFAULT_PORT};
use database::Database;
use host::{Host, HostParts};
use models::{AllowedModels, ModelChoice, ServeModels, StartedLocal, start_local};

/// Options of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Model of Sessions that state no preference: a spec (see docs/models.md),
    /// `local` (the default: the bundled local model, started here) or `none`.
    #[arg(long, env = "SHIITAKE_MODEL")]
    model: Option<String>,
    /// Directory attached as the Computer `workspace` when no --computer is given
    /// (Home's file tools read and edit it); default: the current directory, unless that
    /// is `$HOME` or `/` (then the flag is required).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A Computer for Home, `name=DIR` (repeatable): a local directory its file tools
    /// work in; `/home <name>` chooses among several.
    #[arg(long = "computer", value_name = "NAME=DIR", value_parser = computer_spec)]
    computers: Vec<(String, PathBuf)>,
    /// A skills root (repeatable): each folder in it with a SKILL.md is a skill.
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// Another model spec Sessions may choose (repeatable); besides it, Sessions may choose
    /// `--model`, and `openai:`/`anthropic:` models when their API key is set.
    #[arg(long = "allow-model", value_name = "SPEC")]
    allow_model: Vec<String>,
    /// The tools runs offer their model, for every model: `all`, `none`, `compact` (the
    /// file tools and question) or modules and tools, `files,question,agents.create`.
    /// Default: all to full models, compact to small ones such as the bundled model.
    #[arg(long = "tools", value_name = "LIST")]
    tools: Option<String>,
    /// A remote MCP server, `name=URL[,header=Name:Value]...` (repeatable); its tools
    /// become `env.mcp.<name>`. `${VAR}` in a header value reads the environment.
    #[arg(long = "mcp", value_name = "NAME=URL[,header=Name:Value]", value_parser = mcp_spec)]
    mcp: Vec<McpSpec>,
    /// Where Sessions are stored: `sqlite:PATH` (default: `shiitake.db` in the data
    /// directory) or `postgres://USER@HOST:PORT/NAME`, which several `serve`
    /// processes may share (each owns some Sessions; see docs/hub.md).
    #[arg(
        long,
        env = "SHIITAKE_DATABASE",
        value_name = "URL",
        hide_env_values = true
    )]
    database: Option<String>,
    /// The lease and heartbeat on a shared PostgreSQL database.
    #[command(flatten)]
    hub: database::HubArgs,
    /// A file holding the bearer token clients must send (default: `--token` /
    /// `SHIITAKE_TOKEN` if given, else `<data-dir>/token`, created when absent).
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// The bounds on HTTP connections.
    #[command(flatten)]
    connections: connections::ConnectionArgs,
    /// Which Computers run commands, and in what sandbox.
    #[command(flatten)]
    commands: commands::CommandArgs,
    /// Before a tool not marked safe to repeat runs: `ask` a person or `allow` it.
    /// Default: ask before the file tools that edit, allow the rest.
    #[arg(long, value_enum, value_name = "ask|allow")]
    approve: Option<approval::Approve>,
    /// A rule for tools by name or pattern, `PATTERN=allow|ask|deny` (repeatable; `*`
    /// matches any run of characters, `env__mcp__notes__*=allow`); the most specific wins.
    #[arg(long = "approve-tool", value_name = "PATTERN=RULING")]
    approve_tools: Vec<String>,
    /// A rule for commands a Computer runs, `PATTERN=allow|ask|deny` (repeatable): `*`
    /// matches any run of characters, `'cargo test*=allow'`, `'rm -rf*=deny'`. Each
    /// command of a shell line must be allowed; commands that only read (`ls`, `cat`,
    /// `git status`, …) are, and a line that hides what it runs is never allowed by a rule.
    #[arg(long = "approve-command", value_name = "PATTERN=RULING")]
    approve_commands: Vec<String>,
    /// Metrics and the log format.
    #[command(flatten)]
    operations: operations::OperationsArgs,
    /// How long stopping may take to hand the Sessions over and close the store (1s to
    /// 10m, default 10s). Past it `serve` exits anyway: a store that does not answer
    /// (a database that is down) cannot hold the process, and its leases lapse.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = drain_timeout)]
    drain_timeout: Duration,
}

/// The range `--drain-timeout` accepts.
const DRAIN_TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(1)..=Duration::from_secs(600);

/// `--drain-timeout`: a duration within [`DRAIN_TIMEOUT_RANGE`].
fn drain_timeout(text: &str) -> Result<Duration, String> {
    let timeout = database::duration(text)?;
    if DRAIN_TIMEOUT_RANGE.contains(&timeout) {
        Ok(timeout)
    } else {
        Err(format!("must be from 1s to 10m, not {text}"))
    }
}

impl ServeArgs {
    /// How `serve` writes its log lines (`--log-format`).
    pub fn log_format(&self) -> LogFormat {
        self.operations.log_format()
    }

    /// What `--otlp-endpoint` and `--otlp-content` ask of the trace export.
    pub fn trace_config(&self) -> crate::traces::TraceConfig {
        self.operations.trace_config()
    }
}

/// A `--mcp` value as typed; parsed after clap so no error message repeats it, and
/// its `Debug` hides it (it may hold a header value).
#[derive(Clone)]
struct McpSpec(String);

impl std::fmt::Debug for McpSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpSpec(..)")
    }
}

fn mcp_spec(text: &str) -> Result<McpSpec, std::convert::Infallible> {
    Ok(McpSpec(text.to_owned()))
}

/// `name=DIR` of `--computer`.
fn computer_spec(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((name, dir)) if !name.is_empty() && !dir.is_empty() => {
            Ok((name.to_owned(), PathBuf::from(dir)))
        }
        _ => Err(format!("expected NAME=DIR, got {text:?}")),
    }
}

fn setup(what: &str) -> impl Fn(String) -> CliError + '_ {
    move |error| CliError::Setup(format!("{what}: {error}"))
}

/// The directory the file tools work in: `--workspace`, else the current directory
/// unless that is `$HOME` or `/`, which would hand the model a whole home or system.
fn workspace_root(given: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(root) = given {
        return Ok(root);
    }
    let current = std::env::current_dir()?;
    let canonical = std::fs::canonicalize(&current)?;
    let home = dirs::home_dir().and_then(|home| std::fs::canonicalize(home).ok());
    if canonical.parent().is_none() || home.as_deref() == Some(canonical.as_path()) {
        return Err(CliError::Setup(format!(
            "no --workspace given, and the current directory is {}: the agent's file tools \
             would read and edit all of it. Pass --workspace DIR with the project directory \
             they may touch, or start `shiitake serve` in that directory",
            canonical.display()
        )));
    }
    Ok(current)
}

/// The tools of the Local host besides the extensions': the `--mcp` servers, whose
/// header values `redactions` then keeps out of the log. (The file tools are Home's,
/// over the attached Computers.)
async fn catalog(mcp: &[McpSpec], redactions: &Redactions) -> Result<Arc<Catalog>, CliError> {
    let catalog = Arc::new(Catalog::new());
    if !mcp.is_empty() {
        add_mcp_servers(&catalog, mcp, redactions).await?;
    }
    Ok(catalog)
}

/// The Computers Home works in: each `--computer name=DIR`, or else `workspace` at
/// [`workspace_root`].
fn computer_dirs(
    workspace: Option<PathBuf>,
    computers: Vec<(String, PathBuf)>,
) -> Result<Vec<(String, PathBuf)>, CliError> {
    if computers.is_empty() {
        Ok(vec![("workspace".to_owned(), workspace_root(workspace)?)])
    } else {
        Ok(computers)
    }
}

/// Each Computer as a local attachment with the data directory hidden from its file
/// tools (the database and the token are not the model's to read).
fn attach(dirs: &[(String, PathBuf)], data_dir: &Path) -> Result<Vec<Attachment>, CliError> {
    dirs.iter()
        .map(|(name, dir)| {
            attach_one(name, dir, data_dir)
                .map_err(|error| setup("--computer")(format!("{name}={}: {error}", dir.display())))
        })
        .collect()
}

/// The directory `dir` as the Computer `name`, its file tools jailed to it and blind
/// to `hidden`; why not, in words.
fn attach_one(name: &str, dir: &Path, hidden: &Path) -> Result<Attachment, String> {
    let port = knapsack::LocalFiles::new(dir)
        .and_then(|files| files.hiding(hidden))
        .map_err(|error| error.to_string())?;
    Attachment::from_local(name, port).map_err(|error| error.to_string())
}

/// The skills of the `--skills` roots; what a root could not give is printed.
async fn skills(roots: &[PathBuf]) -> Option<Arc<SkillLibrary>> {
    if roots.is_empty() {
        return None;
    }
    let roots: Vec<SkillRoot> = roots.iter().map(SkillRoot::new).collect();
    let library = SkillLibrary::discover(&roots).await;
    for problem in &library.list().problems {
        eprintln!(
            "shiitake: skills: {}",
            serde_json::to_string(problem).unwrap_or_default()
        );
    }
    println!("shiitake: skills: {}", library.list().skills.len());
    Some(Arc::new(library))
}

/// Starts connecting the `--mcp` servers in the background, so `serve` answers at once;
/// each is printed when it connects (runs see its tools from then on), or reported and
/// left out. The catalog then follows their connections and `tools/list_changed`.
async fn add_mcp_servers(
    catalog: &Arc<Catalog>,
    specs: &[McpSpec],
    redactions: &Redactions,
) -> Result<(), CliError> {
    let servers = specs
        .iter()
        .map(|spec| McpServer::from_spec(&spec.0, |name| std::env::var(name).ok()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| setup("--mcp")(error.to_string()))?;
    // Before anything is sent: rmcp's own log lines may repeat a server's reply.
    for server in &servers {
        redactions.add(server.headers());
    }
    let names: Vec<&str> = servers.iter().map(McpServer::name).collect();
    println!("shiitake: MCP servers connecting: {}", names.join(", "));
    let http = McpHttp::new().map_err(|error| setup("--mcp")(error.to_string()))?;
    let mut options = McpServersOptions::new(http);
    options.on_unavailable = Arc::new(|unavailable: McpUnavailable| {
        eprintln!("shiitake: MCP server left out: {}", unavailable.error);
    });
    options.on_connected = Arc::new(|connected: McpConnected| {
        println!(
            "shiitake: MCP server connected: {} ({} tools)",
            connected.name, connected.tools
        );
    });
    let source = Arc::new(Knapsack::mcp_servers(
        SourceId::new("mcp"),
        servers,
        options,
    ));
    source.connect_in_background().await;
    catalog
        .add_source(source)
        .await
        .map_err(|error| setup("--mcp")(error.to_string()))?;
    let follower = catalog.clone();
    tokio::spawn(async move {
        loop {
            follower.changed().await;
            follower.refresh().await;
        }
    });
    Ok(())
}

/// The token clients must send, and where it came from: `--token`/`SHIITAKE_TOKEN`,
/// else `--token-file`, else the data directory's token file (created when absent).
fn server_token(
    context: &Context,
    token_file: Option<&std::path::Path>,
    data_dir: &std::path::Path,
) -> Result<(Token, String), CliError> {
    let invalid = |from: &str| {
        let from = from.to_owned();
        move |error: shiitake_server::TokenError| setup("token")(format!("{from}: {error}"))
    };
    if let Some(token) = context.token() {
        let token = Token::new(token.trim()).map_err(invalid("--token"))?;
        return Ok((token, "from --token / SHIITAKE_TOKEN".to_owned()));
    }
    if let Some(path) = token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|error| setup("token")(format!("{}: {error}", path.display())))?;
        let from = path.display().to_string();
        let token = Token::new(text.trim()).map_err(invalid(&from))?;
        return Ok((token, format!("from {from}")));
    }
    let (token, path) =
        load_or_create_token(data_dir).map_err(|error| setup("token")(error.to_string()))?;
    Ok((token, format!("in {}", path.display())))
}

/// Runs the host until Ctrl-C, SIGTERM or a server error; each closes the Agents.
/// `redactions` is what the log writer scrubs: the `--mcp` header values join it.
pub async fn run(
    context: &Context,
    args: ServeArgs,
    redactions: &Redactions,
) -> Result<(), CliError> {
    let data_dir = context.data_dir()?;
    datadir::prepare(&data_dir)?;
    let database = Database::parse(args.database.as_deref(), &data_dir)
        .and_then(|database| database.with_hub(&args.hub))
        .map_err(|error| CliError::Setup(error.to_string()))?;
    // On SQLite, one process per data directory, and the port before the Agent: a
    // second `serve` must fail before it opens the database and resumes anyone's
    // work. On PostgreSQL, leases keep the processes' Sessions apart instead.
    let _lock = match database {
        Database::Sqlite(_) => Some(datadir::lock(&data_dir)?),
        Database::Postgres(_) => None,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|error| setup("listen")(format!("127.0.0.1:{}: {error}", args.port)))?;
    let address = listener.local_addr()?;
    let (token, token_from) = server_token(context, args.token_file.as_deref(), &data_dir)?;
    // Before the Agents open: what they record from their first step is kept.
    let agent = context.agent_name()?;
    let exporter = args.operations.exporter()?;
    let traces = args.operations.trace_config();
    let tools = catalog(&args.mcp, redactions).await?;
    let dirs = computer_dirs(args.workspace, args.computers)?;
    let mut hidden = vec![data_dir.clone()];
    hidden.extend(args.token_file.clone());
    let command_setup = commands::CommandSetup::new(&args.commands, &dirs, &data_dir, hidden)?;
    let attachments = commands::equip_all(&command_setup, attach(&dirs, &data_dir)?, &dirs)?;
    let skills = skills(&args.skills).await;
    let offered_tools = models::offered_tools(args.tools.as_deref())?;
    let approvals = approval::policy(args.approve, &args.approve_tools)
        .and_then(|policy| approval::with_commands(policy, &args.approve_commands))?;
    let choice = ModelChoice::parse(args.model.as_deref())?;
    let (default_spec, started_local) = match &choice {
        ModelChoice::Spec(spec) => (Some(spec.clone()), None),
        ModelChoice::Local(weights) => {
            let (spec, started) = start_local(*weights).await?;
            (Some(spec), started)
        }
        ModelChoice::None => (None, None),
    };
    let env = shiitake_model::ModelEnv::from_env();
    let allowed = AllowedModels::new(default_spec.iter().chain(&args.allow_model), &env);
    let models = Arc::new(
        ServeModels::new(default_spec.clone(), allowed)
            .keeping_script_places_in(data_dir.join("scripted")),
    );
    // The browser App bridge: the Local default Agent's runs borrow `ui`; the server
    // mounts its `/browser/` routes.
    let parts = HostParts {
        models,
        tools,
        skills,
        computers: Arc::new(ComputerList::new(attachments)),
        roots: dirs.clone(),
        commands: command_setup.clone(),
        bridge: UiBridge::default(),
        offered_tools: offered_tools.clone(),
        approval: approvals.clone(),
    };
    let host = Host::open(&database, &data_dir, &agent, parts).await?;
    datadir::tighten(&data_dir)?;
    println!("shiitake: data directory {}", data_dir.display());
    println!("shiitake: database {}", database.describe());
    println!("shiitake: token {token_from}");
    for (name, dir) in &dirs {
        println!(
            "shiitake: computer {name} at {} (the file tools may read and edit it)",
            dir.display()
        );
    }
    for line in command_setup.lines() {
        println!("{line}");
    }
    println!("shiitake: agents {}", host.names().join(", "));
    if let Database::Postgres(_) = database {
        println!("shiitake: the Hub roster; other processes on this database share its Sessions");
    }
    match &default_spec {
        Some(model) => println!("shiitake: model {model}"),
        None => println!(
            "shiitake: no model (--model none): runs of Sessions without a model fail until one is given"
        ),
    }
    println!(
        "shiitake: tools {}",
        models::describe_offered(&offered_tools)
    );
    println!("shiitake: approvals: {}", approvals.describe());
    let mut signals = StopSignals::register()?;
    let limits = args.connections.limits();
    println!("{}", connections::describe(&limits));
    println!("shiitake: listening on http://{address}");
    // The web page at `/`: a one-time link sets its session cookie (docs/web.md). It
    // is the first write after the start: a store that does not answer must not make
    // the process deaf to the signals.
    let logins = host.web_logins();
    let issued = tokio::select! {
        issued = logins.issue(&Caller::Operator) => Some(issued),
        stop = signals.wait() => {
            let signal = stop?;
            println!("shiitake: {signal}: stopping; accepted work resumes on the next start");
            None
        }
    };
    let code = match issued {
        Some(Ok(code)) => code,
        Some(Err(error)) => {
            shut_down(host, args.drain_timeout, started_local).await;
            return Err(setup("login link")(error.message));
        }
        None => {
            shut_down(host, args.drain_timeout, started_local).await;
            return Ok(());
        }
    };
    println!(
        "shiitake: web page: open http://{address}{} (the link works once)",
        shiitake_server::login_path(&code)
    );
    let mut config = ServerConfig::new(token.clone());
    if let Some(exporter) = exporter {
        println!("shiitake: metrics at http://{address}/metrics (the bearer token only)");
        config = config.with_metrics(exporter);
    }
    if let Some(said) = traces.describe() {
        println!("shiitake: traces: {said}");
    }
    let app = host.router(&token, config);
    let served = tokio::select! {
        served = shiitake_server::serve(listener, app, limits) => served.map_err(CliError::from),
        stop = signals.wait() => stop.map(|signal| {
            println!("shiitake: {signal}: stopping; accepted work resumes on the next start");
        }),
    };
    shut_down(host, args.drain_timeout, started_local).await;
    served?;
    Ok(())
}

/// Closes the Agents within `drain_timeout`, then stops the bundled model if this
/// process started it (it outlives the process otherwise).
async fn shut_down(host: Host, drain_timeout: Duration, started_local: Option<StartedLocal>) {
    close_within(host, drain_timeout).await;
    if let Some(local) = started_local {
        local.stop().await;
    }
}

/// Closes the Agents, giving up after `timeout`: their Sessions are then neither handed
/// over nor released, and their leases lapse (accepted work is durable either way).
async fn close_within(host: Host, timeout: Duration) {
    match tokio::time::timeout(timeout, host.close()).await {
        Ok(()) => println!("shiitake: the Agents closed"),
        Err(_) => println!(
            "shiitake: the Agents did not close within {} s (--drain-timeout; is the database reachable?); exiting: their leases lapse and accepted work resumes on the next start or another process",
            timeout.as_secs_f64()
        ),
    }
}

/// The signals that stop `serve`, registered before it says it is listening, so a
/// SIGTERM sent as soon as the address is printed is handled, not fatal.
struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn register() -> Result<Self, CliError> {
        Ok(Self {
            #[cfg(unix)]
            terminate: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?,
        })
    }

    /// Waits for Ctrl-C or (on Unix) SIGTERM, and names the one that came.
    async fn wait(&mut self) -> Result<&'static str, CliError> {
        #[cfg(unix)]
        {
            tokio::select! {
                interrupted = tokio::signal::ctrl_c() => {
                    interrupted.map(|()| "interrupted").map_err(CliError::from)
                }
                _ = self.terminate.recv() => Ok("terminated"),
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await?;
            Ok("interrupted")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_timeout_is_taken_from_1s_to_10m_and_refused_one_step_past() {
        assert_eq!(drain_timeout("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(drain_timeout("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(drain_timeout("600000ms"), Ok(Duration::from_secs(600)));
        for refused in ["999ms", "0s", "601s", "600001ms", "11m"] {
            let error = drain_timeout(refused).unwrap_err();
            assert!(error.contains("from 1s to 10m"), "{refused}: {error}");
        }
        assert!(drain_timeout("ten").unwrap_err().contains("whole number"));
    }
}
