//! A call waiting for a person's approval (the approval extension's projection) as an
//! ACP `session/request_permission`: allow once, allow always (for this Session) or
//! reject, answered into the approval extension. The approval is the Session's, not
//! this process's: asked again after `session/load`, and still pending when the
//! editor leaves without answering.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

use agent_client_protocol::{
    self as acp, Client as _, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, ApprovalView, Decision};
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::message::{AssistantContent, Message};
use shiitake_protocol::{SessionApi, SessionExtensionSlots};

use crate::editor::Editor;

pub(crate) use shiitake_ext_approval::contract::waiting_approvals as waiting;

/// The options an editor offers, as ACP names them, and the decision each is.
const OPTIONS: [(&str, &str, PermissionOptionKind, Decision); 3] = [
    (
        "allow_once",
        "Allow once",
        PermissionOptionKind::AllowOnce,
        Decision::AllowOnce,
    ),
    (
        "allow_always",
        "Allow for this Session",
        PermissionOptionKind::AllowAlways,
        Decision::AllowSession,
    ),
    (
        "reject_once",
        "Reject",
        PermissionOptionKind::RejectOnce,
        Decision::Deny,
    ),
];

fn options() -> Vec<PermissionOption> {
    OPTIONS
        .iter()
        .map(|(id, name, kind, _)| PermissionOption::new(*id, *name, *kind))
        .collect()
}

/// The decision of the option the editor picked.
fn decision(option: &str) -> Option<Decision> {
    OPTIONS
        .iter()
        .find(|(id, ..)| *id == option)
        .map(|(.., decision)| *decision)
}

/// The tool calls of a transcript that have no result yet, in order: a waiting
/// approval is one of them.
#[derive(Debug, Default)]
pub(crate) struct OpenCalls(Vec<(String, String)>);

impl OpenCalls {
    /// Notes a committed message.
    pub(crate) fn see(&mut self, message: &Message) {
        match message {
            Message::Assistant(assistant) => {
                for block in &assistant.content {
                    if let AssistantContent::ToolCall(call) = block {
                        self.0.push((call.id.clone(), call.name.clone()));
                    }
                }
            }
            Message::ToolResult(result) => self.0.retain(|(id, _)| *id != result.tool_call_id),
            Message::User(_) => {}
        }
    }

    /// The latest open call of `tool`: the one its approval holds.
    fn of(&self, tool: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(_, name)| name == tool)
            .map(|(id, _)| id.as_str())
    }
}

/// The approvals this process asked the editor about and has no answer for yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct Asked(Rc<RefCell<HashSet<String>>>);

impl Asked {
    /// Asks the editor about every approval of `slots` not asked yet, each in a task of
    /// its own (a person may take long): the answer goes into the approval extension.
    pub(crate) fn ask_new<S: SessionApi + 'static>(
        &self,
        editor: &Editor,
        session: impl Fn() -> S,
        acp_session: &acp::SessionId,
        slots: &SessionExtensionSlots,
        calls: &OpenCalls,
    ) {
        for approval in waiting(slots) {
            let id = approval.approval_id.as_str().to_owned();
            if !self.0.borrow_mut().insert(id.clone()) {
                continue;
            }
            let call_id = calls
                .of(&approval.tool)
                .map_or_else(|| id.clone(), str::to_owned);
            let asking = Asking {
                editor: editor.clone(),
                session: session(),
                acp_session: acp_session.clone(),
                call_id,
                approval,
                asked: self.clone(),
            };
            tokio::task::spawn_local(asking.run());
        }
    }

    fn forget(&self, approval: &str) {
        self.0.borrow_mut().remove(approval);
    }
}

/// One permission request and its answer.
struct Asking<S> {
    editor: Editor,
    session: S,
    acp_session: acp::SessionId,
    call_id: String,
    approval: ApprovalView,
    asked: Asked,
}

impl<S: SessionApi> Asking<S> {
    async fn run(self) {
        let id = self.approval.approval_id.as_str().to_owned();
        if let Err(error) = self.ask_and_answer().await {
            tracing::warn!(approval = %id, %error, "a permission request was not answered");
        }
        // Asked again when seen again (a load, a new prompt) unless it was answered.
        self.asked.forget(&id);
    }

