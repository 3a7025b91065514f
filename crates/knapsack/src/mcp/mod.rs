//! MCP servers over Streamable HTTP, through the rmcp client.
//!
//! A host names its servers ([`McpServer`]: a guest name, a URL, secret headers) and
//! supplies the HTTP client ([`McpHttp`], its `reqwest` client with redirects refused).
//! [`crate::Knapsack::mcp_servers`] turns the list into one capability source
//! ([`McpServersSource`]) holding `env.mcp.<name>` per connected server, one operation
//! per advertised tool:
//!
//! - tool names map onto the guest grammar (`create-note` → `create_note`); two names
//!   that map to one identifier make the list unusable, naming both;
//! - input schemas decode through the capabilities subset; one outside it accepts
//!   any JSON object and the server validates it;
//! - a tool marked `readOnlyHint` is replay-safe, every other one is not;
//! - a call returns `structuredContent`, or `{ isError, content }` when there is none
//!   or the tool failed;
//! - header values never reach a module, a descriptor, a result, an error message or
//!   a log line written by Knapsack, and rmcp only sees them marked sensitive; rmcp's
//!   own log lines can repeat a server's reply (a 401 body that echoes the token), so a
//!   host puts its log writer behind [`Redactions`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use knapsack::Knapsack;
//! use knapsack::mcp::{McpHttp, McpServer, McpServersOptions};
//! use shiitake_capabilities::{Catalog, SourceId};
//!
//! let notes = McpServer::new("notes", "https://notes.example/mcp")?
//!     .with_header("Authorization", "Bearer from-the-host")?;
//! let options = McpServersOptions::new(McpHttp::new()?);
//! let source = Knapsack::mcp_servers(SourceId::new("mcp"), vec![notes], options);
//! let catalog = Catalog::new();
//! catalog.add_source(Arc::new(source)).await?; // connects; failures go to on_unavailable
//! # Ok(())
//! # }
//! ```

mod call;
mod connection;
mod error;
mod http;
mod redact;
mod server;
mod source;
mod spec;
mod tools;

pub use error::{McpConfigError, McpError};
pub use http::{McpHttp, RedirectRefused};
pub use redact::{RedactingWriter, Redactions};
pub use server::{McpServer, SecretHeaders};
pub use source::{McpConnected, McpServersOptions, McpServersSource, McpUnavailable};
