//! Why an MCP server could not be configured, connected or called, and how rmcp's
//! errors are sorted into those reasons.

use std::error::Error as StdError;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpError,
};

use super::http::RedirectRefused;
use super::server::SecretHeaders;

/// A server description the host gave cannot be used; nothing was sent.
///
/// Messages name the header or the rule, never a header value or the URL text
/// (which may hold a credential).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpConfigError {
    /// The server name is not one guest identifier.
    #[error("MCP server name `{name}` is not usable: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The URL is not an `http`/`https` URL without user info.
    #[error("MCP server URL is not usable: {reason}")]
    InvalidUrl {
        /// Why.
        reason: &'static str,
    },
    /// The transport sets this header itself.
    #[error("header `{name}` is set by the MCP transport and cannot be supplied")]
    ReservedHeader {
        /// The header name, lowercased.
        name: String,
    },
    /// A header name or value is malformed.
    #[error("header `{name}` is not usable: {reason}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A `--mcp` specification does not follow `name=URL[,header=Name:Value]`.
    #[error("MCP server specification is not usable: {reason}")]
    InvalidSpec {
        /// Why.
        reason: &'static str,
    },
    /// A header value names an environment variable that is not set.
    #[error("environment variable `{name}` named by a header value is not set")]
    MissingVariable {
        /// The variable.
        name: String,
    },
    /// The HTTP client could not be built.
    #[error("the MCP HTTP client could not be built: {0}")]
    Http(String),
}

/// Why an MCP server was left out of its module list, or stopped answering.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server refused the connection, the handshake or the tool listing, or could
    /// not be reached.
    #[error("MCP server `{name}` rejected the connection: {message}")]
    Rejected {
        /// The server's name.
        name: String,
        /// What went wrong (header values removed).
        message: String,
    },
    /// The server refused its credential (HTTP 401, or 403 with a challenge).
    #[error("MCP server `{name}` refused its credential (HTTP {status})")]
    Unauthorized {
        /// The server's name.
        name: String,
        /// 401 or 403.
        status: u16,
    },
    /// The server answered with a redirect, which Knapsack refuses to follow.
    #[error("MCP server `{name}` answered with a redirect (HTTP {status}); redirects are refused")]
    Redirected {
        /// The server's name.
        name: String,
        /// The redirect status.
        status: u16,
    },
    /// The server did not connect and list its tools in time.
    #[error("MCP server `{name}` did not connect and list its tools within {after:?}")]
    TimedOut {
        /// The server's name.
        name: String,
        /// The timeout.
        after: Duration,
    },
    /// The server advertises more tools than allowed.
    #[error("MCP server `{name}` advertises {count} tools; at most {limit} are allowed")]
    TooManyTools {
        /// The server's name.
        name: String,
        /// How many it advertised.
        count: usize,
        /// The bound.
        limit: usize,
    },
    /// A tool's name or input schema cannot be used, or two names map to one identifier.
    #[error("MCP server `{name}` advertises an unusable tool `{tool}`: {reason}")]
    Unusable {
        /// The server's name.
        name: String,
        /// The tool's advertised name.
        tool: String,
        /// Why.
        reason: String,
    },
    /// Another server of the same list already has this name.
    #[error("MCP server name `{name}` appears more than once; the first one is kept")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// The connection ended after it was made.
    #[error("MCP server `{name}` closed the connection")]
    Disconnected {
        /// The server's name.
        name: String,
    },
    /// The connection attempt was cancelled by its caller (or the source closed).
    #[error("MCP connection was cancelled")]
    Cancelled,
}

/// What went wrong underneath an rmcp error, with header values removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// 401, or 403 with a challenge.
    Unauthorized(u16),
    /// A redirect was refused.
    Redirected(u16),
    /// Anything else: the message, scrubbed.
    Other(String),
}

impl Failure {
    /// The connect error for the server `name`.
    pub(crate) fn into_error(self, name: &str) -> McpError {
        let name = name.to_owned();
        match self {
            Self::Unauthorized(status) => McpError::Unauthorized { name, status },
            Self::Redirected(status) => McpError::Redirected { name, status },
            Self::Other(message) => McpError::Rejected { name, message },
        }
    }

    /// A short sentence for a tool error result.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Unauthorized(status) => {
                format!("the server refused its credential (HTTP {status})")
            }
            Self::Redirected(status) => {
                format!("the server answered with a redirect (HTTP {status}), which is refused")
            }
            Self::Other(message) => message.clone(),
        }
    }
}

/// Sorts a failed handshake.
pub(crate) fn classify_initialize(
    error: &ClientInitializeError,
    headers: &SecretHeaders,
) -> Failure {
    let root: Option<&(dyn StdError + 'static)> = match error {
        ClientInitializeError::TransportError { error, .. } => Some(error.error.as_ref()),
        _ => None,
    };
    classify(error.to_string(), root, headers)
}

/// Sorts a failed request on a live connection.
pub(crate) fn classify_service(error: &ServiceError, headers: &SecretHeaders) -> Failure {
    let root: Option<&(dyn StdError + 'static)> = match error {
        ServiceError::TransportSend(error) => Some(error.error.as_ref()),
        _ => None,
    };
    classify(error.to_string(), root, headers)
}

fn classify(
    message: String,
    root: Option<&(dyn StdError + 'static)>,
    headers: &SecretHeaders,
) -> Failure {
    let mut next = root;
    let mut seen = 0;
    let mut http = None;
    while let Some(current) = next {
        seen += 1;
        if seen > 32 {
            break;
        }
        if let Some(found) = recognise(current) {
            return found;
        }
        if http.is_none() && current.downcast_ref::<reqwest::Error>().is_some() {
            http = Some(current);
        }
        next = inner(current);
    }
    // The HTTP client's own chain says more, and more plainly, than rmcp's wrappers
    // (which name the transport's type): "error sending request for url (…): … refused".
    let message = http.map_or(message, chain_text);
    Failure::Other(headers.scrub(&message))
}

/// `error` and its sources, joined with `: `, each repeated text once.
fn chain_text(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(current) = next {
        let text = current.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        next = current.source();
        if parts.len() >= 8 {
            break;
        }
    }
    parts.join(": ")
}

/// What one link of an error chain says, if it is a failure Knapsack names.
fn recognise(error: &(dyn StdError + 'static)) -> Option<Failure> {
    if let Some(refused) = error.downcast_ref::<RedirectRefused>() {
        return Some(Failure::Redirected(refused.status));
    }
    if error.downcast_ref::<AuthRequiredError>().is_some() {
        return Some(Failure::Unauthorized(401));
    }
    if error.downcast_ref::<InsufficientScopeError>().is_some() {
        return Some(Failure::Unauthorized(403));
    }
    if let Some(StreamableHttpError::UnexpectedServerResponse(text)) =
        error.downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        // A 401/403 without a challenge arrives as an unexpected response naming its status.
        for status in [401, 403] {
            if text.starts_with(&format!("HTTP {status} ")) {
                return Some(Failure::Unauthorized(status));
            }
        }
    }
    if let Some(error) = error.downcast_ref::<reqwest::Error>()
        && let Some(status) = error.status()
        && matches!(status.as_u16(), 401 | 403)
    {
        return Some(Failure::Unauthorized(status.as_u16()));
    }
    None
}

/// The next link: rmcp's transport error keeps the HTTP client's error in a variant
/// that `source()` does not expose.
fn inner<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a (dyn StdError + 'static)> {
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(client)) => Some(client),
        _ => error.source(),
    }
}
