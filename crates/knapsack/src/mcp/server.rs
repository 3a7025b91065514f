//! One host-owned MCP server: its guest name, its URL and its secret headers.

use std::collections::HashMap;
use std::fmt;

use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use shiitake_capabilities::ModulePath;

use super::error::McpConfigError;
use super::redact::{scrub_forms, secret_forms};

/// Header names the MCP transport sets itself; a host header may not replace them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Header values the host supplies (a bearer token, an API key): sent with every request
/// to one server and shown nowhere else.
///
/// Values are marked sensitive (`http` prints them as `Sensitive`), `Debug` lists only
/// the names, and [`SecretHeaders::scrub`] removes the values from any text before
/// Knapsack puts it into an error or a log line; [`Redactions`](super::Redactions)
/// does the same for a host's whole log.
#[derive(Clone, Default)]
pub struct SecretHeaders {
    entries: Vec<(HeaderName, HeaderValue)>,
    /// Every form of every value, longest first, for [`SecretHeaders::scrub`].
    forms: Vec<String>,
}

impl SecretHeaders {
    /// Adds one header; a reserved or malformed name, or a malformed value, is refused
    /// (the error names the header, never its value).
    pub fn insert(&mut self, name: &str, value: &str) -> Result<(), McpConfigError> {
        let header = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
            McpConfigError::InvalidHeader {
                name: name.to_owned(),
                reason: "not a valid header name",
            }
        })?;
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(McpConfigError::ReservedHeader {
                name: header.as_str().to_owned(),
            });
        }
        if value.is_empty() {
            return Err(McpConfigError::InvalidHeader {
                name: header.as_str().to_owned(),
                reason: "the value is empty",
            });
        }
        let mut value_header =
            HeaderValue::from_str(value).map_err(|_| McpConfigError::InvalidHeader {
                name: header.as_str().to_owned(),
                reason: "the value holds a character a header cannot carry",
            })?;
        value_header.set_sensitive(true);
        self.entries.retain(|(existing, _)| existing != header);
        self.entries.push((header, value_header));
        let mut forms: Vec<String> = self
            .entries
            .iter()
            .filter_map(|(_, v)| v.to_str().ok())
            .flat_map(secret_forms)
            .collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        self.forms = forms;
        Ok(())
    }

    /// The header names, in insertion order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(name, _)| name.as_str())
    }

    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `text` with every header value replaced by `<redacted>`: as sent, escaped in a
    /// quoted string, percent-encoded, and the credential after its scheme on its own.
    pub fn scrub(&self, text: &str) -> String {
        scrub_forms(&self.forms, text).into_owned()
    }

    /// Every form [`SecretHeaders::scrub`] removes, longest first.
    pub(crate) fn forms(&self) -> &[String] {
        &self.forms
    }

    /// The headers in the form the rmcp transport takes.
    pub(crate) fn to_map(&self) -> HashMap<HeaderName, HeaderValue> {
        self.entries.iter().cloned().collect()
    }
}

impl fmt::Debug for SecretHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.names().map(|name| (name, "<redacted>")))
            .finish()
    }
}

/// A remote MCP server the host trusts: `env.mcp.<name>` at `url`, with its headers.
///
/// Knapsack neither finds nor mints credentials: the host puts them in the headers.
#[derive(Clone)]
pub struct McpServer {
    name: String,
    module: ModulePath,
    url: Url,
    headers: SecretHeaders,
}

impl McpServer {
    /// A server named by a guest identifier (`notes`), reached over Streamable HTTP at `url`.
    ///
    /// The URL must be `http` or `https` and carry no user name or password (put a
    /// credential in a header, where it stays secret).
    pub fn new(name: impl Into<String>, url: &str) -> Result<Self, McpConfigError> {
        let name = name.into();
        if name.contains('.') {
            return Err(McpConfigError::InvalidName {
                name,
                reason: "a server name is one guest identifier, without dots".to_owned(),
            });
        }
        let module = ModulePath::new(format!("env.mcp.{name}")).map_err(|error| {
            McpConfigError::InvalidName {
                name: name.clone(),
                reason: error.to_string(),
            }
        })?;
        let url = parse_url(url)?;
        Ok(Self {
            name,
            module,
            url,
            headers: SecretHeaders::default(),
        })
    }

