//! `shiitake serve`: the Local host.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use knapsack::Knapsack;
use knapsack::mcp::{McpHttp, McpServer, McpServersOptions, McpUnavailable};
use knapsack::ui::UiBridge;
use shiitake_capabilities::{Catalog, SourceId};
use shiitake_core::{Agent, AgentConfig, Durability, SqliteStore};
use shiitake_ext_ui::UiExtension;
use shiitake_protocol::AgentApi;
use shiitake_server::{ServerConfig, WebLogin, load_or_create_token, router};

use crate::datadir;
use crate::models::{AllowedModels, ModelChoice, ServeModels, start_local};
use crate::setup::Context;
use crate::{CliError, DEFAULT_PORT};

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
    /// Directory the agent's file tools may read and edit; default: the current directory,
    /// unless that is `$HOME` or `/` (then the flag is required).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Another model spec Sessions may choose (repeatable); besides it, Sessions may choose
    /// `--model`, and `openai:`/`anthropic:` models when their API key is set.
    #[arg(long = "allow-model", value_name = "SPEC")]
    allow_model: Vec<String>,
    /// A remote MCP server, `name=URL[,header=Name:Value]...` (repeatable); its tools
    /// become `env.mcp.<name>`. `${VAR}` in a header value reads the environment.
    #[arg(long = "mcp", value_name = "NAME=URL[,header=Name:Value]", value_parser = mcp_spec)]
    mcp: Vec<McpSpec>,
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

/// The tools of the Local host: the Knapsack files module over the workspace directory
/// (with the data directory hidden from it), and the `--mcp` servers.
async fn catalog(root: &Path, data_dir: &Path, mcp: &[McpSpec]) -> Result<Arc<Catalog>, CliError> {
    let files = knapsack::LocalFiles::new(root)
        .and_then(|files| files.hiding(data_dir))
        .map_err(|error| setup("workspace")(format!("{}: {error}", root.display())))?;
    let source = knapsack::Knapsack::files(Arc::new(files))
        .and_then(|connection| connection.source(SourceId::new("files")))
        .map_err(|error| setup("files tools")(error.to_string()))?;
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(source))
        .await
        .map_err(|error| setup("files tools")(error.to_string()))?;
    let catalog = Arc::new(catalog);
    if !mcp.is_empty() {
        add_mcp_servers(&catalog, mcp).await?;
    }
    Ok(catalog)
}

/// Connects the `--mcp` servers (those that fail are reported and left out) and keeps
/// the catalog following their `tools/list_changed`.
async fn add_mcp_servers(catalog: &Arc<Catalog>, specs: &[McpSpec]) -> Result<(), CliError> {
    let servers = specs
        .iter()
        .map(|spec| McpServer::from_spec(&spec.0, |name| std::env::var(name).ok()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| setup("--mcp")(error.to_string()))?;
    let http = McpHttp::new().map_err(|error| setup("--mcp")(error.to_string()))?;
    let mut options = McpServersOptions::new(http);
    options.on_unavailable = Arc::new(|unavailable: McpUnavailable| {
        eprintln!("shiitake: MCP server left out: {}", unavailable.error);
    });
    let source = Arc::new(Knapsack::mcp_servers(
        SourceId::new("mcp"),
        servers,
        options,
    ));
    catalog
        .add_source(source.clone())
        .await
        .map_err(|error| setup("--mcp")(error.to_string()))?;
    println!(
        "shiitake: MCP servers connected: {:?}",
        source.connected().await
    );
    let follower = catalog.clone();
    tokio::spawn(async move {
        loop {
            follower.changed().await;
            follower.refresh().await;
        }
    });
    Ok(())
}

/// Runs the Local host until Ctrl-C, SIGTERM or a server error; each closes the Agent.
pub async fn run(context: &Context, args: ServeArgs) -> Result<(), CliError> {
    let data_dir = context.data_dir()?;
    datadir::prepare(&data_dir)?;
    // One process per data directory, and the port before the Agent: a second
    // `serve` must fail before it opens the database and resumes anyone's work.
    let _lock = datadir::lock(&data_dir)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|error| setup("listen")(format!("127.0.0.1:{}: {error}", args.port)))?;
    let address = listener.local_addr()?;
    let workspace = workspace_root(args.workspace)?;
    let (token, token_path) =
        load_or_create_token(&data_dir).map_err(|error| setup("token")(error.to_string()))?;
    let database = data_dir.join("shiitake.db");
    let store = SqliteStore::open(&database, Durability::Full)
        .await
        .map_err(|error| setup("store")(format!("{}: {error}", database.display())))?;
    datadir::tighten(&data_dir)?;
    let tools = catalog(&workspace, &data_dir, &args.mcp).await?;
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
    let models = ServeModels::new(default_spec.clone(), allowed);
    // The browser App bridge: runs borrow `ui`; the server mounts its `/browser/` routes.
    let bridge = UiBridge::default();
    let ui = UiExtension::new(bridge.clone()).map_err(|error| setup("ui")(error.to_string()))?;
    let agent = Agent::builder(Arc::new(store), tools, AgentConfig::new(Arc::new(models)))
        .extension(ui, UiExtension::grants())
        .open()
        .await?;
    let agent = Arc::new(agent);
    println!("shiitake: data directory {}", data_dir.display());
    println!("shiitake: token in {}", token_path.display());
    println!(
        "shiitake: workspace {} (the file tools may read and edit it)",
        workspace.display()
    );
    match &default_spec {
        Some(model) => println!("shiitake: model {model}"),
        None => println!(
            "shiitake: no model (--model none): runs of Sessions without a model fail until one is given"
        ),
    }
    let mut signals = StopSignals::register()?;
    println!("shiitake: listening on http://{address}");
    // The web page at `/`: a one-time link sets its session cookie (docs/web.md).
    let web = WebLogin::default();
    let login = web
        .login_url(&format!("http://{address}"))
        .map_err(|error| setup("login link")(error.to_string()))?;
    println!("shiitake: web page: open {login} (the link works once)");
    let app = router(
        agent.clone(),
        ServerConfig::new(token)
            .with_browser(bridge.clone())
            .with_web(web),
    );
    let served = tokio::select! {
        served = axum::serve(listener, app) => served.map_err(CliError::from),
        stop = signals.wait() => stop.map(|signal| {
            println!("shiitake: {signal}: stopping; accepted work resumes on the next start");
        }),
    };
    bridge.close();
    let closed = agent.close().await;
    if closed.is_ok() {
        println!("shiitake: the Agent closed");
    }
    // The model server outlives this process unless it is stopped here.
    if let Some(local) = started_local {
        local.stop().await;
    }
    served?;
    closed?;
    Ok(())
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
