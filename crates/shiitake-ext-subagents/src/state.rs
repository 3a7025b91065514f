//! The rules, as plain functions: a child's status from what its Session reads, the
//! collapsed summary, and when rows are read again. Nothing here does I/O.

use shiitake_ext_approval::contract::ApprovalView;
use shiitake_ext_question::contract::AskView;
use shiitake_protocol::SessionInboxState;

use crate::contract::{
    ANSWER_ACTION_LABEL, APPROVAL_ANSWER_CALL, APPROVAL_ANSWER_FLOW, APPROVAL_EXTENSION_ID,
    AnswerAction, ApprovalAnswerAction, ChildRow, ChildStatus, FooterSummary, MAX_APPROVAL_CHARS,
    MAX_QUESTION_CHARS, NeedsYouApproval, NeedsYouQuestion, POLL_EVERY_MS, QUESTION_ANSWER_CALL,
    QUESTION_ANSWER_FLOW, QUESTION_EXTENSION_ID, QUIET_AFTER_MS, REFRESH_AFTER_MS, Tone,
};

/// What a child's own Session says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildState {
    /// Its inbox state (from its committed header).
    pub inbox: SessionInboxState,
    /// Its title.
    pub title: String,
    /// Its open Asks (the question extension's projection), oldest first.
    pub asks: Vec<AskView>,
    /// Its tool calls waiting for a person's approval (the approval extension's
    /// projection), oldest first.
    pub approvals: Vec<ApprovalView>,
}

/// The status a child shows, from what reading its Session gave (`Err`: why it could
/// not be read).
///
/// In order: a question that needs a person → needs you (with its text and the Answer
/// action); a tool call waiting for approval → needs you (likewise); other attention
/// that waits on a person → needs you; a question that waits
/// on the sending Agent → waiting on it; running → working; errored → failed; done →
/// idle. A child that cannot be read is unavailable, never idle.
pub fn status_of(agent: &str, session_id: &str, read: &Result<ChildState, String>) -> ChildStatus {
    let state = match read {
        Ok(state) => state,
        Err(reason) => {
            return ChildStatus::Unavailable {
                reason: reason.clone(),
            };
        }
    };
    if let Some(ask) = state.asks.iter().find(|ask| ask.needs_person()) {
        return ChildStatus::NeedsYou {
            question: Some(needs_you_question(agent, session_id, ask)),
            approval: None,
        };
    }
    if let Some(approval) = state.approvals.first() {
        return ChildStatus::NeedsYou {
            question: None,
            approval: Some(Box::new(needs_you_approval(agent, session_id, approval))),
        };
    }
    if state.inbox == SessionInboxState::NeedsYou {
        return ChildStatus::NeedsYou {
            question: None,
            approval: None,
        };
    }
    if let Some(waiting) = state.asks.iter().find_map(|ask| ask.waiting_on.as_ref()) {
        return ChildStatus::WaitingOn {
            agent: waiting.agent.clone(),
        };
    }
    match state.inbox {
        SessionInboxState::Running => ChildStatus::Working,
        SessionInboxState::Errored => ChildStatus::Failed,
        // `needs_you` without a question was handled above.
        SessionInboxState::Done | SessionInboxState::NeedsYou => ChildStatus::Idle,
    }
}

fn needs_you_question(agent: &str, session_id: &str, ask: &AskView) -> NeedsYouQuestion {
    let text = ask
        .questions
        .first()
        .map(|q| q.question.as_str())
        .unwrap_or_default();
    NeedsYouQuestion {
        ask_id: ask.ask_id.as_str().to_owned(),
        text: cut(text, MAX_QUESTION_CHARS),
        answer: AnswerAction {
            label: ANSWER_ACTION_LABEL.into(),
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            extension_id: QUESTION_EXTENSION_ID.into(),
            flow: QUESTION_ANSWER_FLOW.into(),
            call: QUESTION_ANSWER_CALL.into(),
            ask_id: ask.ask_id.as_str().to_owned(),
        },
    }
}

fn needs_you_approval(agent: &str, session_id: &str, approval: &ApprovalView) -> NeedsYouApproval {
    NeedsYouApproval {
        approval_id: approval.approval_id.as_str().to_owned(),
        text: cut(&approval.line(), MAX_APPROVAL_CHARS),
        answer: ApprovalAnswerAction {
            label: ANSWER_ACTION_LABEL.into(),
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            extension_id: APPROVAL_EXTENSION_ID.into(),
            flow: APPROVAL_ANSWER_FLOW.into(),
            call: APPROVAL_ANSWER_CALL.into(),
            approval_id: approval.approval_id.as_str().to_owned(),
        },
    }
}

