//! What the PostgreSQL tests share: the database from the environment, a fresh
//! tenant per test, and Agents in process or behind a real HTTP server.
//!
//! The tests read `SHIITAKE_TEST_POSTGRES_URL` (`cargo xtask test` starts a
//! throwaway PostgreSQL and sets it; `cargo xtask postgres start` prints one)
//! through `shiitake-test-services`: without it, or when it does not answer, every
//! PostgreSQL test prints one `SKIPPED` line and returns, or fails when
//! `SHIITAKE_REQUIRE_SERVICES=1`. Each test runs as its own Agent key on the shared
//! database, so tests never see each other's rows.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod cluster;
pub mod own_cluster;
pub mod prompt_load;
pub mod proxy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use shiitake_client::{ClientOptions, ReconnectPolicy, RemoteAgent};
use shiitake_conformance::{Fixture, TestTools, tools};
use shiitake_core::store::Ownership;
use shiitake_core::store::ownership::Claim;
use shiitake_core::store::{FencingToken, Op, SessionHeader, Store, StoredEntry};
use shiitake_core::{Agent, AgentConfig, FixedModel, RetryPolicy};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{EntryId, SessionId};
use shiitake_server::{ServerConfig, Token, router};
use shiitake_store_postgres::{AgentKey, HubOptions, PostgresHub, PostgresOptions, PostgresStore};
use shiitake_test_services::Service;
use tokio::task::JoinHandle;

/// The variable naming the test database.
pub const URL_VAR: &str = Service::Postgres.variable();

/// The token every test server uses.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// The test database, or `None` after the `SKIPPED` line when the environment has
/// none that answers (a failure instead when `SHIITAKE_REQUIRE_SERVICES=1`).
pub fn url() -> Option<String> {
    Service::Postgres.url()
}

