//! The Home contract: what clients compile against without the core
//! (`default-features = false`): identity, the durable choice row (which is also its wire
//! shape), the projection, and the `choose` (`/home <name>`) and `seed` commands.

use std::fmt;

use serde::{Deserialize, Serialize};
use shiitake_protocol::{contract_commands, extension_contract};

/// The extension's identity.
pub const EXTENSION_ID: &str = "botanical-agent-home";
/// Its namespace; Home offers no `home.*` model tool, only Knapsack's `files` tools.
pub const NAMESPACE: &str = "home";
/// The scheme of addresses that name a Computer: `computer://<name>/<path>`.
pub const SCHEME: &str = "computer://";
/// The name in `computer://home/` that always means Home; no attachment may take it.
pub const HOME_ALIAS: &str = "home";
/// Longest attachment name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;
/// Longest attachment id, in bytes.
pub const MAX_ATTACHMENT_ID_BYTES: usize = 256;
/// The prompt section names at most this many other attachments, then counts the rest.
pub const PROMPT_NAMES_LISTED: usize = 32;
/// The prompt section always fits in this many bytes (core's section bound), so the host
/// never cuts it.
pub const PROMPT_SECTION_BYTES: usize = 4096;
/// The Agent-scope collection and key of the choice row.
pub const CHOICE_COLLECTION: &str = "choice";
/// See [`CHOICE_COLLECTION`].
pub const CHOICE_KEY: &str = "home";

extension_contract! {
    /// Home as clients see it.
    pub HomeContract = EXTENSION_ID, projection HomeView
}

/// Why a name or id is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// An attachment name breaks its rules.
    #[error(
        "attachment name `{0}` must be 1 to 64 bytes of A-Z, a-z, 0-9, `.`, `_` or `-`, and not `home`"
    )]
    InvalidName(String),
    /// An attachment id breaks its rules.
    #[error("attachment id must be 1 to 256 bytes without control characters")]
    InvalidAttachmentId,
}

/// The host's identity of one attachment (a Computer connected to the Agent); the choice
/// records it, so renaming or reordering attachments never changes Home.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AttachmentId(String);

impl AttachmentId {
    /// Validates `id`: 1 to [`MAX_ATTACHMENT_ID_BYTES`] bytes, no control character.
    pub fn new(id: impl Into<String>) -> Result<Self, ContractError> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_ATTACHMENT_ID_BYTES || id.chars().any(char::is_control) {
            return Err(ContractError::InvalidAttachmentId);
        }
        Ok(Self(id))
    }
}

/// The name a person types (`/home <name>`) and the model writes (`computer://<name>/`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AttachmentName(String);

impl AttachmentName {
    /// Validates `name`: 1 to [`MAX_NAME_BYTES`] bytes of `A-Z a-z 0-9 . _ -`, and not
    /// [`HOME_ALIAS`] in any case.
    pub fn new(name: impl Into<String>) -> Result<Self, ContractError> {
        let name = name.into();
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            && !name.eq_ignore_ascii_case(HOME_ALIAS);
        if valid {
            Ok(Self(name))
        } else {
            Err(ContractError::InvalidName(name))
        }
    }
}

// What both checked texts share: serde's `try_from`/`into` go through `new`, so a wire
// value is checked as a constructed one is.
macro_rules! checked_text {
    ($($name:ident),*) => {$(
        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = ContractError;
            fn try_from(text: String) -> Result<Self, Self::Error> {
                Self::new(text)
            }
        }

        impl From<$name> for String {
            fn from(text: $name) -> Self {
                text.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )*};
}

checked_text!(AttachmentId, AttachmentName);

/// The one recorded Agent-scope choice: the durable row and its wire shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeChoice {
    /// The chosen attachment; it may be detached now.
    pub attachment_id: AttachmentId,
    /// Who recorded it.
    pub by: ChoiceSource,
    /// Unix milliseconds when it was recorded.
    pub at: u64,
}

/// Who recorded the choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceSource {
    /// A person, with `/home <name>`.
    Person,
    /// A run, which found no choice and exactly one attachment.
    Adopted,
    /// The host's `seed` migration, which found no choice.
    Seed,
}

/// What every Session shows of Home (the choice is the Agent's, the attachments the host's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeView {
    /// Where Home stands now; the next run captures it.
    pub home: HomeState,
    /// The recorded choice, if any.
    pub choice: Option<HomeChoice>,
    /// The attachments in the host's order (duplicates left out).
    pub attachments: Vec<AttachmentView>,
    /// Attachments left out of the table, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<AttachmentProblem>,
}

/// Where Home stands, given the choice and the current attachments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum HomeState {
    /// The chosen attachment is attached: runs get file tools on it.
    #[serde(rename_all = "camelCase")]
    Chosen {
        /// The attachment.
        attachment_id: AttachmentId,
        /// Its current name.
        name: AttachmentName,
    },
    /// The chosen attachment is not attached: no file tools until it returns or a person
    /// chooses again.
    #[serde(rename_all = "camelCase")]
    Detached {
        /// The attachment.
        attachment_id: AttachmentId,
    },
    /// No choice and exactly one attachment: the next run adopts it.
    #[serde(rename_all = "camelCase")]
    Adoptable {
        /// The attachment.
        attachment_id: AttachmentId,
        /// Its name.
        name: AttachmentName,
    },
    /// No choice and zero or several attachments: a person chooses with `/home <name>`.
    Unchosen {
        /// How many attachments there are.
        attached: usize,
    },
}

/// One attachment as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentView {
    /// Its name.
    pub name: AttachmentName,
    /// Its id.
    pub attachment_id: AttachmentId,
    /// Whether its port has a native patch engine (apply_patch when it is Home).
    pub patch: bool,
}

