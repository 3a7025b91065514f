//! The extension on core's kit: the contract's commands, the `/approve` flow step, the
//! tool gate, the settled hook, the projection with its footer rows, the prompt
//! section and the catalog.

use serde_json::json;
use shiitake_capabilities::Replay;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{
    GateMoment, GateVerdict, GatedCall, Grant, HookError, ParkCause, StateView, Tx,
};
use shiitake_protocol::{BoundError, CommandScope, ExtensionId, TerminalOutcome};

use crate::contract::{
    ANSWER_FLOW, AnswerApproval, ApprovalContract, ApprovalProjection, EXTENSION_ID, ListApprovals,
    NAMESPACE, Receipt, footer_rows,
};
use crate::policy::Policy;
use crate::state::{Answer, Book, Call, LetGo, Verdict};
use crate::{catalog, flow, store};

/// The extension's id as core takes it.
pub fn extension_id() -> Result<ExtensionId, BoundError> {
    ExtensionId::new(EXTENSION_ID)
}

/// Approval, declared to core's kit with the host's `policy`: register it with
/// `AgentBuilder::kit_extension`, which grants exactly what it declares (state,
/// commands, gate, admissions, attention, prompt, projection).
pub fn extension(policy: Policy) -> Result<KitExtension<ApprovalContract>, KitError> {
    let configuration = json!({"policy": policy});
    ExtensionKit::<ApprovalContract>::new(NAMESPACE)?
        .session_state()
        .configuration(configuration)
        .command(|tx, _: ListApprovals| Ok(store::load(tx)?.projection().approvals))
        .command(answer)
        .untyped_command(ANSWER_FLOW, CommandScope::Session, |tx, input| {
            Ok(json!(flow::answer_step(
                &store::load(tx)?.projection(),
                &input
            )))
        })
        .tool_gate(move |tx, call| gate(&policy, tx, call))
        .on_settled(|tx, settled| {
            let cancelled = settled.outcome == TerminalOutcome::Cancelled;
            let run = settled.command_id.as_str().to_owned();
            store::transact(tx, |book| Ok(((), book.settled(&run, cancelled))))
        })
        // Answers to parked calls reach the model as follow-up prompts; a waiting
        // call raises attention, so the Session's inbox state is `needs_you`.
        .uses(Grant::Admissions)
        .uses(Grant::Attention)
        .prompt(|run| prompt_section(&store::read(&run.state)))
        .projection(|state| Some(projection(state)))
        .footer(|state, id| footer_rows(&projection(state), id))
        .catalog(catalog::catalog)
        .build()
}

fn projection(state: &StateView<'_>) -> ApprovalProjection {
    store::read(state).projection()
}

fn answer(tx: &mut Tx<'_>, input: AnswerApproval) -> Result<Receipt, HookError> {
    let approval_id = input.approval_id;
    let decision = input.decision;
    let given = Answer {
        decision,
        reason: input.reason,
    };
    let delivery = store::transact(tx, |book| book.answer(&approval_id, given))?;
    Ok(Receipt {
        approval_id,
        decision,
        delivery,
    })
}

/// The rule the kit's gate asks: the policy for a first call, the book afterwards.
fn gate(policy: &Policy, tx: &mut Tx<'_>, call: &GatedCall) -> Result<GateVerdict, HookError> {
    let execution = call.execution_id.as_str().to_owned();
    let verdict = match call.moment {
        GateMoment::Call => {
            let request = Call {
                execution,
                run: call.command_id.as_str().to_owned(),
                tool: call.tool_name.clone(),
                arguments: crate::preview::preview(&call.arguments),
                facts: crate::preview::facts(&call.facts),
                fingerprint: crate::fingerprint::fingerprint(&call.tool_name, &call.arguments),
                safe_to_repeat: call.replay == Replay::Safe,
                command: crate::command::Command::from_arguments(&call.arguments),
                now: tx.now(),
            };
            store::transact(tx, |book| Ok(book.call(policy, request)))?
        }
        GateMoment::Resumed | GateMoment::Changed => {
            store::transact(tx, |book| Ok((book.recheck(&execution), Vec::new())))?
        }
        GateMoment::Park(cause) => {
            let why = match cause {
                ParkCause::Cancelled => LetGo::Cancel,
                ParkCause::Waited | ParkCause::Steer => LetGo::Park,
            };
            store::transact(tx, |book| Ok(book.let_go(&execution, why)))?
        }
    };
    Ok(match verdict {
        Verdict::Pass => GateVerdict::Pass,
        Verdict::Allow => GateVerdict::Allow,
        Verdict::Deny(reason) => GateVerdict::Deny(reason),
        Verdict::Ask => GateVerdict::Ask,
    })
}

/// Quiet context while calls wait for a person, so the model does not make them again.
fn prompt_section(book: &Book) -> Option<String> {
    let waiting: Vec<String> = book
        .waiting()
        .filter_map(|approval| approval.view())
        .map(|view| format!("- {}: {}", view.approval_id, view.line()))
        .collect();
    if waiting.is_empty() {
        return None;
    }
    Some(format!(
        "Tool calls waiting for a person's approval (you get a message when they decide; \
         do not make them again meanwhile):\n{}",
        waiting.join("\n")
    ))
}
