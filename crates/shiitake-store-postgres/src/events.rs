//! Announcements between processes: one `LISTEN` connection per process, whatever
//! the tenants it serves, turned into core's [`OwnershipEvent`]s.
//!
//! Every announcement goes on one channel, [`CHANNEL`], as a short text payload
//! `<kind> <agent> <argument>...`; the listener hands each to the open tenant it
//! names and drops those of tenants not open here. When the listening connection
//! drops, announcements in between are lost, so the listener listens anew on a fresh
//! connection (its attempts spaced by the backoff while the database cannot be
//! reached, its log quiet), counts the reconnection
//! (`shiitake_hub_notify_reconnects_total`) and sends [`OwnershipEvent::Resync`] to
//! every open tenant: whoever waits on one looks at the database again.

use std::sync::{Arc, Weak};

use shiitake_core::store::ownership::{ForwardId, OwnershipEvent};
use shiitake_protocol::SessionId;
use sqlx::postgres::{PgListener, PgPool};
use tokio_util::sync::CancellationToken;

use crate::AgentKey;
use crate::hub::HubInner;
use shiitake_core::backoff::Backoff;

use crate::outage::{Connection, Outage};

/// The notification channel of every Shiitake announcement.
pub(crate) const CHANNEL: &str = "shiitake";

/// A Session's owner committed: `c <agent> <session> <head sequence>`.
pub(crate) fn committed_payload(agent: &str, session: &str, head: u64) -> String {
    format!("c {agent} {session} {head}")
}

/// A request was forwarded to a Session's owner: `f <agent> <session>`.
pub(crate) fn forwarded_payload(agent: &str, session: &str) -> String {
    format!("f {agent} {session}")
}

/// A forwarded request was answered: `a <agent> <request id>`.
pub(crate) fn answered_payload(agent: &str, id: ForwardId) -> String {
    format!("a {agent} {}", id.0)
}

/// A lease was given back: `r <agent> <session>`.
pub(crate) fn released_payload(agent: &str, session: &str) -> String {
    format!("r {agent} {session}")
}

/// A process died (or drains) holding Sessions of `agent`: `d <agent>` (a death's is
/// sent by the heartbeat's statement itself, `nodes.rs`; a drain's by `hub.rs`).
pub(crate) fn freed_payload(agent: &str) -> String {
    format!("d {agent}")
}

/// The tenant a `d <agent>` payload reports freed; `None` for any other payload.
pub(crate) fn parse_freed(payload: &str) -> Option<AgentKey> {
    let mut parts = payload.split(' ');
    if parts.next()? != "d" {
        return None;
    }
    let agent = AgentKey::new(parts.next()?).ok()?;
    parts.next().is_none().then_some(agent)
}

/// The Agent a payload names (its second word), to route it by.
pub(crate) fn agent_of(payload: &str) -> Option<&str> {
    payload.split(' ').nth(1)
}

/// Reads one payload of `agent`; `None` for another Agent's or a malformed one.
pub(crate) fn parse(agent: &str, payload: &str) -> Option<OwnershipEvent> {
    let mut parts = payload.split(' ');
    let (kind, of) = (parts.next()?, parts.next()?);
    if of != agent {
        return None;
    }
    let session = |text: Option<&str>| SessionId::new(text?).ok();
    let event = match kind {
        "c" => {
            let session_id = session(parts.next())?;
            let head_sequence = parts.next()?.parse().ok()?;
            OwnershipEvent::Committed {
                session_id,
                head_sequence,
            }
        }
        "f" => OwnershipEvent::Forwarded {
            session_id: session(parts.next())?,
        },
        "a" => OwnershipEvent::Answered {
            id: ForwardId(parts.next()?.parse().ok()?),
        },
        "r" => OwnershipEvent::Released {
            session_id: session(parts.next())?,
        },
        _ => return None,
    };
    parts.next().is_none().then_some(event)
}

/// Connects the listener of this process. It does not reconnect by itself: [`run`]
/// does, so every reconnection is counted and announced the same way.
pub(crate) async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Forwards announcements to the subscribers of the tenant each names until the hub
/// closes; when the connection drops (or fails), listens anew and tells every open
/// tenant to look again.
pub(crate) async fn run(mut listener: PgListener, hub: Weak<HubInner>) {
    let mut backoff = Outage::backoff();
    let mut outage = Outage::new(Connection::Listener);
    loop {
        let Some(closing) = hub.upgrade().map(|hub| hub.closing.clone()) else {
            return;
        };
        let received = tokio::select! {
            biased;
            () = closing.cancelled() => return,
            received = listener.try_recv() => received,
        };
        match received {
            Ok(Some(notification)) => {
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                route(&hub, notification.payload());
                continue;
            }
            // The connection dropped. Whatever is announced until the listener is back
            // is lost, so waiters look again once it is.
            Ok(None) => outage.failed(&"the connection closed"),
            // The store is closing (its pool went first): nothing failed.
            Err(_) if closing.is_cancelled() => return,
            Err(sqlx::Error::PoolClosed) => return,
            // A restart often shows so: the backend's last word is an error.
            Err(error) => outage.failed(&error),
        }
        // The old connection goes (its drop hands a live one back to the pool).
        drop(listener);
        listener = match relisten(&hub, &closing, &mut backoff, &mut outage).await {
            Some(listener) => listener,
            None => return,
        };
        let Some(hub) = hub.upgrade() else {
            return;
        };
        backoff.reset();
        outage.back();
        shiitake_core::telemetry::notify_reconnect();
        for tenant in hub.tenants() {
            let _receivers = tenant.events.send(OwnershipEvent::Resync);
        }
    }
}

