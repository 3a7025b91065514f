//! `shiitake acp`: an editor drives an Agent over the Agent Client Protocol on stdin
//! and stdout (`shiitake-acp`, docs/acp.md). The Agent is a running `serve`'s (or a Hub
//! tenant's, with `--url` and `--token`); on the Local data directory, when no `serve`
//! answers, `acp` starts one as its child (in the editor's folder, its output on
//! stderr) and ends it when the editor leaves. Logs go to stderr; stdout carries
//! protocol only.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shiitake_client::RemoteAgent;
use shiitake_protocol::AgentApi;

use crate::error::CliError;
use crate::setup::Context;

/// Options of `acp`.
#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Use only a `serve` that already runs: fail when none answers, rather than
    /// starting one.
    #[arg(long)]
    no_start: bool,
}

/// How long a `serve` started here may take to answer (its first start may build the
/// bundled local model).
const START_PATIENCE: Duration = Duration::from_secs(900);

/// Serves the editor until it closes stdin.
pub async fn run(context: &Context, args: AcpArgs) -> Result<(), CliError> {
    let (agent, started) = match answering(context).await {
        Ok(agent) => (agent, None),
        Err(_) if !args.no_start && !context.url_given() => {
            let child = start_serve(context)?;
            let agent = wait_for_serve(context, child).await?;
            (agent.0, Some(agent.1))
        }
        Err(error) => return Err(error),
    };
    let served = shiitake_acp::serve(agent, tokio::io::stdin(), tokio::io::stdout())
        .await
        .map_err(|error| CliError::Setup(error.to_string()));
    if let Some(child) = started {
        stop_serve(child);
    }
    served
}

/// The Agent, when its server answers.
async fn answering(context: &Context) -> Result<RemoteAgent, CliError> {
    let agent = context.agent()?;
    agent.list_extensions().await?;
    Ok(agent)
}

/// `serve` on the data directory, as a child whose stdout goes to this process's
/// stderr (stdout is the editor's).
fn start_serve(context: &Context) -> Result<Child, CliError> {
    let exe = std::env::current_exe()?;
    let data_dir = context.data_dir()?;
    eprintln!(
        "shiitake acp: no serve answers on {}; starting one",
        data_dir.display()
    );
    let mut command = Command::new(exe);
    command
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit());
    Ok(command.spawn()?)
}

/// Waits until the started `serve` answers: the Agent, and the child.
async fn wait_for_serve(
    context: &Context,
    mut child: Child,
) -> Result<(RemoteAgent, Child), CliError> {
    let deadline = Instant::now() + START_PATIENCE;
    loop {
        if let Ok(agent) = answering(context).await {
            return Ok((agent, child));
        }
        if let Some(status) = child.try_wait()? {
            return Err(CliError::Setup(format!(
                "the serve started for the editor ended ({status}); its output is above"
            )));
        }
        if Instant::now() > deadline {
            stop_serve(child);
            return Err(CliError::Setup(
                "the serve started for the editor did not answer in 15 minutes".to_owned(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Ends the `serve` started here as Ctrl-C would (its accepted work resumes on its next
/// start), then for good if it does not end.
fn stop_serve(mut child: Child) {
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .is_ok_and(|status| status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while interrupted && Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
