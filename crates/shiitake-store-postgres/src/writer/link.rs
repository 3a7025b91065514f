//! The writer's connection over time: the one it has, and when it may try for a new
//! one after it was lost.
//!
//! A lost connection is replaced before the next group, by one attempt. If that
//! fails, the group is answered unavailable at once (the owners wait and resume), and
//! the next attempts are spaced by core's jittered backoff: a group that arrives
//! before the next attempt is due is answered at once too, never held for it. Between
//! groups the writer tries again when an attempt is due, so the first commit after the
//! database returns finds a connection.

use std::time::Instant;

use shiitake_core::store::StoreError;
use tokio_postgres::Config;

use super::connection::{WriterConnection, pg};
use shiitake_core::backoff::Backoff;

use crate::outage::{Connection, Outage};

/// The writer's connection, or why it has none and when it tries again.
pub(super) struct Link {
    config: Config,
    conn: Option<WriterConnection>,
    backoff: Backoff,
    /// When the next attempt is due, after one failed (`None`: at once).
    retry_at: Option<Instant>,
    /// Why the last attempt failed, for the requests answered meanwhile.
    why: Option<String>,
    outage: Outage,
}

impl Link {
    /// The writer's first connection, and how to open the next ones.
    pub(super) fn new(conn: WriterConnection, config: Config) -> Self {
        Self {
            config,
            conn: Some(conn),
            backoff: Outage::backoff(),
            retry_at: None,
            why: None,
            outage: Outage::new(Connection::Writer),
        }
    }

    /// When the writer should try to reconnect while it waits for requests: only after
    /// an attempt failed.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry_at.filter(|_| self.conn.is_none())
    }

    /// The connection, ready for a group: a lost one is replaced now if an attempt is
    /// due (one attempt); otherwise why there is none, to answer the group with.
    pub(super) async fn ready(&mut self) -> Result<&mut WriterConnection, StoreError> {
        if self.conn.as_ref().is_some_and(WriterConnection::is_closed) {
            self.lose("the connection closed");
        }
        if self.conn.is_none() && self.retry_at.is_none_or(|at| Instant::now() >= at) {
            self.reconnect().await;
        }
        match self.conn.as_mut() {
            Some(conn) => Ok(conn),
            None => Err(StoreError::unavailable(format!(
                "the PostgreSQL writer has no connection: {}",
                self.why.as_deref().unwrap_or("it was lost")
            ))),
        }
    }

    /// The connection broke (`why`): let it go, and log it if it was up.
    pub(super) fn lose(&mut self, why: &str) {
        if let Some(conn) = self.conn.take() {
            conn.abandon();
            self.outage.failed(&why);
            self.why = Some(why.to_owned());
        }
    }

    /// One attempt to connect; on failure the next is spaced by the backoff.
    pub(super) async fn reconnect(&mut self) {
        match WriterConnection::connect(&self.config).await {
            Ok(fresh) => {
                self.conn = Some(fresh);
                self.backoff.reset();
                self.retry_at = None;
                self.why = None;
                self.outage.back();
            }
            Err(error) => {
                let error = pg(error);
                self.outage.failed(&error);
                self.why = Some(error.to_string());
                self.retry_at = Some(Instant::now() + self.backoff.next_delay());
            }
        }
    }

    /// Closes the connection, if it has one, when the writer stops.
    pub(super) async fn close(self) {
        if let Some(conn) = self.conn {
            conn.close().await;
        }
    }
}
