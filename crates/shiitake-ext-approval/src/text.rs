//! What the model and the person read: the tool results of calls that did not run,
//! the follow-up prompts of parked calls, and the attention's text.

use crate::contract::Decision;
use crate::preview::one_line;
use crate::state::{Answer, Approval};

/// The result of a held call whose approval was closed under it (its run was cancelled).
pub const GONE: &str = "not run: the approval this call waited for was withdrawn";

/// Longest attention text, in characters.
const ATTENTION_CHARS: usize = 300;

/// A call the person denied: the reason, when given, is theirs.
pub fn denied(tool: &str, reason: Option<&str>) -> String {
    match reason {
        Some(reason) => {
            format!("not run: the person denied this call of {tool}. Their reason: {reason}")
        }
        None => format!("not run: the person denied this call of {tool}."),
    }
}

/// A call the host's policy denies.
pub fn denied_by_policy(tool: &str, why: &str) -> String {
    format!("not run: {why}, so {tool} cannot be called here.")
}

/// A held call the run went on without.
pub fn parked(approval: &Approval) -> String {
    format!(
        "not run yet: this call of {} waits for a person's approval ({}). You will get a \
         message when they decide; go on with what does not need it, and do not call it \
         again meanwhile.",
        approval.tool,
        approval.id()
    )
}

/// The same call again while its approval waits.
pub fn still_waiting(approval: &Approval) -> String {
    format!(
        "not run: the same call of {} already waits for a person's approval ({}); you will \
         get a message when they decide.",
        approval.tool,
        approval.id()
    )
}

/// A call over the bound of waiting approvals.
pub fn too_many(tool: &str) -> String {
    format!(
        "not run: too many calls wait for a person's approval in this Session ({}), so this \
         call of {tool} was not asked about. Wait for their answers.",
        crate::contract::MAX_OPEN_APPROVALS
    )
}

/// The follow-up prompt that tells the model what a person decided about a call that
/// did not wait for it: self-contained, as it may arrive much later.
pub fn follow_up(approval: &Approval, answer: &Answer) -> String {
    let tool = &approval.tool;
    let id = approval.id();
    let arguments = one_line(&approval.arguments, 300);
    match answer.decision {
        Decision::AllowOnce => format!(
            "[approval {id}] The person allowed your earlier call of {tool} ({arguments}). It \
             has not run: call {tool} again with the same arguments to run it; that call runs \
             without asking."
        ),
        Decision::AllowSession => format!(
            "[approval {id}] The person allowed {tool} for the rest of this Session. Your \
             earlier call ({arguments}) has not run: call it again to run it."
        ),
        Decision::Deny => match &answer.reason {
            Some(reason) => format!(
                "[approval {id}] The person denied your earlier call of {tool} ({arguments}); \
                 it did not run. Their reason: {reason}"
            ),
            None => format!(
                "[approval {id}] The person denied your earlier call of {tool} ({arguments}); \
                 it did not run."
            ),
        },
    }
}

/// The attention an approval raises: `Allow files__apply_patch? the host asks before …`.
pub fn attention(approval: &Approval) -> String {
    let text = format!("Allow {}? {}", approval.tool, approval.why);
    if text.chars().count() <= ATTENTION_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(ATTENTION_CHARS - 1).collect();
    cut.push('…');
    cut
}
