//! Frame streams resume from a cursor: `Last-Event-ID` on the wire, and the
//! client's reconnect after a cut connection, with no gap and no duplicate.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{Remote, TOKEN, client};
use futures::StreamExt;
use shiitake_conformance::Fixture;
use shiitake_conformance::support::{PATIENCE, new_session, send, terminal_of};
use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A TCP proxy whose connections the test can cut, and which can refuse new ones.
struct Proxy {
    url: String,
    connections: Arc<tokio::sync::Mutex<JoinSet<()>>>,
    refusing: Arc<AtomicBool>,
    /// Connections refused (accepted and dropped at once) while refusing.
    refused: Arc<AtomicUsize>,
    _accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(tokio::sync::Mutex::new(JoinSet::new()));
        let refusing = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let (held, refuse, count) = (connections.clone(), refusing.clone(), refused.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if refuse.load(Ordering::SeqCst) {
                    count.fetch_add(1, Ordering::SeqCst);
                    drop(inbound);
                    continue;
                }
                held.lock().await.spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Self {
            url,
            connections,
            refusing,
            refused,
            _accept: accept,
        }
    }

    /// Cuts every open connection and refuses new ones until [`Self::heal`].
    async fn cut(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        self.connections.lock().await.abort_all();
    }

    fn heal(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }
}

/// Messages and terminals a watcher saw, by id, failing on any duplicate.
#[derive(Default)]
struct Seen {
    messages: Vec<(u64, EntryId)>,
    terminals: BTreeSet<CommandId>,
}

impl Seen {
    fn take(&mut self, messages: &[SessionMessage], terminals: &[SessionTerminal]) {
        for message in messages {
            assert!(
                !self.messages.iter().any(|(_, id)| id == &message.id),
                "duplicate message {:?}",
                message.id
            );
            self.messages.push((message.sequence, message.id.clone()));
        }
        for terminal in terminals {
            assert!(
                self.terminals.insert(terminal.command_id.clone()),
                "duplicate terminal"
            );
        }
    }

    fn frame(&mut self, frame: &SessionFrame) {
        match frame {
            SessionFrame::Update(update) => self.take(&update.messages, &update.terminals),
            SessionFrame::Reset(reset) => {
                *self = Seen::default();
                self.take(&reset.baseline.messages, &reset.baseline.terminals);
            }
            SessionFrame::Progress(_) => {}
        }
    }
}

#[tokio::test]
async fn a_cut_watch_reconnects_from_its_last_cursor_without_gap_or_duplicate() {
    let script = Script::new(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ]);
    let fixture = Remote::start(script).await;
    let proxy = Proxy::start(fixture.server.addr).await;
    let watcher = client(&proxy.url);
    let direct = fixture.agent();

    let session = new_session(direct).await;
    let watched = watcher.session(session.session_id().clone());
    let watch = watched.watch(ReadOptions::default()).await.unwrap();
    let mut seen = Seen::default();
    seen.take(&watch.snapshot.messages, &watch.snapshot.terminals);
    let mut changes = watch.changes;

    let first = send(&session, "one").await;
    tokio::time::timeout(PATIENCE, async {
        while !seen.terminals.contains(&first) {
            seen.frame(&changes.next().await.unwrap().unwrap());
        }
    })
    .await
    .unwrap();

    // While the watcher is cut off, a whole run commits.
    proxy.cut().await;
    let second = send(&session, "two").await;
    terminal_of(&session, &second).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.heal();

    tokio::time::timeout(PATIENCE, async {
        while !seen.terminals.contains(&second) {
            seen.frame(&changes.next().await.unwrap().unwrap());
        }
    })
    .await
    .unwrap();
    let sequences: Vec<u64> = seen
        .messages
        .iter()
        .map(|(sequence, _)| *sequence)
        .collect();
    let mut sorted = sequences.clone();
    sorted.sort_unstable();
    assert_eq!(sequences, sorted, "messages arrive in order");
    let transcript = session.read(ReadOptions::default()).await.unwrap();
    let expected: Vec<_> = transcript.messages.iter().map(|m| m.id.clone()).collect();
    let got: Vec<_> = seen.messages.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(got, expected);
    assert_eq!(seen.terminals, BTreeSet::from([first, second]));
}

#[tokio::test]
async fn a_stream_that_cannot_reconnect_ends_unavailable() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let proxy = Proxy::start(fixture.server.addr).await;
    let options = shiitake_client::ClientOptions::new(proxy.url.clone())
        .with_token(TOKEN)
        .with_reconnect(shiitake_client::ReconnectPolicy {
            initial_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
            max_attempts: 3,
        });
    let watcher = shiitake_client::RemoteAgent::new(options).unwrap();
    let session = new_session(fixture.agent()).await;
    let mut frames = watcher
        .session(session.session_id().clone())
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    proxy.cut().await;
    let error = tokio::time::timeout(PATIENCE, frames.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert_eq!(
        proxy.refused.load(Ordering::SeqCst),
        3,
        "exactly max_attempts reconnects were tried"
    );
    assert!(error.message.contains("3 attempts"), "{}", error.message);
    assert!(frames.next().await.is_none());
}

