//! Cron cadences as people write them: Unix (POSIX/Vixie) cron, evaluated in UTC.
//!
//! A cadence has 5 fields (`minute hour day-of-month month day-of-week`), or 6–7
//! fields with seconds first and an optional year last. The day of week counts
//! Sunday as 0 *and* 7 (Monday is 1), and takes names (`MON`, `mon-fri`); months
//! take names too (`JAN`). When both day-of-month and day-of-week are restricted
//! a time matches either one, as in Unix cron (`0 0 13 * FRI` fires on every 13th
//! and every Friday). `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly` work.
//!
//! Every cadence is evaluated in **UTC**: `0 9 * * MON` fires at 09:00 UTC on
//! Mondays. An extension that wants a person's local time converts it before it
//! writes the cadence.
//!
//! The grammar is the `croner` crate's; the `cron` crate was dropped because it
//! numbers days of week from Sunday = 1 (Quartz), so `* * * * 1` fired on Sundays.

use std::str::FromStr;

use super::HookError;

/// The first occurrence of `expression` strictly after `after_ms`, in Unix milliseconds (UTC).
///
/// Fails with [`HookError::Invalid`] for an expression that does not parse or never fires.
pub fn next_after(expression: &str, after_ms: u64) -> Result<u64, HookError> {
    let schedule = croner::Cron::from_str(expression)
        .map_err(|error| HookError::Invalid(format!("cron cadence `{expression}`: {error}")))?;
    let after =
        chrono::DateTime::from_timestamp_millis(i64::try_from(after_ms).unwrap_or(i64::MAX))
            .ok_or_else(|| HookError::Invalid("time out of range".into()))?;
    let next = schedule
        .find_next_occurrence(&after, false)
        .map_err(|error| HookError::Invalid(format!("cron cadence `{expression}`: {error}")))?;
    u64::try_from(next.timestamp_millis())
        .map_err(|_| HookError::Invalid("time out of range".into()))
}

