//! Minting identifiers: a kind prefix and a ULID, so ids sort by creation time.

use shiitake_protocol::{BoundedId, CommandId, EntryId, EventId, RequestId, SessionId};
use ulid::{ULID_LEN, Ulid};

#[allow(clippy::expect_used)]
fn mint(prefix: &str) -> BoundedId {
    // Put together without `format!`: every committed message mints one.
    let mut ulid = [0; ULID_LEN];
    let mut id = String::with_capacity(prefix.len() + 1 + ULID_LEN);
    id.push_str(prefix);
    id.push('_');
    id.push_str(Ulid::generate().array_to_str(&mut ulid));
    // Infallible: a short ASCII prefix plus 26 Crockford characters is visible ASCII
    // far below the 128-byte bound.
    BoundedId::new(id).expect("minted ids are valid")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_prefix_and_a_ulid() {
        let id = entry_id();
        let (prefix, ulid) = id.as_str().split_once('_').unwrap();
        assert_eq!(prefix, "ent");
        assert_eq!(Ulid::from_string(ulid).unwrap().to_string(), ulid);
    }
}
