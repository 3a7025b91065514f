//! Minting identifiers: a kind prefix and a ULID, so ids sort by creation time.

use shiitake_protocol::{BoundedId, CommandId, EntryId, EventId, RequestId, SessionId};
use ulid::Ulid;

#[allow(clippy::expect_used)]
fn mint(prefix: &str) -> BoundedId {
    // Infallible: a short ASCII prefix plus 26 Crockford characters is visible ASCII
    // far below the 128-byte bound.
    BoundedId::new(format!("{prefix}_{}", Ulid::generate())).expect("minted ids are valid")
}

/// A new Session id, `ses_<ulid>`.
pub fn session_id() -> SessionId {
    mint("ses").into()
}

/// A new command id, `cmd_<ulid>`.
pub fn command_id() -> CommandId {
    mint("cmd").into()
}

/// A new lineage entry id, `ent_<ulid>`.
pub fn entry_id() -> EntryId {
    mint("ent").into()
}

/// A new request id for callers that gave none, `req_<ulid>`.
pub fn request_id() -> RequestId {
    mint("req").into()
}

/// A new event id (compaction markers, sandbox failures), `evt_<ulid>`.
pub fn event_id() -> EventId {
    mint("evt").into()
}
