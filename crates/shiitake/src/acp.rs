//! `shiitake acp`: an editor drives the Agent of a running `serve` (or a Hub tenant's,
//! with `--url` and `--token`) over the Agent Client Protocol on stdin and stdout
//! (`shiitake-acp`, docs/acp.md). Logs go to stderr; stdout carries protocol only.

use crate::error::CliError;
use crate::setup::Context;

/// Serves the editor until it closes stdin.
pub async fn run(context: &Context) -> Result<(), CliError> {
    let agent = context.agent()?;
    shiitake_acp::serve(agent, tokio::io::stdin(), tokio::io::stdout())
        .await
        .map_err(|error| CliError::Setup(error.to_string()))
}
