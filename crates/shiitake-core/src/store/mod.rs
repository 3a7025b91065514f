//! The durable store: one small trait, implemented outside core.
//!
//! Core speaks to storage only through [`Store`]. Writes are [`Op`] lists that
//! commit atomically (one [`Store::commit`] call is one transaction, or part of
//! one group commit); reads are bounded queries whose cost follows the page.
//! The trait carries domain rows, never SQL: the SQLite store
//! (`shiitake-store-sqlite`) and the PostgreSQL store (`shiitake-store-postgres`)
//! implement it in crates of their own, on SQL written once for both
//! (`shiitake-store-sql`), so core compiles no database driver.

mod op;
pub mod ownership;
mod words;

pub use op::Op;
pub use ownership::{FencingToken, Ownership};
pub use words::StoredWord;

use async_trait::async_trait;
use serde_json::Value;
use shiitake_protocol::message::Message;
use shiitake_protocol::{
    CommandId, EntryId, EventId, ExtensionId, ModelPreference, RequestId, SessionId,
    SessionInboxState, TerminalOutcome,
};

/// Why the store failed. Backend-neutral: each store turns its driver's errors
/// into these, so core never sees which database it runs on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or failed an operation for a reason that will not pass
    /// by waiting: a constraint the data breaks, a statement the schema cannot run.
    /// (A reason that passes is [`StoreError::Unavailable`].)
    #[error("database: {message}")]
    Database {
        /// What the database said.
        message: String,
        /// A unique index refused the write (an idempotency key already used).
        unique: bool,
    },
    /// Migrations could not be applied.
    #[error("migration: {0}")]
    Migration(String),
    /// A stored row could not be decoded; the message names the row.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The writer task stopped (the Agent is closing).
    #[error("the store is closed")]
    Closed,
    /// A conditional write found the row changed (a timer already claimed).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The commit carried a fencing token the Session's lease no longer has: another
    /// process took the Session over, and nothing of this commit landed.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The store cannot serve now, for a reason that passes: the connection was lost
    /// or refused, the server is restarting or has no connection to spare, the disk is
    /// full, an I/O error, a pool or lock wait ran out. Trying again later may succeed.
    /// A commit that fails so may have landed all the same (a connection can drop
    /// after `COMMIT` was sent), so an owner reads its Session back before going on
    /// (`docs/core.md`, "When the store fails").
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// Whether a unique index refused the write (an idempotency key already used).
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database { unique: true, .. })
    }

    /// Whether the failure passes by waiting ([`StoreError::Unavailable`]): the same
    /// request may succeed later, and a commit that failed so may have landed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// A failure that passes by waiting, with this message.
    pub fn unavailable(message: impl std::fmt::Display) -> Self {
        StoreError::Unavailable(message.to_string())
    }

    /// A failure of the database with this message, not a unique violation.
    pub fn database(message: impl std::fmt::Display) -> Self {
        StoreError::Database {
            message: message.to_string(),
            unique: false,
        }
    }

    /// The same failure, for another caller of a group that failed as a whole.
    pub fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Database { message, unique } => StoreError::Database {
                message: message.clone(),
                unique: *unique,
            },
            StoreError::Migration(message) => StoreError::Migration(message.clone()),
            StoreError::Corrupt(message) => StoreError::Corrupt(message.clone()),
            StoreError::Closed => StoreError::Closed,
            StoreError::Conflict(message) => StoreError::Conflict(message.clone()),
            StoreError::Fenced(message) => StoreError::Fenced(message.clone()),
            StoreError::Unavailable(message) => StoreError::Unavailable(message.clone()),
        }
    }
}

/// The durable header of one Session, written whole with every change.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionHeader {
    /// The Session.
    pub id: SessionId,
    /// Unix milliseconds of creation.
    pub created_at: u64,
    /// Unix milliseconds of the latest command or commit.
    pub last_activity_at: u64,
    /// Unix milliseconds at which the latest work settled.
    pub settled_at: Option<u64>,
    /// Title shown in the inbox.
    pub title: String,
    /// The last sequence taken by a committed change.
    pub head_sequence: u64,
    /// The selected lineage leaf.
    pub leaf: Option<EntryId>,
    /// Grows by one on every branch; cursors of an older epoch cannot be replayed.
    pub epoch: u64,
    /// The model for the next run.
    pub model_preference: Option<ModelPreference>,
    /// Inbox state, kept current so listing needs no derivation.
    pub inbox_state: SessionInboxState,
    /// The lowest id of a command still open (pending or running), `None` when
    /// nothing is: loading reads commands from here, never the settled history
    /// before it. The owner keeps it true with every commit.
    pub open_from: Option<CommandId>,
}

