//! Tool gates: an extension that decides whether a tool call of a run may run,
//! before it runs, and may hold it for a decision (a person's approval).
//!
//! A gate is a synchronous rule ([`Extension::gate`](super::Extension::gate)) asked in
//! one owner transaction of the gating extension, so what it records (a pending
//! approval, the start of an approved call) commits before the runner acts on its
//! verdict. The runner asks every gate the host granted (`gate`) before each call, in
//! registration order; the first verdict other than [`GateVerdict::Pass`] decides.
//!
//! [`GateVerdict::Ask`] holds the call: the runner waits, in the call's turn, for a
//! change of the gate's Session state and asks again ([`GateMoment::Changed`]). The
//! wait lasts the call's execute deadline less [`GATE_WAIT_RESERVE`], at most
//! [`GATE_WAIT_CAP`] (the bounds of a live Ask), and ends early when a steer arrives
//! or the run is cancelled; then the gate is asked once more with
//! [`GateMoment::Park`] and must decide (an `Ask` or `Pass` then reads as "not run").
//!
//! After a restart, a call whose result was not committed is asked about with
//! [`GateMoment::Resumed`]. An `Allow` then runs it, so a gate allows a resumed call
//! only when it knows the call never started (the kit's `tool_gate` keeps that record
//! itself). With no gate deciding, core does what it always does: a replay-safe call
//! runs again, any other is answered "outcome unknown" and never run again.

use std::time::Duration;

use serde_json::{Map, Value};
use shiitake_capabilities::{ExecutionId, Replay};
use shiitake_protocol::CommandId;

/// The longest a held call waits in-turn for a decision (ten minutes, as a live Ask).
pub const GATE_WAIT_CAP: Duration = Duration::from_secs(600);
/// What the in-turn wait leaves of the call's execute deadline (a minute, as a live Ask).
pub const GATE_WAIT_RESERVE: Duration = Duration::from_secs(60);

/// How long a held call waits in-turn, given what is left of its deadline.
pub fn gate_wait(remaining: Option<Duration>) -> Duration {
    match remaining {
        Some(left) => left.saturating_sub(GATE_WAIT_RESERVE).min(GATE_WAIT_CAP),
        None => GATE_WAIT_CAP,
    }
}

/// Why the in-turn wait for a held call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParkCause {
    /// The wait ran out ([`gate_wait`]).
    Waited,
    /// A steer arrived; the call gives way so it enters at the next model call.
    Steer,
    /// The run was cancelled; the call is answered "aborted" whatever the verdict.
    Cancelled,
}

/// Why a gate is asked about a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateMoment {
    /// The model called the tool; it has not run.
    Call,
    /// After a restart the call has no committed result: it may have started.
    Resumed,
    /// The gate held the call and its Session state changed since it was last asked.
    Changed,
    /// The in-turn wait ends: decide now.
    Park(ParkCause),
}

/// One tool call a gate decides on.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedCall {
    /// The provider tool name the model called, such as `files__apply_patch`.
    pub tool_name: String,
    /// Its arguments, as the model sent them (a gate shows them bounded, if at all).
    pub arguments: Map<String, Value>,
    /// `<command id>:<tool call id>`: the same when a restart asks again.
    pub execution_id: ExecutionId,
    /// The run.
    pub command_id: CommandId,
    /// Whether the tool is marked safe to repeat (read-only tools are).
    pub replay: Replay,
    /// Why the gate is asked.
    pub moment: GateMoment,
    /// What the tool says a person deciding about the call should know besides its
    /// arguments (where a command runs, whether it has the network); often empty.
    pub facts: shiitake_capabilities::CallFacts,
}

/// What a gate answers about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateVerdict {
    /// Not this gate's call: the next gate decides, else core's default.
    Pass,
    /// Run it now (after a restart: only a call the gate knows never started).
    Allow,
    /// Do not run it; the model reads this as the tool's error result.
    Deny(String),
    /// Hold it until the gate's Session state changes, then ask again.
    Ask,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_leaves_the_reserve_and_is_capped() {
        assert_eq!(gate_wait(None), GATE_WAIT_CAP);
        assert_eq!(
            gate_wait(Some(Duration::from_secs(120))),
            Duration::from_secs(60)
        );
        assert_eq!(gate_wait(Some(Duration::from_secs(3600))), GATE_WAIT_CAP);
        assert_eq!(gate_wait(Some(Duration::from_secs(660))), GATE_WAIT_CAP);
        assert_eq!(
            gate_wait(Some(Duration::from_secs(661))),
            GATE_WAIT_CAP,
            "one past the cap"
        );
        assert_eq!(gate_wait(Some(Duration::from_secs(60))), Duration::ZERO);
        assert_eq!(gate_wait(Some(Duration::from_secs(30))), Duration::ZERO);
    }
}
