//! `shiitake_server::serve` bounds every connection: a request head must arrive within
//! the header timeout (a half-sent head is closed, a slow but timely one answered); at
//! the connection bound the idlest connection makes room, and when every connection is
//! busy (a handler running, or a response still streaming) one more is refused `503`
//! at once, its place coming back when a response ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use shiitake_protocol::{ErrorCode, ShiitakeError};
use shiitake_server::{ConnectionLimits, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// What a test waits at most for something that should happen at once.
const PROMPTLY: Duration = Duration::from_secs(5);

/// `/hello` answers at once; `/wait` answers once `release` is cancelled; `/stream`
/// answers its head at once and ends its body once `release` is cancelled.
fn app(release: CancellationToken) -> Router {
    let streaming = release.clone();
    Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/wait",
            get(move || {
                let release = release.clone();
                async move {
                    release.cancelled().await;
                    "released"
                }
            }),
        )
        .route(
            "/stream",
            get(move || {
                let release = streaming.clone();
                async move {
                    let body = futures::stream::once(async move {
                        release.cancelled().await;
                        Ok::<_, std::io::Error>("ended")
                    });
                    Body::from_stream(body)
                }
            }),
        )
}

async fn start(
    limits: ConnectionLimits,
) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let release = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = app(release.clone());
    let task = tokio::spawn(async move {
        serve(listener, app, limits).await.unwrap();
    });
    (addr, release, task)
}

fn limits(max_connections: usize, header_timeout: Duration) -> ConnectionLimits {
    ConnectionLimits {
        max_connections,
        header_timeout,
    }
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n")
}

/// A connection that has sent `bytes`.
async fn sent(addr: SocketAddr, bytes: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    stream
}

/// Reads until `needle` has arrived, or the connection closed, or `PROMPTLY` passed.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(PROMPTLY, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&text).contains(needle) {
                break;
            }
        }
    })
    .await;
    String::from_utf8_lossy(&text).into_owned()
}

/// Whether the server closed `stream` within `within` (end of file or a reset).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Waits until the server has served a request on each of `streams` (its head is read).
async fn answered_hello(stream: &mut TcpStream) {
    stream
        .write_all(request("/hello").as_bytes())
        .await
        .unwrap();
    let text = read_until(stream, "hello").await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[tokio::test]
async fn a_half_sent_head_is_closed_at_the_header_timeout_and_a_timely_one_is_answered() {
    let timeout = Duration::from_millis(600);
    let (addr, _release, _server) = start(limits(16, timeout)).await;

    let started = Instant::now();
    let mut half = sent(addr, "GET /hello HTTP/1.1\r\nhost: x\r\n").await;
    // A head sent in two parts, both inside the timeout.
    let mut slow = sent(addr, "GET /hello HTTP/1.1\r\n").await;
    tokio::time::sleep(timeout / 3).await;
    slow.write_all(b"host: x\r\n\r\n").await.unwrap();
    let answer = read_until(&mut slow, "hello").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let idle_since = Instant::now();

    assert!(
        closed_within(&mut half, PROMPTLY).await,
        "the half-sent head was held"
    );
    let elapsed = started.elapsed();
    assert!(elapsed >= timeout, "closed before the timeout: {elapsed:?}");

    // A kept-alive connection waiting for its next head is closed at the timeout too.
    assert!(
        closed_within(&mut slow, PROMPTLY).await,
        "the idle connection was held"
    );
    let idle = idle_since.elapsed();
    assert!(idle >= timeout, "closed before the timeout: {idle:?}");
}

#[tokio::test]
async fn at_the_connection_bound_the_idlest_connection_makes_room() {
    let (addr, _release, _server) = start(limits(2, Duration::from_secs(60))).await;
    let mut oldest = TcpStream::connect(addr).await.unwrap();
    answered_hello(&mut oldest).await;
    let mut newer = TcpStream::connect(addr).await.unwrap();
    answered_hello(&mut newer).await;

    // A third closes the one idle longest, and is served.
    let mut third = sent(addr, &request("/hello")).await;
    let answer = read_until(&mut third, "hello").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        closed_within(&mut oldest, PROMPTLY).await,
        "the idlest stayed open"
    );
    answered_hello(&mut newer).await;
}

#[tokio::test]
async fn when_every_connection_is_busy_one_more_is_refused_at_once() {
    let (addr, release, _server) = start(limits(2, Duration::from_secs(60))).await;
    // At the bound: a running handler and a response still streaming, both served.
    let mut waiting = sent(addr, &request("/wait")).await;
    let mut streaming = sent(addr, &request("/stream")).await;
    let head = read_until(&mut streaming, "\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // One past it.
    let mut refused = sent(addr, &request("/hello")).await;
    let answer = read_until(&mut refused, "}").await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    let error: ShiitakeError = serde_json::from_str(body).unwrap();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(
        error.message.contains("2 busy connections"),
        "{}",
        error.message
    );
    assert!(closed_within(&mut refused, PROMPTLY).await);

    // Ending both responses frees both places.
    release.cancel();
    assert!(
        read_until(&mut waiting, "released")
            .await
            .contains("released")
    );
    assert!(read_until(&mut streaming, "ended").await.contains("ended"));
    let mut after = sent(addr, &request("/hello")).await;
    let answer = read_until(&mut after, "hello").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn stopping_the_server_closes_its_connections() {
    let (addr, _release, server) = start(limits(16, Duration::from_secs(60))).await;
    let mut kept = TcpStream::connect(addr).await.unwrap();
    answered_hello(&mut kept).await;
    let mut waiting = sent(addr, &request("/wait")).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.abort();
    assert!(closed_within(&mut kept, PROMPTLY).await);
    assert!(closed_within(&mut waiting, PROMPTLY).await);
}

#[test]
fn the_default_bound_fits_the_file_limit() {
    let fitted = ConnectionLimits::default().within_file_limit();
    assert!(fitted.max_connections >= 1);
    assert!(fitted.max_connections <= ConnectionLimits::default().max_connections);
    assert_eq!(
        fitted.header_timeout,
        ConnectionLimits::default().header_timeout
    );
}
