//! The owner's side of forwarding: the requests other processes wrote for a
//! Session this process owns, served through the owner as if they came from here,
//! each answered through the database.

use std::sync::Arc;

use serde_json::Value;
use shiitake_protocol::ShiitakeError;
use tokio::sync::oneshot;

use super::forwarded::{Forwarded, Outcome, Replayed, encode};
use crate::owner::{Owner, Reply, Request};
use crate::store::Ownership;
use crate::store::ownership::ForwardId;

/// The forwarded requests of one owned Session, and how far they were served.
pub(crate) struct ForwardedRequests {
    ownership: Arc<dyn Ownership>,
    /// The last forwarded request served.
    after: ForwardId,
}

impl ForwardedRequests {
    pub(crate) fn new(ownership: Arc<dyn Ownership>) -> Self {
        Self {
            ownership,
            after: ForwardId(0),
        }
    }

    /// Serves the requests other processes forwarded to this Session, oldest first,
    /// answering each through the database. A request whose answer was lost with a
    /// fenced commit is left for the Session's new owner.
    pub(crate) async fn serve(&mut self, owner: &mut Owner) {
        let session_id = owner.session_id().clone();
        let waiting = match self.ownership.forwarded(&session_id, self.after).await {
            Ok(waiting) => waiting,
            Err(error) => {
                if error.is_transient() {
                    tracing::debug!(%error, session = %session_id, "could not read forwarded requests");
                } else {
                    tracing::warn!(%error, session = %session_id, "could not read forwarded requests");
                }
                return;
            }
        };
        for row in waiting {
            self.after = self.after.max(row.id);
            let answer = match serde_json::from_value::<Forwarded>(row.request) {
                Ok(forwarded) => serve_one(owner, forwarded).await,
                Err(error) => Some(encode::<()>(Err(ShiitakeError::invalid(format!(
                    "a forwarded request does not decode: {error}"
                ))))),
            };
            if owner.fenced() {
                return;
            }
            let Some(answer) = answer else { continue };
            if let Err(error) = self.ownership.answer(row.id, &answer).await {
                if error.is_transient() {
                    tracing::debug!(%error, session = %session_id, "could not answer a forwarded request");
                } else {
                    tracing::warn!(%error, session = %session_id, "could not answer a forwarded request");
                }
            }
        }
    }
}

/// Handles one forwarded request as if it came from this process.
async fn serve_one(owner: &mut Owner, forwarded: Forwarded) -> Option<Value> {
    Some(match forwarded {
        Forwarded::Command { command, sender } => {
            let outcome = ask(owner, |reply| Request::Command(command, sender, reply)).await?;
            encode(outcome.map(Outcome::from))
        }
        Forwarded::Read { options } => {
            encode(ask(owner, |reply| Request::Read(options, reply)).await?)
        }
        Forwarded::Replay { options } => {
            let frames = ask(owner, |reply| Request::Replay(options, reply)).await?;
            let head = owner.cursor();
            encode(frames.map(|frames| Replayed { frames, head }))
        }
        Forwarded::Preference => encode(ask(owner, Request::Preference).await?),
        Forwarded::SetPreference { preference } => {
            encode(ask(owner, |reply| Request::SetPreference(preference, reply)).await?)
        }
        Forwarded::ExtensionCall {
            extension_id,
            command,
            input,
        } => encode(
            ask(owner, |reply| {
                Request::ExtensionCall(extension_id, command, input, reply)
            })
            .await?,
        ),
        Forwarded::Admit {
            request_id,
            text,
            delivery,
            origin,
        } => encode(
            ask(owner, |reply| Request::Admit {
                request_id,
                text,
                delivery,
                origin,
                reply,
            })
            .await?,
        ),
    })
}

/// Runs one request through the owner and takes its answer; `None` when the
/// owner dropped it (its commit was fenced: the request is the new owner's).
async fn ask<T>(
    owner: &mut Owner,
    request: impl FnOnce(Reply<T>) -> Request,
) -> Option<Result<T, ShiitakeError>> {
    let (reply, answer) = oneshot::channel();
    // Forwarded requests never stop the owner, so the flow can only continue.
    let _flow = owner.handle(request(reply)).await;
    answer.await.ok()
}
