//! One open tenant: its Agents as a group, and the view of the directory each of
//! them gets.
//!
//! A tenant opens as a unit because an Agent reaches its siblings synchronously
//! ([`AgentDirectory::agent`]): the view answers from the group in memory, and only
//! from it, so another tenant's Agent is simply absent.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, Weak};

use async_trait::async_trait;
use shiitake_core::Agent;
use shiitake_core::store::Store;
use shiitake_ext_home::Computers;
use shiitake_protocol::{AgentName, TenantName};
use shiitake_roster_conversation_agents::{AgentDirectory, DirectoryError};

use super::catalog::CatalogError;
use super::options::HubDirectoryOptions;
use crate::{HubAgent, HubOptions};

/// One open Agent of a tenant, with its store (for the timer read).
struct Member {
    name: AgentName,
    hub: HubAgent,
    /// The one handle handed out while it is open, so a host may key what it builds
    /// per Agent (the server's routers) by it.
    shared: Arc<Agent>,
    store: Arc<dyn Store>,
}

#[derive(Default)]
struct Members {
    /// Set once the group is closing: nothing joins it and nothing is found in it.
    sealed: bool,
    /// In the catalog's order, the tenant's first Agent first, then those that joined.
    agents: Vec<Member>,
}

/// The open Agents of one tenant.
pub(super) struct Group {
    tenant: TenantName,
    options: Arc<HubDirectoryOptions>,
    computers: Arc<dyn Computers>,
    members: RwLock<Members>,
    /// Held while an Agent joins the group (created, or found in the catalog), so
    /// one name is opened once.
    joining: tokio::sync::Mutex<()>,
}

impl Group {
    /// Opens every Agent of `tenant`, in the catalog's order. If one fails, those
    /// already open are closed again.
    pub(super) async fn open(
        options: Arc<HubDirectoryOptions>,
        tenant: &TenantName,
    ) -> Result<Arc<Self>, CatalogError> {
        let names = options.catalog.agents(tenant).await?;
        let computers = (options.computers)(tenant);
        let group = Arc::new(Self {
            tenant: tenant.clone(),
            options,
            computers,
            members: RwLock::new(Members::default()),
            joining: tokio::sync::Mutex::new(()),
        });
        for name in names {
            match group.open_member(&name).await {
                // Each is reachable by its siblings as soon as it is open.
                Ok(member) => group.write().agents.push(member),
                Err(error) => {
                    group.close().await;
                    return Err(error);
                }
            }
        }
        Ok(group)
    }

