//! `shiitake`: run a durable Agent and talk to it from a terminal.
//!
//! `shiitake serve` runs the Local host: the core Agent on the embedded SQLite
//! store in a data directory, with the HTTP server on 127.0.0.1 behind a bearer
//! token written to `<data-dir>/token` (or, with `--database postgres://…`, one of
//! several processes sharing a PostgreSQL database). The other commands are clients of that
//! server (`shiitake-client`): `chat` streams a conversation as it is typed,
//! `send` queues one prompt, `watch` tails a Session's frames and `sessions`
//! lists the inbox. `docs/cli.md` describes each command.
//!
//! This file parses the command line and dispatches. The commands: [`serve`] (its
//! folder holds everything only serving needs), [`chat`] (likewise for the
//! conversation), [`commands`] (`send`, `watch`, `sessions`, `agents`), [`hub`]
//! (`hub nodes`, `hub tenant`, `hub token`), [`acp`] (an editor over the Agent Client
//! Protocol); what they share: [`setup`] (data directory, server URL, token),
//! [`render`] (what the terminal is shown), [`error`] and [`logging`].

mod acp;
mod chat;
mod commands;
mod error;
mod hub;
mod logging;
mod render;
mod serve;
mod setup;
mod traces;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "shiitake", version, about = "A durable agent harness")]
pub struct Cli {
    /// Data directory (database and token); default: the platform's data directory.
    #[arg(long, global = true, env = "SHIITAKE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Server URL for client commands (`--server` is the same).
    #[arg(long, global = true, env = "SHIITAKE_URL", visible_alias = "server")]
    url: Option<String>,
    /// Bearer token for client commands; default: read `<data-dir>/token`.
    #[arg(long, global = true, env = "SHIITAKE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The Agent: the one `serve` serves by default (on a Hub, the operator's default
    /// tenant), and the one client commands address (`shiitake agents` lists them);
    /// default `main` (client commands without it use the server's default Agent).
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
    Serve(Box<serve::ServeArgs>),
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
    /// The processes of a Hub (`serve --database postgres://…`), for its operator.
    #[command(subcommand)]
    Hub(hub::HubCommand),
    /// Serve an editor over the Agent Client Protocol on stdin and stdout (the Agent
    /// of a running `serve`, started when none answers, or a Hub tenant's with --url
    /// and --token).
    Acp(acp::AcpArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (format, traces) = match &cli.command {
        Command::Serve(args) => (args.log_format(), Some(args.trace_config())),
        _ => (serve::LogFormat::Text, None),
    };
    let (redactions, traces) = match logging::init(format, traces.as_ref()) {
        Ok(set) => set,
        Err(message) => {
            eprintln!("shiitake: {message}");
            return ExitCode::FAILURE;
        }
    };
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
            Command::Serve(args) => serve::run(&context, *args, &redactions).await,
            Command::Chat(args) => chat::run(&context, args).await,
            Command::Send(args) => commands::send(&context, args).await,
            Command::Watch(args) => commands::watch(&context, args).await,
            Command::Sessions(args) => commands::sessions(&context, args).await,
            Command::Agents => commands::agents(&context).await,
            Command::Hub(command) => hub::run(&context, command).await,
            Command::Acp(args) => acp::run(&context, args).await,
        }
    });
    // Open streams and stdin readers must not keep the process alive.
    runtime.shutdown_background();
    // The last spans leave, within a bound: a hanging collector does not hold the exit.
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("shiitake: {error}");
            ExitCode::FAILURE
        }
    }
}
