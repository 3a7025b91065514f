//! Operator lines accepted while a run was active: they enter the lineage at the
//! run's next model-call boundary, or when it ends. A signal tells the runner
//! whether any wait, so a boundary with nothing to take costs no round trip.

use std::collections::VecDeque;

use shiitake_protocol::CommandId;
use shiitake_protocol::message::Message;
use tokio::sync::watch;

/// One operator line waiting for the boundary.
#[derive(Clone, Debug)]
pub(super) struct WaitingLine {
    pub(super) command_id: CommandId,
    pub(super) message: Message,
}

/// The lines waiting, and the signal raised while there are any.
#[derive(Debug)]
pub(super) struct WaitingLines {
    lines: VecDeque<WaitingLine>,
    signal: watch::Sender<bool>,
}

impl WaitingLines {
    pub(super) fn new() -> Self {
        Self {
            lines: VecDeque::new(),
            signal: watch::Sender::new(false),
        }
    }

    /// Adds lines to wait for the boundary.
    pub(super) fn extend(&mut self, lines: impl IntoIterator<Item = WaitingLine>) {
        self.lines.extend(lines);
        if !self.lines.is_empty() {
            self.signal.send_replace(true);
        }
    }

    /// Adds one line to wait for the boundary.
    pub(super) fn push(&mut self, line: WaitingLine) {
        self.extend(std::iter::once(line));
    }

    /// Forgets every line: they were committed.
    pub(super) fn clear(&mut self) {
        self.lines.clear();
        self.signal.send_replace(false);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &WaitingLine> {
        self.lines.iter()
    }

    /// For a run: raised while lines wait.
    pub(super) fn signal(&self) -> watch::Receiver<bool> {
        self.signal.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use shiitake_protocol::message::UserMessage;

    use super::*;

    fn line(n: usize) -> WaitingLine {
        WaitingLine {
            command_id: CommandId::new(format!("cmd_{n}")).unwrap(),
            message: Message::User(UserMessage::text(format!("line {n}"), 0)),
        }
    }

    #[test]
    fn the_signal_is_raised_exactly_while_lines_wait() {
        let mut waiting = WaitingLines::new();
        let signal = waiting.signal();
        assert!(!*signal.borrow());
        waiting.extend(Vec::new());
        assert!(!*signal.borrow(), "nothing added, nothing raised");
        waiting.push(line(1));
        assert!(*signal.borrow());
        waiting.extend([line(2), line(3)]);
        assert_eq!(waiting.iter().count(), 3);
        waiting.clear();
        assert!(!*signal.borrow());
        assert!(waiting.is_empty());
    }
}
