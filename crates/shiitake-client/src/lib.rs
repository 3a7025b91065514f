//! Shiitake's `AgentApi` and `SessionApi` over HTTP and Server-Sent Events.
//!
//! [`RemoteAgent`] and [`RemoteSession`] implement the same traits as the
//! in-process Agent of `shiitake-core`, against a `shiitake-server` (routes in
//! `docs/http.md`). One behavioural suite runs against both, so code written
//! against the traits cannot tell them apart, except by latency.
//!
//! - [`AgentApi::session`](shiitake_protocol::AgentApi::session) does no I/O;
//!   an unknown Session fails on first use with `not_found`.
//! - `subscribe` and `watch` follow one SSE stream and, when the connection
//!   drops, reconnect from the cursor of the last frame they delivered, with
//!   exponential backoff ([`ReconnectPolicy`]); the server replays strictly
//!   after that cursor, so there is no gap and no duplicate. After too many
//!   failed attempts the stream ends with one `unavailable` error.
//! - `watch` is one server-side watch (a `snapshot` event, then the changes
//!   after it), so the baseline and the changes meet at one point.
//! - Requests leave through a [`Transport`]: the default sends with reqwest; a
//!   host can add headers ([`WithHeaders`]) or bring its own HTTP client.
//! - [`bind_session_extension`] / [`bind_agent_extension`] give typed
//!   extension calls over any implementation of the traits, this one included,
//!   and the `parse_*` codecs decode the wire types a client reads.
//! - A server that serves a directory of Agents (`shiitake serve`) is addressed per
//!   Agent: [`RemoteAgent::agent`] (or [`ClientOptions::with_agent`]) adds the Agent
//!   segment to every route, and [`RemoteAgent::agents`] lists the Agents.
//!
//! ```no_run
//! use shiitake_client::{ClientOptions, RemoteAgent};
//! use shiitake_protocol::{AgentApi, PromptText, RequestId, SendOptions, SessionApi};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = RemoteAgent::new(ClientOptions::new("http://127.0.0.1:8717").with_token("secret-token-from-the-data-dir"))?;
//! let session = agent.session(agent.create_session(RequestId::new("r-1")?).await?);
//! session.send(PromptText::new("hello")?, SendOptions::default()).await?;
//! # Ok(()) }
//! ```

mod agent;
mod follow;
mod http;
mod hub;
mod session;
mod transport;

use std::sync::Arc;
use std::time::Duration;

pub use agent::RemoteAgent;
pub use follow::MAX_EVENT_BYTES;

/// The SSE events of `body`, fed in `chunk`-byte pieces through the same guard and
/// parser as a live stream, as `(event, data)`; for the fuzz targets, not for use.
#[doc(hidden)]
pub fn sse_events_of(body: &[u8], chunk: usize) -> Vec<Result<(String, String), String>> {
    follow::events_of(body, chunk)
}
pub use session::RemoteSession;
pub use shiitake_protocol::extension::{bind_agent_extension, bind_session_extension};
/// The codecs of the wire types a client reads, beside the binding, so a client app
/// depends on this one crate.
pub use shiitake_protocol::{
    DecodeError, parse_accepted, parse_cancel_result, parse_session_frame, parse_session_snapshot,
    parse_session_summary_page, parse_shiitake_error,
};
pub use transport::{ReqwestTransport, Transport, TransportError, WithHeaders};

/// How a dropped frame stream reconnects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Wait before the first reconnect; doubles after each failed attempt.
    pub initial_delay: Duration,
    /// Longest wait between attempts.
    pub max_delay: Duration,
    /// Consecutive failed attempts after which the stream ends `unavailable`.
    pub max_attempts: u32,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_attempts: 12,
        }
    }
}

/// Where the server is and how to talk to it.
#[derive(Clone)]
pub struct ClientOptions {
    /// The server's base URL, such as `http://127.0.0.1:8717`.
    pub base_url: String,
    /// The bearer token (the local host writes it to `<data-dir>/token`).
    pub token: Option<String>,
    /// How requests leave; `None` for a default reqwest client.
    pub transport: Option<Arc<dyn Transport>>,
    /// How dropped frame streams reconnect.
    pub reconnect: ReconnectPolicy,
    /// The Agent of a directory server this client addresses (`/v1/agents/{agent}/...`);
    /// `None` for a single-Agent server, or the directory's default Agent.
    pub agent: Option<shiitake_protocol::AgentName>,
    /// A frame stream that receives no byte for this long counts as dropped
    /// (the server sends a keep-alive comment every 15 s).
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| ".."))
            .field("reconnect", &self.reconnect)
            .field("agent", &self.agent)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

impl ClientOptions {
    /// Defaults for the server at `base_url`: no token, reqwest, default reconnects.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            token: None,
            transport: None,
            reconnect: ReconnectPolicy::default(),
            agent: None,
            idle_timeout: Duration::from_secs(45),
        }
    }

    /// Addresses the Agent `agent` of a server that serves a directory.
    pub fn with_agent(mut self, agent: shiitake_protocol::AgentName) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sends `token` as `Authorization: Bearer <token>`.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sends every request, streams included, through `transport`.
    pub fn with_transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Reconnects dropped frame streams by `policy`.
    pub fn with_reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = policy;
        self
    }
}

/// Why a client could not be constructed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL does not parse or cannot carry a path.
    #[error("bad base URL {url:?}: {reason}")]
    BaseUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The token cannot travel in a header.
    #[error("the token holds characters an HTTP header cannot carry")]
    Token,
}
