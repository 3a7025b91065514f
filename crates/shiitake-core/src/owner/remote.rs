//! Sessions owned by another process, on a store several processes share.
//!
//! When a Session's lease is held elsewhere, this process runs a **stand-in** in
//! the owner's place: it forwards each request through the database
//! ([`Ownership::forward`]) and waits for the owner's answer, and it tries to
//! take the lease itself whenever the owner may have gone (the lease lapsed or
//! was given back), then becomes the owner and handles the request here. Watches
//! and subscriptions get a follower (`follower.rs`); [`watch`] (`adopt.rs`) is
//! this process's side of shared ownership.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shiitake_protocol::{
    Accepted, CancelResult, CommandOutcome, Cursor, ExtensionId, ForkedSession, ModelPreference,
    PromptDelivery, PromptText, ReadOptions, RequestId, SessionCommand, SessionFrame, SessionId,
    SessionSnapshot, ShiitakeError, SubscribeOptions,
};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

pub(crate) use super::adopt::watch;
use super::follower::follow;
use super::{Owner, Reply, Request, send};
use crate::agent_core::AgentCore;
use crate::extension::{Origin, Sender};
use crate::store::ownership::{Claim, OwnershipEvent};
use crate::store::{FencingToken, Ownership};

/// A request as it travels to the owner in another process.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub(crate) enum Forwarded {
    /// A Session command.
    Command {
        command: SessionCommand,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<Sender>,
    },
    /// A bounded snapshot.
    Read { options: ReadOptions },
    /// The frames after a cursor, and the cursor of the Session's head.
    Replay { options: SubscribeOptions },
    /// The model preference.
    Preference,
    /// Persist a model preference.
    SetPreference { preference: ModelPreference },
    /// A Session-scope extension command.
    ExtensionCall {
        extension_id: ExtensionId,
        command: String,
        input: Value,
    },
    /// A prompt an extension admitted from outside the Session.
    Admit {
        request_id: RequestId,
        text: PromptText,
        delivery: PromptDelivery,
        origin: Origin,
    },
}

impl Forwarded {
    /// The forwardable form of a request; `None` for requests only an owner in this
    /// process can serve (host transactions carry a closure, timers fire where the
    /// owner is, runner messages belong to a local run).
    fn of(request: &Request) -> Option<Self> {
        Some(match request {
            Request::Command(command, sender, _) => Forwarded::Command {
                command: command.clone(),
                sender: sender.clone(),
            },
            Request::Read(options, _) | Request::Watch(options, _) => Forwarded::Read {
                options: options.clone(),
            },
            Request::Subscribe(options, _) | Request::Replay(options, _) => Forwarded::Replay {
                options: options.clone(),
            },
            Request::Preference(_) => Forwarded::Preference,
            Request::SetPreference(preference, _) => Forwarded::SetPreference {
                preference: preference.clone(),
            },
            Request::ExtensionCall(extension_id, command, input, _) => Forwarded::ExtensionCall {
                extension_id: extension_id.clone(),
                command: command.clone(),
                input: input.clone(),
            },
            Request::Admit {
                request_id,
                text,
                delivery,
                origin,
                ..
            } => Forwarded::Admit {
                request_id: request_id.clone(),
                text: text.clone(),
                delivery: *delivery,
                origin: origin.clone(),
            },
            Request::ExtensionTx { .. }
            | Request::FireTimer(..)
            | Request::Republish(_)
            | Request::Stop(_)
            | Request::Run(_)
            | Request::Drain
            | Request::LeaseLost(_) => return None,
        })
    }
}

/// [`CommandOutcome`] as a forwarded answer carries it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "camelCase")]
enum Outcome {
    Accepted(Accepted),
    Cancel(CancelResult),
    Forked(ForkedSession),
    Done,
}

impl From<CommandOutcome> for Outcome {
    fn from(outcome: CommandOutcome) -> Self {
        match outcome {
            CommandOutcome::Accepted(accepted) => Outcome::Accepted(accepted),
            CommandOutcome::Cancel(result) => Outcome::Cancel(result),
            CommandOutcome::Forked(forked) => Outcome::Forked(forked),
            CommandOutcome::Done => Outcome::Done,
        }
    }
}

impl From<Outcome> for CommandOutcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Accepted(accepted) => CommandOutcome::Accepted(accepted),
            Outcome::Cancel(result) => CommandOutcome::Cancel(result),
            Outcome::Forked(forked) => CommandOutcome::Forked(forked),
            Outcome::Done => CommandOutcome::Done,
        }
    }
}

/// Frames after a cursor and the cursor of the head they reach.
#[derive(Serialize, Deserialize)]
struct Replayed {
    frames: Vec<SessionFrame>,
    head: Option<Cursor>,
}

