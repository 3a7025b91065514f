//! The footer `chat` and `watch` print after each run: the rows the Session's
//! extensions describe (`footer` of snapshots and update frames), one line each, and
//! one line per stopped extension.
//!
//! A row is printed without knowing which extension wrote it
//! (`shiitake_protocol::footer`): `! ` first when it wants attention, then its text,
//! ` since HH:MM` in this machine's zone when it has a moment, and ` — note` when it
//! has a note. A row with no text (a bar of actions for a page) prints nothing.
//! Extension text is printed inert (control characters escaped), like model text.

use chrono::{DateTime, FixedOffset, Offset, Utc};
use shiitake_protocol::footer::{FooterRowV0, FooterTone};
use shiitake_protocol::{ExtensionSlotV0, SessionExtensionSlots};

use super::style::inert_line;

/// Minutes east of UTC of this machine's zone now: a row's clock time is the person's.
fn local_offset_minutes() -> i32 {
    chrono::Local::now().offset().local_minus_utc() / 60
}

/// `HH:MM` of Unix milliseconds in the zone `offset_minutes` east of UTC.
fn clock_time(unix_ms: u64, offset_minutes: i32) -> String {
    let zone = FixedOffset::east_opt(offset_minutes.saturating_mul(60)).unwrap_or(Utc.fix());
    i64::try_from(unix_ms)
        .ok()
        .and_then(DateTime::from_timestamp_millis)
        .map(|moment| moment.with_timezone(&zone).format("%H:%M").to_string())
        .unwrap_or_else(|| "--:--".to_owned())
}

/// One row as a terminal line, or `None` for a row without text.
fn row_line(row: &FooterRowV0, offset_minutes: i32) -> Option<String> {
    if row.text.is_empty() {
        return None;
    }
    let mut line = match row.tone {
        FooterTone::Attention => "! ".to_owned(),
        FooterTone::Calm => String::new(),
    };
    line.push_str(&inert_line(&row.text));
    if let Some(since) = row.since {
        line.push_str(" since ");
        line.push_str(&clock_time(since, offset_minutes));
    }
    if let Some(note) = &row.note {
        line.push_str(" — ");
        line.push_str(&inert_line(note));
    }
    Some(line)
}

fn stopped(slots: &SessionExtensionSlots) -> impl Iterator<Item = String> + '_ {
    slots.iter().filter_map(|(id, slot)| match slot {
        ExtensionSlotV0::Stopped { reason } => Some(format!(
            "[{}] stopped: {}",
            inert_line(id.as_str()),
            inert_line(reason)
        )),
        ExtensionSlotV0::Running { .. } => None,
    })
}

/// The footer lines for these rows and slots, with clock times in this machine's zone.
pub fn lines(rows: &[FooterRowV0], slots: &SessionExtensionSlots) -> Vec<String> {
    lines_at(rows, slots, local_offset_minutes())
}

/// The footer lines with clock times `offset_minutes` east of UTC.
fn lines_at(
    rows: &[FooterRowV0],
    slots: &SessionExtensionSlots,
    offset_minutes: i32,
) -> Vec<String> {
    rows.iter()
        .filter_map(|row| row_line(row, offset_minutes))
        .chain(stopped(slots))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shiitake_protocol::ExtensionId;
    use shiitake_protocol::footer::FooterActionV0;

    fn row(text: &str) -> FooterRowV0 {
        FooterRowV0::new(ExtensionId::new("x-ext").unwrap(), "k", "kind", text)
    }

    fn slots(entries: &[(&str, ExtensionSlotV0)]) -> SessionExtensionSlots {
        let mut slots = SessionExtensionSlots::new();
        for (id, slot) in entries {
            slots.insert(ExtensionId::new(*id).unwrap(), slot.clone());
        }
        slots
    }

    #[test]
    fn a_row_prints_its_mark_text_moment_and_note_in_that_order() {
        // 14:02 UTC on 2026-11-30.
        let since = 1_796_047_320_000u64;
        let rows = [
            row("plan 1/4: Write tests").with_progress(1, 4),
            row("? [DB] Which\u{1b}[2J one?").with_note("/answer"),
            row("Pursuing goal").with_since(since),
            row("agent writer: needs you: Go?")
                .with_tone(FooterTone::Attention)
                .with_note("/answer @writer"),
        ];
        let stopped = slots(&[(
            "other-extension",
            ExtensionSlotV0::Stopped {
                reason: "bad row".into(),
            },
        )]);
        assert_eq!(
            lines_at(&rows, &stopped, 0),
            [
                "plan 1/4: Write tests",
                "? [DB] Which\\x1b[2J one? — /answer",
                "Pursuing goal since 14:02",
                "! agent writer: needs you: Go? — /answer @writer",
                "[other-extension] stopped: bad row",
            ]
        );
        assert_eq!(
            lines_at(&rows[2..3], &SessionExtensionSlots::new(), -300),
            ["Pursuing goal since 09:02"]
        );
    }

    #[test]
    fn a_row_of_actions_only_prints_nothing_and_no_rows_no_lines() {
        let bar = row("").with_action(FooterActionV0::command(
            "toggle",
            "Collapse",
            "toggle",
            json!({}),
        ));
        assert!(lines_at(&[bar], &SessionExtensionSlots::new(), 0).is_empty());
        assert!(lines(&[], &SessionExtensionSlots::new()).is_empty());
    }

    #[test]
    fn a_note_with_control_characters_is_inert_and_a_moment_out_of_range_is_dashes() {
        let odd = row("t")
            .with_note("\u{1b}]0;title\u{7}")
            .with_since(u64::MAX);
        assert_eq!(
            lines_at(&[odd], &SessionExtensionSlots::new(), 0),
            ["t since --:-- — \\x1b]0;title\\x07"]
        );
    }
}
