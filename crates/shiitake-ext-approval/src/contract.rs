//! The approval contract: what clients compile against, without shiitake-core.
//!
//! Wire types (camelCase JSON), the bounds the extension keeps, the human commands
//! (`list`, `answer`) as typed [`ContractCommand`]s, the projection published per
//! Session, and the footer rows every client shows of it ([`footer_rows`]).
//!
//! ```
//! use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision, ListApprovals};
//! use shiitake_protocol::extension::bind_session_extension;
//!
//! async fn allow_the_first<S: shiitake_protocol::SessionApi>(session: &S)
//!     -> Result<(), shiitake_protocol::ShiitakeError> {
//!     let approvals = bind_session_extension::<_, ApprovalContract>(session);
//!     let waiting = approvals.call(&ListApprovals {}).await?;
//!     if let Some(first) = waiting.first() {
//!         approvals.call(&AnswerApproval {
//!             approval_id: first.approval_id.clone(),
//!             request_id: "allow-1".into(),
//!             decision: Decision::AllowOnce,
//!             reason: None,
//!         }).await?;
//!     }
//!     Ok(())
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_protocol::extension::ContractCommand;
use shiitake_protocol::footer::{FooterActionKind, FooterActionV0, FooterRowV0, FooterTone};
use shiitake_protocol::{ExtensionId, contract_commands, extension_contract};

use crate::preview;

/// The extension's identity.
pub const EXTENSION_ID: &str = "shiitake-session-approval";
/// Its namespace (it offers the model no tools).
pub const NAMESPACE: &str = "approval";
/// The command the `/approve` flow walks (and an approval row's *Answer* button).
pub const ANSWER_FLOW: &str = "answer_flow";
/// The footer kind of an approval's row, which a page styles it by.
pub const FOOTER_KIND: &str = "approval";
/// The name of a row's answer action (what `/answer @agent` runs on a sub-agent's row).
pub const ANSWER_ACTION: &str = "answer";

/// Calls a Session holds for a decision at once; a call beyond it is refused, not asked.
pub const MAX_OPEN_APPROVALS: usize = 8;
/// Tools one Session allows for the rest of the Session.
pub const MAX_ALLOWED_TOOLS: usize = 64;
/// Commands one Session allows for the rest of the Session ("allow for this Session"
/// of a command allows each simple command of its line, exactly).
pub const MAX_ALLOWED_COMMANDS: usize = 64;
/// Longest command a Session allows for the rest of the Session, in bytes; a longer one
/// is allowed once only.
pub const MAX_ALLOWED_COMMAND_BYTES: usize = 1024;
/// One-time allowances a Session keeps (a parked call allowed once, waiting for the
/// model to call it again); the oldest goes first.
pub const MAX_ONE_TIME_ALLOWANCES: usize = 16;
/// Closed approvals a Session remembers: an answer to one of them is `conflict`, to
/// an older one `not_found`.
pub const MAX_CLOSED_REMEMBERED: usize = 64;
/// Longest reason given with a denial, in characters.
pub const MAX_REASON_CHARS: usize = 1000;
/// Longest approval id an answer takes.
pub const MAX_APPROVAL_ID_CHARS: usize = 32;
/// Longest footer row text before its arguments are cut, in characters.
pub const MAX_ROW_CHARS: usize = 160;

extension_contract! {
    /// The approval contract, for `bind_session_extension`.
    pub ApprovalContract = EXTENSION_ID, projection ApprovalProjection
}

/// An approval's id: `ap` and its number in the Session (`ap1`, `ap2`, …).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalId(String);

impl ApprovalId {
    /// The id of the Session's `number`th approval.
    pub fn numbered(number: u64) -> Self {
        Self(format!("ap{number}"))
    }

    /// Wraps an id read from the wire; it is checked where it is looked up.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its number, when it is one of ours (`ap7` → 7).
    pub fn number(&self) -> Option<u64> {
        self.0.strip_prefix("ap")?.parse().ok()
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A person's answer to an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this call, once.
    AllowOnce,
    /// Run it, and every later call of the same tool in this Session, without asking.
    AllowSession,
    /// Do not run it; the model reads the reason, if one is given.
    Deny,
}

impl Decision {
    /// Whether the call runs.
    pub fn allows(self) -> bool {
        !matches!(self, Self::Deny)
    }

    /// How a person says it: `Allow once`, `Allow for this Session`, `Deny`.
    pub fn label(self) -> &'static str {
        match self {
            Self::AllowOnce => "Allow once",
            Self::AllowSession => "Allow for this Session",
            Self::Deny => "Deny",
        }
    }

