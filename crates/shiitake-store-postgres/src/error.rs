//! Why the store could not open. (sqlx's errors become core's [`StoreError`] through
//! `shiitake_store_sql::db`, as on SQLite.)

use std::time::Duration;

use shiitake_core::store::StoreError;

/// Why the store could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL is not a PostgreSQL connection URL.
    #[error("not a PostgreSQL URL: {0}")]
    Url(String),
    /// The database could not be reached or refused the connection.
    #[error("connecting to PostgreSQL: {0}")]
    Connect(String),
    /// The migrations could not be applied.
    #[error("migrating the PostgreSQL store: {0}")]
    Migration(String),
    /// The tenant key is empty, too long, or has a character outside `A-Z a-z 0-9 _ - . :`.
    #[error("not an Agent key: {0:?} (1 to 64 characters of A-Z a-z 0-9 _ - . :)")]
    AgentKey(String),
    /// A store of this tenant is already open on this hub: one per tenant per process,
    /// since its leases are the process's.
    #[error("the tenant {0:?} is already open on this hub")]
    TenantOpen(String),
    /// The hub was closed ([`PostgresHub::close`](crate::PostgresHub::close)).
    #[error("the PostgreSQL hub is closed")]
    HubClosed,
    /// The pool would have no room for a read beside the listener.
    #[error(
        "{0} read connections are too few: the listener holds one, so at least 2 (one for reads)"
    )]
    ReadConnections(u32),
    /// The lease period is outside its bounds.
    #[error(
        "a lease of {0:?} is outside 500 ms to 600 s (a shorter one lapses under load; a longer one keeps a paused process's Sessions too long)"
    )]
    LeaseTtl(Duration),
    /// The heartbeat is outside its bounds.
    #[error(
        "a heartbeat of {heartbeat:?} is outside 50 ms to half the lease ({lease_ttl:?}): a death must be seen well before the lease would lapse"
    )]
    Heartbeat {
        /// The heartbeat given.
        heartbeat: Duration,
        /// The lease it was checked against.
        lease_ttl: Duration,
    },
}

impl OpenError {
    pub(crate) fn connect(error: sqlx::Error) -> Self {
        OpenError::Connect(error.to_string())
    }
}

impl From<OpenError> for StoreError {
    fn from(error: OpenError) -> Self {
        StoreError::database(error)
    }
}
