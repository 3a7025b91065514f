//! The Agent and Session APIs, implemented in-process by the core and over HTTP by the client.
//!
//! Both implementations pass one behavioural test suite, so code written against
//! these traits runs unchanged against a local Agent or a remote one.

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;
use serde_json::Value;

use crate::address::SessionAddress;
use crate::bounded::{Cursor, EntryId, ExtensionId, PromptText, RequestId, SessionId};
use crate::command::{
    Accepted, CancelInput, CancelResult, CommandOutcome, ForkedSession, OperatorAuthor,
    PromptDelivery, SendOptions, SessionCommand,
};
use crate::error::ShiitakeError;
use crate::extension::ExtensionStatusV0;
use crate::frame::SessionFrame;
use crate::preference::ModelPreference;
use crate::snapshot::{ReadOptions, SessionSnapshot, SubscribeOptions, WatchOptions};
use crate::summary::SessionSummaryPage;

/// Frames of one subscription; it ends when the Agent closes or the subscriber drops it.
pub type FrameStream = Pin<Box<dyn Stream<Item = Result<SessionFrame, ShiitakeError>> + Send>>;

/// A race-safe baseline plus every change after it, with no gap and no duplicate.
pub struct SessionWatch {
    /// The baseline.
    pub snapshot: SessionSnapshot,
    /// Changes strictly after the baseline's cursor; dropping it closes the watch.
    pub changes: FrameStream,
}

impl fmt::Debug for SessionWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionWatch")
            .field("snapshot", &self.snapshot)
            .finish_non_exhaustive()
    }
}

/// A constructed durable harness: a store of Sessions.
#[async_trait]
pub trait AgentApi: Send + Sync {
    /// The Session handle this Agent hands out.
    type Session: SessionApi;

    /// Creates a Session; the same request id returns the same Session.
    async fn create_session(&self, request_id: RequestId) -> Result<SessionId, ShiitakeError>;

    /// Deletes a Session and its history; `false` when there was none.
    async fn delete_session(&self, session_id: &SessionId) -> Result<bool, ShiitakeError>;

    /// One inbox page, starting after `after` (the previous page's `next`).
    async fn list_sessions(
        &self,
        after: Option<&Cursor>,
    ) -> Result<SessionSummaryPage, ShiitakeError>;

    /// Addresses a Session. This performs no I/O; an unknown Session fails on first use.
    fn session(&self, session_id: SessionId) -> Self::Session;

    /// The handle of the Session `address` names (a [`SessionApi::address`], maybe
    /// read back from text), on the Agent it names. This performs no I/O: an unknown
    /// Session fails on first use. An address this Agent cannot reach (another process's
    /// `local:` Agent, another server, an Agent this one is not) is `invalid`.
    fn session_at(&self, address: &SessionAddress) -> Result<Self::Session, ShiitakeError>;

    /// Lists the Agent's extensions and whether each runs.
    async fn list_extensions(&self) -> Result<Vec<ExtensionStatusV0>, ShiitakeError>;

    /// The human command flows of the Agent's extensions (`whistle.catalog/v1`), with
    /// whether each extension can take commands now; a client renders them without
    /// knowing the extensions.
    async fn catalogs(&self) -> Result<crate::catalog::SessionCatalogs, ShiitakeError>;

    /// The tools a run of a new Session would see with a model of `profile`, and the
    /// sources left out with their reason (`GET /v1/tools`): what only a model saw.
    async fn tools(
        &self,
        profile: crate::tools::ToolProfile,
    ) -> Result<crate::tools::ToolList, ShiitakeError>;

    /// Restarts a stopped extension.
    async fn resume_extension(
        &self,
        extension_id: &ExtensionId,
    ) -> Result<ExtensionStatusV0, ShiitakeError>;

    /// Calls an Agent-scope command of an extension.
    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError>;

    /// Stops accepting work and releases resources; accepted work stays durable.
    async fn close(&self) -> Result<(), ShiitakeError>;
}