/// Hands one announcement to the tenant it names (or to the hub's `freed`).
fn route(hub: &Arc<HubInner>, payload: &str) {
    if let Some(agent) = parse_freed(payload) {
        // Nobody listening is fine: the host may not care.
        let _receivers = hub.freed.send(agent);
        return;
    }
    let routed = agent_of(payload).and_then(|agent| {
        let tenant = hub.tenant(agent)?;
        Some((tenant, parse(agent, payload)?))
    });
    if let Some((tenant, event)) = routed {
        // Nobody listening is fine: events are hints to wake up.
        let _receivers = tenant.events.send(event);
    }
}

/// Listens anew on a connection of the hub's pool, an attempt at once and then each
/// after the backoff's delay, until one works; `None` when the hub closes first.
async fn relisten(
    hub: &Weak<HubInner>,
    closing: &CancellationToken,
    backoff: &mut Backoff,
    outage: &mut Outage,
) -> Option<PgListener> {
    loop {
        // A clone of the pool, not the hub: the hub may close meanwhile.
        let pool = hub.upgrade().map(|hub| hub.pool.clone())?;
        let attempt = tokio::select! {
            biased;
            () = closing.cancelled() => return None,
            attempt = listen(&pool) => attempt,
        };
        match attempt {
            Ok(listener) => return Some(listener),
            Err(sqlx::Error::PoolClosed) => return None,
            Err(error) => outage.failed(&error),
        }
        tokio::select! {
            biased;
            () = closing.cancelled() => return None,
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn session(n: u32) -> String {
        format!("ses_{n:08}")
    }

    #[test]
    fn each_payload_reads_back_as_its_event() {
        let s = session(7);
        let id = SessionId::new(s.clone()).unwrap();
        assert_eq!(
            parse("a1", &committed_payload("a1", &s, 42)),
            Some(OwnershipEvent::Committed {
                session_id: id.clone(),
                head_sequence: 42
            })
        );
        assert_eq!(
            parse("a1", &forwarded_payload("a1", &s)),
            Some(OwnershipEvent::Forwarded {
                session_id: id.clone()
            })
        );
        assert_eq!(
            parse("a1", &answered_payload("a1", ForwardId(9))),
            Some(OwnershipEvent::Answered { id: ForwardId(9) })
        );
        assert_eq!(
            parse("a1", &released_payload("a1", &s)),
            Some(OwnershipEvent::Released { session_id: id })
        );
    }

    #[test]
    fn a_payload_names_the_agent_it_is_routed_to() {
        let s = session(2);
        assert_eq!(agent_of(&committed_payload("a1", &s, 3)), Some("a1"));
        assert_eq!(parse_freed(&freed_payload("a1")), AgentKey::new("a1").ok());
        assert_eq!(parse_freed(&released_payload("a1", &s)), None);
        assert_eq!(parse_freed("d a1 extra"), None);
        assert_eq!(parse_freed("d "), None);
        assert_eq!(
            parse("a1", &freed_payload("a1")),
            None,
            "not a tenant's event"
        );
        assert_eq!(agent_of(&released_payload("t-x.y:z", &s)), Some("t-x.y:z"));
        assert_eq!(agent_of("c"), None);
        assert_eq!(agent_of(""), None);
    }

    #[test]
    fn another_agents_and_malformed_payloads_are_ignored() {
        let s = session(1);
        assert_eq!(parse("a2", &committed_payload("a1", &s, 1)), None);
        assert_eq!(parse("a1", ""), None);
        assert_eq!(parse("a1", "c a1"), None);
        assert_eq!(parse("a1", &format!("c a1 {s} x")), None);
        assert_eq!(parse("a1", &format!("c a1 {s} 1 extra")), None);
        assert_eq!(parse("a1", "z a1 whatever"), None);
        assert_eq!(parse("a1", "a a1 -"), None);
    }

    proptest! {
        /// An Agent key never matches another Agent's payload, whatever the keys.
        #[test]
        fn payloads_stay_with_their_agent(
            mine in "[A-Za-z0-9_.:-]{1,12}",
            theirs in "[A-Za-z0-9_.:-]{1,12}",
            head in any::<u64>(),
        ) {
            let payload = committed_payload(&theirs, &session(3), head);
            let parsed = parse(&mine, &payload);
            prop_assert_eq!(parsed.is_some(), mine == theirs);
        }
    }
}
