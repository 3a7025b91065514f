//! Ownership across processes, for a store several processes share (the Hub).
//!
//! One process owns a Session at a time: the one holding its lease. Here is this
//! process's side of that arrangement, apart from the single-process owner
//! (`crate::owner`), which only commits under the lease its task hands it:
//!
//! - `forwarded.rs`: requests and answers as they travel through the database;
//! - `stand_in.rs`: standing in for an owner in another process, forwarding and
//!   taking the lease over when that owner goes;
//! - `serve.rs`: serving, through the owner here, what other processes forwarded;
//! - `follower.rs`: watches and subscriptions on a process that does not own the
//!   Session, fed from the owner's announced commits;
//! - `adoption.rs`: waking owners for forwarded requests, stopping owners whose
//!   lease was taken, adopting Sessions whose owner went away.

mod adoption;
mod follower;
mod forwarded;
mod serve;
mod stand_in;

pub(crate) use adoption::watch;
pub(crate) use serve::ForwardedRequests;
pub(crate) use stand_in::{StandIn, stand_in};
