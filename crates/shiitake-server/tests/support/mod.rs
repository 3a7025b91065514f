//! What the server tests share: the remote fixture (a core Agent behind a real server
//! on 127.0.0.1, reached with `RemoteAgent`), and in [`page`] what the web page tests
//! share.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod page;
pub mod tenants;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use shiitake_client::{ClientOptions, ReconnectPolicy, RemoteAgent};
use shiitake_conformance::{Fixture, TestTools};
use shiitake_core::Agent;
use shiitake_model::{Script, ScriptedModel};
use shiitake_server::{ServerConfig, Token, router};
use tempfile::TempDir;
use tokio::task::JoinHandle;

/// The token every test server uses.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running server; dropping it stops serving (open streams are cut).
pub struct Server {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` on `addr` (`127.0.0.1:0` for a free port).
    pub async fn start(app: Router, addr: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            shiitake_server::serve(listener, app, shiitake_server::ConnectionLimits::default())
                .await
                .unwrap();
        });
        Self { addr, task }
    }

    /// Serves `agent` with the test token.
    pub async fn agent(agent: Arc<Agent>, addr: SocketAddr) -> Self {
        let config = ServerConfig::new(Token::new(TOKEN).unwrap());
        Self::start(router(agent, config), addr).await
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits until its task (and every connection it held) is gone.
    pub async fn stop(mut self) {
        self.task.abort();
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = task.await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Quick reconnects for tests.
pub fn quick_reconnect() -> ReconnectPolicy {
    ReconnectPolicy {
        initial_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        max_attempts: 25,
    }
}

/// A client of `url` with the test token.
pub fn client(url: &str) -> RemoteAgent {
    let options = ClientOptions::new(url)
        .with_token(TOKEN)
        .with_reconnect(quick_reconnect());
    RemoteAgent::new(options).unwrap()
}

/// The core tests' in-process fixture: its Agent configuration and opener.
#[path = "../../../shiitake-core/tests/support/harness.rs"]
mod harness;

pub use harness::config;
#[allow(unused_imports)]
pub use harness::open as harness_open;

/// A core Agent on a file in `dir`.
pub async fn local_agent(dir: &TempDir, tools: Arc<TestTools>, model: Arc<ScriptedModel>) -> Agent {
    harness::open(&dir.path().join("agent.db"), tools, config(model)).await
}

/// One test's Agent, served over HTTP and reached through the client.
pub struct Remote {
    pub agent: RemoteAgent,
    pub local: Arc<Agent>,
    pub model: Arc<ScriptedModel>,
    pub tools: Arc<TestTools>,
    pub server: Server,
    pub dir: TempDir,
}

#[async_trait]
impl Fixture for Remote {
    type Agent = RemoteAgent;

    async fn start(script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(ScriptedModel::new(script));
        let tools = Arc::new(TestTools::default());
        let local = Arc::new(local_agent(&dir, tools.clone(), model.clone()).await);
        let server = Server::agent(local.clone(), "127.0.0.1:0".parse().unwrap()).await;
        let agent = client(&server.url());
        Self {
            agent,
            local,
            model,
            tools,
            server,
            dir,
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
