//! Why the store could not open. (sqlx's errors become core's [`StoreError`] through
//! `shiitake_store_sql::db`, as on SQLite.)

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
