//! `shiitake serve`: the Local host.

use std::path::PathBuf;
use std::sync::Arc;

use knapsack::Knapsack;
use knapsack::mcp::{McpHttp, McpServer, McpServersOptions, McpUnavailable};
use knapsack::ui::UiBridge;
use shiitake_capabilities::{Catalog, SourceId};
use shiitake_core::{Agent, AgentConfig, Durability, SqliteStore};
use shiitake_ext_ui::UiExtension;
use shiitake_protocol::AgentApi;
use shiitake_server::{ServerConfig, WebLogin, load_or_create_token, router};

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

/// Runs the Local host until Ctrl-C.
pub async fn run(context: &Context, args: ServeArgs) -> Result<(), CliError> {
    let data_dir = context.data_dir()?;
    let (token, token_path) =
        load_or_create_token(&data_dir).map_err(|error| setup("token")(error.to_string()))?;
    let database = data_dir.join("shiitake.db");
    let store = SqliteStore::open(&database, Durability::Full)
        .await
        .map_err(|error| setup("store")(format!("{}: {error}", database.display())))?;
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
    // The browser App bridge: runs borrow `ui`; the server mounts its `/browser/` routes.
    let bridge = UiBridge::default();
    let ui = UiExtension::new(bridge.clone()).map_err(|error| setup("ui")(error.to_string()))?;
    let agent = Agent::builder(Arc::new(store), tools, AgentConfig::new(Arc::new(models)))
        .extension(ui, UiExtension::grants())
        .open()
        .await?;
    let agent = Arc::new(agent);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .map_err(|error| setup("listen")(format!("127.0.0.1:{}: {error}", args.port)))?;
    let address = listener.local_addr()?;
    println!("shiitake: data directory {}", data_dir.display());
    println!("shiitake: token in {}", token_path.display());
    match &default_spec {
        Some(model) => println!("shiitake: model {model}"),
        None => println!(
            "shiitake: no model (--model none): runs of Sessions without a model fail until one is given"
        ),
    }
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
        served = axum::serve(listener, app) => served,
        stop = tokio::signal::ctrl_c() => stop.map(|()| {
            println!("shiitake: stopping; accepted work resumes on the next start");
        }),
    };
    bridge.close();
    let closed = agent.close().await;
    // The model server outlives this process unless it is stopped here.
    if let Some(local) = started_local {
        local.stop().await;
    }
    served?;
    closed?;
    Ok(())
}
