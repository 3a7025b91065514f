//! `shiitake chat` renders a Markdown answer for a terminal and keeps it as written
//! elsewhere: on a pseudo-terminal (a real pty, read back through a terminal
//! emulator, `vt100`) the screen shows bold without asterisks, bullets, a code block
//! set apart and coloured, an aligned table and a link's address; piped, or with
//! `NO_COLOR` on the terminal, the lines are the model's Markdown. The rendered
//! screen is saved to `<target>/tmp/chat-markdown/screen.txt`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shiitake_model::Turn;

use crate::support::{binary, chat};

const ANSWER: &str = "The file says **hello world**.\n\n- one\n- two\n\n\
```rust\nfn main() {}\n```\n\n| name | size |\n|------|-----:|\n| a.txt | 12 |\n\n\
See [the docs](https://example.com/docs).";

/// The answer as `chat` prints it where nothing is rendered: the model's lines.
const AS_WRITTEN: &[&str] = &[
    "assistant: The file says **hello world**.",
    "",
    "- one",
    "- two",
    "",
    "```rust",
    "fn main() {}",
    "```",
    "",
    "| name | size |",
    "|------|-----:|",
    "| a.txt | 12 |",
    "",
    "See [the docs](https://example.com/docs).",
];

/// The answer as a terminal shows it.
const RENDERED: &[&str] = &[
    "assistant:",
    "The file says hello world.",
    "",
    "• one",
    "• two",
    "",
    "┌─ rust",
    "│ fn main() {}",
    "└─",
    "",
    "name  │ size",
    "──────┼─────",
    "a.txt │   12",
    "",
    "See the docs (https://example.com/docs).",
];

/// How long the chat may take to show something.
const SHOWN: Duration = Duration::from_secs(60);

fn chat_command(url: &str, dir: &std::path::Path) -> Command {
    let mut command = Command::new(binary());
    command
        .args(["--url", url, "--token", chat::TOKEN, "--data-dir"])
        .arg(dir.join("cli"))
        .arg("chat")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("COLORTERM")
        .env("TERM", "xterm-256color");
    command
}

