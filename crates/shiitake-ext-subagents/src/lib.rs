//! Subagents: a footer view of the Agents a Session sent work to or created.
//!
//! Each row is one child Agent and the Session its work went to, with a live status
//! read from the child's own Session: running is *working*, done is *idle*, errored is
//! *failed*; attention that waits on a person is *needs you* (a question carries its
//! text and one Answer action that runs the question's own `/answer` flow); a question
//! that waits on the Agent that sent the work is *waiting on `<name>`*, calm until it is
//! escalated and counted apart in the collapsed summary, which is amber only when a
//! child needs a person; a child whose state cannot be read is *unavailable*, never
//! idle. `/agents` collapses the rows to one summary row and expands them again, per
//! Session and in memory. The mapping is in [`state`]; `docs/ext-subagents.md` is the
//! page.
//!
//! What it does not own: any relationship between Agents, any durable state. The host
//! supplies a [`SubagentsSource`] (which Agents a Session sent work to or created, and
//! its existing access to read them); [`extension`] gives the kit extension to register
//! and the [`Refresher`] task the host runs. Rows are read when a watcher reads the
//! parent and they are at least a second old; while a row is working or waiting they
//! are read every five seconds until nobody has read the parent for thirty seconds.
//! Projections and footer rows stay synchronous reads of memory; core's `on_observed`
//! and `republish_extensions` connect the two.
//!
//! The footer rows are a plain function of the projection,
//! [`FooterView::footer_rows`](contract::FooterView::footer_rows), in the contract, so
//! whatever publishes the view publishes the same rows.
//!
//! With `default-features = false` only [`contract`] compiles: what a client needs,
//! without shiitake-core.

pub mod contract;

#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
mod refresh;
#[cfg(feature = "runtime")]
mod shared;
#[cfg(feature = "runtime")]
pub mod source;
#[cfg(feature = "runtime")]
pub mod state;

#[cfg(feature = "runtime")]
pub use extension::extension;
#[cfg(feature = "runtime")]
pub use refresh::{Refresher, SubagentsHandle};
#[cfg(feature = "runtime")]
pub use source::{ChildPage, ChildRef, SourceError, SubagentsSource, read_core_child};
