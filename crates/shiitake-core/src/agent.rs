//! The Agent: a durable store of Sessions, implementing `AgentApi` in-process.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use shiitake_capabilities::Catalog;
use shiitake_protocol::{
    AddressOrigin, AgentApi, AgentName, Cursor, ExtensionId, ExtensionStatusV0, RequestId,
    SessionAddress, SessionId, SessionSummary, SessionSummaryPage, SessionSummaryRow,
    ShiitakeError,
};

use crate::agent_core::AgentCore;
use crate::clock::now_ms;
use crate::config::AgentConfig;
use crate::extension::host::{Host, Registered};
use crate::extension::{Extension, FilesHandle, Grants, lifecycle};
use crate::ids;
use crate::owner::registry::{self, Registry};
use crate::session::LocalSession;
use crate::store::{ListPosition, Op, SessionHeader, Store};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// A durable harness: Sessions, their queues and runs, on one store.
///
/// Cloning is cheap; every clone is the same Agent.
#[derive(Clone)]
pub struct Agent {
    core: Arc<AgentCore>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("live_owners", &self.core.owners.len())
            .finish_non_exhaustive()
    }
}

/// Rows on one inbox page.
const PAGE_ROWS: usize = SessionSummaryPage::MAX_ROWS;

/// Builds an Agent with extensions.
pub struct AgentBuilder {
    store: Arc<dyn Store>,
    tools: Arc<Catalog>,
    config: AgentConfig,
    extensions: Vec<(Arc<dyn Extension>, Grants, Option<FilesHandle>)>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("extensions", &self.extensions.len())
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// Adds an extension with exactly these grants.
    #[must_use]
    pub fn extension(mut self, extension: impl Extension, grants: Grants) -> Self {
        self.extensions.push((Arc::new(extension), grants, None));
        self
    }

    /// Adds an extension built with the [kit](crate::extension::kit), granted exactly
    /// what its declarations use.
    #[must_use]
    pub fn kit_extension<C, R>(self, extension: crate::extension::kit::KitExtension<C, R>) -> Self
    where
        C: shiitake_protocol::extension::ExtensionContract,
        R: Clone + Send + Sync + 'static,
    {
        let grants = extension.grants();
        self.extension(extension, grants)
    }

    /// Adds an extension built with the kit, with exactly the grants it declares, and
    /// the file port its tools read with [`RunContext::files`](crate::extension::RunContext::files)
    /// (it declares `files` with `.uses(Grant::Files)`).
    #[must_use]
    pub fn kit_extension_with_files<C, R, F>(
        self,
        extension: crate::extension::kit::KitExtension<C, R>,
        files: Arc<F>,
    ) -> Self
    where
        C: shiitake_protocol::extension::ExtensionContract,
        R: Clone + Send + Sync + 'static,
        F: Send + Sync + 'static,
    {
        let grants = extension.grants();
        self.extension_with_files(extension, grants, files)
    }

    /// Adds an extension with these grants and a file port its tools may use
    /// (through [`RunContext::files`](crate::extension::RunContext::files), with the `files` grant).
    #[must_use]
    pub fn extension_with_files<F: Send + Sync + 'static>(
        mut self,
        extension: impl Extension,
        grants: Grants,
        files: Arc<F>,
    ) -> Self {
        self.extensions
            .push((Arc::new(extension), grants, Some(files)));
        self
    }

    /// Opens the Agent: brings extension state to its current schema version, starts
    /// the timer scheduler and resumes every Session that had work pending or running.
    pub async fn open(self) -> Result<Agent, ShiitakeError> {
        let registered: Vec<Registered> = self
            .extensions
            .into_iter()
            .map(|(extension, grants, files)| {
                let definition = extension.definition().clone();
                let revision = definition.revision();
                Registered {
                    extension,
                    definition,
                    grants,
                    revision,
                    files,
                }
            })
            .collect();
        let ownership = self.store.ownership();
        let core = Arc::new_cyclic(|core| AgentCore {
            ownership: ownership.clone(),
            store: self.store,
            tools: self.tools,
            config: Arc::new(self.config),
            owners: Arc::new(Registry::new(start_owners(core.clone()))),
            host: Arc::new(Host::new(registered)),
            closing: CancellationToken::new(),
        });
        if let Some(ownership) = &ownership {
            core.host
                .share_agent_state(core.store.clone(), ownership.clone());
        }
        lifecycle::open_extensions(core.agent_scope_deps()).await?;
        tokio::spawn(crate::timers::run(core.clone()));
        if let Some(ownership) = ownership {
            tokio::spawn(crate::shared::watch(core.clone(), ownership));
        }
        let agent = Agent { core };
        for session_id in agent.core.store.sessions_with_open_work().await? {
            agent.core.owners.mailbox(&session_id);
        }
        Ok(agent)
    }
}

