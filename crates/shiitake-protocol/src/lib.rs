//! Wire types, codecs and API traits of Shiitake, with no I/O.
//!
//! This crate is what a client needs to talk to a Shiitake Agent without the
//! core: every JSON shape of the client API (commands, acceptance, snapshots,
//! frames, activity, summaries, extension slots), the Pi transcript
//! [`Message`], the canonical [`ShiitakeError`], the `parse_*` codecs, and the
//! async [`AgentApi`]/[`SessionApi`] traits that the in-process Agent and the
//! HTTP client both implement.
//!
//! Field names and discriminators are exactly those of the specification:
//! camelCase, optional fields omitted when absent. Bounded values (identifiers,
//! prompt text, page sizes) are validated newtypes, so an out-of-bound value is
//! refused while decoding rather than deep inside the Agent. `docs/wire.md`
//! lists every bound.
//!
//! ```
//! use shiitake_protocol::{SessionCommand, PromptDelivery};
//!
//! let json = r#"{"type":"prompt","requestId":"r-1","text":"hello","delivery":"followUp"}"#;
//! let command: SessionCommand = serde_json::from_str(json)?;
//! assert!(matches!(command, SessionCommand::Prompt { delivery: PromptDelivery::FollowUp, .. }));
//! assert_eq!(serde_json::to_string(&command)?, json);
//! # Ok::<(), serde_json::Error>(())
//! ```

pub mod activity;
pub mod address;
pub mod api;
pub mod bounded;
pub mod catalog;
pub mod codec;
pub mod command;
pub mod directory;
pub mod error;
pub mod extension;
pub mod footer;
pub mod frame;
pub mod hub;
pub mod message;
mod nullable;
pub mod number;
pub mod preference;
pub mod snapshot;
mod strict;
pub mod summary;
pub mod tenant;
pub mod tools;

pub use activity::{
    QueueState, RetryState, SessionActivity, SessionProgress, StorageWait, TOOL_OUTPUT_BYTES,
    ToolOutput,
};
pub use address::{AddressError, AddressOrigin, SessionAddress};
pub use api::{AgentApi, FrameStream, SessionApi, SessionWatch};
pub use bounded::{
    BoundError, BoundedId, CommandId, Cursor, EntryId, EventId, ExtensionId, PageLimit, PromptText,
    RequestId, SessionId,
};
pub use catalog::{CATALOG_FORMAT, Catalog};
pub use codec::{
    DecodeError, parse_accepted, parse_cancel_result, parse_session_frame, parse_session_snapshot,
    parse_session_summary_page, parse_shiitake_error,
};
pub use command::{
    Accepted, CancelInput, CancelResult, CommandOutcome, ForkedSession, OperatorAuthor,
    PromptDelivery, SendOptions, SessionCommand, TooLate,
};
pub use directory::{AgentEntry, AgentList, AgentName, AgentNameError};
pub use error::{ErrorCode, ShiitakeError};
pub use extension::{
    BoundAgentExtension, BoundSessionExtension, CommandScope, ContractCommand, ExtensionContract,
    ExtensionRunState, ExtensionSlotV0, ExtensionStatusV0, ExtensionViewV0, bind_agent_extension,
    bind_session_extension,
};
pub use frame::{FrameDelivery, ProgressFrame, ResetFrame, ResetReason, SessionFrame, UpdateFrame};
pub use hub::{HubNode, HubNodeList};
/// Applies a `macro_rules!` macro as an attribute (`#[apply(tool_input!)]`): how an
/// extension's contract puts [`tool_input!`]'s attributes on a type in one line.
pub use macro_rules_attribute::apply;
pub use message::Message;
pub use preference::{ModelPreference, ModelSpec, ReasoningLevel};
pub use snapshot::{
    ReadOptions, SandboxFailureEvent, SessionCompactionMarker, SessionExtensionSlots,
    SessionMessage, SessionPendingPrompt, SessionPendingPrompts, SessionSnapshot, SessionTerminal,
    SubscribeOptions, TerminalOutcome, WatchOptions,
};
pub use summary::{SessionInboxState, SessionSummary, SessionSummaryPage, SessionSummaryRow};
pub use tenant::{
    CreateTenant, IssueToken, IssuedToken, TenantEntry, TenantList, TenantName, TenantNameError,
    TokenEntry, TokenId, TokenIdError,
};
pub use tools::{
    LeftOutReason, LeftOutSource, ReplaySafety, ToolEntry, ToolList, ToolProfile, ToolSource,
};
