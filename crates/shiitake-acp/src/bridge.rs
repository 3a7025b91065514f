//! The ACP agent side over an Agent's Sessions: each ACP method as the Session calls
//! it stands for (docs/acp.md has the table).

use std::cell::RefCell;
use std::collections::HashMap;

use agent_client_protocol::{
    self as acp, AgentCapabilities, AuthenticateRequest, AuthenticateResponse, CancelNotification,
    Client as _, ContentBlock, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, ProtocolVersion, SessionNotification,
    SessionUpdate, StopReason,
};
use shiitake_ext_question::contract::QuestionContract;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{
    AgentApi, CommandId, PromptDelivery, PromptText, QueueState, ReadOptions, RequestId,
    SendOptions, SessionApi, SessionId,
};

use crate::editor::{Editor, to_acp};
use crate::permissions::Asked;
use crate::questions;
use crate::relay::{Relay, Seen};
use crate::slash::{self, Slash};
use crate::updates::Transcript;

/// An Agent's Sessions as an ACP agent: ACP Session ids are the Agent's Session ids.
pub(crate) struct Bridge<A> {
    agent: A,
    editor: Editor,
    /// The command of the prompt each Session runs now, for `session/cancel`.
    running: RefCell<HashMap<SessionId, CommandId>>,
    /// The approvals the editor is being asked about.
    asked: Asked,
    /// The editor's folder of each Session it opened (`cwd`), which an edit's paths
    /// are read from.
    folders: RefCell<HashMap<String, std::path::PathBuf>>,
    /// The run each loaded Session had going on, followed until a prompt takes over.
    followers: RefCell<HashMap<String, tokio::task::AbortHandle>>,
}

impl<A: AgentApi> Bridge<A> {
    pub(crate) fn new(agent: A, editor: Editor) -> Self {
        Self {
            agent,
            editor,
            running: RefCell::default(),
            asked: Asked::default(),
            folders: RefCell::default(),
            followers: RefCell::default(),
        }
    }

    /// The relay of `acp_session`'s runs to the editor.
    fn relay(&self, acp_session: &acp::SessionId) -> Result<Relay<A>, acp::Error>
    where
        A: Clone,
    {
        Ok(Relay {
            agent: self.agent.clone(),
            editor: self.editor.clone(),
            asked: self.asked.clone(),
            acp_session: acp_session.clone(),
            session: self.session(acp_session)?,
        })
    }

    /// Stops following the run a load found, when a prompt takes the Session over.
    fn stop_following(&self, acp_session: &acp::SessionId) {
        if let Some(follower) = self.followers.borrow_mut().remove(acp_session.0.as_ref()) {
            follower.abort();
        }
    }

    /// The editor's folder of `session`, when it said one.
    fn folder(&self, session: &acp::SessionId) -> Option<std::path::PathBuf> {
        self.folders.borrow().get(session.0.as_ref()).cloned()
    }

