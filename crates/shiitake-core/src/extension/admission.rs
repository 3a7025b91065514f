//! Admission into a named Session from any hook, Agent-scope ones included.
//!
//! [`Tx::admit_into`](super::Tx::admit_into) records the prompt as a durable
//! delivery row, committed with the hook's transaction. Right after the commit the
//! timer scheduler takes the row through the Session's accepted-command door under
//! the caller's request id, so admitting the same occurrence twice (a retry, a
//! second process, a restart between commit and delivery) queues one prompt: the
//! door answers a repeated request id with the original `Accepted`. The door's
//! answer comes back to [`Extension::on_admission`](super::Extension::on_admission)
//! in an Agent-scope transaction that also claims the delivery row, so the hook
//! runs once per delivery.

use serde::{Deserialize, Serialize};
use shiitake_protocol::{
    CommandId, PromptDelivery, PromptText, RequestId, SessionId, ShiitakeError,
};

/// A prompt waiting to be delivered into a Session: the payload of a delivery row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Delivery {
    pub(crate) session_id: SessionId,
    pub(crate) request_id: RequestId,
    pub(crate) text: PromptText,
    pub(crate) delivery: PromptDelivery,
    pub(crate) correlation: String,
}

/// What the accepted-command door answered.
#[derive(Clone, Debug, PartialEq)]
pub enum AdmissionOutcome {
    /// The prompt is queued work (or was already, under the same request id).
    Accepted(CommandId),
    /// The door refused it: the Session does not exist (`not_found`), the request id
    /// was used for another prompt (`conflict`), ... Transient trouble (`unavailable`)
    /// is retried by core and never reported here.
    Refused(ShiitakeError),
}

/// The answer to one [`Tx::admit_into`](super::Tx::admit_into), as admission hooks see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Admitted {
    /// The Session the prompt was for.
    pub session_id: SessionId,
    /// The request id the extension chose for this occurrence.
    pub request_id: RequestId,
    /// The extension's own tag, as given to `admit_into`.
    pub correlation: String,
    /// What the door answered.
    pub outcome: AdmissionOutcome,
}
