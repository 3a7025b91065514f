//! The Loop extension: one repeated prompt per Session.
//!
//! A loop repeats its prompt in one of two forms: on a fixed **cron cadence** (a
//! core timer, Unix cron in UTC), which expires seven days after it starts; or
//! **self-paced**, where the run of each occurrence asks for the next one with
//! `loop.schedule_next` (accepted only in that run) and omitting it ends the loop.
//! The model has `loop.get`, `loop.start`, `loop.stop` and `loop.schedule_next` in
//! every run; a person starts, pauses, resumes and stops a loop with `/loop`. An
//! occurrence that comes due while the previous one is still queued or running is
//! recorded (`skipped`), not stacked (see [`state`]).
//!
//! What it does not own: attention or notifications for loops, another
//! extension's prompts.
//!
//! [`extension()`] declares all of it to core's extension kit; register it with
//! `AgentBuilder::kit_extension(shiitake_ext_loop::extension()?)`, which grants it
//! exactly what it declares. Its footer row reads `loop active, 3 run(s): <prompt>`
//! (or `loop paused (/loop resume), ...`) with Pause or Resume and Stop buttons.
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
mod tools;

#[cfg(feature = "runtime")]
pub use extension::{OwnRun, extension};