    /// Tells the editor the Agent's slash commands, once the answer that names the
    /// Session is on its way (a task of its own).
    fn advertise_commands(&self, acp_session: &acp::SessionId)
    where
        A: Clone + 'static,
    {
        let (agent, editor, acp_session) =
            (self.agent.clone(), self.editor.clone(), acp_session.clone());
        tokio::task::spawn_local(async move {
            let catalogs = match agent.catalogs().await {
                Ok(catalogs) => catalogs,
                Err(error) => {
                    tracing::warn!(%error, "the Agent's commands could not be read");
                    return;
                }
            };
            let update = SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
                slash::available(&catalogs),
            ));
            if let Some(editor) = editor.get()
                && let Err(error) = editor
                    .session_notification(SessionNotification::new(acp_session, update))
                    .await
            {
                tracing::warn!(%error, "the slash commands did not reach the editor");
            }
        });
    }

    /// Runs a prompt that names a slash command: its output (or why it is not run
    /// here) is the agent's answer. `None` when the prompt names none.
    async fn slash_command(
        &self,
        relay: &Relay<A>,
        text: &PromptText,
    ) -> Result<Option<StopReason>, acp::Error>
    where
        A: 'static,
        A::Session: 'static,
    {
        if !text.as_str().trim_start().starts_with('/') {
            return Ok(None);
        }
        let catalogs = self.agent.catalogs().await.map_err(to_acp)?;
        let Some(slash) = slash::parse(&catalogs, text.as_str()) else {
            return Ok(None);
        };
        let said = match slash {
            Slash::Refused(why) => why,
            Slash::Call {
                extension,
                call,
                mut input,
            } => {
                if let Some(object) = input.as_object_mut() {
                    object.insert(
                        "requestId".into(),
                        serde_json::Value::from(relay.session.new_request_id().as_str()),
                    );
                }
                match relay.session.call_extension(&extension, &call, input).await {
                    Ok(output) => output.to_string(),
                    Err(error) => format!("{}: {}", error.code.as_str(), error.message),
                }
            }
        };
        relay.say(said).await?;
        Ok(Some(StopReason::EndTurn))
    }

    /// The Agent's Session an ACP Session id names.
    fn session(&self, id: &acp::SessionId) -> Result<A::Session, acp::Error> {
        let id = SessionId::new(id.0.to_string())
            .map_err(|error| acp::Error::invalid_params().data(error.to_string()))?;
        Ok(self.agent.session(id))
    }
}

/// The most messages `session/load` replays before the newest page, read a page back
/// at a time: a long Session's history comes back whole, a huge one bounded.
pub const MAX_REPLAYED: usize = 10_000;

/// The messages before `newest` (a Session's newest page), oldest first, at most
/// [`MAX_REPLAYED`] of them (the newest ones when there are more).
async fn older_messages<S: SessionApi>(
    session: &S,
    newest: &shiitake_protocol::SessionSnapshot,
) -> Result<Vec<shiitake_protocol::SessionMessage>, acp::Error> {
    let mut pages: Vec<Vec<shiitake_protocol::SessionMessage>> = Vec::new();
    let (mut has_more, mut before) = (newest.has_more, newest.oldest_cursor.clone().flatten());
    let mut count = 0;
    while has_more && count < MAX_REPLAYED {
        let Some(cursor) = before.take() else { break };
        let options = ReadOptions {
            limit: shiitake_protocol::PageLimit::new(shiitake_protocol::PageLimit::MAX).ok(),
            before: Some(cursor),
            ..ReadOptions::default()
        };
        let page = session.read(options).await.map_err(to_acp)?;
        count += page.messages.len();
        has_more = page.has_more && !page.messages.is_empty();
        before = page.oldest_cursor.flatten();
        pages.push(page.messages);
    }
    let mut older: Vec<_> = pages.into_iter().rev().flatten().collect();
    let over = older.len().saturating_sub(MAX_REPLAYED);
    older.drain(..over);
    Ok(older)
}

/// The prompt's text: its text blocks, and a resource link as its address. Images,
/// audio and embedded resources are refused (the initialize answer does not offer
/// them).
fn prompt_text(blocks: &[ContentBlock]) -> Result<PromptText, acp::Error> {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::ResourceLink(link) => parts.push(link.uri.clone()),
            _ => {
                return Err(acp::Error::invalid_params()
                    .data("only text and resource links are taken in a prompt"));
            }
        }
    }
    PromptText::new(parts.join("\n"))
        .map_err(|error| acp::Error::invalid_params().data(error.to_string()))
}

