//! The bounds on `serve`'s HTTP connections (`docs/security.md`, "Connections"): how
//! many may be open, and how long a request head may take.

use std::time::Duration;

use shiitake_server::{ConnectionLimits, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS};

/// The connection options of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionArgs {
    /// Most HTTP connections open at once (default 512, lowered to fit the open-file
    /// limit); one more closes the connection idle longest, or is answered 503 when all
    /// are busy.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Seconds a request head may take to arrive whole; a slower connection is closed.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    header_timeout: u64,
}

impl ConnectionArgs {
    /// The limits these options give: an explicit `--max-connections` as given (the
    /// operator raised the file limit, or chose), else the default fitted to the limit.
    pub fn limits(&self) -> ConnectionLimits {
        let header_timeout = Duration::from_secs(self.header_timeout);
        match self.max_connections {
            Some(max) => ConnectionLimits {
                max_connections: usize::try_from(max).unwrap_or(DEFAULT_MAX_CONNECTIONS),
                header_timeout,
            },
            None => ConnectionLimits {
                max_connections: DEFAULT_MAX_CONNECTIONS,
                header_timeout,
            }
            .within_file_limit(),
        }
    }
}

/// The start-up line that states the limits.
pub fn describe(limits: &ConnectionLimits) -> String {
    format!(
        "shiitake: at most {} connections; a request head must arrive within {} s",
        limits.max_connections,
        limits.header_timeout.as_secs()
    )
}
