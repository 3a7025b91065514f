//! The writer's own connection: `tokio-postgres`, because it pipelines. A group's
//! statements are all sent before the first answer is read, so a group of any size
//! costs two round trips (its statements, then `COMMIT`) instead of one per
//! statement (docs/benchmarks.md, the Hub's profile). The rest of the store reads and
//! leases through sqlx's pool.

use std::collections::HashMap;

use futures::future::join_all;
use shiitake_core::store::StoreError;
use shiitake_store_sql::{Bind, Stmt, TextKey};
use sqlx::postgres::PgConnectOptions;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls, Statement};

use super::fold::{Column, set_based};
use crate::events::CHANNEL;

/// One statement of a pipeline: prepared, with its parameters.
pub(super) struct Call<'a> {
    statement: Statement,
    params: Vec<&'a (dyn ToSql + Sync)>,
}

/// A transaction-control statement. Sent as a simple query (as sqlx sends them), so
/// `pg_stat_statements` counts them: the Hub's profile counts groups by `COMMIT` and
/// takes savepoints from the transaction ids it counts.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    Begin,
    Commit,
    Rollback,
    Savepoint,
    RollbackTo,
    Release,
}

impl Step {
    fn sql(self) -> &'static str {
        match self {
            Step::Begin => "BEGIN",
            Step::Commit => "COMMIT",
            Step::Rollback => "ROLLBACK",
            Step::Savepoint => "SAVEPOINT request",
            Step::RollbackTo => "ROLLBACK TO SAVEPOINT request",
            Step::Release => "RELEASE SAVEPOINT request",
        }
    }
}

/// The writer's connection with what it prepared on it.
pub(super) struct WriterConnection {
    client: Client,
    /// The task that drives the connection; it ends once the client is dropped.
    driver: tokio::task::JoinHandle<()>,
    /// The group's announcement, [`NOTIFY`].
    notify: Statement,
    /// Each commit statement's text → its parameter types and the statement prepared
    /// for them.
    prepared: HashMap<TextKey, (Vec<Type>, Statement)>,
    /// The same for the set-based texts of folded statements (`fold.rs`), keyed by the
    /// statement each folds.
    folded: HashMap<TextKey, (Vec<Type>, Statement)>,
}

/// The statement announcing a group's Sessions on [`CHANNEL`].
const NOTIFY: &str = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload";

impl WriterConnection {
    /// Connects with `config` and prepares the transaction's own statements.
    pub(super) async fn connect(config: &Config) -> Result<Self, tokio_postgres::Error> {
        let (client, connection) = config.connect(NoTls).await?;
        let driver = tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "the PostgreSQL writer's connection ended");
            }
        });
        let notify = client
            .prepare_typed(NOTIFY, &[Type::TEXT, Type::TEXT_ARRAY])
            .await?;
        Ok(Self {
            client,
            driver,
            notify,
            prepared: HashMap::new(),
            folded: HashMap::new(),
        })
    }

    /// Whether the connection is gone (a new one is needed).
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Puts `fresh` in this one's place and lets the old connection go.
    pub(super) async fn replace(&mut self, fresh: WriterConnection) {
        std::mem::replace(self, fresh).close().await;
    }

    /// Ends the connection and waits until it is closed.
    pub(super) async fn close(self) {
        drop(self.client);
        if let Err(error) = self.driver.await {
            tracing::debug!(%error, "the PostgreSQL writer's connection task");
        }
    }

    /// Runs one transaction-control statement.
    pub(super) async fn step(&self, step: Step) -> Result<(), StoreError> {
        self.client.batch_execute(step.sql()).await.map_err(pg)
    }

    /// Rolls back the open transaction, if any (a failure means there was none, or
    /// the connection is gone and took it along).
    pub(super) async fn rollback(&self) {
        if let Err(error) = self.step(Step::Rollback).await {
            tracing::trace!(%error, "nothing to roll back");
        }
    }

    /// Runs one call and returns its rows.
    pub(super) async fn one(&self, call: &Call<'_>) -> Result<u64, StoreError> {
        self.client
            .execute(&call.statement, &call.params)
            .await
            .map_err(pg)
    }

    /// The call announcing `payloads` (a `Vec<String>`) on the store's channel.
    pub(super) fn notify<'a>(&self, payloads: &'a (dyn ToSql + Sync)) -> Call<'a> {
        Call {
            statement: self.notify.clone(),
            params: vec![&CHANNEL as &(dyn ToSql + Sync), payloads],
        }
    }

    /// The call of a commit statement for the tenant `agent`, prepared on first use.
    pub(super) async fn call<'a>(
        &mut self,
        agent: &'a (dyn ToSql + Sync),
        stmt: &'a Stmt,
    ) -> Result<Call<'a>, StoreError> {
        let types: Vec<Type> = std::iter::once(Type::TEXT)
            .chain(stmt.binds.iter().map(bind_type))
            .collect();
        let key = TextKey::of(stmt.sql);
        let statement = match self.prepared.get(&key) {
            Some((known, statement)) if *known == types => statement.clone(),
            _ => {
                let statement = self
                    .client
                    .prepare_typed(stmt.sql, &types)
                    .await
                    .map_err(pg)?;
                self.prepared.insert(key, (types, statement.clone()));
                statement
            }
        };
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(stmt.binds.len() + 1);
        params.push(agent);
        params.extend(stmt.binds.iter().map(bind_value));
        Ok(Call { statement, params })
    }

    /// The call of `sql` folded over `columns` (`fold.rs`), its set-based text made and
    /// prepared on first use.
    pub(super) async fn fold_call<'a>(
        &mut self,
        sql: &'static str,
        columns: &'a [Column<'a>],
    ) -> Result<Call<'a>, StoreError> {
        let types: Vec<Type> = columns.iter().map(Column::sql_type).collect();
        let key = TextKey::of(sql);
        let statement = match self.folded.get(&key) {
            Some((known, statement)) if *known == types => statement.clone(),
            _ => {
                let text = set_based(sql, &types).ok_or_else(|| {
                    StoreError::database(format!("a statement that cannot be folded: {sql}"))
                })?;
                let statement = self.client.prepare_typed(&text, &types).await.map_err(pg)?;
                self.folded.insert(key, (types, statement.clone()));
                statement
            }
        };
        Ok(Call {
            statement,
            params: columns.iter().map(Column::value).collect(),
        })
    }

    /// Sends `BEGIN` and `calls` at once and returns whether the transaction began
    /// and each call's rows, in order. The calls after a failed one fail too
    /// (PostgreSQL ignores the rest of an aborted transaction), so the first error is
    /// the one to report.
    pub(super) async fn begin_with(
        &self,
        calls: &[Call<'_>],
    ) -> (Result<(), StoreError>, Vec<Result<u64, StoreError>>) {
        // `join!` polls in order, and each future sends its request on its first
        // poll, so `BEGIN` goes first and the calls follow in order.
        let begin = self.client.batch_execute(Step::Begin.sql());
        let statements = join_all(
            calls
                .iter()
                .map(|call| self.client.execute(&call.statement, &call.params)),
        );
        let (begun, results) = futures::join!(begin, statements);
        (
            begun.map_err(pg),
            results
                .into_iter()
                .map(|result| result.map_err(pg))
                .collect(),
        )
    }
}

