//! Printing a Session's frames as lines a person can follow.
//!
//! Text from the model and from tools goes through [`style::inert`] first, so
//! it cannot drive the terminal; only our own labels carry colour, and the
//! [`Sink`] drops it where colour is off.
//!
//! Where the sink shows colour (a terminal without `NO_COLOR`), assistant text is
//! rendered as Markdown ([`markdown`]) under an `assistant:` line of its own, and a
//! streamed answer prints only lines that are final ([`markdown_stream`]); a line of
//! ours printed in between is followed by `assistant (continued):`. Elsewhere (a
//! pipe, a file, `NO_COLOR`) the text is printed as the model wrote it, as it streams.
//!
//! This folder is what the terminal is shown, shared by `chat`, `watch` and
//! `sessions`: the [`Printer`] here, [`footer`] (what the extensions show of a Session,
//! one line each), [`markdown`] with [`markdown_stream`] and [`highlight`] (answers
//! for a terminal) and [`style`] (untrusted text made inert, our colours).

mod command_result;
mod footer;
mod highlight;
mod markdown;
mod markdown_stream;
pub mod style;

use std::io::Write;

use anstream::ColorChoice;

use shiitake_protocol::message::{InputContent, UserContent};
use shiitake_protocol::{
    Message, QueueState, SessionActivity, SessionFrame, SessionMessage, SessionSnapshot,
    SessionTerminal, TerminalOutcome,
};

use markdown::render_lines;
use markdown_stream::MarkdownStream;
use style::{BAD, FOOTER, GOOD, LABEL, NOTE, TOOL, WARN, inert, inert_line, paint};

/// Where printed text goes.
#[derive(Default)]
pub enum Sink {
    /// Standard output through `anstream`: colour only on a terminal without `NO_COLOR`.
    #[default]
    Stdout,
    /// Above the line being edited (rustyline's external printer), whole lines at a time.
    Editor(EditorSink),
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::Stdout => f.write_str("Stdout"),
            Sink::Editor(_) => f.write_str("Editor"),
        }
    }
}

/// Output for the line editor: it can only print whole lines above the prompt.
pub struct EditorSink {
    printer: Box<dyn rustyline::ExternalPrinter + Send>,
    partial: String,
    colour: bool,
}

impl EditorSink {
    /// Prints through `printer`, with colour when stdout would show it.
    pub fn new(printer: Box<dyn rustyline::ExternalPrinter + Send>) -> Self {
        let colour = anstream::AutoStream::choice(&std::io::stdout()) != ColorChoice::Never;
        Self {
            printer,
            partial: String::new(),
            colour,
        }
    }

    /// An editor sink with colour (and so Markdown) on or off, whatever stdout is.
    #[cfg(test)]
    fn with_colour(printer: Box<dyn rustyline::ExternalPrinter + Send>, colour: bool) -> Self {
        Self {
            colour,
            ..Self::new(printer)
        }
    }

    fn write(&mut self, text: &str) {
        self.partial.push_str(text);
        let Some(end) = self.partial.rfind('\n') else {
            return;
        };
        let rest = self.partial.split_off(end + 1);
        let mut lines = std::mem::replace(&mut self.partial, rest);
        if !self.colour {
            lines = anstream::adapter::strip_str(&lines).to_string();
        }
        // A terminal that went away is not worth failing a run over.
        let _ignored = self.printer.print(lines);
    }
}

