//! Printing a Session's frames as lines a person can follow.

use std::io::Write;

use shiitake_protocol::message::{InputContent, UserContent};
use shiitake_protocol::{
    Message, QueueState, SessionActivity, SessionFrame, SessionMessage, SessionSnapshot,
    SessionTerminal, TerminalOutcome,
};

/// What has been printed so far, so streamed text is printed once.
#[derive(Debug, Default)]
pub struct Printer {
    /// Text of the assistant message being streamed, as printed.
    streamed: String,
    /// Whether a streamed line is open (no newline yet).
    open_line: bool,
    /// Last tool announced as running.
    tool: Option<String>,
    /// Last retry announced, by attempt.
    retry: Option<u32>,
    /// Also print user messages (for `watch`; `chat` echoes its own input).
    pub show_user: bool,
    /// The queue state after the last frame.
    pub queue: QueueState,
    /// Pending prompts after the last frame.
    pub pending: usize,
}

fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (a pipe that went away) is not worth failing a run over.
    let _ignored = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

impl Printer {
    fn close_line(&mut self) {
        if self.open_line {
            out("\n");
            self.open_line = false;
        }
    }

    fn line(&mut self, text: &str) {
        self.close_line();
        out(&format!("{text}\n"));
    }

    /// Whether the Session has nothing queued or running.
    pub fn idle(&self) -> bool {
        matches!(self.queue, QueueState::Idle) && self.pending == 0
    }

    /// Whether a run is in progress.
    pub fn running(&self) -> bool {
        matches!(self.queue, QueueState::Running { .. })
    }

    fn activity(&mut self, activity: &SessionActivity) {
        self.queue = activity.queue.clone();
        if activity.active_tool != self.tool {
            if let Some(tool) = &activity.active_tool {
                self.line(&format!("[tool] running {tool}"));
            }
            self.tool = activity.active_tool.clone();
        }
        match &activity.retry {
            Some(retry) if self.retry != Some(retry.attempt) => {
                self.line(&format!(
                    "[retry] attempt {}/{} in {} ms: {}",
                    retry.attempt, retry.max_attempts, retry.delay_ms, retry.error_message
                ));
                self.retry = Some(retry.attempt);
            }
            Some(_) => {}
            None => self.retry = None,
        }
    }

    fn message(&mut self, message: &SessionMessage) {
        match &message.value {
            Message::User(user) => {
                if self.show_user {
                    let text = match &user.content {
                        UserContent::Text(text) => text.clone(),
                        UserContent::Blocks(_) => "[blocks]".to_owned(),
                    };
                    self.line(&format!("you: {text}"));
                }
            }
            Message::Assistant(assistant) => {
                let text = assistant.text();
                if !self.streamed.is_empty() && text.starts_with(&self.streamed) {
                    out(&text[self.streamed.len()..]);
                    self.open_line = true;
                    self.close_line();
                } else if !text.is_empty() {
                    self.line(&format!("assistant: {text}"));
                }
                self.streamed.clear();
                for call in assistant.tool_calls() {
                    let arguments = serde_json::Value::Object(call.arguments.clone());
                    self.line(&format!("[tool call] {}({arguments})", call.name));
                }
                if let Some(error) = &assistant.error_message {
                    self.line(&format!("[model error] {error}"));
                }
            }
            Message::ToolResult(result) => {
                let text: String = result
                    .content
                    .iter()
                    .map(|block| match block {
                        InputContent::Text(text) => text.text.clone(),
                        InputContent::Image(_) => "[image]".to_owned(),
                    })
                    .collect();
                let short: String = text.chars().take(200).collect();
                let failed = if result.is_error { " (error)" } else { "" };
                self.line(&format!(
                    "[tool result] {}{failed}: {short}",
                    result.tool_name
                ));
            }
        }
    }

    fn terminal(&mut self, terminal: &SessionTerminal) {
        let outcome = match terminal.outcome {
            TerminalOutcome::Completed => "completed",
            TerminalOutcome::Cancelled => "cancelled",
            TerminalOutcome::Failed => "failed",
            TerminalOutcome::Interrupted => "interrupted",
        };
        match &terminal.diagnostic {
            Some(diagnostic) => self.line(&format!("[run {outcome}] {diagnostic}")),
            None => self.line(&format!("[run {outcome}]")),
        }
    }

    /// Prints a baseline: its last `recent` messages, then its state.
    pub fn snapshot(&mut self, snapshot: &SessionSnapshot, recent: usize) {
        let skip = snapshot.messages.len().saturating_sub(recent);
        for message in &snapshot.messages[skip..] {
            self.message(message);
        }
        self.pending = snapshot.pending.prompts.len();
        self.activity(&snapshot.activity);
        if let Some(progress) = &snapshot.progress {
            out(&format!("assistant: {}", progress.text));
            self.streamed = progress.text.clone();
            self.open_line = true;
        }
    }

    /// Prints one frame.
    pub fn frame(&mut self, frame: &SessionFrame) {
        match frame {
            SessionFrame::Progress(progress) => {
                let text = &progress.progress.text;
                if text.starts_with(&self.streamed) && text.len() > self.streamed.len() {
                    if self.streamed.is_empty() {
                        self.close_line();
                        out("assistant: ");
                    }
                    // The check above makes `streamed` a prefix of `text`: append the rest.
                    let suffix = &text[self.streamed.len()..];
                    out(suffix);
                    self.open_line = true;
                    self.streamed.push_str(suffix);
                }
                self.activity(&progress.activity);
            }
            SessionFrame::Update(update) => {
                for message in &update.messages {
                    self.message(message);
                }
                for terminal in &update.terminals {
                    self.terminal(terminal);
                }
                self.pending = update.pending.prompts.len();
                self.activity(&update.activity);
            }
            SessionFrame::Reset(reset) => {
                self.line("[reset] history moved on; showing the latest state");
                self.streamed.clear();
                self.snapshot(&reset.baseline, 5);
            }
        }
    }
}
