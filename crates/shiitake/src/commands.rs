//! `send`, `watch`, `sessions` and `agents`: one-shot clients of the server.

use futures::StreamExt;
use shiitake_protocol::{
    AgentApi, PromptDelivery, PromptText, ReadOptions, SendOptions, SessionApi, SessionId,
    SessionInboxState, SessionSummaryRow,
};

use anstyle::AnsiColor;

use crate::error::CliError;
use crate::render::Printer;
use crate::render::style::{inert_line, paint};
use crate::setup::Context;

/// Options of `send`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The Session.
    session: String,
    /// The prompt.
    text: String,
    /// Steer the running work instead of queueing a follow-up.
    #[arg(long)]
    steer: bool,
}

/// Options of `watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// The Session.
    session: String,
    /// Leave once nothing is queued or running (after at least the baseline).
    #[arg(long)]
    until_idle: bool,
}

/// Options of `sessions`.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Start after this page cursor (the `next` a previous page printed).
    #[arg(long)]
    after: Option<String>,
}

/// A Session id given on the command line.
pub(crate) fn session_id(text: &str) -> Result<SessionId, CliError> {
    SessionId::new(text).map_err(|error| CliError::Setup(error.to_string()))
}

/// Queues one prompt and prints its command id.
pub async fn send(context: &Context, args: SendArgs) -> Result<(), CliError> {
    let agent = context.agent()?;
    let session = agent.session(session_id(&args.session)?);
    let text = PromptText::new(args.text).map_err(|error| CliError::Setup(error.to_string()))?;
    let delivery = if args.steer {
        PromptDelivery::Steer
    } else {
        PromptDelivery::FollowUp
    };
    let options = SendOptions {
        delivery: Some(delivery),
        request_id: None,
    };
    let accepted = session.send(text, options).await?;
    println!("{}", accepted.command_id);
    Ok(())
}

/// Tails a Session: the last messages, then every frame as it comes.
pub async fn watch(context: &Context, args: WatchArgs) -> Result<(), CliError> {
    let agent = context.agent()?;
    let session = agent.session(session_id(&args.session)?);
    let watch = session.watch(ReadOptions::default()).await?;
    let mut printer = Printer::default();
    printer.show_user = true;
    printer.snapshot(&watch.snapshot, 20);
    let mut changes = watch.changes;
    loop {
        if args.until_idle && printer.idle() {
            return Ok(());
        }
        tokio::select! {
            frame = changes.next() => match frame {
                Some(frame) => printer.frame(&frame?),
                None => return Ok(()),
            },
            stop = tokio::signal::ctrl_c() => return Ok(stop?),
        }
    }
}

/// An inbox state padded to its column and coloured (`anstream` drops colour for pipes and `NO_COLOR`).
fn coloured(state: &str) -> String {
    let colour = match state {
        "needs_you" => AnsiColor::Magenta,
        "running" => AnsiColor::Yellow,
        "errored" => AnsiColor::Red,
        "done" => AnsiColor::Green,
        _ => AnsiColor::BrightBlack,
    };
    paint(colour.on_default(), &format!("{state:<11}"))
}

/// Prints one inbox page: state, Session id, title.
pub async fn sessions(context: &Context, args: SessionsArgs) -> Result<(), CliError> {
    let agent = context.agent()?;
    let after = args
        .after
        .map(shiitake_protocol::Cursor::new)
        .transpose()
        .map_err(|error| CliError::Setup(error.to_string()))?;
    let page = agent.list_sessions(after.as_ref()).await?;
    for row in &page.sessions {
        match row {
            SessionSummaryRow::Available {
                session_id,
                summary,
            } => {
                let state = match summary.state {
                    SessionInboxState::NeedsYou => "needs_you",
                    SessionInboxState::Running => "running",
                    SessionInboxState::Errored => "errored",
                    SessionInboxState::Done => "done",
                };
                let title = if summary.title.is_empty() {
                    "(untitled)".to_owned()
                } else {
                    inert_line(&summary.title)
                };
                anstream::println!("{} {session_id}  {title}", coloured(state));
            }
            SessionSummaryRow::Unavailable { session_id } => {
                anstream::println!("{} {session_id}", coloured("unavailable"));
            }
        }
    }
    if page.sessions.is_empty() {
        println!("(no sessions)");
    }
    if let Some(next) = page.next {
        println!("next page: shiitake sessions --after {next}");
    }
    Ok(())
}

/// `agents`: the Agents the server serves, the default one marked.
pub async fn agents(context: &Context) -> Result<(), CliError> {
    let list = context.agent()?.agents().await?;
    for entry in &list.agents {
        let marker = if entry.default { "  (default)" } else { "" };
        anstream::println!("{}{marker}", entry.name);
    }
    Ok(())
}
