//! Home: the Agent-scope choice of an attached Computer, and each run's file tools on it.
//!
//! **What it owns.** The host builds Home with its Computer list ([`Computers`]), whose
//! `read()` returns the current attachments `{name, attachmentId, port}`, each port
//! already scoped by the host. Home records one Agent-scope choice ([`contract::HomeChoice`]):
//! a person's `/home <name>`, a run's adoption of a sole attachment, or the host's
//! unadvertised `seed` migration, which records an old attachment id only when there is no
//! choice. Each run captures its table, Home and prompt once and gets Knapsack's `files`
//! tools (read, list, glob, grep, plus apply_patch when Home's port has a native patch
//! engine): bare paths and `computer://home/` are on Home, `computer://<name>/` on another
//! captured attachment, and patches always go to Home's engine and jail. A chosen
//! attachment that leaves keeps the choice, and runs get no file tools until it returns
//! or a person chooses again; reordering attachments never changes Home.
//!
//! [`extension`] declares Home on core's extension kit (its prompt and file tools come
//! from one reading of the list per run); [`add_home`] adds it to an Agent with exactly
//! its grants (state, files, commands, projection, prompt, tools), the list as its file
//! port ([`HomePort`]).
//!
//! **What it does not own.** Credentials, ports, roots and the attachment list (the
//! host's); there is no `home.*` model tool.
//!
//! Without the default `runtime` feature, [`contract`], [`state`] and [`route`] compile
//! with no core dependency.
//!
//! `docs/ext-home.md` in the repository documents the rules.

pub mod contract;
pub mod route;
pub mod state;

#[cfg(all(feature = "runtime", unix))]
mod commands;
#[cfg(feature = "runtime")]
mod computers;
#[cfg(feature = "runtime")]
mod errors;
#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
mod jobs_panel;
#[cfg(feature = "runtime")]
mod prompt;
#[cfg(all(feature = "runtime", unix))]
mod run_commands;
#[cfg(feature = "runtime")]
mod tools;

#[cfg(feature = "runtime")]
pub use computers::{AttachError, Attachment, ComputerList, Computers};
#[cfg(feature = "runtime")]
pub use extension::{HomePort, add_home, extension};
