//! The footer `chat` and `watch` print after each run: what the extensions show of
//! the Session (the goal, the plan's current step and progress, the loop, the Agents
//! this Session sent work to, open questions).
//!
//! Each line is decoded through the extension's contract; an extension that is not
//! there, stopped, or publishes nothing adds no line. Extension text is printed
//! inert (control characters escaped), like model text.

use shiitake_ext_goal::contract::{GoalContract, GoalProjection};
use shiitake_ext_loop::contract::{LoopContract, LoopProjection, LoopStatus};
use shiitake_ext_plan::contract::{PlanContract, PlanProjection};
use shiitake_ext_question::contract::{QuestionContract, QuestionProjection};
use shiitake_ext_subagents::contract::{ChildRow, ChildStatus, FooterView, SubagentsContract};
use shiitake_protocol::SessionExtensionSlots;
use shiitake_protocol::extension::{ExtensionContract, ExtensionViewV0, view};

use super::style::inert_line;

/// The decoded projection of contract `C`, when its extension runs and publishes one.
fn running<C: ExtensionContract>(slots: &SessionExtensionSlots) -> Option<C::Projection> {
    match view::<C>(slots) {
        Ok(ExtensionViewV0::Running { value }) => value,
        _ => None,
    }
}

fn stopped(slots: &SessionExtensionSlots) -> Vec<String> {
    slots
        .iter()
        .filter_map(|(id, slot)| match slot {
            shiitake_protocol::ExtensionSlotV0::Stopped { reason } => Some(format!(
                "[{}] stopped: {}",
                inert_line(id.as_str()),
                inert_line(reason)
            )),
            shiitake_protocol::ExtensionSlotV0::Running { .. } => None,
        })
        .collect()
}

