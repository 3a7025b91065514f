//! `serve --database`: where the Agent's Sessions live, and the store opened there.
//!
//! `sqlite:PATH` is the Local host's embedded store (the default is `shiitake.db`
//! in the data directory); `postgres://…` is a database several `serve` processes
//! share, each owning some Sessions under leases (crate `shiitake-store-postgres`,
//! compiled in by the default cargo feature `postgres`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shiitake_core::store::Store;

use crate::error::CliError;

/// A parsed `--database` value.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL URL (it may carry a password, so `Debug` hides it).
    Postgres(String),
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

/// Why a `--database` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DatabaseError {
    /// Neither `sqlite:` nor `postgres://`/`postgresql://`.
    #[error("--database takes sqlite:PATH or postgres://USER@HOST:PORT/NAME, not {0:?}")]
    Scheme(String),
    /// `sqlite:` with nothing after it.
    #[error("--database sqlite: needs a file path after the colon")]
    EmptyPath,
}

impl Database {
    /// Reads a `--database` value; `None` is the default file in `data_dir`.
    pub fn parse(value: Option<&str>, data_dir: &Path) -> Result<Self, DatabaseError> {
        let Some(value) = value.map(str::trim) else {
            return Ok(Self::Sqlite(data_dir.join("shiitake.db")));
        };
        if let Some(path) = value.strip_prefix("sqlite:") {
            // `sqlite://PATH` is accepted too, as sqlx spells it.
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(DatabaseError::EmptyPath);
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(Self::Postgres(value.to_owned()));
        }
        // Only the scheme is echoed: the rest may hold a password.
        let scheme = value.split_once(':').map_or(value, |(scheme, _)| scheme);
        Err(DatabaseError::Scheme(scheme.to_owned()))
    }

    /// What `serve` prints about it (never a password).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("SQLite {}", path.display()),
            Self::Postgres(url) => format!("PostgreSQL {}", without_password(url)),
        }
    }
}

/// Opens the tenant `agent` of the shared PostgreSQL database at `url`.
#[cfg(feature = "postgres")]
pub async fn open_postgres(url: &str, agent: &str) -> Result<Arc<dyn Store>, CliError> {
    use shiitake_store_postgres::{AgentKey, PostgresOptions, PostgresStore};
    let store_error = |error: shiitake_store_postgres::OpenError| {
        CliError::Setup(format!("store: {}: {error}", without_password(url)))
    };
    let key = AgentKey::new(agent).map_err(store_error)?;
    let store = PostgresStore::open(PostgresOptions::new(url, key))
        .await
        .map_err(store_error)?;
    Ok(Arc::new(store))
}

/// Without the `postgres` feature there is no PostgreSQL store to open.
#[cfg(not(feature = "postgres"))]
pub async fn open_postgres(_url: &str, _agent: &str) -> Result<Arc<dyn Store>, CliError> {
    Err(CliError::Setup(
        "this shiitake was built without PostgreSQL (cargo feature `postgres`)".to_owned(),
    ))
}

/// The URL with any password replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{scheme}://{name}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_to_their_store() {
        let dir = Path::new("/data");
        assert_eq!(
            Database::parse(None, dir),
            Ok(Database::Sqlite(PathBuf::from("/data/shiitake.db")))
        );
        assert_eq!(
            Database::parse(Some("sqlite:/tmp/a.db"), dir),
            Ok(Database::Sqlite(PathBuf::from("/tmp/a.db")))
        );
        assert_eq!(
            Database::parse(Some("sqlite://rel/a.db"), dir),
            Ok(Database::Sqlite(PathBuf::from("rel/a.db")))
        );
        assert_eq!(
            Database::parse(Some("postgres://u@h:5432/db"), dir),
            Ok(Database::Postgres("postgres://u@h:5432/db".to_owned()))
        );
        assert_eq!(
            Database::parse(Some("postgresql://h/db"), dir),
            Ok(Database::Postgres("postgresql://h/db".to_owned()))
        );
    }

    #[test]
    fn bad_values_are_refused_without_echoing_secrets() {
        let dir = Path::new("/data");
        assert_eq!(
            Database::parse(Some("sqlite:"), dir),
            Err(DatabaseError::EmptyPath)
        );
        assert_eq!(
            Database::parse(Some("mysql://root:hunter2@h/db"), dir),
            Err(DatabaseError::Scheme("mysql".to_owned()))
        );
        assert_eq!(
            Database::parse(Some("/tmp/a.db"), dir),
            Err(DatabaseError::Scheme("/tmp/a.db".to_owned()))
        );
    }

    #[test]
    fn passwords_are_hidden_when_described() {
        assert_eq!(
            Database::Postgres("postgres://u:hunter2@h:5/db".to_owned()).describe(),
            "PostgreSQL postgres://u:***@h:5/db"
        );
        assert_eq!(
            Database::Postgres("postgres://u@h/db".to_owned()).describe(),
            "PostgreSQL postgres://u@h/db"
        );
        assert_eq!(
            format!(
                "{:?}",
                Database::Postgres("postgres://u:hunter2@h/db".to_owned())
            ),
            "Postgres(..)"
        );
    }
}
