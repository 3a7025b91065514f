//! A run's messages in words, for protocols that carry text: its answers, and one
//! line per committed message for progress.

use shiitake_protocol::message::Message;

/// The visible text of an assistant message (thinking and tool calls left out);
/// `None` for any other message.
pub fn assistant_text(message: &Message) -> Option<String> {
    match message {
        Message::Assistant(assistant) => Some(assistant.text()),
        _ => None,
    }
}

/// Longest progress line, in characters.
const MAX_LINE_CHARS: usize = 120;

/// One short line saying what a committed message was: `calling files__read`,
/// `files__read: done`, the first words of an answer.
pub fn message_line(message: &Message) -> String {
    let line = match message {
        Message::User(_) => "prompt accepted".to_owned(),
        Message::Assistant(assistant) => {
            let calls: Vec<&str> = assistant
                .tool_calls()
                .map(|call| call.name.as_str())
                .collect();
            if calls.is_empty() {
                assistant_text(message).unwrap_or_default()
            } else {
                format!("calling {}", calls.join(", "))
            }
        }
        Message::ToolResult(result) if result.is_error => format!("{}: failed", result.tool_name),
        Message::ToolResult(result) => format!("{}: done", result.tool_name),
    };
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}