fn questions(projection: &QuestionProjection) -> Vec<String> {
    projection
        .asks
        .iter()
        .map(|ask| {
            let first = ask
                .questions
                .first()
                .map(|q| format!("[{}] {}", q.header, q.question))
                .unwrap_or_default();
            let more = match ask.questions.len() {
                0 | 1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            let who = if ask.needs_person() {
                "/answer".to_owned()
            } else {
                ask.status_line()
            };
            format!("? {}{} — {}", inert_line(&first), more, inert_line(&who))
        })
        .collect()
}

/// Minutes east of UTC of this machine's zone now: the goal's clock time is the person's.
fn local_offset_minutes() -> i32 {
    chrono::Local::now().offset().local_minus_utc() / 60
}

fn goal(projection: &GoalProjection, offset_minutes: i32) -> Option<String> {
    projection
        .footer
        .as_ref()
        .map(|footer| footer.text(offset_minutes))
}

fn plan(projection: &PlanProjection) -> Option<String> {
    let footer = projection.footer.as_ref()?;
    let current = footer
        .current
        .as_deref()
        .map(|step| format!(": {}", inert_line(step)))
        .unwrap_or_default();
    Some(format!(
        "plan {}/{}{current}",
        footer.completed, footer.total
    ))
}

fn looping(projection: &LoopProjection) -> Option<String> {
    let record = projection.current.as_ref()?;
    let status = match record.status {
        LoopStatus::Active => "active",
        LoopStatus::Paused => "paused (/loop resume)",
        LoopStatus::Ended => return None,
    };
    Some(format!(
        "loop {status}, {} run(s): {}",
        record.occurrences,
        inert_line(&record.prompt)
    ))
}

/// One line per sub-agent row, or the collapsed summary (`/agents` toggles). A row
/// whose child needs a person names the question and how to answer it from here.
fn subagents(view: &FooterView) -> Vec<String> {
    if view.collapsed {
        let summary = &view.summary;
        let mut parts = Vec::new();
        for (count, label) in [
            (summary.needs_you, "need you"),
            (summary.working, "working"),
            (summary.waiting, "waiting on an Agent"),
            (summary.failed, "failed"),
            (summary.unavailable, "unavailable"),
            (summary.idle, "idle"),
        ] {
            if count > 0 {
                parts.push(format!("{count} {label}"));
            }
        }
        let mark = if summary.needs_you > 0 { "! " } else { "" };
        return vec![format!(
            "{mark}agents: {} ({}) — /agents expands",
            summary.total,
            parts.join(", ")
        )];
    }
    let mut lines: Vec<String> = view.rows.iter().map(child_row).collect();
    if view.more > 0 {
        lines.push(format!("agents: {} more", view.more));
    }
    lines
}

fn child_row(row: &ChildRow) -> String {
    let agent = inert_line(&row.agent);
    let title = if row.title.is_empty() {
        String::new()
    } else {
        format!(" ({})", inert_line(&row.title))
    };
    match &row.status {
        ChildStatus::NeedsYou {
            question: Some(question),
        } => format!(
            "! agent {agent}{title}: needs you: {} — /answer @{agent}",
            inert_line(&question.text)
        ),
        status => format!("agent {agent}{title}: {}", inert_line(&status.label())),
    }
}

/// The footer lines for these slots, in a stable order, with clock times in this
/// machine's zone.
pub fn lines(slots: &SessionExtensionSlots) -> Vec<String> {
    lines_at(slots, local_offset_minutes())
}

/// The footer lines with clock times `offset_minutes` east of UTC.
fn lines_at(slots: &SessionExtensionSlots, offset_minutes: i32) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(projection) = running::<GoalContract>(slots)
        && let Some(line) = goal(&projection, offset_minutes)
    {
        lines.push(line);
    }
    if let Some(projection) = running::<PlanContract>(slots)
        && let Some(line) = plan(&projection)
    {
        lines.push(line);
    }
    if let Some(projection) = running::<LoopContract>(slots)
        && let Some(line) = looping(&projection)
    {
        lines.push(line);
    }
    if let Some(projection) = running::<SubagentsContract>(slots) {
        lines.extend(subagents(&projection));
    }
    if let Some(projection) = running::<QuestionContract>(slots) {
        lines.extend(questions(&projection));
    }
    lines.extend(stopped(slots));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shiitake_protocol::{ExtensionId, ExtensionSlotV0};

    fn slots(entries: &[(&str, ExtensionSlotV0)]) -> SessionExtensionSlots {
        let mut slots = SessionExtensionSlots::new();
        for (id, slot) in entries {
            slots.insert(ExtensionId::new(*id).unwrap(), slot.clone());
        }
        slots
    }

    #[test]
    fn questions_plans_and_stopped_extensions_each_get_a_line() {
        let question = ExtensionSlotV0::Running {
            value: json!({"asks": [{
                "askId": "ask_1", "createdAt": 1,
                "questions": [{"header": "DB", "question": "Which\u{1b}[2J one?", "options": [{"label": "A"}]}]
            }, {
                "askId": "ask_2", "createdAt": 2,
                "questions": [{"header": "X", "question": "Go?", "options": [{"label": "Y"}]}],
                "waitingOn": {"agent": "Planner", "sessionId": "s", "escalated": false}
            }]}),
        };
        let lines = lines(&slots(&[
            ("botanical-session-question", question),
            (
                "botanical-session-plan",
                ExtensionSlotV0::Running {
                    value: json!({"footer": {"revision": 3, "current": "Write tests", "completed": 1,
                                             "total": 4, "expanded": false, "actions": []}}),
                },
            ),
            (
                "other-extension",
                ExtensionSlotV0::Stopped {
                    reason: "bad row".into(),
                },
            ),
        ]));
        assert_eq!(
            lines,
            [
                "plan 1/4: Write tests",
                "? [DB] Which\\x1b[2J one? — /answer",
                "? [X] Go? — waiting on Planner",
                "[other-extension] stopped: bad row",
            ]
        );
    }

    #[test]
    fn a_live_goal_shows_its_clock_time_in_the_given_zone_and_a_paused_one_how_to_resume() {
        let live = ExtensionSlotV0::Running {
            // 14:02 UTC on 2026-11-30.
            value: json!({"goal": null, "footer": {"state": "pursuing", "since": 1_796_047_320_000u64},
                          "turns": [], "waitingOn": []}),
        };
        let id = "botanical-session-goal";
        assert_eq!(
            lines_at(&slots(&[(id, live.clone())]), 0),
            ["Pursuing goal since 14:02"]
        );
        assert_eq!(
            lines_at(&slots(&[(id, live)]), -300),
            ["Pursuing goal since 09:02"]
        );
        let paused = ExtensionSlotV0::Running {
            value: json!({"goal": null, "footer": {"state": "paused"}, "turns": [], "waitingOn": []}),
        };
        assert_eq!(
            lines_at(&slots(&[(id, paused)]), 0),
            ["Goal paused (/goal resume)"]
        );
        let finished = ExtensionSlotV0::Running {
            value: json!({"goal": null, "footer": null, "turns": [], "waitingOn": []}),
        };
        assert!(lines_at(&slots(&[(id, finished)]), 0).is_empty());
    }

    #[test]
    fn each_child_status_has_its_row_and_a_collapsed_view_one_summary() {
        let rows = ExtensionSlotV0::Running {
            value: json!({"collapsed": false, "more": 2, "summary": {"total": 6, "working": 1,
            "waiting": 1, "needsYou": 1, "idle": 1, "failed": 1, "unavailable": 1, "tone": "amber"},
            "rows": [
                {"agent": "builder", "sessionId": "s1", "title": "Build", "status": {"kind": "working"}},
                {"agent": "tester", "sessionId": "s2", "status": {"kind": "waiting_on", "agent": "main"}},
                {"agent": "writer", "sessionId": "s3", "status": {"kind": "needs_you", "question": {
                    "askId": "ask_1", "text": "Which\u{1b}[2J tone?", "answer": {
                        "label": "Answer", "agent": "writer", "sessionId": "s3",
                        "extensionId": "botanical-session-question", "flow": "answer_flow",
                        "call": "answer", "askId": "ask_1"}}}},
                {"agent": "approver", "sessionId": "s4", "status": {"kind": "needs_you"}},
                {"agent": "idler", "sessionId": "s5", "status": {"kind": "idle"}},
                {"agent": "crasher", "sessionId": "s6", "status": {"kind": "failed"}},
                {"agent": "gone", "sessionId": "s7", "status": {"kind": "unavailable", "reason": "closed"}}
            ]}),
        };
        let id = "botanical-session-subagents";
        assert_eq!(
            lines(&slots(&[(id, rows)])),
            [
                "agent builder (Build): working",
                "agent tester: waiting on main",
                "! agent writer: needs you: Which\\x1b[2J tone? — /answer @writer",
                "agent approver: needs you",
                "agent idler: idle",
                "agent crasher: failed",
                "agent gone: unavailable",
                "agents: 2 more",
            ]
        );
        let collapsed = ExtensionSlotV0::Running {
            value: json!({"collapsed": true, "rows": [], "more": 0, "summary": {"total": 3,
                "working": 1, "waiting": 2, "needsYou": 0, "idle": 0, "failed": 0,
                "unavailable": 0, "tone": "calm"}}),
        };
        assert_eq!(
            lines(&slots(&[(id, collapsed)])),
            ["agents: 3 (1 working, 2 waiting on an Agent) — /agents expands"]
        );
        let amber = ExtensionSlotV0::Running {
            value: json!({"collapsed": true, "rows": [], "more": 0, "summary": {"total": 2,
                "working": 0, "waiting": 1, "needsYou": 1, "idle": 0, "failed": 0,
                "unavailable": 0, "tone": "amber"}}),
        };
        assert_eq!(
            lines(&slots(&[(id, amber)])),
            ["! agents: 2 (1 need you, 1 waiting on an Agent) — /agents expands"]
        );
    }

    #[test]
    fn nothing_to_show_is_no_line() {
        let empty = ExtensionSlotV0::Running {
            value: json!({"asks": []}),
        };
        assert!(lines(&slots(&[("botanical-session-question", empty)])).is_empty());
        assert!(lines(&SessionExtensionSlots::new()).is_empty());
    }
}