/// The lines of `printed` from the answer's first line on, `lines` long.
fn answer_lines(printed: &[String], first: &str, lines: usize) -> Vec<String> {
    let at = printed
        .iter()
        .position(|line| line.trim_end() == first)
        .unwrap_or_else(|| panic!("no line {first:?} in:\n{}", printed.join("\n")));
    printed[at..(at + lines).min(printed.len())]
        .iter()
        .map(|line| line.trim_end().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_chat_prints_the_answer_as_written() {
    let (url, _agent, dir) = chat::served(vec![Turn::text(ANSWER)], |agent| agent).await;
    // No NO_COLOR here: stdout being a pipe is what keeps the text plain.
    let mut child = chat_command(&url, dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "Read notes.txt").unwrap();
    drop(stdin);
    let stdout = child.stdout.take().unwrap();
    let printed: Vec<String> = BufReader::new(stdout).lines().map(Result::unwrap).collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        answer_lines(&printed, AS_WRITTEN[0], AS_WRITTEN.len()),
        AS_WRITTEN
    );
    assert!(
        !printed.concat().contains('\x1b'),
        "no escape codes in a pipe: {printed:?}"
    );
}

/// `chat` on a pseudo-terminal and the screen it draws.
struct Terminal {
    child: Child,
    master: std::fs::File,
    screen: Arc<Mutex<vt100::Parser>>,
    output: Receiver<()>,
}

const ROWS: u16 = 80;
const COLS: u16 = 100;

impl Terminal {
    fn start(mut command: Command) -> Self {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master: OwnedFd = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let size = rustix::termios::Winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, size).unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        let child = command
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .unwrap();
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
        let (tx, output) = channel();
        let mut reader = master.try_clone().unwrap();
        let mut answerer = master.try_clone().unwrap();
        let parser = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            while let Ok(read) = reader.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                let chunk = &buffer[..read];
                let mut parser = parser.lock().unwrap();
                parser.process(chunk);
                // A line editor may ask where the cursor is; a terminal answers.
                if chunk.windows(4).any(|w| w == b"\x1b[6n") {
                    let (row, col) = parser.screen().cursor_position();
                    let reply = format!("\x1b[{};{}R", row + 1, col + 1);
                    drop(answerer.write_all(reply.as_bytes()));
                }
                drop(parser);
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            master,
            screen,
            output,
        }
    }

    fn lines(&self) -> Vec<String> {
        let parser = self.screen.lock().unwrap();
        parser.screen().rows(0, COLS).collect()
    }

    /// Waits until the screen shows `needle`.
    fn wait_for(&self, needle: &str) {
        let deadline = Instant::now() + SHOWN;
        loop {
            if self.lines().iter().any(|line| line.contains(needle)) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.output.recv_timeout(left).is_err() {
                // Timed out, or the terminal closed: one last look.
                assert!(
                    self.lines().iter().any(|line| line.contains(needle)),
                    "{needle:?} never showed:\n{}",
                    self.lines().join("\n")
                );
                return;
            }
        }
    }

    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }

    /// The cell under the first `needle` on screen.
    fn cell_at(&self, needle: &str) -> vt100::Cell {
        let lines = self.lines();
        let (row, col) = lines
            .iter()
            .enumerate()
            .find_map(|(row, line)| {
                line.find(needle)
                    .map(|at| (row, line[..at].chars().count()))
            })
            .unwrap_or_else(|| panic!("{needle:?} not on screen"));
        let parser = self.screen.lock().unwrap();
        parser
            .screen()
            .cell(u16::try_from(row).unwrap(), u16::try_from(col).unwrap())
            .unwrap()
            .clone()
    }

    /// Leaves the chat and waits for the process to end.
    fn quit(mut self) {
        self.type_line("/quit");
        let deadline = Instant::now() + SHOWN;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return;
            }
            // It may ask for Enter to leave the line editor cleanly.
            if self
                .lines()
                .iter()
                .any(|line| line.contains("press Enter to leave"))
            {
                self.type_line("");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "chat did not leave:\n{}",
                self.lines().join("\n")
            );
            // Output or a short tick, whichever comes first, then look again.
            let _output_or_tick = self
                .output
                .recv_timeout(left.min(Duration::from_millis(100)));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_on_a_terminal_renders_the_markdown() {
    let (url, _agent, dir) = chat::served(vec![Turn::text(ANSWER)], |agent| agent).await;
    let mut terminal = Terminal::start(chat_command(&url, dir.path()));
    terminal.wait_for("type a message");
    terminal.type_line("Read notes.txt");
    terminal.wait_for("[run completed]");
    let lines = terminal.lines();
    // What the screen shows, for a person to look at (docs/cli.md).
    let artifacts = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chat-markdown");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("screen.txt"), lines.join("\n").trim_end()).unwrap();
    assert_eq!(answer_lines(&lines, RENDERED[0], RENDERED.len()), RENDERED);
    assert!(terminal.cell_at("hello world").bold(), "bold on screen");
    assert!(!terminal.cell_at("The file").bold());
    assert!(
        terminal.cell_at("the docs").underline(),
        "link text underlined"
    );
    assert_ne!(
        terminal.cell_at("fn main").fgcolor(),
        vt100::Color::Default,
        "the named language is coloured"
    );
    assert!(terminal.cell_at("name ").bold(), "the table's head is bold");
    terminal.quit();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_color_on_a_terminal_prints_the_answer_as_written() {
    let (url, _agent, dir) = chat::served(vec![Turn::text(ANSWER)], |agent| agent).await;
    let mut command = chat_command(&url, dir.path());
    command.env("NO_COLOR", "1");
    let mut terminal = Terminal::start(command);
    terminal.wait_for("type a message");
    terminal.type_line("Read notes.txt");
    terminal.wait_for("[run completed]");
    let lines = terminal.lines();
    assert_eq!(
        answer_lines(&lines, AS_WRITTEN[0], AS_WRITTEN.len()),
        AS_WRITTEN
    );
    assert!(!terminal.cell_at("hello world").bold());
    terminal.quit();
}
