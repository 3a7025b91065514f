//! The writer's own connection: `tokio-postgres`, because it pipelines. A group's
//! statements are all sent before the first answer is read, so a group of any size
//! costs two round trips (its statements, then `COMMIT`) instead of one per
//! statement (docs/benchmarks.md, the Hub's profile). The rest of the store reads and
//! leases through sqlx's pool.
//!
//! The connection remembers whether it was lost (an error that ends a connection was
//! seen on it) and whether the group under way sent its `COMMIT`: a group whose
//! connection broke before that landed nothing and may run again on a fresh one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    /// An error that ends a connection was seen on it (the driver's task may not have
    /// noticed yet).
    lost: AtomicBool,
    /// The group under way sent its `COMMIT` (so whether it landed is not known if the
    /// connection breaks now).
    commit_sent: AtomicBool,
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
            lost: AtomicBool::new(false),
            commit_sent: AtomicBool::new(false),
        })
    }

    /// Whether the connection is gone (a new one is needed).
    pub(super) fn is_closed(&self) -> bool {
        self.lost.load(Ordering::SeqCst) || self.client.is_closed()
    }

    /// A group starts: it has not sent its `COMMIT` yet.
    pub(super) fn start_group(&self) {
        self.commit_sent.store(false, Ordering::SeqCst);
    }

    /// Whether the connection broke before the group under way sent its `COMMIT`:
    /// nothing of the group landed (a transaction never committed is rolled back with
    /// its backend), so it may run again on a fresh connection.
    pub(super) fn broke_before_commit(&self) -> bool {
        self.is_closed() && !self.commit_sent.load(Ordering::SeqCst)
    }

    /// Ends the connection and waits until it is closed.
    pub(super) async fn close(self) {
        drop(self.client);
        if let Err(error) = self.driver.await {
            tracing::debug!(%error, "the PostgreSQL writer's connection task");
        }
    }

    /// Lets a lost connection go without waiting for it: a connection cut off without a
    /// word (no reset) could keep its task waiting for the network's timeout.
    pub(super) fn abandon(self) {
        self.driver.abort();
    }

    /// Core's error for `error`, remembering when it means the connection is gone.
    fn failed(&self, error: tokio_postgres::Error) -> StoreError {
        if connection_lost(&error) {
            self.lost.store(true, Ordering::SeqCst);
        }
        pg(error)
    }

    /// Runs one transaction-control statement.
    pub(super) async fn step(&self, step: Step) -> Result<(), StoreError> {
        if matches!(step, Step::Commit) {
            self.commit_sent.store(true, Ordering::SeqCst);
        }
        self.client
            .batch_execute(step.sql())
            .await
            .map_err(|error| self.failed(error))
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
            .map_err(|error| self.failed(error))
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
                let prepared = self.client.prepare_typed(stmt.sql, &types).await;
                let statement = prepared.map_err(|error| self.failed(error))?;
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
                let prepared = self.client.prepare_typed(&text, &types).await;
                let statement = prepared.map_err(|error| self.failed(error))?;
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
            begun.map_err(|error| self.failed(error)),
            results
                .into_iter()
                .map(|result| result.map_err(|error| self.failed(error)))
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

/// Core's error for a driver error, as `shiitake_store_sql::db` makes it for sqlx's: a
/// connection closed or failing (an I/O error underneath), or a SQLSTATE that passes by
/// waiting (`shiitake_store_sql::sqlstate_passes`: the server shutting down, out of
/// connections, a deadlock...), is [`StoreError::Unavailable`], so the owners wait for
/// the store rather than fail their work; anything else is a database failure, with
/// whether a unique index refused the write.
pub(super) fn pg(error: tokio_postgres::Error) -> StoreError {
    let message = match error.as_db_error() {
        Some(db) => format!("error returned from database: {}", db.message()),
        None => error.to_string(),
    };
    let passes = error.is_closed()
        || io_underneath(&error)
        || error
            .code()
            .is_some_and(|code| shiitake_store_sql::sqlstate_passes(code.code()));
    if passes {
        return StoreError::Unavailable(message);
    }
    let unique = error.code() == Some(&SqlState::UNIQUE_VIOLATION);
    StoreError::Database { message, unique }
}

/// Whether `error` means the connection itself is gone, not only the statement: the
/// client found it closed, an I/O error, a connection exception (`08…`) or the server
/// ending the backend (`57P…`: a shutdown, `pg_terminate_backend`).
fn connection_lost(error: &tokio_postgres::Error) -> bool {
    error.is_closed()
        || io_underneath(error)
        || error.code().is_some_and(|code| {
            let code = code.code();
            code.starts_with("08") || code.starts_with("57P")
        })
}

/// Whether an I/O error is what `error` wraps (a socket that failed, a connect refused
/// or timed out).
fn io_underneath(error: &tokio_postgres::Error) -> bool {
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}

/// How long opening the writer's connection may take before the attempt counts as
/// failed: the requests waiting meanwhile are answered unavailable after it.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    // A host that stops answering (cut off, no reset) is given up on within about
    // half a minute rather than the kernel's two hours, so the writer reconnects.
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(5);
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    /// A backend message: its type, its length, its body.
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let length = i32::try_from(body.len() + 4).unwrap();
        let mut bytes = vec![kind];
        bytes.extend(length.to_be_bytes());
        bytes.extend(body);
        bytes
    }

    /// An `ErrorResponse` of `severity` with SQLSTATE `code`.
    fn error_response(severity: &str, code: &str) -> Vec<u8> {
        let mut body = Vec::new();
        for (field, value) in [
            (b'S', severity),
            (b'V', severity),
            (b'C', code),
            (b'M', "scripted"),
        ] {
            body.push(field);
            body.extend(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        message(b'E', &body)
    }

    /// Reads the client's startup message (its length first, no type byte).
    async fn read_startup(server: &mut DuplexStream) {
        let length = server.read_i32().await.unwrap();
        let mut rest = vec![0; usize::try_from(length - 4).unwrap()];
        server.read_exact(&mut rest).await.unwrap();
    }

    type Connected = Result<
        (
            Client,
            tokio_postgres::Connection<DuplexStream, tokio_postgres::tls::NoTlsStream>,
        ),
        tokio_postgres::Error,
    >;

    /// A client connected over an in-memory stream to a server that answers the
    /// startup with `reply`, then keeps its end open (handed back) or closes it.
    async fn scripted(reply: Vec<u8>, keep: bool) -> (Connected, Option<DuplexStream>) {
        let (client_end, mut server) = tokio::io::duplex(4096);
        let serving = tokio::spawn(async move {
            read_startup(&mut server).await;
            server.write_all(&reply).await.unwrap();
            keep.then_some(server)
        });
        let mut config = Config::new();
        config.user("u").dbname("d");
        let connected = config.connect_raw(client_end, NoTls).await;
        (connected, serving.await.unwrap())
    }

    /// What `pg` makes of the error the server answers the startup with.
    async fn refused_with(code: &str) -> StoreError {
        let (connected, _server) = scripted(error_response("FATAL", code), true).await;
        match connected {
            Ok(_) => panic!("{code} was not refused"),
            Err(error) => pg(error),
        }
    }

    #[tokio::test]
    async fn states_that_pass_by_waiting_are_unavailable_and_others_stay_database_errors() {
        for code in [
            "57P01", "57P03", "08006", "53300", "40001", "40P01", "55P03", "58030",
        ] {
            let error = refused_with(code).await;
            assert!(error.is_transient(), "{code}: {error:?}");
        }
        let unique = refused_with("23505").await;
        assert!(unique.is_unique_violation(), "{unique:?}");
        assert!(!unique.is_transient());
        for code in ["42P01", "22P02", "XX000"] {
            let error = refused_with(code).await;
            assert!(
                matches!(error, StoreError::Database { unique: false, .. }),
                "{code}: {error:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_connection_that_closes_is_unavailable_and_lost() {
        // Closed during the startup.
        let (connected, _) = scripted(Vec::new(), false).await;
        let error = connected.err().unwrap();
        assert!(connection_lost(&error), "{error:?}");
        assert!(pg(error).is_transient());

        // Closed once ready: the next statement finds it closed.
        let mut ready = message(b'R', &0_i32.to_be_bytes());
        ready.extend(message(b'Z', b"I"));
        let (connected, server) = scripted(ready, true).await;
        let (client, connection) = connected.unwrap();
        let driver = tokio::spawn(connection);
        drop(server);
        let error = client.batch_execute("SELECT 1").await.unwrap_err();
        assert!(connection_lost(&error), "{error:?}");
        assert!(pg(error).is_transient());
        let _ended = driver.await.unwrap();
        assert!(client.is_closed());
        let error = client.batch_execute("SELECT 1").await.unwrap_err();
        assert!(error.is_closed() && connection_lost(&error));
        assert!(pg(error).is_transient());
    }

    #[tokio::test]
    async fn a_backend_ended_by_the_server_loses_the_connection_and_a_statement_error_does_not() {
        for (code, lost) in [
            ("57P01", true),
            ("08006", true),
            ("40P01", false),
            ("23505", false),
        ] {
            let (connected, _server) = scripted(error_response("FATAL", code), true).await;
            let error = connected.err().unwrap();
            assert_eq!(connection_lost(&error), lost, "{code}");
        }
    }

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