    fn read(&self) -> RwLockReadGuard<'_, Members> {
        self.members.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Members> {
        self.members.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn tenant(&self) -> &TenantName {
        &self.tenant
    }

    /// The open Agent `name` of this tenant.
    pub(super) fn find(&self, name: &AgentName) -> Option<Arc<Agent>> {
        let members = self.read();
        if members.sealed {
            return None;
        }
        members
            .agents
            .iter()
            .find(|member| &member.name == name)
            .map(|member| member.shared.clone())
    }

    /// Whether `name` is one of the group's open Agents.
    pub(super) fn holds(&self, name: &AgentName) -> bool {
        self.find(name).is_some()
    }

    /// The open Agents' names, in order.
    pub(super) fn names(&self) -> Vec<AgentName> {
        let members = self.read();
        if members.sealed {
            return Vec::new();
        }
        members
            .agents
            .iter()
            .map(|member| member.name.clone())
            .collect()
    }

    /// Whether any Agent has work in progress in this process: a Session with an
    /// owner in memory (core's owners leave only when they have no run, no queued
    /// prompt, no waiting line and no watcher) or an armed timer. A timer that
    /// cannot be read counts as armed: closing is never the guess.
    pub(super) async fn has_work(&self) -> bool {
        let agents: Vec<(AgentName, Agent, Arc<dyn Store>)> = self
            .read()
            .agents
            .iter()
            .map(|member| {
                (
                    member.name.clone(),
                    member.hub.agent().clone(),
                    member.store.clone(),
                )
            })
            .collect();
        for (name, agent, store) in agents {
            if agent.live_sessions() > 0 {
                return true;
            }
            match store.next_timer().await {
                Ok(None) => {}
                Ok(Some(_)) => return true,
                Err(error) => {
                    tracing::warn!(agent = %name, %error, "could not read the Agent's timers; the tenant stays open");
                    return true;
                }
            }
        }
        false
    }

    /// Seals the group unless the slot was used since `uses` was read (`current` is
    /// read under the group's lock, so a use either comes before and is seen, or
    /// after and finds the group sealed). Sealed, nothing is found in it any more.
    pub(super) fn seal_unless_used(&self, uses: u64, current: impl Fn() -> u64) -> bool {
        let mut members = self.write();
        if members.sealed {
            return true;
        }
        if current() != uses {
            return false;
        }
        members.sealed = true;
        true
    }

    /// Seals the group and closes every Agent in it; accepted work stays durable.
    pub(super) async fn close(&self) {
        let agents = {
            let mut members = self.write();
            members.sealed = true;
            std::mem::take(&mut members.agents)
        };
        for member in agents {
            self.close_member(member).await;
        }
    }

    /// Closes one Agent; a failure is logged, as its accepted work is durable anyway.
    async fn close_member(&self, member: Member) {
        if let Err(error) = member.hub.close().await {
            tracing::warn!(tenant = %self.tenant, agent = %member.name, %error, "an Agent did not close cleanly");
        }
    }

    /// Opens the Agent `name` (its store from the catalog) with the Hub composition
    /// and this tenant's view of the directory.
    async fn open_member(self: &Arc<Self>, name: &AgentName) -> Result<Member, CatalogError> {
        let store = self.options.catalog.store(name).await?;
        let view: Arc<dyn AgentDirectory> = Arc::new(TenantView {
            group: Arc::downgrade(self),
        });
        let hub = HubAgent::open(HubOptions {
            name: name.clone(),
            store: store.clone(),
            tools: self.options.tools.clone(),
            config: (self.options.config)(name),
            skills: self.options.skills.clone(),
            computers: self.computers.clone(),
            directory: view,
            approval: self.options.approval.clone(),
        })
        .await
        .map_err(|error| CatalogError::Unavailable(error.to_string()))?;
        Ok(Member {
            name: name.clone(),
            shared: Arc::new(hub.agent().clone()),
            hub,
            store,
        })
    }

    /// Adds the open `member`, or closes it again when the group was sealed meanwhile.
    async fn admit(&self, member: Member) -> Result<Arc<Agent>, CatalogError> {
        let agent = member.shared.clone();
        let refused = {
            let mut members = self.write();
            if members.sealed {
                Some(member)
            } else {
                members.agents.push(member);
                None
            }
        };
        match refused {
            None => Ok(agent),
            Some(member) => {
                self.close_member(member).await;
                Err(CatalogError::Unavailable(format!(
                    "the tenant {} is closing; try again",
                    self.tenant
                )))
            }
        }
    }

    /// Opens the catalog's Agent `name` into the group (another process created it
    /// after this tenant opened here), unless it is open already.
    pub(super) async fn join(
        self: &Arc<Self>,
        name: &AgentName,
    ) -> Result<Arc<Agent>, CatalogError> {
        let _one_at_a_time = self.joining.lock().await;
        if let Some(agent) = self.find(name) {
            return Ok(agent);
        }
        let member = self.open_member(name).await?;
        self.admit(member).await
    }

    /// `agents.create`: the host's admission (the catalog, at the per-tenant bound),
    /// then the new Agent opens into the group.
    async fn create(self: &Arc<Self>, name: &AgentName) -> Result<Agent, DirectoryError> {
        let failed = |error: CatalogError| DirectoryError::Failed {
            name: name.clone(),
            reason: error.to_string(),
        };
        let _one_at_a_time = self.joining.lock().await;
        if self.find(name).is_some() {
            return Err(DirectoryError::Exists(name.clone()));
        }
        let max = self.options.limits.max_agents_per_tenant;
        match self
            .options
            .catalog
            .add_agent(&self.tenant, name, max)
            .await
        {
            Ok(()) => {}
            Err(CatalogError::Exists(_)) => return Err(self.taken(name).await),
            Err(CatalogError::Refused(reason)) => {
                return Err(DirectoryError::Refused {
                    name: name.clone(),
                    reason,
                });
            }
            Err(error) => return Err(failed(error)),
        }
        let member = self.open_member(name).await.map_err(failed)?;
        let agent = self.admit(member).await.map_err(failed)?;
        Ok(Agent::clone(&agent))
    }
}

impl Group {
    /// Why a name the catalog has taken cannot be created: it is a sibling (the model
    /// may send it work), or another tenant's, which this tenant must not learn of
    /// beyond "taken" (agent names are one namespace across the Hub).
    async fn taken(&self, name: &AgentName) -> DirectoryError {
        match self.options.catalog.agents(&self.tenant).await {
            Ok(siblings) if siblings.contains(name) => DirectoryError::Exists(name.clone()),
            _ => DirectoryError::Refused {
                name: name.clone(),
                reason: "the name is taken on this Hub; choose another".into(),
            },
        }
    }
}

/// The directory as one tenant's Agents see it: their siblings, and nobody else.
struct TenantView {
    group: Weak<Group>,
}

#[async_trait]
impl AgentDirectory for TenantView {
    fn agent(&self, name: &AgentName) -> Option<Agent> {
        self.group
            .upgrade()?
            .find(name)
            .map(|agent| Agent::clone(&agent))
    }

    fn names(&self) -> Vec<AgentName> {
        self.group
            .upgrade()
            .map(|group| group.names())
            .unwrap_or_default()
    }

    async fn create(&self, name: &AgentName) -> Result<Agent, DirectoryError> {
        let group = self.group.upgrade().ok_or_else(|| DirectoryError::Failed {
            name: name.clone(),
            reason: "the tenant is closing".into(),
        })?;
        group.create(name).await
    }
}