#[async_trait::async_trait(?Send)]
impl<A> acp::Agent for Bridge<A>
where
    A: AgentApi + Clone + 'static,
    A::Session: 'static,
{
    async fn initialize(&self, _args: InitializeRequest) -> Result<InitializeResponse, acp::Error> {
        Ok(InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(PromptCapabilities::new())
                    .session_capabilities(
                        acp::SessionCapabilities::new().list(acp::SessionListCapabilities::new()),
                    ),
            )
            .agent_info(Implementation::new("shiitake", env!("CARGO_PKG_VERSION"))))
    }

    async fn authenticate(
        &self,
        _args: AuthenticateRequest,
    ) -> Result<AuthenticateResponse, acp::Error> {
        // The token is given when `shiitake acp` starts; no method is offered.
        Ok(AuthenticateResponse::new())
    }

    async fn new_session(&self, args: NewSessionRequest) -> Result<NewSessionResponse, acp::Error> {
        let request = RequestId::new(format!("acp-{}", new_session_request()))
            .map_err(|error| acp::Error::internal_error().data(error.to_string()))?;
        let id = self.agent.create_session(request).await.map_err(to_acp)?;
        let acp_session = acp::SessionId::new(id.to_string());
        self.folders
            .borrow_mut()
            .insert(id.to_string(), args.cwd.clone());
        self.advertise_commands(&acp_session);
        Ok(NewSessionResponse::new(acp_session))
    }

    async fn load_session(
        &self,
        args: LoadSessionRequest,
    ) -> Result<LoadSessionResponse, acp::Error> {
        let relay = self.relay(&args.session_id)?;
        let watch = relay
            .session
            .watch(ReadOptions::default())
            .await
            .map_err(to_acp)?;
        self.folders
            .borrow_mut()
            .insert(args.session_id.0.to_string(), args.cwd.clone());
        let mut transcript = Transcript::in_folder(Some(args.cwd.clone()));
        let mut seen = Seen::in_folder(Some(args.cwd.clone()));
        let older = older_messages(&relay.session, &watch.snapshot).await?;
        for message in older.iter().chain(&watch.snapshot.messages) {
            seen.calls.see(&message.value);
            for update in transcript.replayed(&message.value) {
                relay.notify(update).await?;
            }
        }
        // What waits for a person is asked again: approvals are the Session's.
        relay.ask_permissions(&watch.snapshot.extensions, &seen.calls);
        self.advertise_commands(&args.session_id);
        // A run going on is followed until it ends, or a prompt takes the Session over.
        if let QueueState::Running { command_id, .. } = &watch.snapshot.activity.queue {
            self.stop_following(&args.session_id);
            let (command, mut changes) = (command_id.clone(), watch.changes);
            seen.asks.extend(
                questions::waiting(&watch.snapshot.extensions)
                    .iter()
                    .map(|ask| ask.ask_id.as_str().to_owned()),
            );
            let follower = tokio::task::spawn_local(async move {
                if let Err(error) = relay.follow(&command, &mut changes, &mut seen).await {
                    tracing::debug!(%error, "a loaded Session's run was not followed to its end");
                }
            });
            self.followers
                .borrow_mut()
                .insert(args.session_id.0.to_string(), follower.abort_handle());
        }
        Ok(LoadSessionResponse::new())
    }

    async fn prompt(&self, args: PromptRequest) -> Result<PromptResponse, acp::Error> {
        let text = prompt_text(&args.prompt)?;
        let relay = self.relay(&args.session_id)?;
        if let Some(stop) = self.slash_command(&relay, &text).await? {
            return Ok(PromptResponse::new(stop));
        }
        self.stop_following(&args.session_id);
        // Watched before the prompt goes in, so no frame of its run is missed.
        let watch = relay
            .session
            .watch(ReadOptions::default())
            .await
            .map_err(to_acp)?;
        let mut changes = watch.changes;
        let mut seen = Seen::in_folder(self.folder(&args.session_id));
        // Asks already waiting are not shown again in this turn.
        let waiting_asks = questions::waiting(&watch.snapshot.extensions);
        seen.asks.extend(
            waiting_asks
                .iter()
                .map(|ask| ask.ask_id.as_str().to_owned()),
        );
        let command = match waiting_asks.first() {
            // The Session waits on a question: this prompt is its answer, and the run
            // that asked goes on in this turn.
            Some(ask) => {
                let running = match &watch.snapshot.activity.queue {
                    QueueState::Running { command_id, .. } => Some(command_id.clone()),
                    _ => None,
                };
                let request = relay.session.new_request_id().as_str().to_owned();
                let Some(answer) = questions::answer(ask, text.as_str(), request) else {
                    relay.say(questions::message(ask)).await?;
                    return Ok(PromptResponse::new(StopReason::EndTurn));
                };
                bind_session_extension::<_, QuestionContract>(&relay.session)
                    .call(&answer)
                    .await
                    .map_err(to_acp)?;
                match running {
                    Some(command) => command,
                    // A parked question's answer is a new prompt of its own.
                    None => return Ok(PromptResponse::new(StopReason::EndTurn)),
                }
            }
            None => {
                let options = SendOptions {
                    delivery: Some(PromptDelivery::FollowUp),
                    request_id: None,
                };
                relay
                    .session
                    .send(text, options)
                    .await
                    .map_err(to_acp)?
                    .command_id
            }
        };
        let id = relay.session.session_id().clone();
        self.running
            .borrow_mut()
            .insert(id.clone(), command.clone());
        let ended = relay.follow(&command, &mut changes, &mut seen).await;
        self.running.borrow_mut().remove(&id);
        ended.map(PromptResponse::new)
    }

    async fn list_sessions(
        &self,
        args: acp::ListSessionsRequest,
    ) -> Result<acp::ListSessionsResponse, acp::Error> {
        let after = args
            .cursor
            .map(shiitake_protocol::Cursor::new)
            .transpose()
            .map_err(|error| acp::Error::invalid_params().data(error.to_string()))?;
        let page = self
            .agent
            .list_sessions(after.as_ref())
            .await
            .map_err(to_acp)?;
        // Sessions are the Agent's, not a folder's: each is listed in the editor's
        // folder when it asked for one.
        let folder = args.cwd.unwrap_or_default();
        let sessions = page
            .sessions
            .iter()
            .map(|row| {
                let info = acp::SessionInfo::new(row.session_id().to_string(), folder.clone());
                match row {
                    shiitake_protocol::SessionSummaryRow::Available { summary, .. } => info
                        .title(summary.title.clone())
                        .updated_at(rfc3339(summary.last_activity_at)),
                    shiitake_protocol::SessionSummaryRow::Unavailable { .. } => info,
                }
            })
            .collect();
        Ok(acp::ListSessionsResponse::new(sessions)
            .next_cursor(page.next.map(|cursor| cursor.as_str().to_owned())))
    }

    async fn cancel(&self, args: CancelNotification) -> Result<(), acp::Error> {
        let session = self.session(&args.session_id)?;
        let running = self.running.borrow().contains_key(session.session_id());
        if running {
            session.abort().await.map_err(to_acp)?;
        }
        Ok(())
    }
}

/// Unix milliseconds as an RFC 3339 time in UTC (`2026-12-07T19:07:17Z`).
fn rfc3339(unix_ms: u64) -> String {
    i64::try_from(unix_ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A Session's creation request no other `shiitake acp` process makes: the time and
/// the process (a Session's own requests come from `SessionApi::new_request_id`).
fn new_session_request() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_670_437_000), "2026-12-07T19:07:17Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn prompts_take_text_and_links_only() {
        let text = prompt_text(&[
            ContentBlock::from("fix it".to_owned()),
            ContentBlock::ResourceLink(acp::ResourceLink::new("main.rs", "file:///w/main.rs")),
        ])
        .unwrap();
        assert_eq!(text.as_str(), "fix it\nfile:///w/main.rs");
        let image = ContentBlock::Image(acp::ImageContent::new("aGk=", "image/png"));
        assert_eq!(
            prompt_text(&[image]).unwrap_err().code,
            acp::Error::invalid_params().code
        );
        assert!(prompt_text(&[]).is_err(), "an empty prompt is refused");
    }
}
