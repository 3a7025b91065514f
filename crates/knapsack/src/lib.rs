//! Knapsack: tool connections for Shiitake agents.
//!
//! **What it owns.** Knapsack turns things a host already trusts into
//! capability modules (see `shiitake-capabilities`):
//!
//! - **Files.** A [`Files`] port is a bounded, rooted view of text files:
//!   `read` (a window of lines, at most 128 KiB), `list`, `glob`, `grep` (at
//!   most 256 results with a `truncated` flag), and `replace`, an atomic
//!   compare-and-swap of a whole file. [`LocalFiles`] implements it over a
//!   directory, confining every path inside the root. Listing and search see
//!   only what [`SearchVisibility`] allows (`.gitignore`/`.ignore` through the
//!   `ignore` crate, never `.git`); exact-path reads do not consult it.
//! - **apply_patch.** [`patch`] parses, prints and presents the Codex patch
//!   grammar (`docs/patch.md`); a port's [`PatchEngine`] applies a patch
//!   atomically: every file changes or none does.
//! - **Projection.** [`Knapsack::files`] projects one port as the `files`
//!   module (`read`, `list`, `glob`, `grep`, `edit`, and `apply_patch` when
//!   the port has an engine). Every input decodes through the serde +
//!   schemars types of [`types`], which also produce the advertised schemas.
//! - **Computers.** [`Knapsack::computer`] captures one [`Computer`]'s
//!   advertised operations as `env.computers.<name>`;
//!   [`Knapsack::computers`] follows a host-owned list of them, describing
//!   each under a timeout and reporting those that fail.
//! - **MCP servers** (feature `mcp`, on by default). [`Knapsack::mcp_servers`]
//!   connects a host-owned list of remote MCP servers over Streamable HTTP
//!   (the rmcp client) as `env.mcp.<name>`; see [`mcp`].
//! - **The browser App bridge** (feature `ui`, on by default). `ui::UiBridge`
//!   keeps one browser host per Session and lends each run the `ui` module
//!   (`ui.discover`, `ui.execute`), carried out by the App open in the person's
//!   browser; see `ui`.
//!
//! **What it does not own.** Credentials, the choice of roots, Computer
//! storage, model loops and tool execution policy all belong to the host.
//! Knapsack validates paths; the port confines them.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use knapsack::{Files, LocalFiles, ReadInput};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("notes.md"), "one\ntwo\nthree\n")?;
//! let files = LocalFiles::new(dir.path())?;
//! let read = files
//!     .read(ReadInput { path: "notes.md".into(), offset: 1, limit: Some(1) })
//!     .await?;
//! assert_eq!(read.content, "two\n");
//! assert_eq!(read.next_offset, Some(2));
//! # Ok(())
//! # }
//! ```

mod computer;
mod edit;
mod error;
#[cfg(unix)]
pub mod exec;
mod files_module;
pub mod limits;
mod local;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod patch;
mod path;
mod port;
pub mod search;
pub mod types;
#[cfg(feature = "ui")]
pub mod ui;

pub use computer::{
    AdvertisedOperation, Computer, ComputerConnection, ComputerError, ComputersOptions,
    ComputersSource, Knapsack, Unavailable, capture,
};
pub use edit::{edit, plan_edit};
pub use error::{FilesEditError, FilesError};
pub use files_module::{FilesConnection, input_schema, to_tool_error};
pub use local::LocalFiles;
pub use path::{normalize_relative, validate_path};
pub use port::{Files, PatchEngine};
pub use search::{IgnoreSource, SearchVisibility};
pub use types::*;
