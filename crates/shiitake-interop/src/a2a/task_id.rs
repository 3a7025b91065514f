//! A task id names its Session and its run, so that any process finds a task with no
//! table of its own: `<session>.<command>`, where the Session id has `%` written
//! `%25` and `.` written `%2E` (ids are any visible ASCII, so they may hold both).
//! The first `.` is then the separator; the command id follows it as it is. Ids of
//! the usual form (`ses_…`, `cmd_…`) read back unchanged: `ses_01J….cmd_01J…`.
//!
//! The id grants nothing: it is looked up in the caller's own Agent, so a forged one
//! reaches only what the caller could name anyway.

use shiitake_protocol::{CommandId, SessionId};

/// One prompt's run of one Session: an A2A task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskId {
    /// The Session (the task's `contextId`).
    pub session: SessionId,
    /// The accepted prompt whose run the task is.
    pub command: CommandId,
}

/// Why a text is not a task id of this server.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a task id of this agent")]
pub struct NotATaskId(pub String);

impl TaskId {
    /// The task id's text.
    pub fn encode(&self) -> String {
        let mut text =
            String::with_capacity(self.session.as_str().len() + self.command.as_str().len() + 1);
        for c in self.session.as_str().chars() {
            match c {
                '%' => text.push_str("%25"),
                '.' => text.push_str("%2E"),
                c => text.push(c),
            }
        }
        text.push('.');
        text.push_str(self.command.as_str());
        text
    }

    /// Reads a task id back; only the form [`encode`](Self::encode) writes is taken.
    pub fn decode(text: &str) -> Result<Self, NotATaskId> {
        let refuse = || NotATaskId(text.chars().take(300).collect());
        let (session, command) = text.split_once('.').ok_or_else(refuse)?;
        let mut plain = String::with_capacity(session.len());
        let mut rest = session;
        while let Some(at) = rest.find('%') {
            plain.push_str(&rest[..at]);
            let escape = rest.get(at..at + 3).ok_or_else(refuse)?;
            plain.push(match escape {
                "%25" => '%',
                "%2E" => '.',
                _ => return Err(refuse()),
            });
            rest = &rest[at + 3..];
        }
        plain.push_str(rest);
        Ok(Self {
            session: SessionId::new(plain).map_err(|_| refuse())?,
            command: CommandId::new(command).map_err(|_| refuse())?,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    fn task(session: &str, command: &str) -> TaskId {
        TaskId {
            session: SessionId::new(session).unwrap(),
            command: CommandId::new(command).unwrap(),
        }
    }

    #[test]
    fn usual_ids_read_plainly_and_odd_ones_are_escaped() {
        assert_eq!(task("ses_1", "cmd_2").encode(), "ses_1.cmd_2");
        assert_eq!(task("a.b%c", "d.e").encode(), "a%2Eb%25c.d.e");
        assert_eq!(
            TaskId::decode("a%2Eb%25c.d.e").unwrap(),
            task("a.b%c", "d.e")
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for text in [
            "",
            "ses_1",
            ".cmd",
            "ses_1.",
            "a%2.b",
            "a%41.b",
            "a%.b",
            "ses 1.cmd",
            "s.c d",
        ] {
            assert!(TaskId::decode(text).is_err(), "{text:?}");
        }
        let long = format!("{}.cmd", "s".repeat(129));
        assert!(TaskId::decode(&long).is_err());
    }

    proptest! {
        #[test]
        fn every_pair_of_ids_reads_back(session in "[!-~]{1,128}", command in "[!-~]{1,128}") {
            let id = task(&session, &command);
            let text = id.encode();
            prop_assert_eq!(TaskId::decode(&text).unwrap(), id);
        }

        #[test]
        fn whatever_reads_is_written_back_the_same(text in "[!-~]{0,40}") {
            if let Ok(id) = TaskId::decode(&text) {
                prop_assert_eq!(id.encode(), text);
            }
        }
    }
}