impl SessionHeader {
    /// The header of a Session created at `at` (Unix milliseconds): no lineage, no
    /// title, nothing open. Creating a Session writes exactly this.
    pub fn new(id: SessionId, at: u64) -> Self {
        Self {
            id,
            created_at: at,
            last_activity_at: at,
            settled_at: None,
            title: String::new(),
            head_sequence: 0,
            leaf: None,
            epoch: 0,
            model_preference: None,
            inbox_state: SessionInboxState::Done,
            open_from: None,
        }
    }
}

/// What kind of accepted command a row holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandKind {
    /// A prompt: queued work.
    Prompt,
    /// An operator or party line: appended to the lineage, no run.
    Operator,
}

/// Where an accepted command is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandState {
    /// Accepted, waiting to enter the conversation.
    Pending,
    /// Its prompt entered the conversation and its run has not settled.
    Running,
    /// It has a terminal (or, for an operator line, it was appended).
    Settled,
}

/// One accepted command as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredCommand {
    /// Its id.
    pub id: CommandId,
    /// The caller's idempotency key, when it had one.
    pub request_id: Option<RequestId>,
    /// The extension that admitted it, as JSON `{extensionId, correlation}`.
    pub origin: Option<Value>,
    /// Prompt or operator line.
    pub kind: CommandKind,
    /// The command exactly as accepted (canonical JSON of the `SessionCommand`).
    pub payload: String,
    /// The sequence its acceptance took.
    pub accepted_sequence: u64,
    /// Pending, running or settled.
    pub state: CommandState,
    /// The command whose run absorbed this one (a steer joins the running work).
    pub run_id: Option<CommandId>,
    /// How many times recovery resumed it after a crash.
    pub recoveries: u32,
}

/// One lineage entry as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEntry {
    /// Its id.
    pub id: EntryId,
    /// The entry it follows; `None` for a root.
    pub parent: Option<EntryId>,
    /// The sequence its commit took.
    pub sequence: u64,
    /// The command whose work produced it.
    pub command_id: Option<CommandId>,
    /// The message.
    pub message: Message,
}

/// One settled work item as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredTerminal {
    /// The work item.
    pub command_id: CommandId,
    /// How it ended.
    pub outcome: TerminalOutcome,
    /// The sequence its commit took.
    pub sequence: u64,
    /// What a person should know.
    pub diagnostic: Option<String>,
    /// The lineage leaf when it settled; places it on a lineage.
    pub anchor: Option<EntryId>,
}

/// Where older messages were summarised for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredCompaction {
    /// The marker's id.
    pub id: EventId,
    /// The sequence its commit took.
    pub commit_sequence: u64,
    /// The first entry the model still reads after the summary.
    pub first_kept: EntryId,
    /// The sequence of that entry: the marker sits just before it in the timeline.
    pub precedes_sequence: u64,
    /// Unix milliseconds of the compaction.
    pub at: u64,
    /// What the model reads instead of the entries before `first_kept`.
    pub summary: String,
}

/// A sandbox refused a tool.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSandboxFailure {
    /// The event's id.
    pub id: EventId,
    /// The sequence its commit took.
    pub sequence: u64,
    /// Unix milliseconds.
    pub at: u64,
    /// The operation that was refused.
    pub capability: String,
    /// What the sandbox said.
    pub message: String,
}

/// Where an extension's state lives (re-exported as `extension::StateScope`).
///
/// Defined with the store, which keeps rows of either scope, so the store needs
/// nothing of the extension host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StateScope {
    /// One copy per Session.
    Session,
    /// One copy for the whole Agent.
    Agent,
}

impl StateScope {
    /// Its stored word ([`StoredWord`] holds the pair).
    pub(crate) fn as_str(self) -> &'static str {
        StoredWord::word(self)
    }
}

