//! The remote Session: commands, reads and frame streams over HTTP.

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use shiitake_protocol::{
    Accepted, CancelResult, CommandOutcome, ExtensionId, ForkedSession, FrameStream,
    ModelPreference, ReadOptions, RequestId, SessionAddress, SessionApi, SessionCommand, SessionId,
    SessionSnapshot, SessionWatch, ShiitakeError, SubscribeOptions, WatchOptions,
};

use crate::follow::{Follow, read_query as snapshot_query};
use crate::http::{Inner, NO_BODY, decode};

/// One Session of a [`RemoteAgent`](crate::RemoteAgent); holding it costs nothing.
#[derive(Clone)]
pub struct RemoteSession {
    inner: Arc<Inner>,
    session_id: SessionId,
}

impl std::fmt::Debug for RemoteSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSession")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl RemoteSession {
    pub(crate) fn new(inner: Arc<Inner>, session_id: SessionId) -> Self {
        Self { inner, session_id }
    }

    fn path<'a>(&'a self, tail: &[&'a str]) -> Vec<&'a str> {
        let mut segments = vec!["v1", "sessions", self.session_id.as_str()];
        segments.extend_from_slice(tail);
        segments
    }
}

#[async_trait]
impl SessionApi for RemoteSession {
    fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    fn address(&self) -> SessionAddress {
        SessionAddress::new(
            self.inner.origin.clone(),
            self.inner.options.agent.clone(),
            self.session_id.clone(),
        )
    }

    fn new_request_id(&self) -> RequestId {
        match shiitake_protocol::BoundedId::new(format!("req_{}", ulid::Ulid::generate())) {
            Ok(id) => RequestId::from(id),
            // `req_` and 26 Crockford characters: 30 bytes of visible ASCII, always valid.
            Err(error) => unreachable!("a minted request id is valid: {error}"),
        }
    }

    async fn command(&self, command: SessionCommand) -> Result<CommandOutcome, ShiitakeError> {
        let segments = self.path(&["commands"]);
        let response = self
            .inner
            .call_raw(Method::POST, &segments, &Vec::new(), Some(&command))
            .await?;
        let no_content = response.status() == StatusCode::NO_CONTENT;
        match command {
            SessionCommand::Prompt { .. } => decode::<Accepted>(response)
                .await
                .map(CommandOutcome::Accepted),
            SessionCommand::Cancel { .. } => decode::<CancelResult>(response)
                .await
                .map(CommandOutcome::Cancel),
            SessionCommand::Fork { .. } => decode::<ForkedSession>(response)
                .await
                .map(CommandOutcome::Forked),
            SessionCommand::Abort
            | SessionCommand::Branch { .. }
            | SessionCommand::Operator { .. } => {
                if no_content {
                    Ok(CommandOutcome::Done)
                } else {
                    Err(ShiitakeError::internal(format!(
                        "the server answered {} where 204 was expected",
                        response.status()
                    )))
                }
            }
        }
    }

    async fn read(&self, options: ReadOptions) -> Result<SessionSnapshot, ShiitakeError> {
        let segments = self.path(&["snapshot"]);
        self.inner
            .call(Method::GET, &segments, &snapshot_query(&options), NO_BODY)
            .await
    }

    async fn subscribe(&self, options: SubscribeOptions) -> Result<FrameStream, ShiitakeError> {
        Follow::subscribe(
            self.inner.clone(),
            self.session_id.clone(),
            options.after,
            options.include_sandbox_failures,
        )
        .await
    }

    async fn watch(&self, options: WatchOptions) -> Result<SessionWatch, ShiitakeError> {
        let (snapshot, changes) =
            Follow::watch(self.inner.clone(), self.session_id.clone(), options).await?;
        Ok(SessionWatch { snapshot, changes })
    }

    async fn model_preference(&self) -> Result<Option<ModelPreference>, ShiitakeError> {
        let segments = self.path(&["model-preference"]);
        self.inner
            .call(Method::GET, &segments, &Vec::new(), NO_BODY)
            .await
    }

    async fn set_model_preference(&self, preference: ModelPreference) -> Result<(), ShiitakeError> {
        let segments = self.path(&["model-preference"]);
        self.inner
            .call_raw(Method::PUT, &segments, &Vec::new(), Some(&preference))
            .await
            .map(|_| ())
    }

    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        let segments = self.path(&["extensions", extension_id.as_str(), command]);
        self.inner
            .call(Method::POST, &segments, &Vec::new(), Some(&input))
            .await
    }
}
