//! The database file itself: a plain connection to read what the store wrote, and
//! the schema as an older release left it, to write what that release would have.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::str::FromStr;

use sqlx::ConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;

/// A plain sqlx connection to the database file at `path`, for reading what the store
/// wrote or writing what an older release would have.
pub async fn connect(path: &Path) -> sqlx::SqliteConnection {
    SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap()
}

/// Creates the file at `path` with the schema as migrations 1 to `version` left it,
/// as an older release wrote it; returns the connection for seeding its rows.
pub async fn migrated_to(path: &Path, version: i64) -> sqlx::SqliteConnection {
    let migrations = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    let mut migrator = Migrator::new(migrations).await.unwrap();
    migrator.migrations = std::borrow::Cow::Owned(
        migrator
            .migrations
            .iter()
            .filter(|migration| migration.version <= version)
            .cloned()
            .collect(),
    );
    let mut conn = connect(path).await;
    migrator.run_direct(&mut conn).await.unwrap();
    conn
}
