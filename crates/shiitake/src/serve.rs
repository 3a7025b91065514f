//! `shiitake serve`: the Local host (on SQLite), or one process of several sharing
//! a PostgreSQL database (`--database postgres://…`).

use std::path::PathBuf;
use std::sync::Arc;

use knapsack::Knapsack;
use knapsack::mcp::{McpHttp, McpServer, McpServersOptions, McpUnavailable};
use shiitake_capabilities::{Catalog, SourceId};
use shiitake_core::{Agent, AgentConfig};
use shiitake_protocol::AgentApi;
use shiitake_server::{ServerConfig, Token, load_or_create_token, router};

use crate::database::Database;
use crate::models::{ModelChoice, ServeModels, start_local};
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
    /// Directory the agent's file tools may read and edit; default: the current directory.
    #[arg(long)]
    workspace: Option<PathBuf>,
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
    /// The Agent (tenant) this process serves on a shared PostgreSQL database.
    #[arg(long, env = "SHIITAKE_AGENT", default_value = "default")]
    agent: String,
    /// A file holding the bearer token clients must send (default: `--token` /
    /// `SHIITAKE_TOKEN` if given, else `<data-dir>/token`, created when absent).
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
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

/// The tools of the Local host: the Knapsack files module over the workspace directory,
/// and the `--mcp` servers.
async fn catalog(workspace: Option<PathBuf>, mcp: &[McpSpec]) -> Result<Arc<Catalog>, CliError> {
    let root = match workspace {
        Some(root) => root,
        None => std::env::current_dir()?,
    };
    let files = knapsack::LocalFiles::new(&root)
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

/// Runs the host until Ctrl-C.
pub async fn run(context: &Context, args: ServeArgs) -> Result<(), CliError> {
    let data_dir = context.data_dir()?;
    let database = Database::parse(args.database.as_deref(), &data_dir)
        .map_err(|error| CliError::Setup(error.to_string()))?;
    let (token, token_from) = server_token(context, args.token_file.as_deref(), &data_dir)?;
    let store = database.open(&args.agent).await?;
    let tools = catalog(args.workspace, &args.mcp).await?;
    let choice = ModelChoice::parse(args.model.as_deref())?;
    let (default_spec, started_local) = match &choice {
        ModelChoice::Spec(spec) => (Some(spec.clone()), None),
        ModelChoice::Local(weights) => {
            let (spec, started) = start_local(*weights).await?;
            (Some(spec), started)
        }
        ModelChoice::None => (None, None),
    };
    let models = ServeModels::new(default_spec.clone());
    let agent = Arc::new(Agent::open(store, tools, AgentConfig::new(Arc::new(models))).await?);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|error| setup("listen")(format!("127.0.0.1:{}: {error}", args.port)))?;
    let address = listener.local_addr()?;
    println!("shiitake: data directory {}", data_dir.display());
    println!("shiitake: database {}", database.describe());
    if let Database::Postgres(_) = database {
        // The Hub roster (its extensions and grants) is not built yet.
        println!(
            "shiitake: Agent {} on PostgreSQL: the plain Agent (no Hub roster yet); other processes on this database share its Sessions",
            args.agent
        );
    }
    println!("shiitake: token {token_from}");
    match &default_spec {
        Some(model) => println!("shiitake: model {model}"),
        None => println!(
            "shiitake: no model (--model none): runs of Sessions without a model fail until one is given"
        ),
    }
    println!("shiitake: listening on http://{address}");
    let app = router(agent.clone(), ServerConfig::new(token));
    let served = tokio::select! {
        served = axum::serve(listener, app) => served,
        stop = tokio::signal::ctrl_c() => stop.map(|()| {
            println!("shiitake: stopping; accepted work resumes on the next start");
        }),
    };
    let closed = agent.close().await;
    // The model server outlives this process unless it is stopped here.
    if let Some(local) = started_local {
        local.stop().await;
    }
    served?;
    closed?;
    Ok(())
}