/// Whether `expression` is a cadence [`next_after`] can evaluate.
pub fn validate(expression: &str) -> Result<(), HookError> {
    next_after(expression, 0).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Utc, Weekday};

    /// 2026-11-30T00:00:00Z, a Monday.
    const MONDAY_MIDNIGHT: u64 = 1_795_996_800_000;
    const DAY: u64 = 24 * 60 * 60 * 1000;

    fn weekday_of(ms: u64) -> Weekday {
        Utc.timestamp_millis_opt(ms as i64).unwrap().weekday()
    }

    #[test]
    fn the_reference_instant_is_a_monday_midnight() {
        let at = Utc.timestamp_millis_opt(MONDAY_MIDNIGHT as i64).unwrap();
        assert_eq!(
            (at.weekday(), at.format("%F %T").to_string()),
            (Weekday::Mon, "2026-11-30 00:00:00".into())
        );
    }

    #[test]
    fn every_weekday_by_number_and_by_name_fires_on_that_day() {
        let days = [
            (0, "SUN", Weekday::Sun),
            (1, "MON", Weekday::Mon),
            (2, "TUE", Weekday::Tue),
            (3, "WED", Weekday::Wed),
            (4, "THU", Weekday::Thu),
            (5, "FRI", Weekday::Fri),
            (6, "SAT", Weekday::Sat),
            (7, "SUN", Weekday::Sun),
        ];
        for (number, name, weekday) in days {
            for expression in [
                format!("0 9 * * {number}"),
                format!("0 9 * * {name}"),
                format!("0 9 * * {}", name.to_lowercase()),
            ] {
                // From Monday 00:00 the next 09:00 on that day; Monday's is the same day.
                let next = next_after(&expression, MONDAY_MIDNIGHT).unwrap();
                assert_eq!(weekday_of(next), weekday, "{expression}");
                let offset = (weekday.num_days_from_monday() as u64) * DAY;
                assert_eq!(
                    next,
                    MONDAY_MIDNIGHT + offset + 9 * 60 * 60 * 1000,
                    "{expression}"
                );
            }
        }
    }

    #[test]
    fn every_weekday_fires_on_its_day_across_a_week_of_starts() {
        use Weekday::*;
        for start_day in 0..7 {
            let start = MONDAY_MIDNIGHT + start_day * DAY + 12 * 60 * 60 * 1000;
            for number in 0..=7u32 {
                let next = next_after(&format!("30 6 * * {number}"), start).unwrap();
                let sunday_first = [Sun, Mon, Tue, Wed, Thu, Fri, Sat];
                let expected = sunday_first[(number % 7) as usize];
                assert_eq!(weekday_of(next), expected, "day {number} from {start}");
                assert!(next > start && next - start <= 7 * DAY);
            }
        }
    }

    #[test]
    fn ranges_lists_and_steps_read_as_unix_cron() {
        let weekdays_from = |expression: &str| -> Vec<Weekday> {
            let mut at = MONDAY_MIDNIGHT - 1;
            (0..7)
                .map(|_| {
                    at = next_after(expression, at).unwrap();
                    weekday_of(at)
                })
                .collect()
        };
        use Weekday::*;
        assert_eq!(
            weekdays_from("0 0 * * 1-5"),
            vec![Mon, Tue, Wed, Thu, Fri, Mon, Tue]
        );
        assert_eq!(
            weekdays_from("0 0 * * MON-FRI"),
            vec![Mon, Tue, Wed, Thu, Fri, Mon, Tue]
        );
        assert_eq!(
            weekdays_from("0 0 * * 0,6"),
            vec![Sat, Sun, Sat, Sun, Sat, Sun, Sat]
        );
        assert_eq!(
            weekdays_from("0 0 * * 5-7"),
            vec![Fri, Sat, Sun, Fri, Sat, Sun, Fri]
        );
        assert_eq!(
            weekdays_from("0 0 * * */2"),
            vec![Tue, Thu, Sat, Sun, Tue, Thu, Sat]
        );
    }

    #[test]
    fn day_of_month_or_day_of_week_as_in_unix_cron() {
        // 2026-12-13 is a Sunday; Fridays are Dec 4, 11, 18.
        let mut at = MONDAY_MIDNIGHT;
        let mut days = Vec::new();
        for _ in 0..4 {
            at = next_after("0 0 13 * FRI", at).unwrap();
            days.push(Utc.timestamp_millis_opt(at as i64).unwrap().day());
        }
        assert_eq!(days, vec![4, 11, 13, 18]);
    }

    #[test]
    fn seconds_first_six_and_seven_fields_and_the_five_field_form() {
        assert_eq!(
            next_after("*/15 * * * *", MONDAY_MIDNIGHT).unwrap(),
            MONDAY_MIDNIGHT + 15 * 60 * 1000
        );
        assert_eq!(
            next_after("30 * * * * *", MONDAY_MIDNIGHT).unwrap(),
            MONDAY_MIDNIGHT + 30 * 1000
        );
        assert_eq!(
            next_after("* * * * * *", MONDAY_MIDNIGHT).unwrap(),
            MONDAY_MIDNIGHT + 1000
        );
        assert_eq!(
            next_after("0 0 0 * * MON 2027", MONDAY_MIDNIGHT).unwrap(),
            MONDAY_MIDNIGHT + 5 * 7 * DAY,
            "the first Monday of 2027 is January 4"
        );
        assert_eq!(
            next_after("@daily", MONDAY_MIDNIGHT).unwrap(),
            MONDAY_MIDNIGHT + DAY
        );
    }

    #[test]
    fn bad_cadences_are_invalid_not_panics() {
        for bad in [
            "",
            "not a cadence",
            "* * * *",
            "* * * * * * * *",
            "61 * * * *",
            "* * * * 8",
            "0 0 30 2 *",
        ] {
            assert!(
                matches!(next_after(bad, MONDAY_MIDNIGHT), Err(HookError::Invalid(_))),
                "{bad:?}"
            );
        }
        assert!(validate("0 9 * * 1").is_ok());
    }
}