/// An answer as stored: `{"ok": value}` or `{"error": ShiitakeError}`.
fn encode<T: Serialize>(result: Result<T, ShiitakeError>) -> Value {
    match result.and_then(|value| {
        serde_json::to_value(value).map_err(|error| ShiitakeError::internal(error.to_string()))
    }) {
        Ok(value) => json!({ "ok": value }),
        Err(error) => json!({ "error": error }),
    }
}

fn decode<T: DeserializeOwned>(answer: Value) -> Result<T, ShiitakeError> {
    let bad = |error: serde_json::Error| {
        ShiitakeError::internal(format!("a forwarded answer does not decode: {error}"))
    };
    match answer {
        Value::Object(mut fields) => match (fields.remove("ok"), fields.remove("error")) {
            (Some(value), _) => serde_json::from_value(value).map_err(bad),
            (None, Some(error)) => Err(serde_json::from_value(error).map_err(bad)?),
            (None, None) => Err(ShiitakeError::internal("a forwarded answer is empty")),
        },
        _ => Err(ShiitakeError::internal(
            "a forwarded answer is not an object",
        )),
    }
}

impl Owner {
    /// Serves the requests other processes forwarded to this Session, oldest first,
    /// answering each through the database. A request whose answer was lost with a
    /// fenced commit is left for the Session's new owner.
    pub(super) async fn serve_forwarded(&mut self) {
        let Some(ownership) = self.core.ownership.clone() else {
            return;
        };
        let waiting = match ownership
            .forwarded(&self.header.id, self.forwarded_after)
            .await
        {
            Ok(waiting) => waiting,
            Err(error) => {
                tracing::warn!(%error, session = %self.header.id, "could not read forwarded requests");
                return;
            }
        };
        for row in waiting {
            self.forwarded_after = self.forwarded_after.max(row.id);
            let answer = match serde_json::from_value::<Forwarded>(row.request) {
                Ok(forwarded) => self.serve(forwarded).await,
                Err(error) => Some(encode::<()>(Err(ShiitakeError::invalid(format!(
                    "a forwarded request does not decode: {error}"
                ))))),
            };
            if self.fenced {
                return;
            }
            let Some(answer) = answer else { continue };
            if let Err(error) = ownership.answer(row.id, &answer).await {
                tracing::warn!(%error, session = %self.header.id, "could not answer a forwarded request");
            }
        }
    }

