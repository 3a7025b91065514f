//! Wire types, codecs and API traits of Shiitake, with no I/O.
//!
//! This crate is what a client needs to talk to a Shiitake Agent without the
//! core: every JSON shape of the client API (commands, acceptance, snapshots,
//! frames, activity, summaries, extension slots), the Pi transcript
//! [`Message`](message::Message), the canonical [`ShiitakeError`], the `parse_*`
//! codecs, and the async [`AgentApi`]/[`SessionApi`] traits that the in-process
//! Agent and the HTTP client both implement.
//!
//! Field names and discriminators are exactly those of the specification:
//! camelCase, optional fields omitted when absent. Bounded values (identifiers,
//! prompt text) are validated newtypes, so an out-of-bound value is rejected
//! while decoding rather than deep inside the Agent. `docs/wire.md` lists every
//! bound.

pub mod message;
pub mod number;