#[tokio::test]
async fn deleting_the_session_ends_a_remote_subscription_without_reconnecting() {
    let fixture = Remote::start(Script::new(vec![])).await;
    let agent = fixture.agent();
    let session = new_session(agent).await;
    let mut frames = agent
        .session(session.session_id().clone())
        .subscribe(SubscribeOptions::default())
        .await
        .unwrap();
    assert!(agent.delete_session(session.session_id()).await.unwrap());
    let next = tokio::time::timeout(PATIENCE, frames.next()).await.unwrap();
    assert!(next.is_none(), "the stream ends, not {next:?}");
}

/// Reads SSE events (name, id, data) from a raw response until `count` frames arrived.
async fn raw_events(
    response: reqwest::Response,
    count: usize,
) -> Vec<(String, Option<String>, String)> {
    use eventsource_stream::Eventsource;
    let mut events = response.bytes_stream().eventsource();
    let mut out = Vec::new();
    while out.len() < count {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let id = (!event.id.is_empty()).then_some(event.id);
        out.push((event.event, id, event.data));
    }
    out
}

#[tokio::test]
async fn last_event_id_resumes_strictly_after_and_wins_over_after() {
    let script = Script::new(vec![Turn::text("first"), Turn::text("second")]);
    let fixture = Remote::start(script).await;
    let session = new_session(fixture.agent()).await;
    let first = send(&session, "one").await;
    terminal_of(&session, &first).await;
    let middle = session
        .read(ReadOptions::default())
        .await
        .unwrap()
        .cursor
        .unwrap();
    let second = send(&session, "two").await;
    terminal_of(&session, &second).await;
    let head = session
        .read(ReadOptions::default())
        .await
        .unwrap()
        .cursor
        .unwrap();

    let url = format!(
        "{}/v1/sessions/{}/events?after=v1.99.99",
        fixture.server.url(),
        session.session_id()
    );
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(TOKEN)
        .header("last-event-id", middle.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = raw_events(response, 1).await;
    let (name, id, data) = &events[0];
    assert_eq!(
        (name.as_str(), id.as_deref()),
        ("update", Some(head.as_str()))
    );
    let SessionFrame::Update(update) = serde_json::from_str(data).unwrap() else {
        panic!("{data}")
    };
    assert_eq!(update.delivery, FrameDelivery::Replay);
    let commands: Vec<_> = update
        .terminals
        .iter()
        .map(|t| t.command_id.clone())
        .collect();
    assert_eq!(commands, vec![second.clone()]);
    assert!(
        update
            .messages
            .iter()
            .all(|m| m.command_id.as_ref() == Some(&second))
    );
    assert_eq!(update.messages.len(), 2, "the second prompt and its answer");
}

/// Reads raw SSE blocks (field lines) until `count` event blocks arrived; the
/// parser of a client would carry the last id forward, so this reads the wire.
async fn raw_blocks(response: reqwest::Response, count: usize) -> Vec<Vec<String>> {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    loop {
        let blocks: Vec<Vec<String>> = text
            .split("\n\n")
            .filter(|block| block.lines().any(|line| line.starts_with("event:")))
            .map(|block| block.lines().map(str::to_owned).collect())
            .collect();
        if blocks.len() >= count && text.ends_with("\n\n") {
            return blocks;
        }
        let chunk = tokio::time::timeout(PATIENCE, body.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test]
async fn progress_events_carry_no_id() {
    let slow = Turn::new(vec![
        Step::Text("streaming slowly, chunk by chunk".into()),
        Step::DelayMs(300),
        Step::Text(" and done".into()),
    ]);
    let fixture = Remote::start(Script::new(vec![slow])).await;
    let session = new_session(fixture.agent()).await;
    let url = format!(
        "{}/v1/sessions/{}/events",
        fixture.server.url(),
        session.session_id()
    );
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    send(&session, "go").await;
    let blocks = raw_blocks(response, 3).await;
    let mut kinds = Vec::new();
    for block in &blocks {
        let has_id = block.iter().any(|line| line.starts_with("id:"));
        let kind = block
            .iter()
            .find_map(|line| line.strip_prefix("event:"))
            .unwrap()
            .trim();
        match kind {
            "progress" => assert!(!has_id, "{block:?}"),
            "update" => assert!(has_id, "{block:?}"),
            other => panic!("unexpected event {other}"),
        }
        kinds.push(kind.to_owned());
    }
    assert!(kinds.iter().any(|kind| kind == "progress"), "{kinds:?}");
}