/// A parameter's type: what sqlx binds for the same value, so the texts (written
/// for both drivers) resolve alike.
fn bind_type(bind: &Bind) -> Type {
    match bind {
        Bind::Text(_) => Type::TEXT,
        Bind::Int(_) => Type::INT8,
        Bind::Bytes(_) => Type::BYTEA,
        Bind::Bool(_) => Type::BOOL,
    }
}

fn bind_value(bind: &Bind) -> &(dyn ToSql + Sync) {
    match bind {
        Bind::Text(value) => value,
        Bind::Int(value) => value,
        Bind::Bytes(value) => value,
        Bind::Bool(value) => value,
    }
}

/// Core's error for a driver error, as `shiitake_store_sql::db` makes it for sqlx's.
pub(super) fn pg(error: tokio_postgres::Error) -> StoreError {
    let unique = error.code() == Some(&SqlState::UNIQUE_VIOLATION);
    let message = match error.as_db_error() {
        Some(db) => format!("error returned from database: {}", db.message()),
        None => error.to_string(),
    };
    StoreError::Database { message, unique }
}

/// The writer's connection settings, from the store's: host (or socket directory),
/// port, user, database, application name and options as sqlx read them (from the
/// URL and the `PG*` environment), and the password from the URL's user part, its
/// `password` parameter, or `PGPASSWORD`.
pub(crate) fn config(url: &str, options: &PgConnectOptions) -> Config {
    let mut config = Config::new();
    match options.get_socket() {
        Some(socket) => config.host_path(socket),
        None => config.host(options.get_host()),
    };
    config.port(options.get_port()).user(options.get_username());
    if let Some(database) = options.get_database() {
        config.dbname(database);
    }
    if let Some(name) = options.get_application_name() {
        config.application_name(name);
    }
    if let Some(extra) = options.get_options() {
        config.options(extra);
    }
    if let Some(password) = password(url) {
        config.password(password);
    }
    config
}

/// The password the URL gives (or `PGPASSWORD`), read by tokio-postgres's own parser:
/// the whole URL first, then without its query (which may hold sqlx-only parameters).
fn password(url: &str) -> Option<Vec<u8>> {
    let parsed = url.parse::<Config>().ok().or_else(|| {
        url.split_once('?')
            .and_then(|(bare, _)| bare.parse::<Config>().ok())
    });
    parsed
        .and_then(|config| config.get_password().map(<[u8]>::to_vec))
        .or_else(|| std::env::var("PGPASSWORD").ok().map(String::into_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_comes_from_the_url_or_its_bare_form() {
        assert_eq!(
            password("postgres://u:s%40cret@h:5/db").as_deref(),
            Some(&b"s@cret"[..])
        );
        // statement-cache-capacity is sqlx's own: tokio-postgres refuses it.
        assert_eq!(
            password("postgres://u:pw@h/db?statement-cache-capacity=10").as_deref(),
            Some(&b"pw"[..])
        );
        assert_eq!(
            password("postgres://u@h/db?password=given").as_deref(),
            Some(&b"given"[..])
        );
    }

    #[test]
    fn the_config_follows_what_sqlx_read() {
        let url = "postgres://writer:pw@db.example:6543/hub?application_name=shiitake%20x";
        let options: PgConnectOptions = url.parse().expect("a URL sqlx reads");
        let config = config(url, &options);
        assert_eq!(config.get_user(), Some("writer"));
        assert_eq!(config.get_dbname(), Some("hub"));
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(config.get_application_name(), Some("shiitake x"));
        assert_eq!(config.get_password(), Some(&b"pw"[..]));
    }
}
