//! `Knapsack::mcp_servers`: a capability source over a host-owned list of MCP servers.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::join_all;
use shiitake_capabilities::{
    CapabilitySource, Invalidations, Invalidator, LeftOutPart, Module, SourceError, SourceId,
};
use tokio::sync::{Mutex, Semaphore};
use tokio_util::sync::CancellationToken;

use super::connection::Connection;
use super::error::McpError;
use super::http::McpHttp;
use super::server::McpServer;
use crate::limits::{MCP_CONNECT_CONCURRENCY, MCP_CONNECT_TIMEOUT};

/// An MCP server left out of the source, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpUnavailable {
    /// The server's name.
    pub name: String,
    /// What went wrong.
    pub error: McpError,
}

/// An MCP server that connected, and how many tools its module holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConnected {
    /// The server's name.
    pub name: String,
    /// How many tools it advertised (each an operation of `env.mcp.<name>`).
    pub tools: usize,
}

/// How an [`McpServersSource`] connects.
#[derive(Clone)]
pub struct McpServersOptions {
    /// The host's HTTP client, which carries every request.
    pub http: McpHttp,
    /// How long one server has to connect and list its tools (default 10 s); a
    /// listing after `tools/list_changed` has as long.
    pub timeout: Duration,
    /// How many servers connect at once (default 8).
    pub concurrency: usize,
    /// Told about each server that is left out or drops out; the others stay.
    pub on_unavailable: Arc<dyn Fn(McpUnavailable) + Send + Sync>,
    /// Told about each server once it has connected and listed its tools.
    pub on_connected: Arc<dyn Fn(McpConnected) + Send + Sync>,
}

impl McpServersOptions {
    /// The defaults around the host's client; unavailable servers are logged as
    /// warnings, connected ones at info level.
    pub fn new(http: McpHttp) -> Self {
        Self {
            http,
            timeout: MCP_CONNECT_TIMEOUT,
            concurrency: MCP_CONNECT_CONCURRENCY,
            on_unavailable: Arc::new(|unavailable: McpUnavailable| {
                tracing::warn!(server = %unavailable.name, error = %unavailable.error, "MCP server unavailable");
            }),
            on_connected: Arc::new(|connected: McpConnected| {
                tracing::info!(server = %connected.name, tools = connected.tools, "MCP server connected");
            }),
        }
    }
}

impl std::fmt::Debug for McpServersOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServersOptions")
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// A source holding one module, `env.mcp.<name>`, per connected MCP server.
///
/// The first read of its modules connects every server, at most `concurrency` at a
/// time, each under `timeout` (handshake and `tools/list`); or, after
/// [`McpServersSource::connect_in_background`], reads never wait and each server's
/// module appears once it has connected. A server that rejects,
/// refuses its credential, redirects, times out or advertises an unusable tool list
/// is reported through `on_unavailable` and left out; the rest stay. A server's
/// `tools/list_changed` invalidates the source, and the next read lists that
/// server's tools again; a server whose connection ended, or whose new list is
/// unusable, is then reported and dropped. A dropped server is not retried: build a
/// new source to try again. Closing the source ends every connection.
pub struct McpServersSource {
    id: SourceId,
    servers: Vec<McpServer>,
    options: McpServersOptions,
    invalidator: Arc<Invalidator>,
    closed: CancellationToken,
    /// `None` until the first acquisition (or the background connecting) starts;
    /// shared with the background connections, which add themselves.
    connections: Arc<Mutex<Option<Vec<Connection>>>>,
    /// The servers reported unavailable and not connected since.
    left_out: LeftOut,
}

/// The servers a source left out, shared with its reporting callbacks.
type LeftOut = Arc<std::sync::Mutex<Vec<LeftOutPart>>>;

impl std::fmt::Debug for McpServersSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServersSource")
            .field("id", &self.id)
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

