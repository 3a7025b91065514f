//! The HTTP client that carries every MCP request: the host's, with redirects refused.

use std::fmt;

use reqwest::redirect::{Attempt, Policy};

use super::error::McpConfigError;

/// The error a refused redirect carries inside reqwest's error, so Knapsack can name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("redirect (HTTP {status}) refused")]
pub struct RedirectRefused {
    /// The redirect status the server answered with.
    pub status: u16,
}

/// The HTTP client of MCP connections.
///
/// The host supplies the client (its TLS roots, proxy, timeouts, user agent) as a
/// `reqwest::ClientBuilder`; Knapsack finishes it with a redirect policy that refuses
/// every redirect, so a request and its headers go only to the URL the host named.
/// Knapsack enables no TLS backend of its own: an `https` server needs the host's
/// reqwest to have one (the `shiitake` binary enables rustls). Cheap to clone.
#[derive(Clone)]
pub struct McpHttp {
    client: reqwest::Client,
}

impl McpHttp {
    /// A client from reqwest's defaults, with redirects refused.
    pub fn new() -> Result<Self, McpConfigError> {
        Self::from_builder(reqwest::Client::builder())
    }

    /// The host's client, with redirects refused.
    ///
    /// Idle connections are not pooled, as rmcp's own default client does: reusing a
    /// connection whose last response body was not read to its end stalls on TCP
    /// delayed acknowledgement.
    pub fn from_builder(builder: reqwest::ClientBuilder) -> Result<Self, McpConfigError> {
        let client = builder
            .redirect(Policy::custom(refuse))
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|error| McpConfigError::Http(error.to_string()))?;
        Ok(Self { client })
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

fn refuse(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    let status = attempt.status().as_u16();
    attempt.error(RedirectRefused { status })
}

impl fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // reqwest's Debug prints default headers; the host may have set some.
        f.debug_struct("McpHttp").finish_non_exhaustive()
    }
}