    /// Handles one forwarded request as if it came from this process.
    async fn serve(&mut self, forwarded: Forwarded) -> Option<Value> {
        Some(match forwarded {
            Forwarded::Command { command, sender } => {
                let outcome = self
                    .ask_self(|reply| Request::Command(command, sender, reply))
                    .await?;
                encode(outcome.map(Outcome::from))
            }
            Forwarded::Read { options } => {
                encode(self.ask_self(|reply| Request::Read(options, reply)).await?)
            }
            Forwarded::Replay { options } => {
                let frames = self
                    .ask_self(|reply| Request::Replay(options, reply))
                    .await?;
                let head = self.cursor();
                encode(frames.map(|frames| Replayed { frames, head }))
            }
            Forwarded::Preference => encode(self.ask_self(Request::Preference).await?),
            Forwarded::SetPreference { preference } => encode(
                self.ask_self(|reply| Request::SetPreference(preference, reply))
                    .await?,
            ),
            Forwarded::ExtensionCall {
                extension_id,
                command,
                input,
            } => encode(
                self.ask_self(|reply| Request::ExtensionCall(extension_id, command, input, reply))
                    .await?,
            ),
            Forwarded::Admit {
                request_id,
                text,
                delivery,
                origin,
            } => encode(
                self.ask_self(|reply| Request::Admit {
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

    /// Runs one request through this owner and takes its answer; `None` when the
    /// owner dropped it (its commit was fenced: the request is the new owner's).
    async fn ask_self<T>(
        &mut self,
        request: impl FnOnce(Reply<T>) -> Request,
    ) -> Option<Result<T, ShiitakeError>> {
        let (reply, answer) = oneshot::channel();
        // Forwarded requests never stop the owner, so the flow can only continue.
        let _flow = self.handle(request(reply)).await;
        answer.await.ok()
    }
}

/// How a stand-in ended.
pub(super) enum StandIn {
    /// This process took the lease: run the owner, handling `pending` first.
    Owner {
        token: FencingToken,
        /// Boxed: a request is large, and a stand-in that stops carries nothing.
        pending: Option<Box<Request>>,
    },
    /// It stopped (idle, the Agent closing, the mailbox gone).
    Gone,
}

/// Stands in for the owner in another process until it idles out, is stopped, or
/// this process takes the lease.
pub(super) async fn stand_in(
    core: &Arc<AgentCore>,
    ownership: &Arc<dyn Ownership>,
    session_id: &SessionId,
    generation: u64,
    requests: &mut mpsc::Receiver<Request>,
) -> StandIn {
    loop {
        let request = tokio::select! {
            request = requests.recv() => request,
            () = tokio::time::sleep(core.config.owner_idle) => {
                if core.owners.retire(session_id, generation) {
                    requests.close();
                    while requests.try_recv().is_ok() {}
                    return StandIn::Gone;
                }
                continue;
            }
        };
        let Some(request) = request else {
            return StandIn::Gone;
        };
        let Some(forwarded) = Forwarded::of(&request) else {
            match request {
                Request::Stop(done) => {
                    if done.send(()).is_err() {
                        tracing::trace!("stop requester left");
                    }
                    return StandIn::Gone;
                }
                // Adopting an orphan: take the lease if it is free now.
                Request::Drain => match ownership.claim(session_id).await {
                    Ok(Claim::Held(token)) => {
                        return StandIn::Owner {
                            token,
                            pending: None,
                        };
                    }
                    Ok(Claim::Elsewhere | Claim::Missing) => {}
                    Err(error) => tracing::warn!(%error, session = %session_id, "could not claim"),
                },
                // The owner's process publishes to the watchers it serves; the watchers
                // here follow its frames, so nothing here is republished.
                Request::Republish(reply) => send(reply, Ok(false)),
                // Only an owner can run these: take the lease if it is free now,
                // else they run in the process that owns the Session.
                request @ (Request::ExtensionTx { .. } | Request::FireTimer(..)) => {
                    match ownership.claim(session_id).await {
                        Ok(Claim::Held(token)) => {
                            return StandIn::Owner {
                                token,
                                pending: Some(Box::new(request)),
                            };
                        }
                        Ok(Claim::Elsewhere | Claim::Missing) => {
                            request.fail(elsewhere(session_id));
                        }
                        Err(error) => request.fail(error.into()),
                    }
                }
                _ => {}
            }
            continue;
        };
        // Subscribe before forwarding, so no announcement after the answer is missed.
        let events = ownership.events();
        match call(ownership, session_id, &forwarded, events.resubscribe()).await {
            Call::TookOver(token) => {
                return StandIn::Owner {
                    token,
                    pending: Some(Box::new(request)),
                };
            }
            Call::Answered { answer, took_over } => {
                answer_locally(core, session_id, request, answer, events);
                if let Some(token) = took_over {
                    return StandIn::Owner {
                        token,
                        pending: None,
                    };
                }
            }
            Call::Failed(error) => request.fail(error),
        }
    }
}

fn elsewhere(session_id: &SessionId) -> ShiitakeError {
    ShiitakeError::unavailable(format!(
        "Session {session_id} is owned by another process; this runs only there"
    ))
}

/// Replies to the waiting caller with the owner's answer, starting a follower for
/// a watch or a subscription.
fn answer_locally(
    core: &Arc<AgentCore>,
    session_id: &SessionId,
    request: Request,
    answer: Value,
    events: broadcast::Receiver<OwnershipEvent>,
) {
    match request {
        Request::Command(_, _, reply) => {
            send(reply, decode::<Outcome>(answer).map(CommandOutcome::from));
        }
        Request::Read(_, reply) => send(reply, decode(answer)),
        Request::Preference(reply) => send(reply, decode(answer)),
        Request::SetPreference(_, reply) => send(reply, decode(answer)),
        Request::ExtensionCall(_, _, _, reply) => send(reply, decode(answer)),
        Request::Admit { reply, .. } => send(reply, decode(answer)),
        Request::Replay(_, reply) => {
            send(
                reply,
                decode::<Replayed>(answer).map(|replayed| replayed.frames),
            );
        }
        Request::Watch(options, reply) => {
            let result = decode::<SessionSnapshot>(answer).map(|snapshot| {
                let include = options.include_sandbox_failures.unwrap_or(false);
                let receiver = follow(core, session_id, snapshot.cursor.clone(), include, events);
                (snapshot, receiver)
            });
            send(reply, result);
        }
        Request::Subscribe(options, reply) => {
            let result = decode::<Replayed>(answer).map(|replayed| {
                let include = options.include_sandbox_failures.unwrap_or(false);
                let cursor = replayed.head.or(options.after);
                let receiver = follow(core, session_id, cursor, include, events);
                (replayed.frames, receiver)
            });
            send(reply, result);
        }
        other => other.fail(ShiitakeError::internal("not a forwarded request")),
    }
}

/// What forwarding one request came to.
enum Call {
    /// The owner answered; this process may also have taken the lease meanwhile.
    Answered {
        answer: Value,
        took_over: Option<FencingToken>,
    },
    /// The owner went away before answering and this process took the lease: the
    /// request was withdrawn and is to be handled here.
    TookOver(FencingToken),
    /// The database failed.
    Failed(ShiitakeError),
}

/// Forwards `request` to the owner and waits for its answer, taking the lease when
/// the owner goes away first.
async fn call(
    ownership: &Arc<dyn Ownership>,
    session_id: &SessionId,
    request: &Forwarded,
    mut events: broadcast::Receiver<OwnershipEvent>,
) -> Call {
    // The lease may be free (its owner left while idle): take it rather than wait.
    match ownership.claim(session_id).await {
        Ok(Claim::Held(token)) => return Call::TookOver(token),
        Ok(Claim::Elsewhere) => {}
        Ok(Claim::Missing) => {
            return Call::Failed(ShiitakeError::not_found(format!("no Session {session_id}")));
        }
        Err(error) => return Call::Failed(error.into()),
    }
    let request = match serde_json::to_value(request) {
        Ok(request) => request,
        Err(error) => return Call::Failed(ShiitakeError::internal(error.to_string())),
    };
    let mut id = match ownership.forward(session_id, &request).await {
        Ok(id) => id,
        Err(error) => return Call::Failed(error.into()),
    };
    let look_every = ownership.lease_ttl() / 2;
    let mut deadline = Instant::now() + look_every;
    loop {
        let look = tokio::select! {
            event = events.recv() => match event {
                Ok(OwnershipEvent::Answered { id: answered }) => answered == id,
                Ok(OwnershipEvent::Released { session_id: released }) => &released == session_id,
                Ok(OwnershipEvent::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => true,
                Ok(_) => false,
                Err(broadcast::error::RecvError::Closed) => {
                    return Call::Failed(ShiitakeError::unavailable("the store is closing"));
                }
            },
            () = tokio::time::sleep_until(deadline) => {
                deadline = Instant::now() + look_every;
                true
            }
        };
        if !look {
            continue;
        }
        match ownership.take_answer(id).await {
            Ok(Some(answer)) => {
                return Call::Answered {
                    answer,
                    took_over: None,
                };
            }
            Ok(None) => {}
            Err(error) => return Call::Failed(error.into()),
        }
        match ownership.claim(session_id).await {
            Ok(Claim::Held(token)) => {
                return match ownership.withdraw(id).await {
                    Ok(true) => Call::TookOver(token),
                    Ok(false) => match ownership.take_answer(id).await {
                        Ok(Some(answer)) => Call::Answered {
                            answer,
                            took_over: Some(token),
                        },
                        Ok(None) => Call::TookOver(token),
                        Err(error) => Call::Failed(error.into()),
                    },
                    Err(error) => Call::Failed(error.into()),
                };
            }
            Ok(Claim::Elsewhere) => {}
            Ok(Claim::Missing) => {
                return Call::Failed(ShiitakeError::not_found(format!("no Session {session_id}")));
            }
            Err(error) => return Call::Failed(error.into()),
        }
        // Still owned elsewhere and unanswered: write the request again, so an owner
        // that took the Session over after it was written (and never saw it) does.
        match ownership.withdraw(id).await {
            Ok(true) => match ownership.forward(session_id, &request).await {
                Ok(again) => id = again,
                Err(error) => return Call::Failed(error.into()),
            },
            Ok(false) => {}
            Err(error) => return Call::Failed(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_through_their_stored_form() {
        let ok: Result<Option<u32>, ShiitakeError> = decode(encode(Ok(Some(7u32))));
        assert_eq!(ok.unwrap(), Some(7));
        let error = ShiitakeError::conflict("request id used for another prompt");
        let failed: Result<u32, ShiitakeError> = decode(encode::<u32>(Err(error.clone())));
        assert_eq!(failed.unwrap_err(), error);
        let garbage: Result<u32, ShiitakeError> = decode(json!([1, 2]));
        assert_eq!(
            garbage.unwrap_err().code,
            shiitake_protocol::ErrorCode::Internal
        );
    }

    #[test]
    fn a_forwarded_command_keeps_its_payload() {
        let command = SessionCommand::Prompt {
            request_id: RequestId::new("r-1").unwrap(),
            text: PromptText::new("hello").unwrap(),
            delivery: PromptDelivery::Steer,
        };
        let forwarded = Forwarded::Command {
            command: command.clone(),
            sender: None,
        };
        let value = serde_json::to_value(&forwarded).unwrap();
        match serde_json::from_value::<Forwarded>(value).unwrap() {
            Forwarded::Command {
                command: back,
                sender,
            } => {
                assert_eq!(back, command);
                assert_eq!(sender, None);
            }
            other => panic!("decoded as {other:?}"),
        }
    }
}
