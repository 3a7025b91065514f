//! The printer: frames, the footer and tool results as a terminal shows them.

use std::sync::{Arc, Mutex};

use super::*;
use shiitake_protocol::{EntryId, ProgressFrame, SessionActivity, SessionMessage, SessionProgress};

/// The editor's printer, keeping what it was given.
struct Captured(Arc<Mutex<String>>);

impl rustyline::ExternalPrinter for Captured {
    fn print(&mut self, msg: String) -> rustyline::Result<()> {
        self.0.lock().unwrap().push_str(&msg);
        Ok(())
    }
}

fn progress(text: &str, revision: u64) -> SessionFrame {
    SessionFrame::Progress(ProgressFrame {
        progress: SessionProgress {
            message_id: EntryId::new("ent_1").unwrap(),
            revision,
            text: text.to_owned(),
            thinking: String::new(),
            text_truncated: false,
            thinking_truncated: false,
        },
        activity: SessionActivity::default(),
    })
}

/// A printer into an editor sink with colour on or off, and what it printed.
fn captured(colour: bool) -> (Printer, Arc<Mutex<String>>) {
    let shown = Arc::new(Mutex::new(String::new()));
    let sink = EditorSink::with_colour(Box::new(Captured(shown.clone())), colour);
    let printer = Printer {
        sink: Sink::Editor(sink),
        ..Printer::default()
    };
    (printer, shown)
}

fn plain(shown: &Mutex<String>) -> String {
    anstream::adapter::strip_str(&shown.lock().unwrap()).to_string()
}

fn assistant(text: &str) -> SessionMessage {
    let answer: Message = serde_json::from_value(serde_json::json!({
        "role": "assistant", "content": [{"type": "text", "text": text}],
        "api": "scripted", "provider": "scripted", "model": "scripted",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "stop", "timestamp": 1
    }))
    .unwrap();
    SessionMessage {
        id: EntryId::new("ent_1").unwrap(),
        sequence: 3,
        command_id: None,
        value: answer,
    }
}

#[test]
fn a_rendered_stream_prints_final_lines_and_relabels_after_an_interruption() {
    let (mut printer, shown) = captured(true);
    let answer = "Some **bold** text.\n\n- one\n- two\n\n```sh\nls\n```\n\nEnd.";
    let mut revision = 0;
    for cut in [4, 19, 21, 28, 35, 40, 45, 52] {
        revision += 1;
        printer.frame(&progress(&answer[..cut], revision));
        if cut == 28 {
            printer.note("[tool] running files__read");
        }
    }
    printer.message(&assistant(answer));
    assert_eq!(
        plain(&shown),
        "assistant:\nSome bold text.\n[tool] running files__read\nassistant (continued):\n\n• one\n\
         • two\n\n┌─ sh\n│ ls\n└─\n\nEnd.\n"
    );
    assert!(
        shown.lock().unwrap().contains("\x1b[1mbold"),
        "bold on a terminal"
    );
}

#[test]
fn a_running_tools_output_prints_its_whole_lines_once() {
    let (mut printer, shown) = captured(false);
    let activity = |text: &str, total: u64| SessionActivity {
        active_tool: Some("commands__exec".to_owned()),
        tool_output: Some(shiitake_protocol::ToolOutput {
            tool: "commands__exec".to_owned(),
            text: text.to_owned(),
            total_bytes: total,
        }),
        ..SessionActivity::default()
    };
    printer.activity(&activity("one\ntw", 6));
    printer.activity(&activity("one\ntwo\n", 8));
    printer.activity(&activity("one\ntwo\n", 8));
    // Ten bytes the frames no longer hold, then "four".
    printer.activity(&activity("four\n", 23));
    assert_eq!(
        plain(&shown),
        "[tool] running commands__exec\n  | one\n  | two\n  | [10 bytes not shown]\n  | four\n"
    );
}

#[test]
fn an_answer_that_did_not_stream_renders_whole() {
    let (mut printer, shown) = captured(true);
    printer.message(&assistant("# Done\n\n1. a\n2. b"));
    assert_eq!(plain(&shown), "assistant:\n# Done\n\n1. a\n2. b\n");
}

#[test]
fn a_stream_interrupted_by_a_line_starts_over_labelled() {
    // Where the text is printed as written (no colour).
    let (mut printer, shown) = captured(false);
    printer.frame(&progress("Noted B'", 1));
    printer.note("[?] Which database?");
    printer.frame(&progress("Noted B's", 2));
    printer.message(&assistant("Noted B's reply."));
    assert_eq!(
        plain(&shown),
        "assistant: Noted B'\n[?] Which database?\nassistant: Noted B's reply.\n"
    );
}
