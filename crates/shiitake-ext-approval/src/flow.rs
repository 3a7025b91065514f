//! The `/approve` conversation: which call, allow once, allow for the Session or deny,
//! and for a denial an optional reason.
//!
//! The client calls [`ANSWER_FLOW`] with what it collected so far: `approvalId`, then
//! `decision` (`allow_once`, `allow_session`, `deny`), then for `deny` the `reason`
//! (`-` for none). The last step confirms with the `answer` input.

use serde_json::{Map, Value, json};
use shiitake_protocol::catalog::{ArgumentKind, CatalogChoice, FlowStep};

use crate::contract::{ApprovalProjection, ApprovalView, Decision, MAX_REASON_CHARS};

pub use crate::contract::ANSWER_FLOW;

/// What a person types for "no reason".
pub const NO_REASON: &str = "-";

fn choice(label: impl Into<String>, value: impl Into<String>) -> CatalogChoice {
    CatalogChoice {
        label: label.into(),
        value: value.into(),
    }
}

/// The next step of `/approve` for the arguments collected so far.
pub fn answer_step(projection: &ApprovalProjection, collected: &Value) -> FlowStep {
    let empty = Map::new();
    let collected = collected.as_object().unwrap_or(&empty);
    let given = |name: &str| {
        collected
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
    };
    let waiting = &projection.approvals;
    if waiting.is_empty() {
        return FlowStep::Unavailable {
            message: "No call is waiting for your approval.".into(),
        };
    }
    let approval: &ApprovalView = match given("approvalId") {
        Some(id) => match waiting.iter().find(|a| a.approval_id.as_str() == id) {
            Some(approval) => approval,
            None => {
                return FlowStep::Unavailable {
                    message: format!("Approval {id} is no longer waiting for an answer."),
                };
            }
        },
        None if waiting.len() == 1 => &waiting[0],
        None => {
            return FlowStep::Ask {
                argument: "approvalId".into(),
                prompt: "Which call do you want to answer?".into(),
                kind: ArgumentKind::Choice {
                    choices: waiting
                        .iter()
                        .map(|a| {
                            choice(
                                format!("{} {}", a.approval_id, a.line()),
                                a.approval_id.as_str(),
                            )
                        })
                        .collect(),
                    multiple: false,
                    free_text: false,
                },
            };
        }
    };
    let decision = match given("decision") {
        None => {
            return FlowStep::Ask {
                argument: "decision".into(),
                prompt: decision_prompt(approval),
                kind: ArgumentKind::Choice {
                    choices: Decision::ALL
                        .iter()
                        .map(|d| choice(d.label(), d.as_str()))
                        .collect(),
                    multiple: false,
                    free_text: false,
                },
            };
        }
        Some(word) => match Decision::ALL
            .into_iter()
            .find(|d| d.as_str() == word || d.label() == word)
        {
            Some(decision) => decision,
            None => {
                return FlowStep::Unavailable {
                    message: format!("{word:?} is not allow_once, allow_session or deny."),
                };
            }
        },
    };
    let reason = match (decision, given("reason")) {
        (Decision::Deny, None) => {
            return FlowStep::Ask {
                argument: "reason".into(),
                prompt: format!("Why not? The model reads this ({NO_REASON} for no reason)."),
                kind: ArgumentKind::Choice {
                    choices: vec![choice("No reason", NO_REASON)],
                    multiple: false,
                    free_text: true,
                },
            };
        }
        (Decision::Deny, Some(NO_REASON)) | (_, None) => None,
        (Decision::Deny, Some(reason)) if reason.chars().count() > MAX_REASON_CHARS => {
            return FlowStep::Unavailable {
                message: format!("The reason is longer than {MAX_REASON_CHARS} characters."),
            };
        }
        (Decision::Deny, Some(reason)) => Some(reason.to_owned()),
        // A reason goes with a denial only.
        (_, Some(_)) => None,
    };
    let mut input = json!({"approvalId": approval.approval_id, "decision": decision});
    if let (Some(reason), Some(object)) = (&reason, input.as_object_mut()) {
        object.insert("reason".into(), Value::from(reason.as_str()));
    }
    let summary = match &reason {
        Some(reason) => format!("{}: {} ({reason})", decision.label(), approval.tool),
        None => format!("{}: {}", decision.label(), approval.tool),
    };
    FlowStep::Confirm { summary, input }
}

/// `approve commands__exec? {…} (the host asks before commands__exec) — computer: work ·
/// cwd: … · network: off · sandbox: on`: the call, why, and what its tool says of it.
fn decision_prompt(approval: &ApprovalView) -> String {
    let mut prompt = format!("{} ({})", approval.line(), approval.why);
    if !approval.facts.is_empty() {
        prompt.push_str(" — ");
        prompt.push_str(&approval.facts_line());
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ApprovalId;

    fn view(n: u64, tool: &str) -> ApprovalView {
        ApprovalView {
            approval_id: ApprovalId::numbered(n),
            facts: Default::default(),
            tool: tool.into(),
            arguments: json!({}),
            why: "the host asks".into(),
            created_at: 0,
            parked: false,
        }
    }

    fn projection(views: Vec<ApprovalView>) -> ApprovalProjection {
        ApprovalProjection {
            approvals: views,
            allowed: Vec::new(),
            allowed_commands: Vec::new(),
        }
    }

    fn asks(step: &FlowStep) -> &str {
        match step {
            FlowStep::Ask { argument, .. } => argument,
            other => panic!("expected a question, got {other:?}"),
        }
    }

    #[test]
    fn the_flow_picks_a_call_asks_the_decision_and_a_denials_reason() {
        let one = projection(vec![view(1, "files__edit")]);
        assert_eq!(asks(&answer_step(&one, &json!({}))), "decision");
        assert_eq!(
            answer_step(&one, &json!({"decision": "allow_once"})),
            FlowStep::Confirm {
                summary: "Allow once: files__edit".into(),
                input: json!({"approvalId": "ap1", "decision": "allow_once"})
            }
        );
        assert_eq!(
            asks(&answer_step(&one, &json!({"decision": "deny"}))),
            "reason"
        );
        assert_eq!(
            answer_step(&one, &json!({"decision": "deny", "reason": "-"})),
            FlowStep::Confirm {
                summary: "Deny: files__edit".into(),
                input: json!({"approvalId": "ap1", "decision": "deny"})
            }
        );
        assert_eq!(
            answer_step(&one, &json!({"decision": "deny", "reason": "too risky"})),
            FlowStep::Confirm {
                summary: "Deny: files__edit (too risky)".into(),
                input: json!({"approvalId": "ap1", "decision": "deny", "reason": "too risky"})
            }
        );
        let two = projection(vec![
            view(1, "files__edit"),
            view(2, "env__mcp__notes__add"),
        ]);
        assert_eq!(asks(&answer_step(&two, &json!({}))), "approvalId");
        assert!(matches!(
            answer_step(&two, &json!({"approvalId": "ap2", "decision": "allow_session"})),
            FlowStep::Confirm { input, .. } if input["approvalId"] == "ap2"
        ));
        assert!(matches!(
            answer_step(&two, &json!({"approvalId": "ap9"})),
            FlowStep::Unavailable { .. }
        ));
        assert!(matches!(
            answer_step(&projection(Vec::new()), &json!({})),
            FlowStep::Unavailable { .. }
        ));
        let long = "x".repeat(MAX_REASON_CHARS + 1);
        assert!(matches!(
            answer_step(&one, &json!({"decision": "deny", "reason": long})),
            FlowStep::Unavailable { .. }
        ));
    }
}
