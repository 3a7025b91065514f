//! Tool gates on the runner's side: before a call runs, each gate the host granted is
//! asked in one owner transaction; a held call waits in-turn for a change of the
//! gate's state and is parked when the wait ends (see `extension::gate`).

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use shiitake_capabilities::{InvocationContext, Replay, ToolError};

use crate::extension::gate::gate_wait;
use crate::extension::host::ToolTx;
use crate::extension::{Extension, GateMoment, GateVerdict, GatedCall, ParkCause};

/// The text of a held call a gate let go without a decision.
pub(crate) const HELD_NOT_RUN: &str =
    "not run: the call waits for a decision that did not come in time";

/// One gate of a run: the extension, and the door to its owner transactions.
pub(crate) struct GateLink {
    pub(crate) extension: Arc<dyn Extension>,
    pub(crate) tools: ToolTx,
}

impl GateLink {
    /// Asks the gate about `call` in one owner transaction, committed before it answers.
    async fn ask(&self, call: &GatedCall) -> Result<GateVerdict, String> {
        let verdict = Arc::new(Mutex::new(None));
        let (extension, asked, slot) = (self.extension.clone(), call.clone(), verdict.clone());
        let id = self.tools.extension_id.clone();
        self.tools
            .run(move |tx| {
                let decided = extension.gate(tx, &asked)?;
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(decided);
                Ok(Value::Null)
            })
            .await
            .map_err(|error| match error {
                ToolError::ForModel(error) => {
                    format!(
                        "not run: the tool gate {id} could not decide: {}",
                        error.message
                    )
                }
                other => format!("not run: the tool gate {id} could not decide: {other}"),
            })?;
        let decided = verdict
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        decided.ok_or_else(|| format!("not run: the tool gate {id} gave no verdict"))
    }
}

/// What the gates came to for one call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Passage {
    /// Run it.
    Run,
    /// Do not run it; the model reads this.
    Refused(String),
    /// The run was cancelled while the call was held.
    Cancelled,
    /// After a restart, nobody vouched that it never started and it is not safe to
    /// repeat: its outcome is unknown.
    Unknown,
}

/// Asks the gates about `call` in order; the first that decides (anything but `Pass`)
/// wins. A held call waits on `ctx`'s bounds, its steer signal and cancellation. With
/// no gate deciding, a resumed call runs only when it is replay-safe.
pub(crate) async fn pass(gates: &[GateLink], call: GatedCall, ctx: &InvocationContext) -> Passage {
    // From the first hold to the decision, the wait is a span of its own.
    let mut waiting = None;
    let passage = pass_held(gates, call, ctx, &mut waiting).await;
    if let Some(span) = waiting {
        let decision = match &passage {
            Passage::Run => "allow",
            Passage::Refused(text) if text == HELD_NOT_RUN => "undecided",
            Passage::Refused(_) => "deny",
            Passage::Cancelled => "cancelled",
            Passage::Unknown => "unknown",
        };
        crate::spans::gate_decided(&span, decision);
    }
    passage
}

/// [`pass`], opening `waiting` (the wait's span) when a gate first holds the call.
async fn pass_held(
    gates: &[GateLink],
    mut call: GatedCall,
    ctx: &InvocationContext,
    waiting: &mut Option<tracing::Span>,
) -> Passage {
    let first = call.moment;
    for gate in gates {
        call.moment = first;
        // Taken before the first question, so no change committed after it is missed.
        let mut changes = gate.tools.state_changes();
        let wait = tokio::time::sleep(gate_wait(ctx.remaining()));
        tokio::pin!(wait);
        let mut verdict = gate.ask(&call).await;
        loop {
            let parked = matches!(call.moment, GateMoment::Park(_));
            match verdict {
                Err(refusal) => return Passage::Refused(refusal),
                Ok(GateVerdict::Pass) if !parked => break,
                Ok(GateVerdict::Allow) => return Passage::Run,
                Ok(GateVerdict::Deny(reason)) => return Passage::Refused(reason),
                Ok(GateVerdict::Pass | GateVerdict::Ask) if parked => {
                    return Passage::Refused(HELD_NOT_RUN.to_owned());
                }
                Ok(GateVerdict::Pass | GateVerdict::Ask) => {
                    if waiting.is_none() {
                        let gate = gate.tools.extension_id.as_str();
                        *waiting = Some(crate::spans::gate_wait(gate, &call.tool_name));
                    }
                }
            }
            call.moment = tokio::select! {
                biased;
                () = ctx.cancellation().cancelled() => GateMoment::Park(ParkCause::Cancelled),
                () = ctx.newer_input().raised() => GateMoment::Park(ParkCause::Steer),
                () = &mut wait => GateMoment::Park(ParkCause::Waited),
                changed = changes.changed() => match changed {
                    Ok(()) => GateMoment::Changed,
                    Err(_) => return Passage::Refused("not run: the Session's owner stopped".into()),
                },
            };
            verdict = gate.ask(&call).await;
            if call.moment == GateMoment::Park(ParkCause::Cancelled) {
                // The gate has recorded that the call goes; whatever it says, it does not run.
                return Passage::Cancelled;
            }
        }
    }
    undecided(first, call.replay)
}

/// What becomes of a call no gate decided (or that had no gate to ask): it runs, unless
/// it resumed after a restart and is not safe to repeat.
pub(crate) fn undecided(moment: GateMoment, replay: Replay) -> Passage {
    if moment == GateMoment::Resumed && replay != Replay::Safe {
        Passage::Unknown
    } else {
        Passage::Run
    }
}
