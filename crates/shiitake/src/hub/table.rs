//! Aligned columns for the operator's lists, and the times in them.

use chrono::{DateTime, SecondsFormat, Utc};

/// Unix milliseconds as a UTC time to the second; the number itself when out of range.
pub fn utc(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .map_or_else(
            || ms.to_string(),
            |at| at.to_rfc3339_opts(SecondsFormat::Secs, true),
        )
}

/// A header and rows as lines, each column as wide as its widest cell, two spaces
/// apart, without trailing blanks.
pub fn aligned<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let mut widths = header.clone().map(|cell| cell.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(header).chain(rows) {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
