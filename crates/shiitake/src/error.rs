//! How a command fails: one error type every command returns, printed by `main` as
//! `shiitake: <message>` before a non-zero exit.

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