/// One addressable Session. Holding a handle costs nothing; every call may do I/O.
#[async_trait]
pub trait SessionApi: Send + Sync {
    /// The Session this handle addresses.
    fn session_id(&self) -> &SessionId;

    /// The Session and the Agent that holds it as one address (seed 001's
    /// `ShiitakeSession.address`; grammar in [`crate::address`]); computing it performs
    /// no I/O, and [`AgentApi::session_at`] turns it back into a handle.
    fn address(&self) -> SessionAddress;

    /// A fresh request id, used by [`send`](Self::send) when the caller gives none.
    fn new_request_id(&self) -> RequestId;

    /// Executes one command; the outcome's form follows the command's type.
    async fn command(&self, command: SessionCommand) -> Result<CommandOutcome, ShiitakeError>;

    /// Reads a bounded snapshot of the selected lineage.
    async fn read(&self, options: ReadOptions) -> Result<SessionSnapshot, ShiitakeError>;

    /// Replays frames strictly after `options.after`, then goes live.
    async fn subscribe(&self, options: SubscribeOptions) -> Result<FrameStream, ShiitakeError>;

    /// A snapshot plus the changes after it, with no gap and no duplicate.
    async fn watch(&self, options: WatchOptions) -> Result<SessionWatch, ShiitakeError>;

    /// The Session's persisted model preference, if set.
    async fn model_preference(&self) -> Result<Option<ModelPreference>, ShiitakeError>;

    /// Persists the model the next run uses.
    async fn set_model_preference(&self, preference: ModelPreference) -> Result<(), ShiitakeError>;

    /// Calls a Session-scope command of an extension.
    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError>;

    /// Accepts a prompt as queued work (a follow-up unless `options` says steer).
    async fn send(
        &self,
        text: PromptText,
        options: SendOptions,
    ) -> Result<Accepted, ShiitakeError> {
        let command = SessionCommand::Prompt {
            request_id: options.request_id.unwrap_or_else(|| self.new_request_id()),
            text,
            delivery: options.delivery.unwrap_or(PromptDelivery::FollowUp),
        };
        match self.command(command).await? {
            CommandOutcome::Accepted(accepted) => Ok(accepted),
            other => Err(unexpected("prompt", &other)),
        }
    }

    /// Cancels one accepted command, or reports that it is too late.
    async fn cancel(&self, input: CancelInput) -> Result<CancelResult, ShiitakeError> {
        let command = SessionCommand::Cancel {
            command_id: input.command_id,
            only_if_pending: input.only_if_pending,
        };
        match self.command(command).await? {
            CommandOutcome::Cancel(result) => Ok(result),
            other => Err(unexpected("cancel", &other)),
        }
    }

    /// Stops the active run.
    async fn abort(&self) -> Result<(), ShiitakeError> {
        self.command(SessionCommand::Abort).await.map(|_| ())
    }

    /// Selects a lineage leaf.
    async fn branch(&self, entry_id: EntryId) -> Result<(), ShiitakeError> {
        self.command(SessionCommand::Branch { entry_id })
            .await
            .map(|_| ())
    }

    /// Copies the lineage root→`entry_id` into a new Session.
    async fn fork(&self, entry_id: EntryId) -> Result<ForkedSession, ShiitakeError> {
        match self.command(SessionCommand::Fork { entry_id }).await? {
            CommandOutcome::Forked(forked) => Ok(forked),
            other => Err(unexpected("fork", &other)),
        }
    }

    /// Records an operator or party line without a run.
    async fn operator(
        &self,
        request_id: RequestId,
        author: OperatorAuthor,
        text: PromptText,
    ) -> Result<(), ShiitakeError> {
        self.command(SessionCommand::Operator {
            request_id,
            author,
            text,
        })
        .await
        .map(|_| ())
    }
}

fn unexpected(command: &str, outcome: &CommandOutcome) -> ShiitakeError {
    ShiitakeError::internal(format!("a {command} command answered {outcome:?}"))
}
