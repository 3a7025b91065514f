//! A Session handle: addressing costs nothing; each call goes to the Session's owner.

mod live;

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use shiitake_protocol::{
    AddressOrigin, AgentName, CommandOutcome, ExtensionId, FrameStream, ModelPreference,
    ReadOptions, RequestId, SessionAddress, SessionApi, SessionCommand, SessionId, SessionSnapshot,
    SessionWatch, ShiitakeError, SubscribeOptions, WatchOptions,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::owner::registry::Registry;
use crate::owner::{Published, Reply, Request};

/// One Session of an in-process Agent.
#[derive(Clone)]
pub struct LocalSession {
    owners: Arc<Registry>,
    /// The Agent's closing: a stream whose owner left then ends rather than follow.
    closing: CancellationToken,
    /// The Agent's name, for [`SessionApi::address`].
    agent: Option<AgentName>,
    session_id: SessionId,
}

impl std::fmt::Debug for LocalSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalSession")
            .field("session_id", &self.session_id)
            .finish()
    }
}

impl LocalSession {
    pub(crate) fn new(
        owners: Arc<Registry>,
        closing: CancellationToken,
        agent: Option<AgentName>,
        session_id: SessionId,
    ) -> Self {
        Self {
            owners,
            closing,
            agent,
            session_id,
        }
    }

    /// Sends one request to the owner, retrying when the owner retired before answering.
    async fn ask<T>(&self, request: impl Fn(Reply<T>) -> Request) -> Result<T, ShiitakeError> {
        self.owners.ask(&self.session_id, request).await
    }

    /// Accepts a prompt another Agent sent, recording `sender` with it so the run and
    /// extension hooks can see who asked ([`crate::extension::Sender`]).
    ///
    /// Host only, like [`Self::host_transaction`]: clients cannot claim a sender.
    /// Idempotent by request id like [`SessionApi::send`].
    pub async fn send_from(
        &self,
        sender: crate::extension::Sender,
        text: shiitake_protocol::PromptText,
        options: shiitake_protocol::SendOptions,
    ) -> Result<shiitake_protocol::Accepted, ShiitakeError> {
        let command = SessionCommand::Prompt {
            request_id: options.request_id.unwrap_or_else(|| self.new_request_id()),
            text,
            delivery: options
                .delivery
                .unwrap_or(shiitake_protocol::PromptDelivery::FollowUp),
        };
        match self
            .ask(|reply| Request::Command(command.clone(), Some(sender.clone()), reply))
            .await?
        {
            CommandOutcome::Accepted(accepted) => Ok(accepted),
            other => Err(ShiitakeError::internal(format!(
                "a prompt answered {other:?}"
            ))),
        }
    }

    /// Runs a transaction of one extension in this Session and commits it, on behalf
    /// of the host itself.
    ///
    /// This is the in-process door for operations a host must not expose to clients
    /// over the wire (another Agent answering a question it was asked, a migration
    /// seed): it is not part of [`SessionApi`], so no HTTP route reaches it. The
    /// extension needs no `commands` grant for it; its transaction still obeys every
    /// other grant. A transaction that changes nothing commits nothing.
    pub async fn host_transaction(
        &self,
        extension_id: &ExtensionId,
        transaction: impl Fn(
            &mut crate::extension::Tx<'_>,
        ) -> Result<Value, crate::extension::HookError>
        + Send
        + Sync
        + 'static,
    ) -> Result<Value, ShiitakeError> {
        let transaction = Arc::new(transaction);
        self.ask(|reply| {
            let transaction = transaction.clone();
            Request::ExtensionTx {
                extension_id: extension_id.clone(),
                transaction: Box::new(move |tx| transaction(tx)),
                reply,
            }
        })
        .await
    }

    /// Publishes the extension slots of this Session again, without a change, to
    /// everyone watching it; answers whether anyone was.
    ///
    /// For an extension whose projection shows what it read elsewhere (see
    /// [`Extension::on_observed`](crate::extension::Extension::on_observed)): after it
    /// refreshed that in memory, watchers see it in one `update` frame with no new rows
    /// and the same cursor. Nothing is committed; a later snapshot computes the slots
    /// afresh anyway. Host only: not part of [`SessionApi`].
    pub async fn republish_extensions(&self) -> Result<bool, ShiitakeError> {
        self.ask(Request::Republish).await
    }

    /// Admits a prompt an extension sent from outside the Session, with its origin.
    pub(crate) async fn admit(
        &self,
        delivery: crate::extension::Delivery,
        origin: crate::extension::Origin,
    ) -> Result<shiitake_protocol::Accepted, ShiitakeError> {
        self.ask(|reply| Request::Admit {
            request_id: delivery.request_id.clone(),
            text: delivery.text.clone(),
            delivery: delivery.delivery,
            origin: origin.clone(),
            reply,
        })
        .await
    }

    pub(crate) async fn watch_parts(
        &self,
        options: ReadOptions,
    ) -> Result<(SessionSnapshot, broadcast::Receiver<Published>), ShiitakeError> {
        self.ask(|reply| Request::Watch(options.clone(), reply))
            .await
    }
}

#[async_trait]
impl SessionApi for LocalSession {
    fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    fn address(&self) -> SessionAddress {
        SessionAddress::new(
            AddressOrigin::Local,
            self.agent.clone(),
            self.session_id.clone(),
        )
    }

    fn new_request_id(&self) -> RequestId {
        crate::ids::request_id()
    }

    async fn command(&self, command: SessionCommand) -> Result<CommandOutcome, ShiitakeError> {
        self.ask(|reply| Request::Command(command.clone(), None, reply))
            .await
    }

    async fn read(&self, options: ReadOptions) -> Result<SessionSnapshot, ShiitakeError> {
        self.ask(|reply| Request::Read(options.clone(), reply))
            .await
    }

    async fn subscribe(&self, options: SubscribeOptions) -> Result<FrameStream, ShiitakeError> {
        let include = options.include_sandbox_failures.unwrap_or(false);
        let (replay, receiver) = self
            .ask(|reply| Request::Subscribe(options.clone(), reply))
            .await?;
        let cursor = live::last_cursor(&replay).or(options.after);
        let live = live::frames(self.clone(), receiver, include, cursor);
        Ok(futures::stream::iter(replay.into_iter().map(Ok))
            .chain(live)
            .boxed())
    }

    async fn watch(&self, options: WatchOptions) -> Result<SessionWatch, ShiitakeError> {
        let include = options.include_sandbox_failures.unwrap_or(false);
        let (snapshot, receiver) = self.watch_parts(options).await?;
        let cursor = snapshot.cursor.clone();
        Ok(SessionWatch {
            snapshot,
            changes: live::frames(self.clone(), receiver, include, cursor),
        })
    }

    async fn model_preference(&self) -> Result<Option<ModelPreference>, ShiitakeError> {
        self.ask(Request::Preference).await
    }

    async fn set_model_preference(&self, preference: ModelPreference) -> Result<(), ShiitakeError> {
        self.ask(|reply| Request::SetPreference(preference.clone(), reply))
            .await
    }

    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        self.ask(|reply| {
            Request::ExtensionCall(
                extension_id.clone(),
                command.to_owned(),
                input.clone(),
                reply,
            )
        })
        .await
    }
}
