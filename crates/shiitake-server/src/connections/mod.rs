//! Serving a router on a TCP listener with every connection bounded: how long a request
//! head may take, and how many connections may be open at once.
//!
//! `axum::serve` gives hyper no timer, so a client that sends half a request head holds
//! its connection (and a file descriptor) for ever; it caps nothing, and when the
//! process runs out of descriptors it sleeps a second before accepting again. Here:
//!
//! - each connection speaks HTTP/1.1 with hyper's header-read timeout on: a request head
//!   (the first, or the next one on a kept-alive connection) must arrive whole within
//!   [`ConnectionLimits::header_timeout`], or the connection is closed;
//! - at most [`ConnectionLimits::max_connections`] are open. One more closes the
//!   connection idle longest (reading a head, or kept alive between requests) to make
//!   room; when every connection is busy (a request in flight, or its response, such as
//!   an event stream, still being sent) the new one is answered `503 unavailable` at
//!   once and closed;
//! - when `accept` fails for want of descriptors, the idlest connection is closed and
//!   accepting resumes as soon as one has ended (within 50 ms), so waiting clients are
//!   not starved.

mod busy_body;
mod table;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use shiitake_protocol::ShiitakeError;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use busy_body::BusyBody;
use table::{Connection, Table};

/// The default bound on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// The default time a request head has to arrive whole.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The fewest descriptors [`ConnectionLimits::within_file_limit`] leaves for the rest
/// of the process (databases, the model, MCP servers, logs).
pub const RESERVED_DESCRIPTORS: usize = 64;
/// Longest wait for a connection to end after `accept` ran out of descriptors.
const DESCRIPTOR_WAIT: Duration = Duration::from_millis(50);
/// Out-of-descriptor warnings are logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The bounds of every connection one server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once; past it the idlest is closed, or the new one
    /// refused when all are busy.
    pub max_connections: usize,
    /// Longest time a request head may take to arrive whole (from the connection's
    /// start, or from the end of the previous response).
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

impl ConnectionLimits {
    /// Lowers `max_connections` so the connections fit the process's open-file limit
    /// with a quarter of it (at least [`RESERVED_DESCRIPTORS`]) left for everything
    /// else; without a known limit it is unchanged. Never below 1.
    #[must_use]
    pub fn within_file_limit(mut self) -> Self {
        if let Some(fit) = file_limit().map(connections_within) {
            self.max_connections = self.max_connections.min(fit);
        }
        self
    }
}

/// How many connections a soft open-file limit of `limit` leaves room for.
fn connections_within(limit: usize) -> usize {
    let reserve = (limit / 4).max(RESERVED_DESCRIPTORS);
    limit.saturating_sub(reserve).max(1)
}

/// The soft open-file limit of this process, if it has one.
fn file_limit() -> Option<usize> {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        limit
            .current
            .and_then(|current| usize::try_from(current).ok())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Serves `app` on `listener` within `limits` until the returned future is dropped,
/// which closes every connection.
///
/// Accept errors never end it: a connection that failed before it was accepted is
/// skipped, and running out of descriptors is waited out as the module says.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let table = Arc::new(Table::default());
    let server = CancellationToken::new();
    let _stop_all = server.clone().drop_guard();
    let mut warned: Option<Instant> = None;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if table.live() >= limits.max_connections && !table.close_idlest() {
                    tokio::spawn(refuse(stream, limits.max_connections));
                    continue;
                }
                let connection = table.open(&server);
                tokio::spawn(run_connection(stream, app.clone(), connection, limits));
            }
            Err(error) if out_of_descriptors(&error) => {
                if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(%error, open = table.live(), "accepting connections ran out of file descriptors; closing the idlest connection");
                }
                let ended = table.ended();
                table.close_idlest();
                // Whether one ended or the wait ran out, try again: another may have ended.
                let _ = tokio::time::timeout(DESCRIPTOR_WAIT, ended).await;
            }
            Err(error) => {
                tracing::debug!(%error, "a connection failed before it was accepted");
            }
        }
    }
}

/// Whether an `accept` error means the process or system is out of descriptors or
/// memory, which only closing a connection (or waiting) can cure.
fn out_of_descriptors(error: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        use rustix::io::Errno;
        error.raw_os_error().is_some_and(|code| {
            let errno = Errno::from_raw_os_error(code);
            [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM].contains(&errno)
        })
    }
    #[cfg(not(unix))]
    {
        error.kind() == std::io::ErrorKind::OutOfMemory
    }
}

/// Serves one connection until it ends, the table closes it, or the server stops.
async fn run_connection(
    stream: TcpStream,
    app: Router,
    connection: Connection,
    limits: ConnectionLimits,
) {
    // Small event-stream writes leave at once instead of waiting on Nagle's algorithm.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY could not be set");
    }
    let connection = Arc::new(connection);
    let on_request = connection.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let busy = on_request.busy();
        let app = app.clone();
        async move {
            let response = app.oneshot(request.map(Body::new)).await?;
            Ok::<_, Infallible>(response.map(|inner| Body::new(BusyBody { inner, _busy: busy })))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let serving = http.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        served = serving => {
            if let Err(error) = served {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        () = connection.stop().cancelled() => {}
    }
}

/// Answers a connection past the bound `503 unavailable` and closes it.
async fn refuse(mut stream: TcpStream, bound: usize) {
    let error = ShiitakeError::unavailable(format!(
        "this server already has {bound} busy connections, its bound; retry shortly"
    ));
    let body = serde_json::to_string(&error).unwrap_or_default();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // Best effort, and never waiting on a client that does not read.
    let written = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if let Ok(Err(error)) = written {
        tracing::debug!(%error, "the refusal could not be sent");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_fit_the_file_limit_with_a_reserve() {
        assert_eq!(connections_within(1024), 768);
        assert_eq!(connections_within(256), 192);
        // Below four times the reserve, the reserve is the fixed minimum.
        assert_eq!(connections_within(200), 136);
        assert_eq!(connections_within(64), 1);
        assert_eq!(connections_within(0), 1);
    }

    #[test]
    fn out_of_descriptors_is_told_from_other_accept_errors() {
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert!(out_of_descriptors(&emfile));
        let aborted = std::io::Error::from(std::io::ErrorKind::ConnectionAborted);
        assert!(!out_of_descriptors(&aborted));
    }
}
