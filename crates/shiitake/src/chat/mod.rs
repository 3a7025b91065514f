//! `shiitake chat`: a line-based conversation with one Session.
//!
//! Each line typed is a follow-up; a line starting with `!` (or `/steer `) is a
//! steer that enters the running work at its next model call. The answer is
//! printed as it streams, with tool calls and retry notices as they happen.
//! `Ctrl-C` aborts the running work; `Ctrl-C` with nothing running, `/quit`, or
//! the end of input (after the queued work settles) leaves. On a terminal the
//! line is edited with history (see [`input`]); piped lines are read as
//! they come.
//!
//! This folder is everything only `chat` needs; its parts:
//!
//! - [`input`]: where lines come from (a line editor on a terminal, a pipe);
//! - [`flows`]: slash commands, the human command flows the server advertises;
//! - [`asker`]: who answers a flow's questions (`inquire` prompts, or the next lines);
//! - [`outstanding`]: prompts sent that no frame has shown yet, so piped `chat`
//!   leaves only after their runs.
//!
//! Printing frames and the footer is shared with `watch` ([`crate::render`]).

mod asker;
mod flows;
mod input;
mod outstanding;

use futures::StreamExt;
use shiitake_client::RemoteSession;
use shiitake_protocol::{
    AgentApi, FrameStream, PromptDelivery, PromptText, ReadOptions, RequestId, SendOptions,
    SessionApi,
};

use crate::commands;
use crate::error::CliError;
use crate::render::Printer;
use crate::setup::Context;
use asker::{LineAsker, TerminalAsker};
use input::{Event, Input};
use outstanding::Outstanding;

/// Options of `chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The Session to continue; default: a new one.
    #[arg(long)]
    session: Option<String>,
}

/// What one typed line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Typed {
    Prompt(String, PromptDelivery),
    Slash(flows::Slash),
    Abort,
    Quit,
    Nothing,
}

fn parse(line: &str) -> Typed {
    let line = line.trim();
    if line.is_empty() {
        Typed::Nothing
    } else if line == "/quit" || line == "/exit" {
        Typed::Quit
    } else if line == "/abort" {
        Typed::Abort
    } else if let Some(text) = line
        .strip_prefix("/steer ")
        .or_else(|| line.strip_prefix('!'))
    {
        Typed::Prompt(text.trim().to_owned(), PromptDelivery::Steer)
    } else if let Some(slash) = flows::parse(line) {
        Typed::Slash(slash)
    } else {
        Typed::Prompt(line.to_owned(), PromptDelivery::FollowUp)
    }
}

fn new_request() -> Result<RequestId, CliError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    RequestId::new(format!("cli-{}-{nanos}", std::process::id()))
        .map_err(|error| CliError::Setup(error.to_string()))
}

/// Runs the conversation until the person leaves.
pub async fn run(context: &Context, args: ChatArgs) -> Result<(), CliError> {
    let agent = context.agent()?;
    let session_id = match args.session {
        Some(id) => commands::session_id(&id)?,
        None => agent.create_session(new_request()?).await?,
    };
    let session = agent.session(session_id.clone());
    let watch = session.watch(ReadOptions::default()).await?;
    let history = context.data_dir().ok().map(|dir| dir.join("chat_history"));
    let (mut input, sink) = Input::open(history);
    let mut printer = Printer::default();
    printer.sink = sink;
    printer.note(&format!(
        "[session {session_id}] type a message; `!text` steers; Ctrl-C aborts; /quit leaves"
    ));
    printer.snapshot(&watch.snapshot, 10);
    let result = converse(&agent, &session, &mut input, &mut printer, watch.changes).await;
    if input.editing() {
        // The editor is mid-read; leaving now would leave the terminal raw.
        printer.note("[chat] the conversation ended; press Enter to leave");
        let _line_is_ignored = input.next().await;
    }
    input.close();
    if result? {
        printer.note(&format!("[session {session_id}]"));
    }
    Ok(())
}