/// What has been printed so far, so streamed text is printed once.
#[derive(Debug, Default)]
pub struct Printer {
    /// Where it goes.
    pub sink: Sink,
    /// Text of the assistant message being streamed, as printed.
    streamed: String,
    /// Whether a streamed line is open (no newline yet).
    open_line: bool,
    /// Last tool announced as running.
    tool: Option<String>,
    /// Bytes of the running tool's output printed so far (whole lines only).
    tool_bytes: u64,
    /// Some of the running tool's output was printed while it ran.
    streamed_output: bool,
    /// Last retry announced, by attempt.
    retry: Option<u32>,
    /// Also print user messages (for `watch`; `chat` echoes its own input).
    pub show_user: bool,
    /// The queue state after the last frame.
    pub queue: QueueState,
    /// Pending prompts after the last frame.
    pending: usize,
    /// The footer last printed, so an unchanged one is not printed again.
    footer: Vec<String>,
    /// Whether assistant text is rendered as Markdown: the sink shows colour
    /// (decided at the first answer, once the sink is set).
    rendering: Option<bool>,
    /// The streamed assistant message's Markdown, when rendering.
    markdown: MarkdownStream,
    /// A line of ours was printed under the rendered stream since its last lines.
    interrupted: bool,
}

impl Sink {
    /// Whether what is written here shows colour.
    fn colour(&self) -> bool {
        match self {
            Sink::Stdout => anstream::AutoStream::choice(&std::io::stdout()) != ColorChoice::Never,
            Sink::Editor(editor) => editor.colour,
        }
    }

    fn write(&mut self, text: &str) {
        match self {
            Sink::Stdout => {
                let mut stdout = anstream::stdout().lock();
                // A closed stdout (a pipe that went away) is not worth failing a run over.
                let _ignored = stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush());
            }
            Sink::Editor(editor) => editor.write(text),
        }
    }
}

impl Printer {
    fn out(&mut self, text: &str) {
        self.sink.write(text);
    }

    /// Prints one line of our own (not model or tool text).
    pub fn note(&mut self, text: &str) {
        self.line(&paint(NOTE, text));
    }

    /// Ends an open streamed line. Any other line printed under it interrupts the
    /// stream, so the rest of the message starts over on a labelled line of its own
    /// instead of continuing bare under whatever came between.
    fn close_line(&mut self) {
        if self.open_line {
            self.out("\n");
            self.open_line = false;
            self.streamed.clear();
        }
    }

    fn line(&mut self, text: &str) {
        self.close_line();
        if !self.streamed.is_empty() && self.rendering == Some(true) {
            self.interrupted = true;
        }
        self.out(&format!("{text}\n"));
    }

    /// Whether assistant text is rendered as Markdown.
    fn rendering(&mut self) -> bool {
        let sink = &self.sink;
        *self.rendering.get_or_insert_with(|| {
            let colour = sink.colour();
            if colour {
                highlight::warm_up();
            }
            colour
        })
    }

    /// Prints rendered Markdown lines, relabelled after a line of ours came between.
    fn rendered(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut text = String::new();
        if std::mem::take(&mut self.interrupted) {
            text.push_str(&paint(LABEL, "assistant (continued):"));
            text.push('\n');
        }
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        self.out(&text);
    }

    /// A rendered answer starts: its label on a line of its own.
    fn rendered_label(&mut self) {
        self.close_line();
        self.out(&format!("{}\n", paint(LABEL, "assistant:")));
        self.interrupted = false;
    }

    /// The streamed text grew to `text` (rendering): prints what became final.
    fn rendered_progress(&mut self, text: &str) {
        if !text.starts_with(&self.streamed) || text.len() <= self.streamed.len() {
            return;
        }
        if self.streamed.is_empty() {
            self.rendered_label();
        }
        text.clone_into(&mut self.streamed);
        let lines = self.markdown.advance(text);
        self.rendered(&lines);
    }

    /// Prints the extensions' footer rows (and stopped extensions) when they changed.
    fn footer(
        &mut self,
        rows: &[shiitake_protocol::footer::FooterRowV0],
        slots: &shiitake_protocol::SessionExtensionSlots,
    ) {
        let lines = footer::lines(rows, slots);
        if lines != self.footer {
            for line in &lines {
                self.line(&paint(FOOTER, &format!("  {line}")));
            }
            self.footer = lines;
        }
    }

