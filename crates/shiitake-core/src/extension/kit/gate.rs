//! The kit's tool gate: the extension's rule, plus the record that makes a held call
//! safe across a crash.
//!
//! For every call the rule held (answered [`GateVerdict::Ask`]), the kit keeps one row
//! in the extension's Session state, collection [`HELD_COLLECTION`], keyed by the
//! call's execution id: `waiting` while it is held, `started` once the rule allowed
//! it. The `started` row is written in the transaction that answers `Allow`, so it
//! commits before the call runs. After a restart:
//!
//! - a call with no row (the rule never held it) or a `started` row is not the rule's
//!   to decide: the kit passes, and core runs it again only when it is replay-safe
//!   (an unsafe call that may have run is "outcome unknown", never run twice);
//! - a `waiting` row goes to the rule ([`GateMoment::Resumed`]): a pending decision
//!   waits again, an approval that had not run yet runs once, a denial stays denied.
//!
//! After a pause for the store, the owner knows which calls its stopped run started,
//! and a call it never started is asked about again as a first call
//! ([`GateMoment::Call`]) with the same execution id. A `waiting` row then makes it the
//! held call it was: the rule is asked as for a resumed call, so it is not held twice
//! (one approval, not two); a `started` row (allowed, never started) runs it.
//!
//! The rows of a run are removed in the transaction that settles it.

use serde::{Deserialize, Serialize};

use crate::extension::{GateMoment, GateVerdict, GatedCall, HookError, Settled, StateScope, Tx};

/// The kit's collection of held calls in a gating extension's Session state.
pub const HELD_COLLECTION: &str = "kit.gate.held";

/// Where a held call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Held {
    /// The rule held it; it has not started.
    Waiting,
    /// The rule allowed it: it may have run.
    Started,
}

/// A gate's rule: synchronous, over the call and the extension's state.
pub(super) type GateRule =
    Box<dyn Fn(&mut Tx<'_>, &GatedCall) -> Result<GateVerdict, HookError> + Send + Sync>;

/// Asks `rule` about `call`, keeping the record of held calls.
pub(super) fn decide(
    rule: &GateRule,
    tx: &mut Tx<'_>,
    call: &GatedCall,
) -> Result<GateVerdict, HookError> {
    let key = call.execution_id.as_str();
    let held: Option<Held> = tx.get(StateScope::Session, HELD_COLLECTION, key)?;
    if call.moment == GateMoment::Resumed && held != Some(Held::Waiting) {
        // Never held, or allowed and perhaps run: core's default decides.
        return Ok(GateVerdict::Pass);
    }
    let verdict = match (call.moment, held) {
        // Asked again after a pause: the call it holds, not a new one.
        (GateMoment::Call, Some(Held::Waiting)) => {
            let resumed = GatedCall {
                moment: GateMoment::Resumed,
                ..call.clone()
            };
            rule(tx, &resumed)?
        }
        (GateMoment::Call, Some(Held::Started)) => return Ok(GateVerdict::Allow),
        _ => rule(tx, call)?,
    };
    match (&verdict, held) {
        (GateVerdict::Allow, Some(_)) => {
            tx.put(StateScope::Session, HELD_COLLECTION, key, &Held::Started)?;
        }
        (GateVerdict::Ask, None) => {
            tx.put(StateScope::Session, HELD_COLLECTION, key, &Held::Waiting)?;
        }
        _ => {}
    }
    Ok(verdict)
}

/// Forgets the held calls of a run that settled: none of them can be resumed now.
pub(super) fn settled(tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
    let prefix = format!("{}:", settled.command_id.as_str());
    let held: Vec<(String, serde_json::Value)> = tx.scan(StateScope::Session, HELD_COLLECTION)?;
    for (key, _) in held {
        if key.starts_with(&prefix) {
            tx.delete(StateScope::Session, HELD_COLLECTION, &key)?;
        }
    }
    Ok(())
}