impl McpServersSource {
    /// A source over `servers`; nothing connects until the first acquisition.
    pub fn new(id: SourceId, servers: Vec<McpServer>, mut options: McpServersOptions) -> Self {
        // Every report also lands in `left_out`, for the operator's view of the tools;
        // a server that connects later (after a listing error) leaves it.
        let left_out: LeftOut = Arc::default();
        let paths: Arc<HashMap<String, String>> = Arc::new(
            servers
                .iter()
                .map(|server| (server.name().to_owned(), server.module_path().to_string()))
                .collect(),
        );
        let path_of = move |name: &str| paths.get(name).cloned().unwrap_or_else(|| name.to_owned());
        let (unavailable, record, path) = (
            options.on_unavailable.clone(),
            left_out.clone(),
            path_of.clone(),
        );
        options.on_unavailable = Arc::new(move |report: McpUnavailable| {
            let name = path(&report.name);
            let mut parts = record.lock().unwrap_or_else(PoisonError::into_inner);
            parts.retain(|part: &LeftOutPart| part.name != name);
            parts.push(LeftOutPart {
                name,
                reason: report.error.to_string(),
            });
            drop(parts);
            unavailable(report);
        });
        let (connected, record) = (options.on_connected.clone(), left_out.clone());
        options.on_connected = Arc::new(move |report: McpConnected| {
            let name = path_of(&report.name);
            record
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|part| part.name != name);
            connected(report);
        });
        Self {
            id,
            servers,
            options,
            invalidator: Arc::new(Invalidator::new()),
            closed: CancellationToken::new(),
            connections: Arc::new(Mutex::new(None)),
            left_out,
        }
    }

    /// Starts connecting every server now, each on its own task (at most `concurrency`
    /// at a time, each under `timeout`), so a host need not wait for the slowest.
    ///
    /// From then on reads of the modules do not wait: each server's module appears
    /// once it has connected, and the source is invalidated then, so a catalog that
    /// follows it (`changed`, then `refresh`) gains the server; failures go to
    /// `on_unavailable` as usual. Does nothing once the servers are connecting or
    /// connected. Closing (or dropping) the source cancels what has not connected.
    pub async fn connect_in_background(&self) {
        let mut guard = self.connections.lock().await;
        if guard.is_some() {
            return;
        }
        *guard = Some(Vec::new());
        drop(guard);
        let unique = self.unique_servers();
        let order: Arc<Vec<String>> =
            Arc::new(unique.iter().map(|s| s.name().to_owned()).collect());
        let slots = Arc::new(Semaphore::new(self.options.concurrency.max(1)));
        for server in unique {
            let background = Background {
                connections: self.connections.clone(),
                invalidator: self.invalidator.clone(),
                options: self.options.clone(),
                closed: self.closed.clone(),
                slots: slots.clone(),
                order: order.clone(),
            };
            tokio::spawn(background.connect(server));
        }
    }

    /// Connects the servers (the first time) or brings stale ones up to date, and
    /// returns the modules of those connected. Cancelling `cancel` gives up with
    /// [`McpError::Cancelled`].
    pub async fn acquire(&self, cancel: &CancellationToken) -> Result<Vec<Module>, McpError> {
        let mut guard = self.connections.lock().await;
        let connections = match guard.as_mut() {
            Some(connections) => {
                self.maintain(connections, cancel).await?;
                connections
            }
            None => guard.insert(self.connect_all(cancel).await?),
        };
        Ok(connections.iter().map(|c| c.module().clone()).collect())
    }

    /// The names of the servers connected now, in list order.
    pub async fn connected(&self) -> Vec<String> {
        self.connections
            .lock()
            .await
            .iter()
            .flatten()
            .map(|c| c.name().to_owned())
            .collect()
    }

    /// The servers with a name not used before in the list; each repeat is reported.
    fn unique_servers(&self) -> Vec<McpServer> {
        let mut names = BTreeSet::new();
        let mut unique = Vec::new();
        for server in &self.servers {
            if names.insert(server.name()) {
                unique.push(server.clone());
            } else {
                self.report(
                    server.name(),
                    McpError::DuplicateName {
                        name: server.name().to_owned(),
                    },
                );
            }
        }
        unique
    }

    async fn connect_all(&self, cancel: &CancellationToken) -> Result<Vec<Connection>, McpError> {
        let unique = self.unique_servers();
        let token = cancel.child_token();
        let _stop = token.clone().drop_guard();
        let timeout = self.options.timeout;
        // Unordered, so a fast or failing server frees its slot at once; the
        // results are put back in list order afterwards.
        let opening = futures::stream::iter(unique.into_iter().enumerate())
            .map(|(index, server)| {
                let token = token.clone();
                let invalidator = self.invalidator.clone();
                let http = self.options.http.clone();
                async move {
                    let opened =
                        Connection::open(&server, &http, invalidator, timeout, &token).await;
                    (index, server, opened)
                }
            })
            .buffer_unordered(self.options.concurrency.max(1))
            .collect::<Vec<_>>();
        let mut results = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(McpError::Cancelled),
            results = opening => results,
        };
        results.sort_by_key(|(index, _, _)| *index);
        let mut connections = Vec::new();
        let mut cancelled = false;
        for (_, server, opened) in results {
            match opened {
                Ok(connection) => {
                    (self.options.on_connected)(connected(&connection));
                    connections.push(connection);
                }
                Err(McpError::Cancelled) => cancelled = true,
                Err(error) => self.report(server.name(), error),
            }
        }
        if cancelled {
            join_all(connections.into_iter().map(Connection::close)).await;
            return Err(McpError::Cancelled);
        }
        Ok(connections)
    }

    /// Drops ended connections and lists stale ones again.
    async fn maintain(
        &self,
        connections: &mut Vec<Connection>,
        cancel: &CancellationToken,
    ) -> Result<(), McpError> {
        let timeout = self.options.timeout;
        let relisted = join_all(
            connections
                .iter_mut()
                .filter(|c| !c.is_closed() && c.is_stale())
                .map(|c| async move {
                    let result = c.relist(timeout, cancel).await;
                    (c.name().to_owned(), result)
                }),
        )
        .await;
        let mut failed = BTreeSet::new();
        for (name, result) in relisted {
            match result {
                Ok(()) => {}
                Err(McpError::Cancelled) => return Err(McpError::Cancelled),
                Err(error) => {
                    self.report(&name, error);
                    failed.insert(name);
                }
            }
        }
        let mut kept = Vec::with_capacity(connections.len());
        let mut dropped = Vec::new();
        for connection in connections.drain(..) {
            if failed.contains(connection.name()) {
                dropped.push(connection);
            } else if connection.is_closed() {
                self.report(
                    connection.name(),
                    McpError::Disconnected {
                        name: connection.name().to_owned(),
                    },
                );
                dropped.push(connection);
            } else {
                kept.push(connection);
            }
        }
        *connections = kept;
        join_all(dropped.into_iter().map(Connection::close)).await;
        Ok(())
    }

    fn report(&self, name: &str, error: McpError) {
        (self.options.on_unavailable)(McpUnavailable {
            name: name.to_owned(),
            error,
        });
    }
}