    /// Whether nothing runs once `update` is applied: a footer change then shows at once
    /// (a question answered, a plan cleared), not only after the next run.
    fn idle_after(&self, update: &shiitake_protocol::UpdateFrame) -> bool {
        matches!(update.activity.queue, QueueState::Idle)
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
                self.line(&paint(
                    TOOL,
                    &format!("[tool] running {}", inert_line(tool)),
                ));
            }
            self.tool = activity.active_tool.clone();
            self.tool_bytes = 0;
            self.streamed_output = false;
        }
        if let Some(output) = &activity.tool_output
            && self.tool.as_deref() == Some(output.tool.as_str())
        {
            self.tool_output(output);
        }
        match &activity.retry {
            Some(retry) if self.retry != Some(retry.attempt) => {
                self.line(&paint(
                    NOTE,
                    &format!(
                        "[retry] attempt {}/{} in {} ms: {}",
                        retry.attempt,
                        retry.max_attempts,
                        retry.delay_ms,
                        inert_line(&retry.error_message)
                    ),
                ));
                self.retry = Some(retry.attempt);
            }
            Some(_) => {}
            None => self.retry = None,
        }
    }

    /// Prints the whole lines of a running tool's output not printed yet, each under
    /// `  | `; what the frames no longer held is counted, not printed.
    fn tool_output(&mut self, output: &shiitake_protocol::ToolOutput) {
        let fresh = output.total_bytes.saturating_sub(self.tool_bytes);
        if fresh == 0 {
            return;
        }
        let text = output.text.as_str();
        let held = usize::try_from(fresh).unwrap_or(usize::MAX).min(text.len());
        let mut start = text.len() - held;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        let new = &text[start..];
        // Only whole lines: the rest waits for its newline.
        let Some(end) = new.rfind('\n') else {
            return;
        };
        let missed = fresh - held as u64;
        if missed > 0 {
            self.line(&paint(NOTE, &format!("  | [{missed} bytes not shown]")));
        }
        for line in new[..end].split('\n') {
            self.line(&paint(NOTE, &format!("  | {}", inert_line(line))));
        }
        self.streamed_output = true;
        let unprinted = (new.len() - end - 1) as u64;
        self.tool_bytes = output.total_bytes - unprinted;
    }

    fn message(&mut self, message: &SessionMessage) {
        match &message.value {
            Message::User(user) => {
                if self.show_user {
                    let text = match &user.content {
                        UserContent::Text(text) => inert(text).into_owned(),
                        UserContent::Blocks(_) => "[blocks]".to_owned(),
                    };
                    self.line(&format!("{} {text}", paint(LABEL, "you:")));
                }
            }
            Message::Assistant(assistant) => {
                let text = assistant.text();
                if self.rendering() && !text.is_empty() {
                    let lines = if !self.streamed.is_empty() && text.starts_with(&self.streamed) {
                        self.markdown.finish(&text)
                    } else {
                        self.rendered_label();
                        render_lines(&text)
                    };
                    self.rendered(&lines);
                } else if !self.streamed.is_empty() && text.starts_with(&self.streamed) {
                    let rest = inert(&text[self.streamed.len()..]).into_owned();
                    self.out(&rest);
                    self.open_line = true;
                    self.close_line();
                } else if !text.is_empty() {
                    self.line(&format!("{} {}", paint(LABEL, "assistant:"), inert(&text)));
                } else if assistant.tool_calls().next().is_none() {
                    // An empty answer is shown as such, never as silence.
                    self.line(&format!(
                        "{} {}",
                        paint(LABEL, "assistant:"),
                        paint(NOTE, "(no text)")
                    ));
                }
                self.streamed.clear();
                self.markdown = MarkdownStream::default();
                self.interrupted = false;
                for call in assistant.tool_calls() {
                    let arguments = serde_json::Value::Object(call.arguments.clone()).to_string();
                    self.line(&paint(
                        TOOL,
                        &format!(
                            "[tool call] {}({})",
                            inert_line(&call.name),
                            inert_line(&arguments)
                        ),
                    ));
                }
                if let Some(error) = &assistant.error_message {
                    self.line(&paint(BAD, &format!("[model error] {}", inert_line(error))));
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
                let failed = if result.is_error { " (error)" } else { "" };
                let label = format!("[tool result] {}{failed}:", inert_line(&result.tool_name));
                let style = if result.is_error { BAD } else { TOOL };
                let command = (!result.is_error && result.tool_name == "commands__exec")
                    .then(|| command_result::lines(&text))
                    .flatten();
                if let Some((summary, output)) = command {
                    self.line(&format!(
                        "{} {}",
                        paint(style, &label),
                        inert_line(&summary)
                    ));
                    // What streamed while it ran is not shown twice.
                    if !std::mem::take(&mut self.streamed_output) {
                        for line in output {
                            self.line(&paint(NOTE, &inert_line(&line)));
                        }
                    }
                    return;
                }
                let short: String = text.chars().take(200).collect();
                self.line(&format!("{} {}", paint(style, &label), inert_line(&short)));
            }
        }
    }

    fn terminal(&mut self, terminal: &SessionTerminal) {
        let (outcome, style) = match terminal.outcome {
            TerminalOutcome::Completed => ("completed", GOOD),
            TerminalOutcome::Cancelled => ("cancelled", WARN),
            TerminalOutcome::Failed => ("failed", BAD),
            TerminalOutcome::Interrupted => ("interrupted", WARN),
        };
        let label = paint(style, &format!("[run {outcome}]"));
        match &terminal.diagnostic {
            Some(diagnostic) => self.line(&format!("{label} {}", inert_line(diagnostic))),
            None => self.line(&label),
        }
    }

    /// Prints a baseline: its last `recent` messages, then its state.
    pub fn snapshot(&mut self, snapshot: &SessionSnapshot, recent: usize) {
        // Decided now, so the highlighter loads while the person types.
        self.rendering();
        let skip = snapshot.messages.len().saturating_sub(recent);
        for message in &snapshot.messages[skip..] {
            self.message(message);
        }
        self.pending = snapshot.pending.prompts.len();
        self.activity(&snapshot.activity);
        self.footer(&snapshot.footer, &snapshot.extensions);
        if let Some(progress) = &snapshot.progress
            && self.rendering()
        {
            self.rendered_progress(&progress.text);
        } else if let Some(progress) = &snapshot.progress {
            let shown = format!("{} {}", paint(LABEL, "assistant:"), inert(&progress.text));
            self.out(&shown);
            self.streamed = progress.text.clone();
            self.open_line = true;
        }
    }

    /// Prints one frame.
    pub fn frame(&mut self, frame: &SessionFrame) {
        match frame {
            SessionFrame::Progress(progress) if self.rendering() => {
                self.rendered_progress(&progress.progress.text);
                self.activity(&progress.activity);
            }
            SessionFrame::Progress(progress) => {
                let text = &progress.progress.text;
                if text.starts_with(&self.streamed) && text.len() > self.streamed.len() {
                    if self.streamed.is_empty() {
                        self.close_line();
                        self.out(&format!("{} ", paint(LABEL, "assistant:")));
                    }
                    // The check above makes `streamed` a prefix of `text`: append the rest.
                    let suffix = &text[self.streamed.len()..];
                    let shown = inert(suffix).into_owned();
                    self.out(&shown);
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
                if !update.terminals.is_empty()
                    || self.idle_after(update)
                    || asks_the_person(update)
                {
                    self.footer(&update.footer, &update.extensions);
                }
                self.pending = update.pending.prompts.len();
                self.activity(&update.activity);
            }
            SessionFrame::Reset(reset) => {
                self.note("[reset] history moved on; showing the latest state");
                self.streamed.clear();
                self.markdown = MarkdownStream::default();
                self.snapshot(&reset.baseline, 5);
            }
        }
    }
}

/// Whether `update`'s footer holds a row in attention: something waits on the person
/// now (a tool call waiting for approval), so the footer shows during the run, not
/// only after it.
fn asks_the_person(update: &shiitake_protocol::UpdateFrame) -> bool {
    update
        .footer
        .iter()
        .any(|row| row.tone == shiitake_protocol::footer::FooterTone::Attention)
}

#[cfg(test)]
mod tests;