/// An attachment left out of the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentProblem {
    /// Its name.
    pub name: AttachmentName,
    /// Its id.
    pub attachment_id: AttachmentId,
    /// Why it was left out.
    pub problem: AttachmentRule,
}

/// Why an attachment was left out of the table; the earlier one in the host's order stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentRule {
    /// An earlier attachment has the same name.
    DuplicateName,
    /// An earlier attachment has the same id.
    DuplicateId,
}

/// `/home <name>`: a person chooses Home among the current attachments. A Session command
/// that changes Agent state: every Session's next run sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Choose {
    /// The attachment's current name.
    pub name: String,
}

contract_commands!(HomeContract { Choose => "choose" in SessionScope -> HomeChoice });

/// Ends a background job of this Session (the footer's *Kill* on a job row, `/kill`):
/// the job is asked to end at once, as `jobs__kill` ends it, without waiting for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KillJob {
    /// The job's id (`job-…`).
    pub job: String,
    /// The Computer it runs on, by name.
    pub computer: String,
}

/// What `kill_job` did: the job is asked to end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KillRequested {
    /// The job.
    pub job: String,
}

contract_commands!(HomeContract { KillJob => "kill_job" in SessionScope -> KillRequested });

/// The most background jobs a Session's state remembers (the oldest record goes first),
/// so a job the host forgot or lost is still listed.
pub const MAX_JOB_RECORDS: usize = 32;
/// The most job rows a Session's footer shows (running jobs only).
pub const MAX_JOB_ROWS: usize = 8;

/// `/jobs`: the background jobs this Session started, as a person reads them, newest
/// first, each running one with the `/kill` line that ends it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListJobs {}

/// What `list_jobs` answers: at most [`MAX_JOB_RECORDS`] jobs, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    /// The jobs.
    pub jobs: Vec<JobLine>,
}

/// One background job of a Session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobLine {
    /// Its id (`job-…`).
    pub job: String,
    /// The Computer it runs (or ran) on.
    pub computer: String,
    /// What it runs, as the model asked (cut at 200 characters).
    pub command: String,
    /// Where it is.
    #[serde(flatten)]
    pub state: JobState,
    /// The chat line that ends it, while it runs (`/kill <job> <computer>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill: Option<String>,
}

/// Where a background job is, as `/jobs` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum JobState {
    /// It runs.
    Running,
    /// It exited with this status.
    Exited {
        /// The status.
        code: i32,
    },
    /// A signal ended it (a kill, its time limit).
    Signalled {
        /// The signal.
        signal: i32,
    },
    /// It ended in this life of the host, and the host no longer keeps it (newer jobs
    /// took its place): its status and output are gone.
    Forgotten,
    /// The host that ran it stopped (a restart, a takeover): it was killed with it, and
    /// its output is gone.
    Lost,
}

contract_commands!(HomeContract { ListJobs => "list_jobs" in SessionScope -> JobList });

/// The host's unadvertised migration: record an old attachment id only when no choice
/// exists (even if that attachment is detached). It never overwrites a choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Seed {
    /// The attachment the host's older records name.
    pub attachment_id: AttachmentId,
}

contract_commands!(HomeContract { Seed => "seed" in AgentScope -> SeedOutcome });

/// What `seed` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SeedOutcome {
    /// There was no choice; this one is recorded.
    Recorded {
        /// The new choice.
        choice: HomeChoice,
    },
    /// A choice exists and stays.
    Kept {
        /// The existing choice.
        choice: HomeChoice,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_their_rules_at_the_edges() {
        assert!(AttachmentName::new("a".repeat(MAX_NAME_BYTES)).is_ok());
        assert!(AttachmentName::new("a".repeat(MAX_NAME_BYTES + 1)).is_err());
        for bad in ["", "home", "HOME", "a/b", "a b", "é", "a:b"] {
            assert!(AttachmentName::new(bad).is_err(), "{bad}");
        }
        for good in ["build-box", "Work_2", "notes.v1", "homes"] {
            assert!(AttachmentName::new(good).is_ok(), "{good}");
        }
        assert!(serde_json::from_value::<AttachmentName>(json!("home")).is_err());
    }

    #[test]
    fn ids_follow_their_rules_at_the_edges() {
        assert!(AttachmentId::new("i".repeat(MAX_ATTACHMENT_ID_BYTES)).is_ok());
        assert!(AttachmentId::new("i".repeat(MAX_ATTACHMENT_ID_BYTES + 1)).is_err());
        assert!(AttachmentId::new("").is_err());
        assert!(AttachmentId::new("a\nb").is_err());
        assert!(AttachmentId::new("att:01/é").is_ok());
    }

    #[test]
    fn the_view_encodes_with_camel_case_and_state_tags() {
        let view = HomeView {
            home: HomeState::Chosen {
                attachment_id: AttachmentId::new("a-1").unwrap(),
                name: AttachmentName::new("work").unwrap(),
            },
            choice: Some(HomeChoice {
                attachment_id: AttachmentId::new("a-1").unwrap(),
                by: ChoiceSource::Person,
                at: 5,
            }),
            attachments: vec![],
            problems: vec![],
        };
        let value = serde_json::to_value(&view).unwrap();
        assert_eq!(
            value,
            json!({"home": {"state": "chosen", "attachmentId": "a-1", "name": "work"},
                   "choice": {"attachmentId": "a-1", "by": "person", "at": 5},
                   "attachments": []})
        );
        assert_eq!(serde_json::from_value::<HomeView>(value).unwrap(), view);
    }
}