/// Runs a typed slash command: `/answer @agent` answers a sub-agent's question from
/// the footer, everything else is a catalog flow.
async fn slash_command(
    agent: &shiitake_client::RemoteAgent,
    session: &RemoteSession,
    slash: &flows::Slash,
    asker: &mut dyn flows::Asker,
    request_id: &str,
) -> Result<(), CliError> {
    match slash.rest.strip_prefix('@') {
        Some(child) if slash.name == "answer" => {
            flows::answer_child(agent, session, child.trim(), asker, request_id).await
        }
        _ => flows::run(agent, session, slash, asker, request_id).await,
    }
}

/// The conversation loop; true when anything was sent.
async fn converse(
    agent: &shiitake_client::RemoteAgent,
    session: &RemoteSession,
    input: &mut Input,
    printer: &mut Printer,
    mut changes: FrameStream,
) -> Result<bool, CliError> {
    let mut input_open = true;
    let mut sent_any = false;
    let mut outstanding = Outstanding::default();
    loop {
        if !input_open && printer.idle() && outstanding.is_empty() {
            break;
        }
        tokio::select! {
            event = input.next(), if input_open => match event {
                None => input_open = false,
                Some(Event::Interrupt) => {
                    if !printer.running() {
                        break;
                    }
                    printer.note("[abort] stopping the run (Ctrl-C again with nothing running to leave)");
                    session.abort().await?;
                    input.resume();
                }
                Some(Event::Line(line)) => match parse(&line) {
                    Typed::Nothing => input.resume(),
                    Typed::Quit => break,
                    Typed::Abort => {
                        session.abort().await?;
                        input.resume();
                    }
                    Typed::Slash(slash) => {
                        let request_id = new_request()?;
                        let outcome = if input.is_terminal() {
                            let mut asker = TerminalAsker { printer: &mut *printer };
                            slash_command(agent, session, &slash, &mut asker, request_id.as_str()).await
                        } else {
                            let mut asker = LineAsker { input: &mut *input, printer: &mut *printer };
                            slash_command(agent, session, &slash, &mut asker, request_id.as_str()).await
                        };
                        if let Err(error) = outcome {
                            printer.note(&format!("[/{}] {error}", slash.name));
                        }
                        input.resume();
                    }
                    Typed::Prompt(text, delivery) => {
                        match PromptText::new(text) {
                            Ok(text) => {
                                let options = SendOptions { delivery: Some(delivery), request_id: None };
                                let accepted = session.send(text, options).await?;
                                // Until a frame names it, a stale idle frame must not end the chat.
                                outstanding.sent(accepted.command_id);
                                sent_any = true;
                            }
                            Err(error) => eprintln!("[not sent] {error}"),
                        }
                        input.resume();
                    }
                },
            },
            frame = changes.next() => match frame {
                Some(frame) => {
                    let frame = frame?;
                    outstanding.observe(&frame);
                    printer.frame(&frame);
                }
                None => break,
            },
            stop = tokio::signal::ctrl_c() => {
                stop?;
                if printer.running() {
                    printer.note("\n[abort] stopping the run (Ctrl-C again with nothing running to leave)");
                    session.abort().await?;
                } else {
                    break;
                }
            }
        }
    }
    Ok(sent_any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_follow_ups_steers_or_controls() {
        assert_eq!(
            parse("hello"),
            Typed::Prompt("hello".into(), PromptDelivery::FollowUp)
        );
        assert_eq!(
            parse("!faster"),
            Typed::Prompt("faster".into(), PromptDelivery::Steer)
        );
        assert_eq!(
            parse("/steer  shorter"),
            Typed::Prompt("shorter".into(), PromptDelivery::Steer)
        );
        assert_eq!(parse("/quit"), Typed::Quit);
        assert_eq!(
            parse("/goal ship it"),
            Typed::Slash(flows::Slash {
                name: "goal".into(),
                rest: "ship it".into()
            })
        );
        assert_eq!(parse("/abort"), Typed::Abort);
        assert_eq!(parse("   "), Typed::Nothing);
    }
}