/// Starts the task behind each mailbox the registry hands out: the owner's life
/// (`owner_task.rs`), in a span naming its Session. Holds the Agent weakly, so an
/// Agent dropped without `close` does not live on through its registry.
fn start_owners(core: std::sync::Weak<AgentCore>) -> registry::StartOwner {
    Box::new(move |slot| {
        let Some(core) = core.upgrade() else {
            // The Agent is gone: dropping the mailbox's receiver refuses its callers.
            return;
        };
        // `agent` is the host's name for the Agent (the tenant, on a Hub), when it has one.
        let agent = core.config.name.as_ref().map(AgentName::as_str);
        let span = tracing::info_span!(
            "owner",
            agent,
            session = %slot.session_id,
            generation = slot.generation
        );
        tokio::spawn(crate::owner_task::run(core, slot).instrument(span));
    })
}

impl Agent {
    /// Opens an Agent on `store` with no extensions; see [`Agent::builder`] for more.
    pub async fn open(
        store: Arc<dyn Store>,
        tools: Arc<Catalog>,
        config: AgentConfig,
    ) -> Result<Self, ShiitakeError> {
        Self::builder(store, tools, config).open().await
    }

    /// Starts building an Agent, to add extensions with their grants.
    pub fn builder(
        store: Arc<dyn Store>,
        tools: Arc<Catalog>,
        config: AgentConfig,
    ) -> AgentBuilder {
        AgentBuilder {
            store,
            tools,
            config,
            extensions: Vec::new(),
        }
    }

    /// How many Sessions have an owner in memory now.
    pub fn live_sessions(&self) -> usize {
        self.core.owners.len()
    }

    /// One Session's inbox row (its state and times), as [`AgentApi::list_sessions`]
    /// shows it, without paging through the inbox; `None` when there is no such Session.
    ///
    /// Read from the committed header, so it never starts the Session's owner: a host
    /// can look at many Sessions (a footer of sub-agents) without loading them.
    pub async fn session_summary(
        &self,
        session_id: &SessionId,
    ) -> Result<Option<SessionSummary>, ShiitakeError> {
        let Some(loaded) = self.core.store.load_session(session_id).await? else {
            return Ok(None);
        };
        let header = loaded.header;
        Ok(Some(SessionSummary {
            created_at: header.created_at,
            last_activity_at: header.last_activity_at,
            settled_at: header.settled_at,
            title: header.title,
            state: header.inbox_state,
        }))
    }
}

fn list_cursor(position: &ListPosition) -> Result<Cursor, ShiitakeError> {
    Cursor::new(format!(
        "l1.{}.{}.{}",
        position.rank, position.last_activity_at, position.session_id
    ))
    .map_err(ShiitakeError::from)
}

