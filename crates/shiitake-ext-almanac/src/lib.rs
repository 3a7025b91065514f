//! The Almanac extension: Agent-scope one-shot and recurring schedules.
//!
//! Each schedule targets a Session and admits its prompt there when due, through
//! core's Agent-scope admission (`Tx::admit_into`) under one request id per
//! occurrence, so an occurrence is never admitted twice: not after a restart, not
//! with two Agent processes on one database (each occurrence is claimed by one
//! timer transaction, and the door answers a repeated request id with the first
//! `Accepted`). A refused admission (the Session was deleted ...) is retried for
//! that schedule alone with backoff; after five refusals the schedule stops with
//! the recorded error until a person resumes it. People create, list, pause,
//! resume and delete schedules with Agent-scope commands.
//!
//! What it does not own: the Sessions it admits into, the runs of its prompts.
//!
//! [`extension()`] declares all of it to core's extension kit; register it with
//! `AgentBuilder::kit_extension(shiitake_ext_almanac::extension()?)`, which grants it
//! exactly what it declares. Its commands are Agent scope: the host refuses them on a
//! Session's route, before anything runs.
//!
//! [`contract`] builds without core (`default-features = false`) for clients; the
//! extension itself is behind the default `runtime` feature.

pub mod contract;
pub mod state;

#[cfg(feature = "runtime")]
mod catalog;
#[cfg(feature = "runtime")]
mod extension;

#[cfg(feature = "runtime")]
pub use extension::extension;