/// The URL of a new, empty database on the test server, for a test that must not meet
/// the other tests' processes (their heartbeats free the leases of every tenant's dead
/// processes). `None` when PostgreSQL is missing, as [`url`].
pub async fn own_database() -> Option<String> {
    let url = url()?;
    let name = format!("own_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::Executor::execute(&mut admin, format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let (base, query) = url.split_once('?').unwrap_or((&url, ""));
    let (server, _database) = base.rsplit_once('/').unwrap();
    Some(if query.is_empty() {
        format!("{server}/{name}")
    } else {
        format!("{server}/{name}?{query}")
    })
}

/// Whether the PostgreSQL tests can run here.
pub fn ready() -> bool {
    url().is_some()
}

/// A tenant no other test uses.
pub fn fresh_key() -> AgentKey {
    AgentKey::new(format!(
        "t-{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    ))
    .unwrap()
}

/// A fresh Session id.
pub fn session_id() -> SessionId {
    SessionId::new(format!("ses_{}", ulid::Ulid::generate())).unwrap()
}

/// Creates a Session in `store`: its id.
pub async fn create(store: &PostgresStore) -> SessionId {
    let id = session_id();
    store
        .commit(vec![Op::CreateSession {
            header: SessionHeader::new(id.clone(), 1),
            request_id: None,
        }])
        .await
        .unwrap();
    id
}

/// The fencing token of a claim that got the lease.
pub fn held(claim: Claim) -> FencingToken {
    match claim {
        Claim::Held(lease) => lease.token,
        other => panic!("expected the lease, found {other:?}"),
    }
}

/// A new Session of `store`, its lease claimed there: its id and fencing token.
pub async fn claimed(store: &PostgresStore) -> (SessionId, FencingToken) {
    let session = create(store).await;
    let token = held(store.claim(&session).await.unwrap());
    (session, token)
}

/// A hub on the test database: 60 s leases (nothing lapses while a test looks), a
/// quick heartbeat, `read_connections` in the pool.
pub async fn hub(read_connections: u32) -> PostgresHub {
    let mut options = HubOptions::new(url().unwrap());
    options.lease_ttl = Duration::from_secs(60);
    options.heartbeat = Duration::from_millis(100);
    options.read_connections = read_connections;
    PostgresHub::open(options).await.unwrap()
}

/// Opens a store of `key` on the test database with leases of `ttl` (and the
/// default heartbeat for them).
pub async fn store(key: &AgentKey, ttl: Duration) -> PostgresStore {
    let url = url().expect("the test database");
    let mut options = PostgresOptions::new(url, key.clone());
    options.lease_ttl = ttl;
    options.heartbeat = shiitake_store_postgres::default_heartbeat(ttl);
    options.read_connections = 4;
    PostgresStore::open(options).await.unwrap()
}

/// The core tests' configuration: the scripted model and quick retries.
pub fn config(model: Arc<ScriptedModel>) -> AgentConfig {
    let mut config = AgentConfig::new(Arc::new(FixedModel(model)));
    config.retry = RetryPolicy {
        max_attempts: 3,
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    };
    config
}

/// An Agent of `key` with the standard test tools and the conformance suite's
/// tally extension.
pub async fn agent(key: &AgentKey, counters: Arc<TestTools>, config: AgentConfig) -> Agent {
    use shiitake_conformance::extension::Tally;
    let store = store(key, Duration::from_secs(10)).await;
    Agent::builder(Arc::new(store), tools::catalog(counters).await, config)
        .extension(Tally::new().unwrap(), Tally::grants())
        .open()
        .await
        .unwrap()
}

/// The in-process fixture on PostgreSQL.
pub struct PgLocal {
    pub agent: Agent,
    pub model: Arc<ScriptedModel>,
    pub tools: Arc<TestTools>,
    pub key: AgentKey,
}

#[async_trait]
impl Fixture for PgLocal {
    type Agent = Agent;

    async fn start(script: Script) -> Self {
        let key = fresh_key();
        let model = Arc::new(ScriptedModel::new(script));
        let tools = Arc::new(TestTools::default());
        let agent = agent(&key, tools.clone(), config(model.clone())).await;
        Self {
            agent,
            model,
            tools,
            key,
        }
    }

    fn agent(&self) -> &Agent {
        &self.agent
    }

    fn model(&self) -> &ScriptedModel {
        &self.model
    }

    fn tools(&self) -> &TestTools {
        &self.tools
    }
}

/// A running HTTP server; dropping it stops serving.
pub struct Server {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `agent` with the test token on a free loopback port.
    pub async fn agent(agent: Arc<Agent>) -> Self {
        let config = ServerConfig::new(Token::new(TOKEN).unwrap());
        Self::start(router(agent, config)).await
    }

    async fn start(app: Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client of `url` with the test token and quick reconnects.
pub fn client(url: &str) -> RemoteAgent {
    let options = ClientOptions::new(url)
        .with_token(TOKEN)
        .with_reconnect(ReconnectPolicy {
            initial_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(200),
            max_attempts: 25,
        });
    RemoteAgent::new(options).unwrap()
}

/// The HTTP fixture: a PostgreSQL-backed Agent behind a real server, reached with the client.
pub struct PgRemote {
    pub agent: RemoteAgent,
    pub local: Arc<Agent>,
    pub model: Arc<ScriptedModel>,
    pub tools: Arc<TestTools>,
    pub server: Server,
}

#[async_trait]
impl Fixture for PgRemote {
    type Agent = RemoteAgent;

    async fn start(script: Script) -> Self {
        let key = fresh_key();
        let model = Arc::new(ScriptedModel::new(script));
        let tools = Arc::new(TestTools::default());
        let local = Arc::new(agent(&key, tools.clone(), config(model.clone())).await);
        let server = Server::agent(local.clone()).await;
        let agent = client(&server.url());
        Self {
            agent,
            local,
            model,
            tools,
            server,
        }
    }

    fn agent(&self) -> &RemoteAgent {
        &self.agent
    }

    fn model(&self) -> &ScriptedModel {
        &self.model
    }

    fn tools(&self) -> &TestTools {
        &self.tools
    }
}

/// Two processes of one Agent (leases of 60 s: renewals, every 20 s, cannot interfere
/// with a test's clock moves) and a Session the first created.
pub async fn two_processes() -> (PostgresStore, PostgresStore, SessionId) {
    let key = fresh_key();
    let first = store(&key, Duration::from_secs(60)).await;
    let second = store(&key, Duration::from_secs(60)).await;
    let session = create(&first).await;
    (first, second, session)
}

/// An entry of `session` at `sequence` with no parent (a user's "hi").
pub fn entry(session: &SessionId, sequence: u64) -> Op {
    Op::InsertEntry {
        session_id: session.clone(),
        entry: StoredEntry {
            id: EntryId::new(format!("ent_{}", ulid::Ulid::generate())).unwrap(),
            parent: None,
            sequence,
            command_id: None,
            message: Message::User(UserMessage::text("hi", 1)),
        },
    }
}

/// Runs SQL on the test database directly, as an operator (or a clock) would.
pub async fn sql(statement: &str, session: &SessionId) {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url().unwrap())
        .await
        .unwrap();
    sqlx::query(statement)
        .bind(session.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
}
