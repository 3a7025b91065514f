//! A TCP proxy a test controls, between one Hub process and its database: a
//! partition of that process alone.
//!
//! It forwards every connection to the upstream port both ways. [`Proxy::cut`] ends
//! every forwarded connection (both sides closed: the process sees its connections
//! drop and PostgreSQL ends their backends, so to the other processes this one looks
//! dead) and stops listening, so new connections are refused; [`Proxy::heal`] listens
//! again on the same port. It listens on a port below the ephemeral range
//! ([`quiet_port`]), so a process retrying while it is refused cannot connect to itself
//! there and hold the port.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::own_cluster::quiet_port;

/// A proxy from a port of its own to `upstream` on 127.0.0.1.
pub struct Proxy {
    port: u16,
    upstream: u16,
    counts: Arc<Counts>,
    /// While it listens: what stops it, and its accepting task.
    serving: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

#[derive(Default)]
struct Counts {
    /// Connections forwarded now.
    live: AtomicUsize,
    /// Connections ended by a cut, in all.
    cut: AtomicUsize,
}

impl Proxy {
    /// Starts forwarding to `upstream`.
    pub async fn start(upstream: u16) -> Self {
        let proxy = Self {
            port: quiet_port(),
            upstream,
            counts: Arc::default(),
            serving: Mutex::new(None),
        };
        proxy.heal().await;
        proxy
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections forwarded now.
    pub fn live(&self) -> usize {
        self.counts.live.load(Ordering::SeqCst)
    }

    /// Ends every forwarded connection and stops listening; returns once nothing is
    /// forwarded and new connections are refused, with how many connections it ended.
    pub async fn cut(&self) -> usize {
        let before = self.counts.cut.load(Ordering::SeqCst);
        let serving = self.serving.lock().unwrap().take();
        let (stop, accepting) = serving.expect("the proxy is not listening");
        stop.cancel();
        accepting.await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.live() > 0 {
            assert!(
                Instant::now() < deadline,
                "{} proxied connections outlived the cut",
                self.live()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.counts.cut.load(Ordering::SeqCst) - before
    }

    /// Listens again (on the same port) and forwards what it accepts.
    pub async fn heal(&self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        let stop = CancellationToken::new();
        let accepting = tokio::spawn(accept(
            listener,
            self.upstream,
            stop.clone(),
            self.counts.clone(),
        ));
        let previous = self.serving.lock().unwrap().replace((stop, accepting));
        assert!(previous.is_none(), "the proxy was already listening");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some((stop, _)) = self.serving.lock().unwrap().take() {
            stop.cancel();
        }
    }
}

/// Accepts until `stop`, then drops the listener (new connections are refused).
async fn accept(
    listener: TcpListener,
    upstream: u16,
    stop: CancellationToken,
    counts: Arc<Counts>,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        tokio::spawn(forward(client, upstream, stop.clone(), counts.clone()));
    }
}

/// Forwards one connection both ways until either side closes it or `stop` ends it
/// (dropping both sockets closes both).
async fn forward(
    mut client: TcpStream,
    upstream: u16,
    stop: CancellationToken,
    counts: Arc<Counts>,
) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
        // The server is not there: the client sees its connection closed.
        return;
    };
    if stop.is_cancelled() {
        return;
    }
    // Both sides' small writes (the protocol's pipelined messages) go at once.
    if client.set_nodelay(true).is_err() || server.set_nodelay(true).is_err() {
        return;
    }
    counts.live.fetch_add(1, Ordering::SeqCst);
    tokio::select! {
        biased;
        () = stop.cancelled() => {
            counts.cut.fetch_add(1, Ordering::SeqCst);
        }
        // Either side closing or failing ends the forwarding; both sockets close here.
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
    }
    counts.live.fetch_sub(1, Ordering::SeqCst);
}
