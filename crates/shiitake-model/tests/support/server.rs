//! A real axum server on 127.0.0.1:0 that records every request and plays canned replies.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::stream;
use serde_json::Value;
use tokio::sync::Notify;

/// One piece of a reply body.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes sent as they are.
    Data(String),
    /// Wait, sending an SSE comment every 50 ms so a closed client is noticed.
    Wait(u64),
    /// Wait before sending the status line and headers.
    DelayHeaders(u64),
}

/// A canned reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
}

impl Reply {
    /// A 200 SSE reply with these raw parts.
    pub fn sse(parts: Vec<Part>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
        }
    }

    /// An error reply with a JSON body.
    pub fn error(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::Data(body.to_string())],
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Re-cuts the data parts at these byte offsets (waits are dropped).
    pub fn resplit(mut self, cuts: &[usize]) -> Self {
        let text: String = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Data(d) => Some(d.as_str()),
                _ => None,
            })
            .collect();
        let bytes = text.as_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.push(0);
        points.push(bytes.len());
        points.sort_unstable();
        points.dedup();
        // Cutting inside a UTF-8 character is legal on the wire; send raw bytes via lossless split.
        let mut parts = Vec::new();
        for pair in points.windows(2) {
            let piece = &bytes[pair[0]..pair[1]];
            parts.push(Part::Data(unsafe_free_utf8(piece)));
        }
        self.parts = parts;
        self
    }
}

/// Test bodies are ASCII-cut at char boundaries only when needed; keep ASCII test data.
fn unsafe_free_utf8(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("test data cut inside a UTF-8 character")
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    closed: AtomicUsize,
    notify: Notify,
}

/// Counts a body as closed when it is dropped (finished, or the client went away).
struct CloseGuard(Arc<Shared>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
}

/// A running test server.
pub struct TestServer {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Starts a server that answers requests with `replies`, in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared::default());
        shared.replies.lock().unwrap().extend(replies);
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            base: format!("http://{address}"),
            shared,
            task,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many reply bodies were dropped (completed or closed by the client).
    pub fn closed(&self) -> usize {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Waits until at least `count` bodies were dropped; false after `timeout`.
    pub async fn wait_closed(&self, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.notify.notified();
            if self.closed() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.closed() >= count;
            }
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    shared.requests.lock().unwrap().push(recorded);
    let reply = shared.replies.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from(
                "{\"error\":{\"message\":\"test server: no reply left\"}}",
            ))
            .unwrap();
    };
    let mut parts: VecDeque<Part> = reply.parts.into();
    while let Some(Part::DelayHeaders(ms)) = parts.front().cloned() {
        parts.pop_front();
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let guard = CloseGuard(shared.clone());
    let body = stream::unfold(
        (parts, guard, 0u64),
        |(mut parts, guard, mut waited)| async move {
            loop {
                match parts.front().cloned() {
                    None => return None,
                    Some(Part::Data(data)) => {
                        parts.pop_front();
                        return Some((Ok::<_, Infallible>(Bytes::from(data)), (parts, guard, 0)));
                    }
                    Some(Part::DelayHeaders(_)) => {
                        parts.pop_front();
                    }
                    Some(Part::Wait(ms)) => {
                        if waited >= ms {
                            parts.pop_front();
                            waited = 0;
                            continue;
                        }
                        let step = (ms - waited).min(50);
                        tokio::time::sleep(Duration::from_millis(step)).await;
                        waited += step;
                        return Some((
                            Ok(Bytes::from_static(b": keepalive\n\n")),
                            (parts, guard, waited),
                        ));
                    }
                }
            }
        },
    );
    let mut response = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(body)).unwrap()
}
