//! The footer rows of a [`FooterView`], as a plain function of the view: what a
//! terminal prints and a page shows for the sub-agent rows. It builds without core, so
//! anything that publishes the view (the extension, a test stand-in) publishes the same
//! rows.

use serde_json::json;
use shiitake_protocol::ExtensionId;
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::footer::{
    FooterActionKind, FooterActionV0, FooterRowV0, FooterTone, SessionTarget,
};

use super::{
    AnswerAction, ApprovalAnswerAction, ChildRow, ChildStatus, FooterSummary, FooterView,
    ToggleRows,
};

/// The kind (a page's CSS family) of the collapsed summary row; its key is `summary`.
pub const SUMMARY_ROW_KIND: &str = "subagents-summary";
/// The kind of one child's row; its key is the child's Session id (one Agent may have
/// several Sessions among the rows).
pub const CHILD_ROW_KIND: &str = "subagent";
/// The kind of the row after the children (how many more, and *Collapse*); its key
/// is `more`.
pub const MORE_ROW_KIND: &str = "subagents-more";

impl FooterView {
    /// The rows that show this view: while collapsed, one summary row (*Expand*);
    /// else one row per child (*Open*, and *Answer* when a question needs a person)
    /// and, after them, a row counting the Agents beyond them (empty text when there
    /// are none) with *Collapse*.
    pub fn footer_rows(&self, id: &ExtensionId) -> Vec<FooterRowV0> {
        if self.collapsed {
            return vec![summary_row(&self.summary, id)];
        }
        let mut rows: Vec<FooterRowV0> = self.rows.iter().map(|row| child_row(row, id)).collect();
        if !rows.is_empty() {
            let text = if self.more > 0 {
                format!("agents: {} more", self.more)
            } else {
                String::new()
            };
            rows.push(
                FooterRowV0::new(id.clone(), "more", MORE_ROW_KIND, text)
                    .with_action(toggle("Collapse")),
            );
        }
        rows
    }
}

/// The button that calls `/agents` (`toggle`) with no arguments.
fn toggle(label: &str) -> FooterActionV0 {
    FooterActionV0::command("toggle", label, ToggleRows::NAME, json!({}))
}

/// `agents: 3 (1 need you, 2 working) — /agents expands`, in attention while a child
/// needs a person.
fn summary_row(summary: &FooterSummary, id: &ExtensionId) -> FooterRowV0 {
    let parts: Vec<String> = [
        (summary.needs_you, "need you"),
        (summary.working, "working"),
        (summary.waiting, "waiting on an Agent"),
        (summary.failed, "failed"),
        (summary.unavailable, "unavailable"),
        (summary.idle, "idle"),
    ]
    .into_iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, label)| format!("{count} {label}"))
    .collect();
    let text = format!("agents: {} ({})", summary.total, parts.join(", "));
    FooterRowV0::new(id.clone(), "summary", SUMMARY_ROW_KIND, text)
        .with_tone(attention_when(summary.needs_you > 0))
        .with_note("/agents expands")
        .with_action(toggle("Expand"))
}

fn attention_when(needs_you: bool) -> FooterTone {
    if needs_you {
        FooterTone::Attention
    } else {
        FooterTone::Calm
    }
}

/// `agent builder (Build): working`, or, for a question that needs a person,
/// `agent writer: needs you: Which tone? — /answer @writer` with its Answer action.
fn child_row(row: &ChildRow, id: &ExtensionId) -> FooterRowV0 {
    let title = if row.title.is_empty() {
        String::new()
    } else {
        format!(" ({})", row.title)
    };
    let who = format!("agent {}{title}", row.agent);
    let needs_you = |text: &str, answer: Option<FooterActionV0>| {
        let asks = FooterRowV0::new(
            id.clone(),
            &row.session_id,
            CHILD_ROW_KIND,
            format!("{who}: needs you: {text}"),
        )
        .with_tone(FooterTone::Attention)
        .with_note(format!("/answer @{}", row.agent));
        match answer {
            Some(answer) => asks.with_action(answer),
            None => asks,
        }
    };
    let shown = match &row.status {
        ChildStatus::NeedsYou {
            question: Some(question),
            ..
        } => needs_you(&question.text, answer_action(&question.answer)),
        ChildStatus::NeedsYou {
            approval: Some(approval),
            ..
        } => needs_you(&approval.text, approve_action(&approval.answer)),
        status => FooterRowV0::new(
            id.clone(),
            &row.session_id,
            CHILD_ROW_KIND,
            format!("{who}: {}", status.label()),
        ),
    };
    shown.with_action(FooterActionV0 {
        label: "Open".into(),
        name: "open".into(),
        primary: false,
        kind: FooterActionKind::Open {
            target: SessionTarget {
                agent: row.agent.clone(),
                session_id: row.session_id.clone(),
            },
        },
    })
}