/// Whose an extension row is: one Session's, or the whole Agent's.
///
/// The typed form of a scope and its id: a Session-scope row always names its
/// Session, and an Agent-scope row names none (stores write the Agent's scope id
/// as they like; both of today's write it empty).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowScope {
    /// State of one Session.
    Session(SessionId),
    /// State of the whole Agent.
    Agent,
}

impl RowScope {
    /// Which of the two scopes this is.
    pub fn kind(&self) -> StateScope {
        match self {
            RowScope::Session(_) => StateScope::Session,
            RowScope::Agent => StateScope::Agent,
        }
    }

    /// The scope id a store keys the row by: the Session id, or empty for the Agent.
    pub fn scope_id(&self) -> &str {
        match self {
            RowScope::Session(session_id) => session_id.as_str(),
            RowScope::Agent => "",
        }
    }

    /// Reads a stored scope and scope id back; a Session scope must name a Session.
    pub fn from_stored(scope: StateScope, scope_id: &str) -> Result<Self, StoreError> {
        match scope {
            StateScope::Agent => Ok(RowScope::Agent),
            StateScope::Session => SessionId::new(scope_id)
                .map(RowScope::Session)
                .map_err(|error| StoreError::Corrupt(format!("row scope id: {error}"))),
        }
    }
}

/// One stored row of an extension's state.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtensionRow {
    /// The Session it belongs to, or the Agent.
    pub scope: RowScope,
    /// The collection.
    pub collection: String,
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
}

/// An extension row as read back, with the extension it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredExtensionRow {
    /// The extension.
    pub extension_id: ExtensionId,
    /// The row.
    pub row: ExtensionRow,
}

/// The stored answer to a human command, so an exact retry answers it again.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtensionReceipt {
    /// The command and input as first received (canonical JSON).
    pub payload: String,
    /// The answer it got.
    pub response: Value,
}

/// An extension's stored revision and state.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtensionStatusRow {
    /// The extension.
    pub extension_id: ExtensionId,
    /// Its revision when last opened.
    pub revision: String,
    /// The schema version of its stored state.
    pub schema_version: u32,
    /// Why it is stopped, if it is.
    pub stopped_reason: Option<String>,
}

/// A durable timer.
#[derive(Clone, Debug, PartialEq)]
pub struct TimerRow {
    /// Its id (a ULID).
    pub id: String,
    /// The extension whose hook it fires.
    pub extension_id: ExtensionId,
    /// The Session, for Session-scope timers.
    pub session_id: Option<SessionId>,
    /// Unix milliseconds.
    pub due_at: u64,
    /// A cron cadence that moves it after each firing.
    pub cadence: Option<String>,
    /// What the extension stored with it.
    pub payload: Value,
    /// Whether it fires a hook or delivers an admission.
    pub kind: TimerKind,
}

/// What a timer row does when it comes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// Runs the extension's timer hook.
    Hook,
    /// Delivers a prompt an extension admitted into a named Session, then runs its
    /// admission hook with the door's answer.
    Admission,
}

/// Attention raised on a Session.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionRow {
    /// The extension that raised it.
    pub extension_id: ExtensionId,
    /// Its kind.
    pub kind: String,
    /// Whether it waits on a person.
    pub inbox: bool,
    /// What to show.
    pub text: String,
}

/// A Session as loaded by its owner: the header and every command not yet settled.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedSession {
    /// The header.
    pub header: SessionHeader,
    /// Pending and running commands in acceptance order.
    pub open_commands: Vec<StoredCommand>,
}

/// One row of the inbox listing as the store sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// Where the row sits in the inbox order; the next page starts after it.
    pub position: ListPosition,
    /// The Session, or `Err` with its id when its row could not be decoded.
    pub header: Result<SessionHeader, SessionId>,
}

/// A position in the inbox order: rank (needs_you, running, settled), newest activity, id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPosition {
    /// 0 needs_you, 1 running, 2 settled.
    pub rank: u8,
    /// Unix milliseconds of the latest activity.
    pub last_activity_at: u64,
    /// The Session; breaks ties.
    pub session_id: SessionId,
}

/// The inbox rank of a state: needs_you first, then running, then everything settled.
pub fn inbox_rank(state: SessionInboxState) -> u8 {
    match state {
        SessionInboxState::NeedsYou => 0,
        SessionInboxState::Running => 1,
        SessionInboxState::Errored | SessionInboxState::Done => 2,
    }
}