fn parse_list_cursor(cursor: &Cursor) -> Result<ListPosition, ShiitakeError> {
    let invalid = || ShiitakeError::invalid("not an inbox cursor of this Agent");
    let mut parts = cursor.as_str().splitn(4, '.');
    let (Some("l1"), Some(rank), Some(last), Some(id)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    Ok(ListPosition {
        rank: rank.parse().map_err(|_| invalid())?,
        last_activity_at: last.parse().map_err(|_| invalid())?,
        session_id: SessionId::new(id).map_err(|_| invalid())?,
    })
}

#[async_trait]
impl AgentApi for Agent {
    type Session = LocalSession;

    async fn create_session(&self, request_id: RequestId) -> Result<SessionId, ShiitakeError> {
        let store = &self.core.store;
        let header = SessionHeader::new(ids::session_id(), now_ms());
        let session_id = header.id.clone();
        let created = store
            .commit(vec![Op::CreateSession {
                header,
                request_id: Some(request_id.clone()),
            }])
            .await;
        match created {
            Ok(()) => Ok(session_id),
            // The unique index on request ids decides: an earlier or concurrent create
            // with this request id won, and its Session is the answer.
            Err(error) => match store.session_by_request(&request_id).await? {
                Some(existing) => Ok(existing),
                None => Err(error.into()),
            },
        }
    }

    async fn delete_session(&self, session_id: &SessionId) -> Result<bool, ShiitakeError> {
        if let Some(mailbox) = self.core.owners.live_mailbox(session_id) {
            registry::stop(&mailbox).await;
        }
        Ok(self.core.store.delete_session(session_id).await?)
    }

    async fn list_sessions(
        &self,
        after: Option<&Cursor>,
    ) -> Result<SessionSummaryPage, ShiitakeError> {
        let after = after.map(parse_list_cursor).transpose()?;
        let mut rows = self
            .core
            .store
            .list_sessions(after.as_ref(), PAGE_ROWS + 1)
            .await?;
        let next = if rows.len() > PAGE_ROWS {
            rows.truncate(PAGE_ROWS);
            rows.last()
                .map(|row| list_cursor(&row.position))
                .transpose()?
        } else {
            None
        };
        let sessions = rows
            .into_iter()
            .map(|row| match row.header {
                Ok(header) => SessionSummaryRow::Available {
                    session_id: header.id,
                    summary: SessionSummary {
                        created_at: header.created_at,
                        last_activity_at: header.last_activity_at,
                        settled_at: header.settled_at,
                        title: header.title,
                        state: header.inbox_state,
                    },
                },
                Err(session_id) => SessionSummaryRow::Unavailable { session_id },
            })
            .collect();
        Ok(SessionSummaryPage { sessions, next })
    }

    fn session(&self, session_id: SessionId) -> LocalSession {
        LocalSession::new(
            self.core.owners.clone(),
            self.core.closing.clone(),
            self.core.config.name.clone(),
            session_id,
        )
    }

    fn session_at(&self, address: &SessionAddress) -> Result<LocalSession, ShiitakeError> {
        let name = self.core.config.name.as_ref();
        match address.origin() {
            AddressOrigin::Local if address.agent() == name => {
                Ok(self.session(address.session_id().clone()))
            }
            AddressOrigin::Local => Err(ShiitakeError::invalid(format!(
                "{address} names the Agent {}, and this is the Agent {}",
                address.agent().map_or("without a name", AgentName::as_str),
                name.map_or("without a name", AgentName::as_str),
            ))),
            AddressOrigin::Http(base) => Err(ShiitakeError::invalid(format!(
                "{address} is a Session of the server at {base}; reach it with a RemoteAgent"
            ))),
        }
    }

    async fn catalogs(&self) -> Result<shiitake_protocol::catalog::SessionCatalogs, ShiitakeError> {
        Ok(lifecycle::catalogs(&self.core.host))
    }

    async fn tools(
        &self,
        profile: shiitake_protocol::ToolProfile,
    ) -> Result<shiitake_protocol::ToolList, ShiitakeError> {
        crate::tool_list::list(&self.core, profile).await
    }

    async fn list_extensions(&self) -> Result<Vec<ExtensionStatusV0>, ShiitakeError> {
        Ok(self
            .core
            .host
            .extensions
            .iter()
            .map(|r| lifecycle::status(&self.core.host, r))
            .collect())
    }

    async fn resume_extension(
        &self,
        extension_id: &ExtensionId,
    ) -> Result<ExtensionStatusV0, ShiitakeError> {
        lifecycle::resume(self.core.agent_scope_deps(), extension_id).await
    }

    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        lifecycle::call_agent_command(self.core.agent_scope_deps(), extension_id, command, input)
            .await
    }

    /// Stops every run without settling it and closes the store. On a store other
    /// processes share, this is a drain: the process first stops taking Sessions, then
    /// each owner hands its lease over as it stops, so the processes that stay resume
    /// the work at once (and do not count it as a recovery from a crash).
    async fn close(&self) -> Result<(), ShiitakeError> {
        if let Some(ownership) = &self.core.ownership
            && let Err(error) = ownership.drain().await
        {
            tracing::warn!(%error, "could not mark this process as draining; it takes no more Sessions all the same");
        }
        self.core.closing.cancel();
        let mailboxes = self.core.owners.all();
        futures::future::join_all(mailboxes.iter().map(registry::stop)).await;
        self.core.store.close().await;
        Ok(())
    }
}
