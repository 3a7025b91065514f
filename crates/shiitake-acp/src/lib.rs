//! An Agent's Sessions over the Agent Client Protocol (ACP): JSON-RPC on stdio, what an
//! editor (Zed, a JetBrains IDE, Neovim) speaks to drive an agent. `shiitake acp` runs
//! [`serve`] over the Agent of a running `serve` or Hub.
//!
//! What the editor gets is what a Session is: a prompt becomes a queued follow-up of
//! the Session, its run's frames become `session/update`s (`updates.rs`), its terminal
//! the prompt's stop reason, `session/cancel` an abort, and `session/load` replays the
//! durable transcript, so a Session outlives the editor, the host and a crash. A call
//! waiting for a person's approval is a `session/request_permission` whose answer goes
//! into the approval extension (`permissions.rs`); a question the agent asks ends the
//! turn and the next prompt answers it (`questions.rs`); the Agent's slash commands are
//! the editor's (`slash.rs`).
//! docs/acp.md has the mapping and what is not built yet.
//!
//! The protocol's crate (`agent-client-protocol`) runs its handlers on one thread
//! (`?Send`); [`serve`] gives it a `LocalSet` of its own.

mod bridge;
mod diffs;
mod editor;
mod permissions;
mod questions;
mod relay;
mod slash;
mod updates;
mod wire;

pub use wire::MAX_LINE_BYTES;

use std::rc::Rc;

use agent_client_protocol::AgentSideConnection;
use shiitake_protocol::AgentApi;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::bridge::Bridge;

/// Why serving an editor stopped.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The connection to the editor failed (its end closed, or unreadable bytes).
    #[error("the editor's connection failed: {0}")]
    Connection(String),
}

/// Serves `agent`'s Sessions to the editor on `input` and `output` (stdin and stdout)
/// until the editor closes its end. Nothing but protocol is written to `output`.
pub async fn serve<A>(
    agent: A,
    input: impl AsyncRead + Unpin + 'static,
    output: impl AsyncWrite + Unpin + 'static,
) -> Result<(), AcpError>
where
    A: AgentApi + Clone + 'static,
    A::Session: 'static,
{
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async move {
            // The editor's lines are checked before the crate reads them, and one writer
            // puts the crate's lines and the checks' answers on stdout (`wire.rs`).
            let (crate_input, crate_reads) = tokio::io::duplex(PIPE_BYTES);
            let (crate_writes, crate_output) = tokio::io::duplex(PIPE_BYTES);
            let (answers, answered) = tokio::sync::mpsc::unbounded_channel();
            let filtering = tokio::task::spawn_local(wire::filter(input, crate_input, answers));
            let writing = tokio::task::spawn_local(wire::writer(crate_output, answered, output));
            let editor = Rc::new(std::cell::OnceCell::new());
            let bridge = Bridge::new(agent, editor.clone());
            let (connection, io) = AgentSideConnection::new(
                bridge,
                crate_writes.compat_write(),
                crate_reads.compat(),
                |task| {
                    tokio::task::spawn_local(task);
                },
            );
            if editor.set(connection).is_err() {
                return Err(AcpError::Connection("the connection was made twice".into()));
            }
            let served = io
                .await
                .map_err(|error| AcpError::Connection(error.to_string()));
            filtering.abort();
            // The connection is gone: what it wrote is flushed before the end.
            drop(editor);
            let _ = writing.await;
            served
        })
        .await
}

/// The buffer between the stdio lines and the protocol's crate, each way.
const PIPE_BYTES: usize = 1 << 16;
