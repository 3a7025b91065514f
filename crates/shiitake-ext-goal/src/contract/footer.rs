//! The goal's footer: what it shows while a goal is live or paused, as the projection's
//! [`Footer`] and as the footer row every client prints ([`footer_row`]).

use serde::{Deserialize, Serialize};
use serde_json::json;
use shiitake_protocol::ExtensionId;
use shiitake_protocol::footer::{FooterActionV0, FooterRowV0};

use super::{Goal, GoalChange, GoalProjection, GoalStatus, ResumeGoal};
use shiitake_protocol::extension::ContractCommand;

/// The footer text of a live goal; clients add ` since HH:MM` in the person's zone.
pub const PURSUING_TEXT: &str = "Pursuing goal";
/// The footer text of a paused goal.
pub const PAUSED_TEXT: &str = "Goal paused (/goal resume)";
/// The footer kind and key of the goal's one row.
pub const FOOTER_KIND: &str = "goal";

/// What the footer shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Footer {
    /// "Pursuing goal since 14:02".
    Pursuing {
        /// Unix milliseconds the goal became live.
        since: u64,
    },
    /// "Goal paused (/goal resume)".
    Paused,
}

impl Footer {
    /// The footer of a goal: only a live or paused one shows.
    pub fn of(goal: &Goal) -> Option<Footer> {
        match goal.status {
            GoalStatus::Live => Some(Footer::Pursuing {
                since: goal.live_since.unwrap_or(goal.created_at),
            }),
            GoalStatus::Paused => Some(Footer::Paused),
            GoalStatus::Achieved | GoalStatus::Cleared => None,
        }
    }

    /// The footer line, with the clock time in the person's zone (`offset_minutes`
    /// east of UTC): "Pursuing goal since 14:02" or "Goal paused (/goal resume)".
    pub fn text(&self, offset_minutes: i32) -> String {
        match self {
            Footer::Pursuing { since } => {
                format!(
                    "{PURSUING_TEXT} since {}",
                    clock_time(*since, offset_minutes)
                )
            }
            Footer::Paused => PAUSED_TEXT.to_owned(),
        }
    }
}

/// `HH:MM` of Unix milliseconds, shifted by `offset_minutes`.
pub fn clock_time(unix_ms: u64, offset_minutes: i32) -> String {
    const DAY: i64 = 24 * 60;
    let minutes = i64::try_from(unix_ms / 60_000).unwrap_or(0) + i64::from(offset_minutes);
    let of_day = minutes.rem_euclid(DAY);
    format!("{:02}:{:02}", of_day / 60, of_day % 60)
}

/// The goal's footer row, while the projection has a footer: `Pursuing goal` with
/// the moment it became live (a terminal prints `Pursuing goal since 14:02`), or
/// `Goal paused (/goal resume)` with a *Resume* button that resumes the revision shown.
pub fn footer_row(projection: &GoalProjection, extension_id: &ExtensionId) -> Option<FooterRowV0> {
    let row = |text: &str| FooterRowV0::new(extension_id.clone(), FOOTER_KIND, FOOTER_KIND, text);
    Some(match projection.footer? {
        Footer::Pursuing { since } => row(PURSUING_TEXT).with_since(since),
        Footer::Paused => {
            let revision = projection.goal.as_ref().map(|goal| goal.revision);
            let resume = FooterActionV0::command(
                "resume",
                "Resume",
                ResumeGoal::NAME,
                json!(GoalChange {
                    revision,
                    request_id: None,
                }),
            );
            row(PAUSED_TEXT).with_action(resume.primary())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::tests::goal;

    #[test]
    fn the_footer_shows_live_and_paused_goals_only() {
        let live = goal(GoalStatus::Live, None);
        // 2025-11-30T13:22:00Z
        assert_eq!(
            Footer::of(&live).unwrap().text(0),
            "Pursuing goal since 13:22"
        );
        assert_eq!(
            Footer::of(&live).unwrap().text(40),
            "Pursuing goal since 14:02"
        );
        assert_eq!(
            Footer::of(&live).unwrap().text(-14 * 60),
            "Pursuing goal since 23:22"
        );
        let paused = goal(GoalStatus::Paused, None);
        assert_eq!(
            Footer::of(&paused).unwrap().text(0),
            "Goal paused (/goal resume)"
        );
        assert_eq!(Footer::of(&goal(GoalStatus::Achieved, None)), None);
        assert_eq!(Footer::of(&goal(GoalStatus::Cleared, None)), None);
    }

    #[test]
    fn the_footer_row_is_the_line_a_terminal_prints() {
        let id = ExtensionId::new(crate::contract::EXTENSION_ID).unwrap();
        let of = |goal: Goal| GoalProjection {
            footer: Footer::of(&goal),
            goal: Some(goal),
            ..GoalProjection::default()
        };
        let live = footer_row(&of(goal(GoalStatus::Live, None)), &id).unwrap();
        assert_eq!(
            (live.key.as_str(), live.kind.as_str(), live.text.as_str()),
            ("goal", "goal", "Pursuing goal")
        );
        assert_eq!(live.since, Some(1_764_508_920_000));
        assert_eq!(live.tone, shiitake_protocol::footer::FooterTone::Calm);
        assert!(live.note.is_none() && live.actions.is_empty());
        let paused = footer_row(&of(goal(GoalStatus::Paused, None)), &id).unwrap();
        assert_eq!(paused.text, "Goal paused (/goal resume)");
        assert_eq!(paused.since, None);
        assert_eq!(
            serde_json::to_value(&paused.actions).unwrap(),
            json!([{"label": "Resume", "name": "resume", "primary": true, "kind": "command",
                    "command": "resume", "input": {"revision": 3}}])
        );
        assert_eq!(footer_row(&of(goal(GoalStatus::Achieved, None)), &id), None);
        assert_eq!(footer_row(&GoalProjection::default(), &id), None);
    }
}
