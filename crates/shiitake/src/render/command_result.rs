//! A command's result (`commands__exec`) as a person reads it: how it ended, how long
//! it took and where, then its output, instead of the raw JSON. The text is the tool's
//! own (untrusted): every piece is made inert by the caller.

use serde_json::Value;

/// The most lines of each stream shown.
const SHOWN_LINES: usize = 12;

/// What a command's result says: the summary after the label, and the output lines
/// (`  | ` for its standard output, `  ! ` for its standard error); `None` when `text`
/// is not the result of a command run to its end or started in the background.
pub(super) fn lines(text: &str) -> Option<(String, Vec<String>)> {
    let result: Value = serde_json::from_str(text).ok()?;
    let computer = result.get("computer")?.as_str()?;
    if let Some(job) = result.get("job").and_then(Value::as_str) {
        let command = result.get("command")?.as_str()?;
        return Some((
            format!("job {job} started on {computer}: {command}"),
            Vec::new(),
        ));
    }
    let exit = result.get("exit")?;
    let ended = match (exit.get("code"), exit.get("signal")) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => return None,
    };
    let stopped = match result.get("stopped").and_then(Value::as_str) {
        Some("timedOut") => ", its time limit passed",
        Some("cancelled") => ", cancelled",
        _ => "",
    };
    let ms = result
        .get("durationMs")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut lines = Vec::new();
    for (stream, mark) in [("stdout", "  | "), ("stderr", "  ! ")] {
        let Some(captured) = result.get(stream) else {
            continue;
        };
        let text = |field: &str| captured.get(field).and_then(Value::as_str).unwrap_or("");
        let cut = captured
            .get("cutBytes")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mut shown: Vec<&str> = text("head").lines().collect();
        if cut > 0 {
            shown.push("");
            shown.extend(text("tail").lines());
        }
        let more = shown.len().saturating_sub(SHOWN_LINES);
        for line in shown.into_iter().take(SHOWN_LINES) {
            if line.is_empty() && cut > 0 {
                lines.push(format!("{mark}[{cut} bytes cut]"));
            } else {
                lines.push(format!("{mark}{line}"));
            }
        }
        if more > 0 {
            lines.push(format!("{mark}[{more} more lines]"));
        }
    }
    Some((format!("{ended} in {ms} ms on {computer}{stopped}"), lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_command_reads_as_its_ending_and_its_output() {
        let result = json!({"computer": "workspace", "exit": {"code": 3}, "stopped": null,
            "durationMs": 12,
            "stdout": {"head": "one\ntwo\n", "tail": "", "totalBytes": 8, "cutBytes": 0},
            "stderr": {"head": "bad\n", "tail": "", "totalBytes": 4, "cutBytes": 0}});
        let (summary, lines) = super::lines(&result.to_string()).unwrap();
        assert_eq!(summary, "exit 3 in 12 ms on workspace");
        assert_eq!(lines, ["  | one", "  | two", "  ! bad"]);

        let killed = json!({"computer": "w", "exit": {"signal": 9}, "stopped": "timedOut",
            "durationMs": 500,
            "stdout": {"head": "a\n", "tail": "z\n", "totalBytes": 99, "cutBytes": 95},
            "stderr": {"head": "", "tail": "", "totalBytes": 0, "cutBytes": 0}});
        let (summary, lines) = super::lines(&killed.to_string()).unwrap();
        assert_eq!(
            summary,
            "killed by signal 9 in 500 ms on w, its time limit passed"
        );
        assert_eq!(lines, ["  | a", "  | [95 bytes cut]", "  | z"]);

        let job = json!({"computer": "w", "job": "job-abc-1", "command": "npm run dev",
            "running": true, "exit": null, "stopped": null, "outputBytes": 0});
        assert_eq!(
            super::lines(&job.to_string()).unwrap().0,
            "job job-abc-1 started on w: npm run dev"
        );
        assert_eq!(super::lines("not json"), None);
        assert_eq!(super::lines(r#"{"path": "a"}"#), None);
    }

    #[test]
    fn long_output_is_cut_to_its_first_lines() {
        let head: String = (1..=20).map(|n| format!("line {n}\n")).collect();
        let result = json!({"computer": "w", "exit": {"code": 0}, "durationMs": 1,
            "stdout": {"head": head, "tail": "", "totalBytes": 1, "cutBytes": 0}});
        let (_, lines) = super::lines(&result.to_string()).unwrap();
        assert_eq!(lines.len(), SHOWN_LINES + 1);
        assert_eq!(lines[SHOWN_LINES], "  | [8 more lines]");
    }
}