/// The question's own `/answer` flow on the child's Session, with the Ask preset.
fn answer_action(answer: &AnswerAction) -> Option<FooterActionV0> {
    child_flow(
        &answer.label,
        &answer.extension_id,
        &answer.flow,
        &answer.call,
        json!({"askId": answer.ask_id}),
        SessionTarget {
            agent: answer.agent.clone(),
            session_id: answer.session_id.clone(),
        },
    )
}

/// The approval's own `/approve` flow on the child's Session, with the approval preset.
fn approve_action(answer: &ApprovalAnswerAction) -> Option<FooterActionV0> {
    child_flow(
        &answer.label,
        &answer.extension_id,
        &answer.flow,
        &answer.call,
        json!({"approvalId": answer.approval_id}),
        SessionTarget {
            agent: answer.agent.clone(),
            session_id: answer.session_id.clone(),
        },
    )
}

/// The primary *Answer* action (named `answer`, which `/answer @agent` runs) that
/// walks `flow` of `extension_id` on `target` from `preset`, then calls `call`; none
/// when the extension's id is not a valid id (nothing could run it).
fn child_flow(
    label: &str,
    extension_id: &str,
    flow: &str,
    call: &str,
    preset: serde_json::Value,
    target: SessionTarget,
) -> Option<FooterActionV0> {
    Some(
        FooterActionV0 {
            label: label.to_owned(),
            name: "answer".into(),
            primary: false,
            kind: FooterActionKind::Flow {
                extension_id: ExtensionId::new(extension_id).ok()?,
                flow: flow.to_owned(),
                call: call.to_owned(),
                preset,
                target: Some(target),
            },
        }
        .primary(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{EXTENSION_ID, NeedsYouApproval, NeedsYouQuestion};

    fn id() -> ExtensionId {
        ExtensionId::new(EXTENSION_ID).unwrap_or_else(|error| panic!("{error}"))
    }

    /// A row as the terminal prints it: `! ` in attention, the text, ` — note`; a row
    /// with no text prints nothing.
    fn line(row: &FooterRowV0) -> Option<String> {
        if row.text.is_empty() {
            return None;
        }
        let mark = if row.tone == FooterTone::Attention {
            "! "
        } else {
            ""
        };
        let note = row
            .note
            .as_ref()
            .map(|note| format!(" — {note}"))
            .unwrap_or_default();
        Some(format!("{mark}{}{note}", row.text))
    }

    fn lines(view: &FooterView) -> Vec<String> {
        view.footer_rows(&id()).iter().filter_map(line).collect()
    }

    fn child(agent: &str, session_id: &str, title: &str, status: ChildStatus) -> ChildRow {
        ChildRow {
            agent: agent.into(),
            session_id: session_id.into(),
            title: title.into(),
            status,
        }
    }

    fn asking() -> ChildStatus {
        ChildStatus::NeedsYou {
            approval: None,
            question: Some(NeedsYouQuestion {
                ask_id: "ask_1".into(),
                text: "Which tone?".into(),
                answer: AnswerAction {
                    label: "Answer".into(),
                    agent: "writer".into(),
                    session_id: "s3".into(),
                    extension_id: "botanical-session-question".into(),
                    flow: "answer_flow".into(),
                    call: "answer".into(),
                    ask_id: "ask_1".into(),
                },
            }),
        }
    }

    fn approving() -> ChildStatus {
        ChildStatus::NeedsYou {
            question: None,
            approval: Some(Box::new(NeedsYouApproval {
                approval_id: "ap1".into(),
                text: "approve files__apply_patch? {}".into(),
                answer: ApprovalAnswerAction {
                    label: "Answer".into(),
                    agent: "patcher".into(),
                    session_id: "s8".into(),
                    extension_id: "shiitake-session-approval".into(),
                    flow: "answer_flow".into(),
                    call: "answer".into(),
                    approval_id: "ap1".into(),
                },
            })),
        }
    }

    fn expanded() -> FooterView {
        FooterView {
            collapsed: false,
            rows: vec![
                child("builder", "s1", "Build", ChildStatus::Working),
                child(
                    "tester",
                    "s2",
                    "",
                    ChildStatus::WaitingOn {
                        agent: "main".into(),
                    },
                ),
                child("writer", "s3", "", asking()),
                child(
                    "approver",
                    "s4",
                    "",
                    ChildStatus::NeedsYou {
                        question: None,
                        approval: None,
                    },
                ),
                child("patcher", "s8", "", approving()),
                child("idler", "s5", "", ChildStatus::Idle),
                child("crasher", "s6", "", ChildStatus::Failed),
                child(
                    "gone",
                    "s7",
                    "",
                    ChildStatus::Unavailable {
                        reason: "closed".into(),
                    },
                ),
            ],
            summary: FooterSummary::default(),
            more: 2,
            refreshed_at: None,
        }
    }

    fn collapsed(summary: FooterSummary) -> FooterView {
        FooterView {
            collapsed: true,
            rows: Vec::new(),
            summary,
            more: 0,
            refreshed_at: None,
        }
    }

    #[test]
    fn each_child_status_has_its_line_and_a_collapsed_view_one_summary() {
        assert_eq!(
            lines(&expanded()),
            [
                "agent builder (Build): working",
                "agent tester: waiting on main",
                "! agent writer: needs you: Which tone? — /answer @writer",
                "agent approver: needs you",
                "! agent patcher: needs you: approve files__apply_patch? {} — /answer @patcher",
                "agent idler: idle",
                "agent crasher: failed",
                "agent gone: unavailable",
                "agents: 2 more",
            ]
        );
        let calm = FooterSummary {
            total: 3,
            working: 1,
            waiting: 2,
            ..FooterSummary::default()
        };
        assert_eq!(
            lines(&collapsed(calm)),
            ["agents: 3 (1 working, 2 waiting on an Agent) — /agents expands"]
        );
        let amber = FooterSummary {
            total: 2,
            waiting: 1,
            needs_you: 1,
            ..FooterSummary::default()
        };
        assert_eq!(
            lines(&collapsed(amber)),
            ["! agents: 2 (1 need you, 1 waiting on an Agent) — /agents expands"]
        );
    }

    #[test]
    fn the_summary_lists_every_status_in_its_order() {
        let all = FooterSummary {
            total: 6,
            working: 1,
            waiting: 1,
            needs_you: 1,
            idle: 1,
            failed: 1,
            unavailable: 1,
            ..FooterSummary::default()
        };
        assert_eq!(
            lines(&collapsed(all)),
            [
                "! agents: 6 (1 need you, 1 working, 1 waiting on an Agent, 1 failed, \
                 1 unavailable, 1 idle) — /agents expands"
            ]
        );
    }

    #[test]
    fn rows_carry_their_keys_kinds_and_actions() {
        let rows = expanded().footer_rows(&id());
        assert_eq!(rows.len(), 9);
        let writer = &rows[2];
        assert_eq!(
            (writer.key.as_str(), writer.kind.as_str()),
            ("s3", CHILD_ROW_KIND)
        );
        let target = SessionTarget {
            agent: "writer".into(),
            session_id: "s3".into(),
        };
        assert_eq!(
            writer.actions,
            [
                FooterActionV0 {
                    label: "Answer".into(),
                    name: "answer".into(),
                    primary: true,
                    kind: FooterActionKind::Flow {
                        extension_id: ExtensionId::new("botanical-session-question")
                            .unwrap_or_else(|error| panic!("{error}")),
                        flow: "answer_flow".into(),
                        call: "answer".into(),
                        preset: json!({"askId": "ask_1"}),
                        target: Some(target.clone()),
                    },
                },
                FooterActionV0 {
                    label: "Open".into(),
                    name: "open".into(),
                    primary: false,
                    kind: FooterActionKind::Open { target },
                },
            ]
        );
        let builder = &rows[0];
        assert_eq!(builder.tone, FooterTone::Calm);
        assert_eq!(builder.actions.len(), 1, "only Open");
        assert_eq!(builder.actions[0].name, "open");
        let patcher = &rows[4];
        assert_eq!(patcher.tone, FooterTone::Attention);
        assert_eq!(
            patcher.actions[0].kind,
            FooterActionKind::Flow {
                extension_id: ExtensionId::new("shiitake-session-approval")
                    .unwrap_or_else(|error| panic!("{error}")),
                flow: "answer_flow".into(),
                call: "answer".into(),
                preset: json!({"approvalId": "ap1"}),
                target: Some(SessionTarget {
                    agent: "patcher".into(),
                    session_id: "s8".into(),
                }),
            },
            "answered from the row with the approval's own flow"
        );
        assert_eq!(patcher.actions[0].name, "answer");
        let more = &rows[8];
        assert_eq!(
            (more.key.as_str(), more.kind.as_str()),
            ("more", MORE_ROW_KIND)
        );
        assert_eq!(
            more.actions,
            [FooterActionV0::command(
                "toggle",
                "Collapse",
                "toggle",
                json!({})
            )]
        );
        let summary = &collapsed(FooterSummary::default()).footer_rows(&id())[0];
        assert_eq!(
            (summary.key.as_str(), summary.kind.as_str()),
            ("summary", SUMMARY_ROW_KIND)
        );
        assert_eq!(
            summary.actions,
            [FooterActionV0::command(
                "toggle",
                "Expand",
                "toggle",
                json!({})
            )]
        );
    }

    #[test]
    fn the_closing_row_has_no_line_without_more_and_no_children_no_rows() {
        let mut view = expanded();
        view.more = 0;
        let rows = view.footer_rows(&id());
        let last = rows.last().unwrap_or_else(|| panic!("rows"));
        assert_eq!((last.key.as_str(), last.text.as_str()), ("more", ""));
        assert_eq!(line(last), None, "the terminal prints no line for it");
        view.rows.clear();
        assert!(view.footer_rows(&id()).is_empty());
    }
}
