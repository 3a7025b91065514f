//! `shiitake chat`: a line-based conversation with one Session.
//!
//! Each line typed is a follow-up; a line starting with `!` (or `/steer `) is a
//! steer that enters the running work at its next model call. The answer is
//! printed as it streams, with tool calls and retry notices as they happen.
//! `Ctrl-C` aborts the running work; `Ctrl-C` with nothing running, `/quit`, or
//! the end of input (after the queued work settles) leaves.

use futures::StreamExt;
use shiitake_protocol::{
    AgentApi, PromptDelivery, PromptText, ReadOptions, RequestId, SendOptions, SessionApi,
};
use tokio::io::AsyncBufReadExt;

use crate::CliError;
use crate::commands;
use crate::render::Printer;
use crate::setup::Context;

/// Options of `chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// The Session to continue; default: a new one.
    #[arg(long)]
    session: Option<String>,
}

/// What one typed line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    Prompt(String, PromptDelivery),
    Abort,
    Quit,
    Nothing,
}

fn parse(line: &str) -> Input {
    let line = line.trim();
    if line.is_empty() {
        Input::Nothing
    } else if line == "/quit" || line == "/exit" {
        Input::Quit
    } else if line == "/abort" {
        Input::Abort
    } else if let Some(text) = line
        .strip_prefix("/steer ")
        .or_else(|| line.strip_prefix('!'))
    {
        Input::Prompt(text.trim().to_owned(), PromptDelivery::Steer)
    } else {
        Input::Prompt(line.to_owned(), PromptDelivery::FollowUp)
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
    println!("[session {session_id}] type a message; `!text` steers; Ctrl-C aborts; /quit leaves");
    let mut printer = Printer::default();
    printer.snapshot(&watch.snapshot, 10);
    let mut changes = watch.changes;

    let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<String>(16);
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = stdin.next_line().await {
            if lines_tx.send(line).await.is_err() {
                break;
            }
        }
    });
    let mut input_open = true;
    let mut sent_any = false;
    loop {
        if !input_open && printer.idle() {
            break;
        }
        tokio::select! {
            line = lines.recv(), if input_open => match line.as_deref().map(parse) {
                None => input_open = false,
                Some(Input::Nothing) => {}
                Some(Input::Quit) => break,
                Some(Input::Abort) => session.abort().await?,
                Some(Input::Prompt(text, delivery)) => {
                    let text = match PromptText::new(text) {
                        Ok(text) => text,
                        Err(error) => {
                            eprintln!("[not sent] {error}");
                            continue;
                        }
                    };
                    let options = SendOptions { delivery: Some(delivery), request_id: None };
                    session.send(text, options).await?;
                    // Until the acceptance shows up in a frame the Session is not idle.
                    printer.pending += 1;
                    sent_any = true;
                }
            },
            frame = changes.next() => match frame {
                Some(frame) => printer.frame(&frame?),
                None => break,
            },
            stop = tokio::signal::ctrl_c() => {
                stop?;
                if printer.running() {
                    println!("\n[abort] stopping the run (Ctrl-C again with nothing running to leave)");
                    session.abort().await?;
                } else {
                    break;
                }
            }
        }
    }
    if sent_any {
        println!("[session {session_id}]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_follow_ups_steers_or_controls() {
        assert_eq!(
            parse("hello"),
            Input::Prompt("hello".into(), PromptDelivery::FollowUp)
        );
        assert_eq!(
            parse("!faster"),
            Input::Prompt("faster".into(), PromptDelivery::Steer)
        );
        assert_eq!(
            parse("/steer  shorter"),
            Input::Prompt("shorter".into(), PromptDelivery::Steer)
        );
        assert_eq!(parse("/quit"), Input::Quit);
        assert_eq!(parse("/abort"), Input::Abort);
        assert_eq!(parse("   "), Input::Nothing);
    }
}