/// `text` at most `limit` characters, ending with `…` when cut.
fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// One row from what reading the child gave.
pub fn row(agent: &str, session_id: &str, read: &Result<ChildState, String>) -> ChildRow {
    ChildRow {
        agent: agent.to_owned(),
        session_id: session_id.to_owned(),
        title: read
            .as_ref()
            .map(|state| state.title.clone())
            .unwrap_or_default(),
        status: status_of(agent, session_id, read),
    }
}

/// The collapsed summary: counts by status; amber only when a child needs a person.
pub fn summary(rows: &[ChildRow]) -> FooterSummary {
    let mut summary = FooterSummary::default();
    for row in rows {
        summary.total += 1;
        match row.status {
            ChildStatus::Working => summary.working += 1,
            ChildStatus::WaitingOn { .. } => summary.waiting += 1,
            ChildStatus::NeedsYou { .. } => summary.needs_you += 1,
            ChildStatus::Idle => summary.idle += 1,
            ChildStatus::Failed => summary.failed += 1,
            ChildStatus::Unavailable { .. } => summary.unavailable += 1,
        }
    }
    summary.tone = if summary.needs_you > 0 {
        Tone::Amber
    } else {
        Tone::Calm
    };
    summary
}

/// When one Session's rows are read again.
///
/// - A read of the Session refreshes rows that are at least [`REFRESH_AFTER_MS`] old
///   (rows never read count as old).
/// - While a row is live (working or waiting), rows are read again every
///   [`POLL_EVERY_MS`], as long as that poll comes less than [`QUIET_AFTER_MS`] after
///   the Session was last read.
/// - A refresh whose republication reached a watcher counts as a read: someone is
///   looking at the footer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracking {
    /// When the Session was last read (or a watcher last received its footer).
    pub last_read: Option<u64>,
    /// When its rows were last read.
    pub refreshed_at: Option<u64>,
    /// Whether any row was working or waiting at that refresh.
    pub live: bool,
    /// A read asked for a refresh that has not run yet.
    pub wanted: bool,
}

impl Tracking {
    /// The Session was read at `now`.
    pub fn observed(&mut self, now: u64) {
        self.last_read = Some(self.last_read.map_or(now, |at| at.max(now)));
        let old = self
            .refreshed_at
            .is_none_or(|at| now.saturating_sub(at) >= REFRESH_AFTER_MS);
        if old {
            self.wanted = true;
        }
    }

    /// The rows were read at `now`; `live` if any is working or waiting, `watched` if
    /// showing them reached a watcher.
    pub fn refreshed(&mut self, now: u64, live: bool, watched: bool) {
        self.refreshed_at = Some(now);
        self.live = live;
        self.wanted = false;
        if watched {
            self.last_read = Some(self.last_read.map_or(now, |at| at.max(now)));
        }
    }

    /// When the rows should next be read, if at all: at once (`Some(0)`) after a read
    /// that wanted it, else the next poll while one is due.
    pub fn due_at(&self) -> Option<u64> {
        if self.wanted {
            return Some(0);
        }
        if !self.live {
            return None;
        }
        let refreshed = self.refreshed_at?;
        let last_read = self.last_read?;
        let poll = refreshed.saturating_add(POLL_EVERY_MS);
        (poll.saturating_sub(last_read) < QUIET_AFTER_MS).then_some(poll)
    }