/// What one server's background connection needs of its source.
struct Background {
    connections: Arc<Mutex<Option<Vec<Connection>>>>,
    invalidator: Arc<Invalidator>,
    options: McpServersOptions,
    closed: CancellationToken,
    slots: Arc<Semaphore>,
    /// The servers' names in list order, which the connections keep.
    order: Arc<Vec<String>>,
}

impl Background {
    /// Connects `server` when a slot is free, and adds it in list order (or closes it
    /// when the source closed meanwhile).
    async fn connect(self, server: McpServer) {
        let slot = tokio::select! {
            biased;
            () = self.closed.cancelled() => return,
            slot = self.slots.clone().acquire_owned() => slot,
        };
        let Ok(_slot) = slot else { return };
        let opened = Connection::open(
            &server,
            &self.options.http,
            self.invalidator.clone(),
            self.options.timeout,
            &self.closed,
        )
        .await;
        let connection = match opened {
            Ok(connection) => connection,
            Err(McpError::Cancelled) => return,
            Err(error) => {
                (self.options.on_unavailable)(McpUnavailable {
                    name: server.name().to_owned(),
                    error,
                });
                return;
            }
        };
        let mut guard = self.connections.lock().await;
        let Some(connections) = guard.as_mut().filter(|_| !self.closed.is_cancelled()) else {
            drop(guard);
            connection.close().await;
            return;
        };
        let rank = |name: &str| self.order.iter().position(|n| n == name);
        let at = connections
            .iter()
            .position(|c| rank(c.name()) > rank(connection.name()))
            .unwrap_or(connections.len());
        (self.options.on_connected)(connected(&connection));
        connections.insert(at, connection);
        drop(guard);
        self.invalidator.invalidate();
    }
}

/// The report of a connection just made.
fn connected(connection: &Connection) -> McpConnected {
    McpConnected {
        name: connection.name().to_owned(),
        tools: connection.module().operations().len(),
    }
}

#[async_trait]
impl CapabilitySource for McpServersSource {
    fn id(&self) -> &SourceId {
        &self.id
    }

    async fn modules(&self) -> Result<Vec<Module>, SourceError> {
        if self.closed.is_cancelled() {
            return Err(SourceError::Closed);
        }
        self.acquire(&self.closed)
            .await
            .map_err(|error| match error {
                McpError::Cancelled => SourceError::Closed,
                other => SourceError::Unavailable(other.to_string()),
            })
    }

    fn subscribe(&self) -> Invalidations {
        self.invalidator.subscribe()
    }

    fn left_out(&self) -> Vec<LeftOutPart> {
        self.left_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn close(&self) {
        self.closed.cancel();
        self.invalidator.close();
        let connections = self.connections.lock().await.take();
        join_all(connections.into_iter().flatten().map(Connection::close)).await;
    }
}

impl Drop for McpServersSource {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}