/// The durable store behind an Agent.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Commits `ops` atomically: all of them or none.
    async fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError>;

    /// The Session created with `request_id`, if any.
    async fn session_by_request(
        &self,
        request_id: &RequestId,
    ) -> Result<Option<SessionId>, StoreError>;

    /// Loads a Session for its owner; `None` when it does not exist. Every open
    /// command's id is at or after `header.open_from`, and there are none when it is
    /// `None`, so a store need not read the settled history before it.
    async fn load_session(&self, id: &SessionId) -> Result<Option<LoadedSession>, StoreError>;

    /// Deletes a Session and everything in it; `false` when there was none.
    async fn delete_session(&self, id: &SessionId) -> Result<bool, StoreError>;

    /// The command accepted with `request_id` in a Session, if any.
    async fn command_by_request(
        &self,
        session_id: &SessionId,
        request_id: &RequestId,
    ) -> Result<Option<StoredCommand>, StoreError>;

    /// An entry by id.
    async fn entry(
        &self,
        session_id: &SessionId,
        entry_id: &EntryId,
    ) -> Result<Option<StoredEntry>, StoreError>;

    /// The entry whose commit took `sequence`, if it is an entry.
    async fn entry_at(
        &self,
        session_id: &SessionId,
        sequence: u64,
    ) -> Result<Option<StoredEntry>, StoreError>;

    /// Walks the lineage from `from` towards the root: at most `limit` entries, newest first.
    async fn lineage(
        &self,
        session_id: &SessionId,
        from: &EntryId,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError>;

    /// Entries committed strictly after `sequence`, oldest first, at most `limit`.
    async fn entries_after(
        &self,
        session_id: &SessionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredEntry>, StoreError>;

    /// Terminals with a sequence in `(after, up_to]`, oldest first, at most `limit`.
    async fn terminals_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredTerminal>, StoreError>;

    /// Every compaction of a Session, oldest first (there are few).
    async fn compactions(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<StoredCompaction>, StoreError>;

    /// Sandbox failures with a sequence in `(after, up_to]`, oldest first, at most `limit`.
    async fn sandbox_failures_between(
        &self,
        session_id: &SessionId,
        after: u64,
        up_to: u64,
        limit: usize,
    ) -> Result<Vec<StoredSandboxFailure>, StoreError>;

    /// One inbox page: `needs_you`, `running`, then settled, newest activity first.
    async fn list_sessions(
        &self,
        after: Option<&ListPosition>,
        limit: usize,
    ) -> Result<Vec<SummaryRow>, StoreError>;

    /// Sessions that may have pending or running work (their inbox rank is `needs_you`
    /// or `running`), for recovery on open.
    async fn sessions_with_open_work(&self) -> Result<Vec<SessionId>, StoreError>;

    /// Every row of one extension (for migrations), or of every extension in one scope.
    async fn extension_rows(
        &self,
        extension_id: Option<&ExtensionId>,
        scope: Option<&RowScope>,
    ) -> Result<Vec<StoredExtensionRow>, StoreError>;

    /// Every extension's stored status.
    async fn extension_statuses(&self) -> Result<Vec<ExtensionStatusRow>, StoreError>;

    /// The stored answer to a human command of one scope.
    async fn extension_request(
        &self,
        extension_id: &ExtensionId,
        scope: &RowScope,
        request_id: &str,
    ) -> Result<Option<ExtensionReceipt>, StoreError>;

    /// Attention raised on a Session.
    async fn attention(&self, session_id: &SessionId) -> Result<Vec<AttentionRow>, StoreError>;

    /// The timer due soonest, if any.
    async fn next_timer(&self) -> Result<Option<TimerRow>, StoreError>;

    /// Timers due at or before `now`, soonest first, at most `limit`.
    async fn due_timers(&self, now: u64, limit: usize) -> Result<Vec<TimerRow>, StoreError>;

    /// Stops the writer after the commits already handed to it.
    async fn close(&self);

    /// Leases and forwarding, for a store several processes share; `None` (the
    /// default) when this process is the only one, as with SQLite.
    fn ownership(&self) -> Option<std::sync::Arc<dyn Ownership>> {
        None
    }
}
