//! What Goal says: the continuation prompt, the two prompt sections (each bounded
//! in UTF-8 bytes), the closing chat lines and pause details.

use crate::contract::{
    CONTEXT_SECTION_BYTES, DIRECTIVE_SECTION_BYTES, Goal, GoalStatus, PauseKind, STALL_LIMIT,
};
use crate::state::Reached;

/// The prompt each continuation admits; the directive rides in the system section.
pub const CONTINUATION_PROMPT: &str = "Continue working toward the goal.";

const CUT: &str = "…";

/// `text` cut to at most `max` bytes at a character boundary, ending with `…` when cut.
pub fn bound(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(CUT.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
}

/// The quiet goal context every run gets while a goal is live or paused.
pub fn context(goal: &Goal) -> Option<String> {
    let state = match (goal.status, &goal.pause_cause) {
        (GoalStatus::Live, _) => "live".to_owned(),
        (GoalStatus::Paused, Some(cause)) if cause.kind.by_person() => {
            "paused by a person; of the goal tools only goal.complete is accepted until a \
             person resumes it"
                .to_owned()
        }
        (GoalStatus::Paused, Some(cause)) => format!(
            "paused ({}): it does not continue on its own; goal.create with the same \
             objective resumes it",
            kind_name(cause.kind)
        ),
        (GoalStatus::Paused, None) => "paused".to_owned(),
        (GoalStatus::Achieved | GoalStatus::Cleared, _) => return None,
    };
    let text = format!(
        "Session goal (revision {}, {state}):\n{}\n\nCall goal.complete when it is achieved and \
         goal.block when you cannot go on without a person. Only a person clears or replaces \
         a live goal.",
        goal.revision, goal.objective
    );
    Some(bound(&text, CONTEXT_SECTION_BYTES))
}

/// The continuation directive: only for runs Goal admitted for the live goal.
pub fn directive() -> String {
    let text = format!(
        "This turn continues the goal on its own; no person is waiting for a reply. Take the \
         next concrete step with your tools. When the goal is achieved, call goal.complete with \
         a short summary; if you cannot continue without a person, call goal.block with the \
         reason. A turn that calls no tool counts as a stall: after {STALL_LIMIT} in a row the \
         goal pauses."
    );
    bound(&text, DIRECTIVE_SECTION_BYTES)
}

/// The chat line an achieved goal adds after its last work.
pub fn achieved_line(goal: &Goal, summary: Option<&str>) -> String {
    match summary {
        Some(summary) => format!("Goal achieved: {}\n{summary}", goal.objective),
        None => format!("Goal achieved: {}", goal.objective),
    }
}

/// The chat line a cleared (or replaced) goal adds.
pub fn cleared_line(goal: &Goal) -> String {
    format!("Goal cleared: {}", goal.objective)
}

/// The display detail of a pause the extension caused.
pub fn detail(kind: PauseKind) -> Option<String> {
    match kind {
        PauseKind::Person | PauseKind::Blocked => None,
        PauseKind::Stalled => Some(format!("{STALL_LIMIT} turns in a row made no tool call")),
        PauseKind::Cancelled => Some("A person stopped the last turn".into()),
        PauseKind::Failed => Some("The last turn failed".into()),
        PauseKind::NoTerminal => Some("The last turn could not resume".into()),
    }
}

/// The display detail of a goal paused at the host's bound: it names the bound.
pub fn bound_reached(reached: Reached) -> String {
    match reached {
        Reached::Turns(max) => format!(
            "Reached the host's bound of {max} goal turns since the goal went live; resuming \
             allows {max} more"
        ),
        Reached::Tokens(max) => format!(
            "Reached the host's bound of {max} tokens used by goal turns since the goal went \
             live; resuming allows {max} more"
        ),
    }
}

fn kind_name(kind: PauseKind) -> &'static str {
    match kind {
        PauseKind::Person => "person",
        PauseKind::Blocked => "blocked",
        PauseKind::Stalled => "stalled",
        PauseKind::Cancelled => "cancelled",
        PauseKind::Failed => "failed",
        PauseKind::NoTerminal => "no-terminal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_cut_at_a_character_boundary() {
        assert_eq!(bound("abc", 3), "abc");
        assert_eq!(bound("abcd", 3), "…");
        let cut = bound(&"é".repeat(100), 11);
        assert!(cut.len() <= 11, "{}", cut.len());
        assert_eq!(cut, format!("{}…", "é".repeat(4)));
    }

    #[test]
    fn the_context_fits_the_longest_objective_and_cuts_a_longer_one() {
        use crate::contract::{GoalId, MAX_OBJECTIVE_BYTES, SetBy};
        let goal = |objective: String| Goal {
            goal_id: GoalId::new("goal_1"),
            objective,
            status: GoalStatus::Live,
            pause_cause: None,
            revision: u64::MAX,
            set_by: SetBy::Person,
            created_at: 0,
            live_since: Some(0),
            ended_at: None,
            provisional: None,
            stalls: 0,
            continuations: 0,
            spent: Default::default(),
            waiting: false,
        };
        let longest = "é".repeat(MAX_OBJECTIVE_BYTES / 2);
        let section = context(&goal(longest.clone())).unwrap();
        assert!(section.contains(&longest) && !section.ends_with(CUT));
        assert!(section.len() <= CONTEXT_SECTION_BYTES);
        let section = context(&goal("é".repeat(CONTEXT_SECTION_BYTES))).unwrap();
        assert!(section.ends_with(CUT));
        assert!(section.len() <= CONTEXT_SECTION_BYTES, "{}", section.len());
        assert!(
            section.len() > CONTEXT_SECTION_BYTES - 4,
            "cut at the last boundary"
        );
    }

    #[test]
    fn the_directive_fits_its_bound() {
        assert!(directive().len() <= DIRECTIVE_SECTION_BYTES);
        assert!(!directive().ends_with(CUT), "the directive is not cut");
    }
}