    /// The wire word: `allow_once`, `allow_session`, `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowSession => "allow_session",
            Self::Deny => "deny",
        }
    }

    /// The decision a person's reply in words names: a wire word or a label
    /// (`allow_once`, `Allow for this Session`), or `allow`/`yes` (once) and
    /// `deny`/`no`/`reject`, in any case; `None` for anything else.
    pub fn from_reply(reply: &str) -> Option<Self> {
        let reply = reply
            .trim()
            .trim_end_matches(['.', '!'])
            .to_ascii_lowercase();
        if let Some(decision) = Self::ALL.into_iter().find(|decision| {
            reply == decision.as_str() || reply == decision.label().to_ascii_lowercase()
        }) {
            return Some(decision);
        }
        match reply.as_str() {
            "allow" | "yes" | "y" | "approve" | "ok" => Some(Self::AllowOnce),
            "always" | "allow always" | "allow session" => Some(Self::AllowSession),
            "no" | "n" | "reject" => Some(Self::Deny),
            _ => None,
        }
    }

    /// Every decision, in the order a person is offered them.
    pub const ALL: [Decision; 3] = [Self::AllowOnce, Self::AllowSession, Self::Deny];
}

/// One call waiting for a person, as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    /// The approval.
    pub approval_id: ApprovalId,
    /// The provider tool name the model called, such as `files__apply_patch`.
    pub tool: String,
    /// Its arguments, bounded, with what looks like a secret replaced
    /// ([`crate::preview`]).
    pub arguments: Value,
    /// What the tool says a person should know besides them, bounded: for a command,
    /// `computer`, `cwd`, `network` (`on`/`off`) and `sandbox` (`on`/`off`). Absent when
    /// the tool says nothing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
    /// Why the host asks: `the host asks before files__apply_patch`.
    pub why: String,
    /// Unix milliseconds the call was made.
    pub created_at: u64,
    /// The run went on without it (a steer came, or nobody answered in time): an
    /// answer reaches the model as a follow-up prompt.
    pub parked: bool,
}

impl ApprovalView {
    /// `cwd: computer://work/src · network: off`: the facts on one line.
    pub fn facts_line(&self) -> String {
        self.facts
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// `approve files__apply_patch? {"path":"a.txt"}`: the row's text, bounded.
    pub fn line(&self) -> String {
        let head = format!("approve {}? ", self.tool);
        let room = MAX_ROW_CHARS.saturating_sub(head.chars().count());
        format!("{head}{}", preview::one_line(&self.arguments, room))
    }
}

/// The approvals waiting in a Session's extension slots, oldest first (none when the
/// approval extension is absent, stopped or unreadable).
pub fn waiting_approvals(slots: &shiitake_protocol::SessionExtensionSlots) -> Vec<ApprovalView> {
    match shiitake_protocol::extension::view::<ApprovalContract>(slots) {
        Ok(shiitake_protocol::extension::ExtensionViewV0::Running {
            value: Some(projection),
        }) => projection.approvals,
        _ => Vec::new(),
    }
}

/// What the extension publishes per Session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalProjection {
    /// Calls waiting for a person, oldest first.
    pub approvals: Vec<ApprovalView>,
    /// Tools a person allowed for the rest of this Session, sorted.
    pub allowed: Vec<String>,
    /// Commands a person allowed for the rest of this Session (each exactly: its words
    /// joined by single spaces), sorted; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_commands: Vec<String>,
}

/// The footer row of one waiting call: `! approve files__apply_patch? {…} since 14:02 —
/// /approve`, in attention, with the reason on a detail line and an *Answer* button that
/// walks the `/approve` flow for this approval.
pub fn approval_footer_row(approval: &ApprovalView, extension_id: &ExtensionId) -> FooterRowV0 {
    let answer = FooterActionV0 {
        label: "Answer".into(),
        name: ANSWER_ACTION.into(),
        primary: false,
        kind: FooterActionKind::Flow {
            extension_id: extension_id.clone(),
            flow: ANSWER_FLOW.into(),
            call: AnswerApproval::NAME.into(),
            preset: json!({"approvalId": approval.approval_id}),
            target: None,
        },
    };
    let mut detail = vec![approval.why.clone()];
    if !approval.facts.is_empty() {
        detail.push(approval.facts_line());
    }
    if approval.parked {
        detail.push("the run went on; an answer reaches the model as a new message".into());
    }
    FooterRowV0::new(
        extension_id.clone(),
        approval.approval_id.as_str(),
        FOOTER_KIND,
        approval.line(),
    )
    .with_tone(FooterTone::Attention)
    .with_since(approval.created_at)
    .with_note("/approve")
    .with_detail(detail)
    .with_action(answer.primary())
}