    async fn ask_and_answer(&self) -> Result<(), String> {
        let editor = self
            .editor
            .get()
            .ok_or_else(|| "the editor's connection is not up".to_owned())?;
        let mut fields = ToolCallUpdateFields::new()
            .title(self.approval.line())
            .status(ToolCallStatus::Pending)
            .raw_input(self.approval.arguments.clone());
        if !self.approval.facts.is_empty() {
            fields = fields.content(vec![self.approval.facts_line().into()]);
        }
        let request = RequestPermissionRequest::new(
            self.acp_session.clone(),
            ToolCallUpdate::new(self.call_id.clone(), fields),
            options(),
        );
        let answer = editor
            .request_permission(request)
            .await
            .map_err(|error| error.to_string())?;
        let RequestPermissionOutcome::Selected(selected) = answer.outcome else {
            // The editor cancelled (its prompt was cancelled): the approval waits on.
            return Ok(());
        };
        let option = selected.option_id.0.to_string();
        let decision = decision(&option).ok_or_else(|| format!("unknown option {option}"))?;
        bind_session_extension::<_, ApprovalContract>(&self.session)
            .call(&AnswerApproval {
                approval_id: self.approval.approval_id.clone(),
                request_id: format!("acp-{}-{option}", self.approval.approval_id),
                decision,
                reason: None,
            })
            .await
            .map(|_| ())
            .map_err(|error| error.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shiitake_ext_approval::contract::EXTENSION_ID;

    #[test]
    fn options_are_allow_once_allow_always_and_reject() {
        let offered: Vec<serde_json::Value> = options()
            .iter()
            .map(|option| serde_json::to_value(option).unwrap())
            .collect();
        assert_eq!(
            offered
                .iter()
                .map(|option| (option["optionId"].clone(), option["kind"].clone()))
                .collect::<Vec<_>>(),
            [
                (json!("allow_once"), json!("allow_once")),
                (json!("allow_always"), json!("allow_always")),
                (json!("reject_once"), json!("reject_once")),
            ]
        );
        assert_eq!(decision("allow_always"), Some(Decision::AllowSession));
        assert_eq!(decision("reject_once"), Some(Decision::Deny));
        assert_eq!(decision("nope"), None);
    }

    #[test]
    fn the_open_call_of_a_tool_is_its_latest_without_a_result() {
        let mut calls = OpenCalls::default();
        let assistant: Message = serde_json::from_value(json!({"role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c1", "name": "files__edit", "arguments": {}},
                {"type": "toolCall", "id": "c2", "name": "files__edit", "arguments": {}}
            ], "api": "a", "provider": "p", "model": "m", "usage": {"input": 0, "output": 0,
            "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "cost": {"input": 0,
            "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "toolUse", "timestamp": 1}))
        .unwrap();
        calls.see(&assistant);
        assert_eq!(calls.of("files__edit"), Some("c2"));
        let result: Message = serde_json::from_value(json!({"role": "toolResult",
            "toolCallId": "c2", "toolName": "files__edit", "content": [], "isError": false,
            "timestamp": 2}))
        .unwrap();
        calls.see(&result);
        assert_eq!(calls.of("files__edit"), Some("c1"));
        assert_eq!(calls.of("commands__exec"), None);
    }

    #[test]
    fn waiting_approvals_are_read_from_the_extensions_slot() {
        let slots: SessionExtensionSlots = serde_json::from_value(json!({
            EXTENSION_ID: {"status": "running", "value": {"approvals": [{
                "approvalId": "ap1", "tool": "files__edit", "arguments": {"path": "a"},
                "why": "the host asks", "createdAt": 1, "parked": false}], "allowed": []}},
            "other": {"status": "running", "value": null}
        }))
        .unwrap();
        let found = waiting(&slots);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].approval_id.as_str(), "ap1");
        assert!(waiting(&SessionExtensionSlots::new()).is_empty());
    }
}
