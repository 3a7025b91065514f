//! `shiitake`: run a durable Agent and talk to it from a terminal.
//!
//! `shiitake serve` runs the Local host: the core Agent on the embedded SQLite
//! store in a data directory, with the HTTP server on 127.0.0.1 behind a bearer
//! token written to `<data-dir>/token` (or, with `--database postgres://…`, one of
//! several processes sharing a PostgreSQL database). The other commands are clients of that
//! server (`shiitake-client`): `chat` streams a conversation as it is typed,
//! `send` queues one prompt, `watch` tails a Session's frames and `sessions`
//! lists the inbox. `docs/cli.md` describes each command.

mod asker;
mod chat;
mod commands;
mod database;
mod datadir;
mod flows;
mod footer;
mod host;
mod input;
mod models;
mod outstanding;
mod render;
mod serve;
mod setup;
mod style;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Default port of the Local host's HTTP server.
pub const DEFAULT_PORT: u16 = 8717;

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "shiitake", version, about = "A durable agent harness")]
pub struct Cli {
    /// Data directory (database and token); default: the platform's data directory.
    #[arg(long, global = true, env = "SHIITAKE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Server URL for client commands.
    #[arg(long, global = true, env = "SHIITAKE_URL")]
    url: Option<String>,
    /// Bearer token for client commands; default: read `<data-dir>/token`.
    #[arg(long, global = true, env = "SHIITAKE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The Agent client commands address (`shiitake agents` lists them); default: the
    /// server's default Agent.
    #[arg(long, global = true, env = "SHIITAKE_AGENT")]
    agent: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the host: the Agent (on SQLite, or on a PostgreSQL database shared with
    /// other `serve` processes) and the HTTP server on 127.0.0.1.
    Serve(serve::ServeArgs),
    /// Open or create a Session and converse, streaming the answer as it is typed.
    Chat(chat::ChatArgs),
    /// Queue one prompt on a Session and print its command id.
    Send(commands::SendArgs),
    /// Tail a Session's frames.
    Watch(commands::WatchArgs),
    /// List the inbox.
    Sessions(commands::SessionsArgs),
    /// List the Agents the server serves.
    Agents,
}

/// A failure that ends the command with a message.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Setting up failed (data directory, token, store, port).
    #[error("{0}")]
    Setup(String),
    /// The Agent answered with an error.
    #[error("{0}")]
    Api(#[from] shiitake_protocol::ShiitakeError),
    /// Terminal input or output failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

/// The log filter: `SHIITAKE_LOG` when set (a filter that does not parse is an
/// error, not a silent default), else `warn`.
fn log_filter() -> Result<tracing_subscriber::EnvFilter, String> {
    match std::env::var("SHIITAKE_LOG") {
        Err(std::env::VarError::NotPresent) => Ok(tracing_subscriber::EnvFilter::new("warn")),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("SHIITAKE_LOG is not UTF-8 text; set a filter such as `info`".to_owned())
        }
        Ok(text) => tracing_subscriber::EnvFilter::builder()
            .parse(&text)
            .map_err(|error| {
                format!(
                    "SHIITAKE_LOG={text:?} does not parse ({error}); set a filter such as \
                     `info` or `shiitake_core=debug,warn`"
                )
            }),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match log_filter() {
        Ok(filter) => filter,
        Err(message) => {
            eprintln!("shiitake: {message}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("shiitake: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let context = setup::Context::new(cli.data_dir, cli.url, cli.token, cli.agent);
        match cli.command {
            Command::Serve(args) => serve::run(&context, args).await,
            Command::Chat(args) => chat::run(&context, args).await,
            Command::Send(args) => commands::send(&context, args).await,
            Command::Watch(args) => commands::watch(&context, args).await,
            Command::Sessions(args) => commands::sessions(&context, args).await,
            Command::Agents => commands::agents(&context).await,
        }
    });
    // Open streams and stdin readers must not keep the process alive.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shiitake: {error}");
            ExitCode::FAILURE
        }
    }
}