    /// Adds a header sent with every request to this server (e.g. `Authorization`).
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self, McpConfigError> {
        self.headers.insert(name, value)?;
        Ok(self)
    }

    /// The guest identifier under `env.mcp`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `env.mcp.<name>`.
    pub fn module_path(&self) -> &ModulePath {
        &self.module
    }

    /// The endpoint.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The secret headers.
    pub fn headers(&self) -> &SecretHeaders {
        &self.headers
    }
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("headers", &self.headers)
            .finish()
    }
}

fn parse_url(text: &str) -> Result<Url, McpConfigError> {
    let invalid = |reason: &'static str| McpConfigError::InvalidUrl { reason };
    let url = Url::parse(text).map_err(|_| invalid("not an absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "the URL carries a user name or password; pass a credential as a header",
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("the URL has no host"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn debug_shows_header_names_but_never_values() {
        let server = McpServer::new("notes", "http://127.0.0.1:9/mcp")
            .unwrap()
            .with_header("Authorization", "Bearer s3cr3t-value")
            .unwrap();
        let shown = format!("{server:?}");
        assert!(shown.contains("authorization"), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        let map = format!("{:?}", server.headers().to_map());
        assert!(!map.contains("s3cr3t"), "{map}");
    }

    #[test]
    fn scrub_replaces_every_value() {
        let mut headers = SecretHeaders::default();
        headers.insert("X-Api-Key", "k-123").unwrap();
        headers.insert("Authorization", "Bearer t-456").unwrap();
        assert_eq!(
            headers.scrub("a k-123 b Bearer t-456 c k-123"),
            "a <redacted> b <redacted> c <redacted>"
        );
    }

    #[test]
    fn a_header_set_twice_keeps_the_last_value() {
        let mut headers = SecretHeaders::default();
        headers.insert("X-Key", "one").unwrap();
        headers.insert("x-key", "two").unwrap();
        assert_eq!(headers.names().collect::<Vec<_>>(), ["x-key"]);
        let map = headers.to_map();
        assert_eq!(map.len(), 1);
        assert_eq!(map.values().next().unwrap().to_str().unwrap(), "two");
    }

    #[test]
    fn reserved_and_malformed_headers_are_refused_without_echoing_the_value() {
        let mut headers = SecretHeaders::default();
        assert_eq!(
            headers.insert("Mcp-Session-Id", "x"),
            Err(McpConfigError::ReservedHeader {
                name: "mcp-session-id".into()
            })
        );
        assert!(matches!(
            headers.insert("bad name", "x"),
            Err(McpConfigError::InvalidHeader { .. })
        ));
        let error = headers.insert("X-Key", "line\nbreak-secret").unwrap_err();
        assert!(!error.to_string().contains("secret"), "{error}");
        assert!(matches!(
            headers.insert("X-Key", ""),
            Err(McpConfigError::InvalidHeader { .. })
        ));
    }

    #[test]
    fn names_and_urls_are_checked() {
        assert!(McpServer::new("notes", "https://example.com/mcp").is_ok());
        assert!(matches!(
            McpServer::new("Notes", "http://x/mcp"),
            Err(McpConfigError::InvalidName { .. })
        ));
        assert!(matches!(
            McpServer::new("a.b", "http://x/mcp"),
            Err(McpConfigError::InvalidName { .. })
        ));
        for url in [
            "ftp://x/mcp",
            "notes",
            "http://user:pw@x/mcp",
            "http://user@x/mcp",
        ] {
            assert!(
                matches!(
                    McpServer::new("notes", url),
                    Err(McpConfigError::InvalidUrl { .. })
                ),
                "{url}"
            );
        }
        let error = McpServer::new("notes", "http://user:pw-secret@x/mcp").unwrap_err();
        assert!(!error.to_string().contains("pw-secret"));
    }
}
