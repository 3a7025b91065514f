//! What a process says while one of its connections is lost: one warning when it is
//! lost, one line when it is back (how long it was down and how many attempts it
//! took), and at most one reminder every [`REMINDER`] in between. Never a line per
//! attempt: a database that is down for minutes costs a few lines, not a log of
//! hundreds of megabytes. Attempts are spaced by core's jittered [`Backoff`]. The gauge `shiitake_hub_connections_down` follows the same
//! states.

use std::fmt::Display;
use std::time::Duration;

use shiitake_core::backoff::Backoff;
use shiitake_core::quiet::{Ended, Repeated, Say};

/// The longest a lost connection goes without a line in the log.
pub(crate) const REMINDER: Duration = Duration::from_secs(10);

/// The longest delay between two attempts to reconnect: how late a process may notice
/// that the database is back. The restart grace of `nodes.rs` is longer, so a live
/// process is back before the others give its Sessions away.
pub(crate) const CAP: Duration = shiitake_core::backoff::STORE_CAP;

/// Which of a process's connections: its name in the log and in the gauge's label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Connection {
    /// The group-commit writer's.
    Writer,
    /// The heartbeat's and the renewals'.
    Upkeep,
    /// `LISTEN`'s.
    Listener,
}

impl Connection {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Connection::Writer => "writer",
            Connection::Upkeep => "upkeep",
            Connection::Listener => "listener",
        }
    }

    /// What being without it means, for the warning.
    fn meaning(self) -> &'static str {
        match self {
            Connection::Writer => {
                "commits answer unavailable until it is back; owners wait and resume"
            }
            Connection::Upkeep => {
                "this process's leases are not renewed until it is back; it renews them first thing"
            }
            Connection::Listener => {
                "announcements are missed until it is back; every waiter looks again then"
            }
        }
    }
}

/// One connection's state, as far as the log and the gauge go.
#[derive(Debug)]
pub(crate) struct Outage {
    connection: Connection,
    failures: Repeated,
}

impl Outage {
    /// A connection that is up.
    pub(crate) fn new(connection: Connection) -> Self {
        Self {
            connection,
            failures: Repeated::new(REMINDER),
        }
    }

    /// The delays between this connection's attempts to come back (core's for a
    /// store, up to [`CAP`]).
    pub(crate) fn backoff() -> Backoff {
        Backoff::for_store()
    }

    /// The connection was lost (`error`), or an attempt to reconnect failed: the first
    /// of an outage is warned of, the others at most every [`REMINDER`].
    pub(crate) fn failed(&mut self, error: &dyn Display) {
        match self.failures.failed() {
            Some(Say::Started) => {
                shiitake_core::telemetry::hub_connection_down(self.connection.as_str(), true);
                tracing::warn!(
                    connection = self.connection.as_str(),
                    %error,
                    "lost this process's PostgreSQL connection; reconnecting: {}",
                    self.connection.meaning()
                );
            }
            Some(Say::Reminder { failures, lasting }) => tracing::warn!(
                connection = self.connection.as_str(),
                %error,
                attempts = failures,
                down_s = lasting.as_secs(),
                "still cannot reach PostgreSQL"
            ),
            None => {}
        }
    }

    /// The connection works (again): a line if it had been lost.
    pub(crate) fn back(&mut self) {
        if let Some(Ended { failures, lasted }) = self.failures.succeeded() {
            shiitake_core::telemetry::hub_connection_down(self.connection.as_str(), false);
            tracing::info!(
                connection = self.connection.as_str(),
                attempts = failures,
                down_ms = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX),
                "this process's PostgreSQL connection is back"
            );
        }
    }
}
