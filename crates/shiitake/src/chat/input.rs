//! Where `chat` reads lines from: a line editor on a terminal, plain lines from a pipe.
//!
//! On a terminal (stdin and stdout both), `rustyline` edits the line with
//! history kept in `<data-dir>/chat_history`, and everything the chat prints
//! goes above the prompt through its external printer ([`Sink::Editor`]).
//! The editor runs on its own thread, since it blocks; after each line it
//! waits for [`Input::resume`], so it never reads while the chat is deciding
//! whether to leave (a process that exits mid-read would leave the terminal
//! raw). Ctrl-C while editing arrives as [`Event::Interrupt`].
//!
//! Anything else (a pipe, a file) is read line by line as before: no prompt,
//! no editing, no colour.

use std::io::IsTerminal;
use std::path::PathBuf;

use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config, Editor};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::render::{EditorSink, Sink};

/// What the person did.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A line was entered.
    Line(String),
    /// Ctrl-C in the editor (outside it, Ctrl-C is a signal).
    Interrupt,
}

/// The source of typed lines.
pub struct Input {
    events: mpsc::Receiver<Event>,
    /// The editor thread waits on this after each event: `true` reads on, `false` ends it.
    resume: Option<std::sync::mpsc::Sender<bool>>,
    /// The editor thread, joined on close so its history is saved.
    thread: Option<std::thread::JoinHandle<()>>,
    /// An event was handed out and the editor waits for `resume`.
    waiting: bool,
}

const PROMPT: &str = "> ";

impl Input {
    /// Opens the editor when stdin and stdout are a terminal, else reads stdin as lines.
    ///
    /// Returns the input and where the chat should print.
    pub fn open(history: Option<PathBuf>) -> (Self, Sink) {
        let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if terminal && let Some((input, sink)) = Self::editor(history) {
            return (input, sink);
        }
        (Self::lines(), Sink::Stdout)
    }

    fn lines() -> Self {
        let (tx, events) = mpsc::channel(16);
        tokio::spawn(async move {
            let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = stdin.next_line().await {
                if tx.send(Event::Line(line)).await.is_err() {
                    break;
                }
            }
        });
        Self {
            events,
            resume: None,
            thread: None,
            waiting: false,
        }
    }

    /// The line editor, or `None` when the terminal cannot host it (then lines are read plainly).
    fn editor(history: Option<PathBuf>) -> Option<(Self, Sink)> {
        let config = Config::builder().auto_add_history(true).build();
        let mut editor: Editor<(), FileHistory> = Editor::with_config(config).ok()?;
        let printer = editor.create_external_printer().ok()?;
        if let Some(path) = &history {
            // A first run has no history yet; any other failure only loses history.
            let _missing_is_fine = editor.load_history(path);
        }
        let (tx, events) = mpsc::channel(16);
        let (resume_tx, resume_rx) = std::sync::mpsc::channel::<bool>();
        let thread = std::thread::spawn(move || {
            loop {
                let event = match editor.readline(PROMPT) {
                    Ok(line) => Event::Line(line),
                    Err(ReadlineError::Interrupted) => Event::Interrupt,
                    Err(ReadlineError::Eof) => break,
                    Err(error) => {
                        eprintln!("[input] {error}");
                        break;
                    }
                };
                if tx.blocking_send(event).is_err() || !resume_rx.recv().unwrap_or(false) {
                    break;
                }
            }
            if let Some(path) = &history
                && let Err(error) = editor.save_history(path)
            {
                eprintln!("[input] history not saved to {}: {error}", path.display());
            }
        });
        let input = Self {
            events,
            resume: Some(resume_tx),
            thread: Some(thread),
            waiting: false,
        };
        Some((input, Sink::Editor(EditorSink::new(Box::new(printer)))))
    }

    /// Whether lines come from the line editor on a terminal (not a pipe).
    pub fn is_terminal(&self) -> bool {
        self.resume.is_some()
    }

    /// Whether the editor is reading a line now (so leaving must wait for it to return).
    pub fn editing(&self) -> bool {
        self.resume.is_some()
            && !self.waiting
            && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The next event; `None` once input has ended (end of file, Ctrl-D).
    pub async fn next(&mut self) -> Option<Event> {
        let event = self.events.recv().await;
        self.waiting = event.is_some() && self.resume.is_some();
        event
    }

    /// Lets the editor read the next line.
    pub fn resume(&mut self) {
        if self.waiting
            && let Some(resume) = &self.resume
        {
            // An editor that already ended needs no answer.
            let _already_ended = resume.send(true);
        }
        self.waiting = false;
    }

    /// Ends the editor (restoring the terminal and saving history); call when no line is being edited.
    pub fn close(mut self) {
        if let Some(resume) = self.resume.take() {
            let _already_ended = resume.send(false);
        }
        if let Some(thread) = self.thread.take()
            && thread.is_finished() | self.waiting
        {
            // It has ended or is ending now: wait for the history to be written.
            let _panicked_thread_is_gone_anyway = thread.join();
        }
    }
}