    /// Whether memory for this Session may be let go: nothing due and nobody has read
    /// it for [`QUIET_AFTER_MS`].
    pub fn forgettable(&self, now: u64) -> bool {
        self.due_at().is_none()
            && self
                .last_read
                .is_none_or(|at| now.saturating_sub(at) >= QUIET_AFTER_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shiitake_ext_question::contract::{AskId, Question, QuestionOption, WaitingOn};

    fn ask(id: &str, waiting_on: Option<(&str, bool)>) -> AskView {
        AskView {
            ask_id: AskId::new(id),
            questions: vec![Question {
                header: "Database".into(),
                question: "Which database?".into(),
                options: vec![QuestionOption {
                    label: "SQLite".into(),
                    description: None,
                }],
                multi_select: false,
            }],
            created_at: 1,
            expires_at: None,
            on_expire: None,
            waiting_on: waiting_on.map(|(agent, escalated)| WaitingOn {
                agent: agent.into(),
                session_id: "parent".into(),
                escalated,
            }),
        }
    }

    fn state(inbox: SessionInboxState, asks: Vec<AskView>) -> Result<ChildState, String> {
        Ok(ChildState {
            inbox,
            title: String::new(),
            asks,
            approvals: Vec::new(),
        })
    }

    fn approval(id: &str) -> ApprovalView {
        ApprovalView {
            approval_id: shiitake_ext_approval::contract::ApprovalId::new(id),
            facts: Default::default(),
            tool: "files__apply_patch".into(),
            arguments: serde_json::json!({"patch": "*** Begin Patch"}),
            why: "the host asks before files__apply_patch".into(),
            created_at: 1,
            parked: false,
        }
    }

    #[test]
    fn each_child_state_maps_to_its_status() {
        use SessionInboxState::*;
        let status = |read| status_of("B", "s-b", &read);
        assert_eq!(status(state(Running, vec![])), ChildStatus::Working);
        assert_eq!(status(state(Done, vec![])), ChildStatus::Idle);
        assert_eq!(status(state(Errored, vec![])), ChildStatus::Failed);
        assert_eq!(
            status(state(NeedsYou, vec![])),
            ChildStatus::NeedsYou {
                question: None,
                approval: None
            },
            "attention another extension raised"
        );
        assert_eq!(
            status(state(Done, vec![ask("ask_1", Some(("A", false)))])),
            ChildStatus::WaitingOn { agent: "A".into() }
        );
        assert_eq!(
            status(state(Running, vec![ask("ask_1", Some(("A", false)))])),
            ChildStatus::WaitingOn { agent: "A".into() },
            "a question waiting on the sender shows over work that goes on"
        );
        let ChildStatus::NeedsYou {
            question: Some(question),
            ..
        } = status(state(NeedsYou, vec![ask("ask_2", Some(("A", true)))]))
        else {
            panic!("an escalated question needs a person")
        };
        assert_eq!(question.text, "Which database?");
        assert_eq!(
            question.answer,
            AnswerAction {
                label: "Answer".into(),
                agent: "B".into(),
                session_id: "s-b".into(),
                extension_id: "botanical-session-question".into(),
                flow: "answer_flow".into(),
                call: "answer".into(),
                ask_id: "ask_2".into(),
            }
        );
        assert!(matches!(
            status(state(NeedsYou, vec![ask("ask_3", None)])),
            ChildStatus::NeedsYou {
                question: Some(_),
                ..
            }
        ));
        let mut approving = state(NeedsYou, vec![]).unwrap();
        approving.approvals = vec![approval("ap2")];
        assert_eq!(
            status(Ok(approving.clone())),
            ChildStatus::NeedsYou {
                question: None,
                approval: Some(Box::new(NeedsYouApproval {
                    approval_id: "ap2".into(),
                    text: r#"approve files__apply_patch? {"patch":"*** Begin Patch"}"#.into(),
                    answer: ApprovalAnswerAction {
                        label: "Answer".into(),
                        agent: "B".into(),
                        session_id: "s-b".into(),
                        extension_id: "shiitake-session-approval".into(),
                        flow: "answer_flow".into(),
                        call: "answer".into(),
                        approval_id: "ap2".into(),
                    },
                })),
            },
            "a tool call waiting for approval"
        );
        approving.asks = vec![ask("ask_4", None)];
        assert!(
            matches!(
                status(Ok(approving)),
                ChildStatus::NeedsYou {
                    question: Some(_),
                    approval: None
                }
            ),
            "a question first"
        );
        assert_eq!(
            status(Err("no Agent B".into())),
            ChildStatus::Unavailable {
                reason: "no Agent B".into()
            },
            "unreadable is unavailable, never idle"
        );
    }

    #[test]
    fn a_person_question_wins_over_one_waiting_on_the_sender() {
        let read = state(
            SessionInboxState::NeedsYou,
            vec![ask("ask_1", Some(("A", false))), ask("ask_2", None)],
        );
        let ChildStatus::NeedsYou {
            question: Some(question),
            ..
        } = status_of("B", "s", &read)
        else {
            panic!("needs you")
        };
        assert_eq!(question.ask_id, "ask_2");
    }

    #[test]
    fn question_text_is_cut_at_its_bound() {
        let exact = "q".repeat(MAX_QUESTION_CHARS);
        assert_eq!(cut(&exact, MAX_QUESTION_CHARS), exact);
        let over = "é".repeat(MAX_QUESTION_CHARS + 1);
        let cut_text = cut(&over, MAX_QUESTION_CHARS);
        assert_eq!(cut_text.chars().count(), MAX_QUESTION_CHARS);
        assert!(cut_text.ends_with('…'));
    }

    #[test]
    fn the_summary_counts_waiting_apart_and_is_amber_only_for_a_person() {
        let rows: Vec<ChildRow> = [
            state(SessionInboxState::Running, vec![]),
            state(SessionInboxState::Done, vec![ask("a", Some(("A", false)))]),
            state(SessionInboxState::Done, vec![]),
            Err("gone".into()),
        ]
        .iter()
        .map(|read| row("B", "s", read))
        .collect();
        let calm = summary(&rows);
        assert_eq!(
            calm,
            FooterSummary {
                total: 4,
                working: 1,
                waiting: 1,
                needs_you: 0,
                idle: 1,
                failed: 0,
                unavailable: 1,
                tone: Tone::Calm,
            }
        );
        let mut rows = rows;
        rows.push(row("C", "s", &state(SessionInboxState::NeedsYou, vec![])));
        assert_eq!(summary(&rows).tone, Tone::Amber);
        assert_eq!(summary(&rows).needs_you, 1);
    }

    #[test]
    fn a_read_refreshes_rows_at_least_a_second_old() {
        let mut tracking = Tracking::default();
        tracking.observed(10_000);
        assert_eq!(tracking.due_at(), Some(0), "never read: old");
        tracking.refreshed(10_000, false, false);
        assert_eq!(tracking.due_at(), None);
        tracking.observed(10_000 + REFRESH_AFTER_MS - 1);
        assert_eq!(tracking.due_at(), None, "one millisecond too fresh");
        tracking.observed(10_000 + REFRESH_AFTER_MS);
        assert_eq!(tracking.due_at(), Some(0), "a second old");
    }

    #[test]
    fn live_rows_poll_every_five_seconds_until_thirty_quiet_seconds() {
        let mut tracking = Tracking::default();
        tracking.observed(0);
        let mut now = 0;
        let mut polls = Vec::new();
        tracking.refreshed(now, true, false);
        while let Some(at) = tracking.due_at() {
            assert!(at > now, "polls move forward");
            now = at;
            polls.push(now);
            tracking.refreshed(now, true, false);
        }
        assert_eq!(polls, vec![5_000, 10_000, 15_000, 20_000, 25_000]);
        // Rows that are idle do not poll at all.
        let mut idle = Tracking::default();
        idle.observed(0);
        idle.refreshed(0, false, false);
        assert_eq!(idle.due_at(), None);
    }

    #[test]
    fn a_watcher_that_receives_the_rows_keeps_them_polling() {
        let mut tracking = Tracking::default();
        tracking.observed(0);
        let mut now = 0;
        tracking.refreshed(now, true, true);
        for _ in 0..20 {
            now = tracking.due_at().unwrap();
            tracking.refreshed(now, true, true);
        }
        assert_eq!(now, 20 * POLL_EVERY_MS);
    }

    #[test]
    fn memory_is_let_go_only_when_quiet() {
        let mut tracking = Tracking::default();
        tracking.observed(0);
        tracking.refreshed(0, false, false);
        assert!(!tracking.forgettable(QUIET_AFTER_MS - 1));
        assert!(tracking.forgettable(QUIET_AFTER_MS));
    }

    proptest! {
        /// Whatever the reads and refreshes, a poll is never due at or after thirty
        /// seconds past the last read, and never before the last refresh.
        #[test]
        fn polls_stop_after_the_quiet_period(
            steps in proptest::collection::vec((0u64..40_000, any::<bool>(), any::<bool>(), any::<bool>()), 1..40)
        ) {
            let mut tracking = Tracking::default();
            let mut now = 0u64;
            for (gap, read, live, watched) in steps {
                now += gap;
                if read {
                    tracking.observed(now);
                } else {
                    tracking.refreshed(now, live, watched);
                }
                if let Some(at) = tracking.due_at().filter(|at| *at > 0) {
                    let last_read = tracking.last_read.unwrap();
                    prop_assert!(at - last_read < QUIET_AFTER_MS || at < last_read);
                    prop_assert!(at >= tracking.refreshed_at.unwrap());
                    prop_assert!(tracking.live);
                }
            }
        }
    }
}