/// One footer row per waiting call, oldest first: what every client shows.
pub fn footer_rows(
    projection: &ApprovalProjection,
    extension_id: &ExtensionId,
) -> Vec<FooterRowV0> {
    projection
        .approvals
        .iter()
        .map(|approval| approval_footer_row(approval, extension_id))
        .collect()
}

/// How a decision reaches the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// The waiting call receives it in the same turn (it runs, or is refused).
    InTurn,
    /// A follow-up prompt was admitted with it (the call had been parked).
    FollowUp,
}

/// What `answer` returns; an exact retry (same `requestId`, same input) returns it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The approval.
    pub approval_id: ApprovalId,
    /// What the person decided.
    pub decision: Decision,
    /// How the model gets it.
    pub delivery: Delivery,
}

/// Lists the calls of the Session waiting for a person.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListApprovals {}

/// Answers one waiting call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerApproval {
    /// The approval.
    pub approval_id: ApprovalId,
    /// Stable per answer: reuse it after an uncertain response.
    pub request_id: String,
    /// Allow once, allow for this Session, or deny.
    pub decision: Decision,
    /// Why, for the model; only with `deny`, at most [`MAX_REASON_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

// The human commands, on one Session.
contract_commands!(ApprovalContract {
    ListApprovals => "list" in SessionScope -> Vec<ApprovalView>,
    AnswerApproval => "answer" in SessionScope -> Receipt,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_in_words_names_a_decision_or_none() {
        for (reply, decision) in [
            ("allow_once", Decision::AllowOnce),
            ("Allow for this Session", Decision::AllowSession),
            (" yes ", Decision::AllowOnce),
            ("DENY.", Decision::Deny),
            ("no", Decision::Deny),
            ("always", Decision::AllowSession),
        ] {
            assert_eq!(Decision::from_reply(reply), Some(decision), "{reply:?}");
        }
        for reply in ["", "maybe", "allow once please", "yess"] {
            assert_eq!(Decision::from_reply(reply), None, "{reply:?}");
        }
    }

    fn id() -> ExtensionId {
        ExtensionId::new(EXTENSION_ID).unwrap_or_else(|error| panic!("{error}"))
    }

    fn view(parked: bool) -> ApprovalView {
        ApprovalView {
            approval_id: ApprovalId::numbered(3),
            facts: Default::default(),
            tool: "files__apply_patch".into(),
            arguments: json!({"patch": "*** Begin Patch"}),
            why: "the host asks before files__apply_patch".into(),
            created_at: 1_700_000_000_000,
            parked,
        }
    }

    #[test]
    fn a_waiting_call_is_an_attention_row_that_walks_the_approve_flow() {
        let row = approval_footer_row(&view(false), &id());
        assert_eq!(
            (row.key.as_str(), row.kind.as_str(), row.tone),
            ("ap3", FOOTER_KIND, FooterTone::Attention)
        );
        assert_eq!(
            row.text,
            r#"approve files__apply_patch? {"patch":"*** Begin Patch"}"#
        );
        assert_eq!(row.note.as_deref(), Some("/approve"));
        assert_eq!(row.since, Some(1_700_000_000_000));
        assert_eq!(row.detail, ["the host asks before files__apply_patch"]);
        assert_eq!(
            serde_json::to_value(&row.actions).unwrap_or_default(),
            json!([{"label": "Answer", "name": "answer", "primary": true, "kind": "flow",
                    "extensionId": EXTENSION_ID, "flow": "answer_flow", "call": "answer",
                    "preset": {"approvalId": "ap3"}}])
        );
        let parked = approval_footer_row(&view(true), &id());
        assert_eq!(parked.detail.len(), 2);
    }

    #[test]
    fn a_row_is_bounded_however_long_the_arguments() {
        let mut long = view(false);
        long.arguments = json!({"patch": "x".repeat(5000)});
        let line = long.line();
        assert_eq!(line.chars().count(), MAX_ROW_CHARS);
        assert!(line.ends_with('…'));
    }

    #[test]
    fn ids_number_and_decisions_read_their_wire_words() {
        assert_eq!(ApprovalId::numbered(12).as_str(), "ap12");
        assert_eq!(ApprovalId::new("ap12").number(), Some(12));
        assert_eq!(ApprovalId::new("ask_1").number(), None);
        for decision in Decision::ALL {
            let wire = serde_json::to_value(decision).unwrap_or_default();
            assert_eq!(wire, json!(decision.as_str()));
        }
        let answer: AnswerApproval = serde_json::from_value(json!({
            "approvalId": "ap1", "requestId": "r", "decision": "deny", "reason": "no"
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(answer.decision, Decision::Deny);
        assert!(
            serde_json::from_value::<AnswerApproval>(json!({
                "approvalId": "ap1", "requestId": "r", "decision": "maybe"
            }))
            .is_err()
        );
    }
}
