//! The Plan extension: one checklist per Session.
//!
//! The model replaces the checklist whole with `plan.update_plan` (at most
//! [`MAX_STEPS`](contract::MAX_STEPS) steps, at most one in progress; `steps: []`
//! clears it). A person opens the full checklist with `/plan` and clears it with
//! `/plan clear` or the footer's *Clear plan* action, which call the same owner
//! command. The projection is the footer row: the current step and progress, and
//! the whole checklist only while a person has it open. A finished (every step
//! completed) or cleared plan leaves the footer; its history stays in state.
//!
//! What it does not own: the rendering of the footer (clients do it from the
//! projection), other extensions' plans or goals.
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
pub use extension::extension;
