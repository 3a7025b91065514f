//! The directory of a Hub process: every tenant of the database, each opened on
//! first use and closed when idle, with a bound on how many are open.
//!
//! The host gives it a [`TenantCatalog`] (which tenant owns which Agent, where each
//! Agent's store is, which Agents have work waiting) and the parts every Hub Agent
//! gets. [`HubDirectory::agent`] opens the owning tenant on first use, all its Agents
//! at once ([`HubAgent::open`](crate::HubAgent::open) each), because an Agent reaches
//! its siblings synchronously; each Agent's [`AgentDirectory`](crate::AgentDirectory)
//! is a view of its own tenant only, and `agents.create` in it is admitted by the host's
//! bound ([`HubLimits::max_agents_per_tenant`]).
//!
//! A tenant unused for [`HubLimits::idle`] with no work in progress (no Session owner
//! in memory, so no run, queued prompt, waiting line or watcher, and no armed timer)
//! is closed by the [sweep](HubDirectory::sweep), which also opens every tenant whose
//! Agents the catalog reports with work waiting. Opening a tenant past
//! [`HubLimits::max_open_tenants`] first closes the least recently used idle one; when
//! every open tenant is busy, the open is refused [`CatalogError::Unavailable`].
//! Closing is [`HubAgent::close`](crate::HubAgent::close): durable, and on a shared
//! store a handover to the other processes. `docs/hub.md`, "The directory of
//! tenants", has the whole story.

mod catalog;
mod open_set;
mod options;
mod sweep;
mod tenant;

use std::sync::Arc;

use shiitake_core::Agent;
use shiitake_protocol::{AgentName, TenantName};
use tokio_util::sync::CancellationToken;

pub use catalog::{CatalogError, TenantCatalog};
pub use options::{ComputersFor, ConfigFor, HubDirectoryOptions, HubLimits, LimitError};
pub use sweep::Swept;

use open_set::OpenSet;
use tenant::Group;

/// What every handle of one directory shares.
struct Inner {
    options: Arc<HubDirectoryOptions>,
    set: OpenSet,
    /// Cancelled by `close`: nothing opens any more, and the sweep stops.
    closing: CancellationToken,
    sweeper: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Every tenant of a Hub's database, as one process serves them; cloning is cheap
/// and shares them.
#[derive(Clone)]
pub struct HubDirectory {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HubDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubDirectory")
            .field("limits", &self.inner.options.limits)
            .field("open_tenants", &self.open_tenants())
            .finish_non_exhaustive()
    }
}

impl HubDirectory {
    /// A directory with no tenant open yet, sweeping every
    /// [`HubLimits::sweep_every`] (on the calling tokio runtime); refuses bounds
    /// [`HubLimits::check`] refuses.
    pub fn start(options: HubDirectoryOptions) -> Result<Self, LimitError> {
        options.limits.check()?;
        let every = options.limits.sweep_every;
        let inner = Arc::new(Inner {
            options: Arc::new(options),
            set: OpenSet::default(),
            closing: CancellationToken::new(),
            sweeper: std::sync::Mutex::new(None),
        });
        if let Some(every) = every {
            let task = tokio::spawn(sweep::run(
                Arc::downgrade(&inner),
                every,
                inner.closing.clone(),
            ));
            *inner
                .sweeper
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
        }
        Ok(Self { inner })
    }

    /// The Agent `name`, opening its tenant here on first use (concurrent first uses
    /// open it once). Every call counts as a use of the tenant, for the idle time and
    /// the least-recently-used order.
    pub async fn agent(&self, name: &AgentName) -> Result<Agent, CatalogError> {
        let agent = self.shared_agent(name).await?;
        Ok(Agent::clone(&agent))
    }

    /// As [`HubDirectory::agent`], as the one `Arc` handed out while the tenant stays
    /// open here (another after it reopens), so a host that keeps something per Agent
    /// (the server's router cache, keyed by the `Arc`) never serves the closed one: it
    /// builds anew for the new `Arc`, and the old entry waits for the cache's bound.
    pub async fn shared_agent(&self, name: &AgentName) -> Result<Arc<Agent>, CatalogError> {
        self.reach(name).await.map(|(agent, _)| agent)
    }

    /// The Agent `name`, and the tenant this call opened, if it opened one.
    async fn reach(
        &self,
        name: &AgentName,
    ) -> Result<(Arc<Agent>, Option<TenantName>), CatalogError> {
        let inner = &self.inner;
        refuse_if_closing(inner)?;
        let now = || inner.options.clock.now_ms();
        if let Some((slot, group)) = inner.set.holding(name) {
            // The use comes first: a close that seals the group after it gives up.
            slot.touch(now());
            if let Some(agent) = group.find(name) {
                return Ok((agent, None));
            }
        }
        let tenant = inner
            .options
            .catalog
            .tenant_of(name)
            .await?
            .ok_or_else(|| CatalogError::NotFound(format!("no Agent named {name}")))?;
        let slot = inner.set.slot(&tenant);
        let mut state = slot.state.lock().await;
        refuse_if_closing(inner)?;
        slot.touch(now());
        let (group, opened) = match &*state {
            Some(group) => (group.clone(), None),
            None => {
                inner.make_room(&tenant).await?;
                match Group::open(inner.options.clone(), &tenant).await {
                    Ok(group) => {
                        *state = Some(group.clone());
                        slot.mirror(Some(group.clone()));
                        tracing::info!(%tenant, "opened a tenant");
                        (group, Some(tenant.clone()))
                    }
                    Err(error) => {
                        inner.set.release();
                        return Err(error);
                    }
                }
            }
        };
        drop(state);
        let agent = match group.find(name) {
            Some(agent) => agent,
            // Created by another process after the tenant opened here.
            None => group.join(name).await?,
        };
        Ok((agent, opened))
    }

    /// The tenant that owns `agent`: from the open tenants when it is open here,
    /// else from the catalog.
    pub async fn tenant_of(&self, agent: &AgentName) -> Result<Option<TenantName>, CatalogError> {
        if let Some((_, group)) = self.inner.set.holding(agent) {
            return Ok(Some(group.tenant().clone()));
        }
        self.inner.options.catalog.tenant_of(agent).await
    }

    /// The tenant's Agents, first one first, as the catalog has them (open here or not).
    pub async fn names_of(&self, tenant: &TenantName) -> Result<Vec<AgentName>, CatalogError> {
        self.inner.options.catalog.agents(tenant).await
    }

    /// The tenants open in this process now, by name.
    pub fn open_tenants(&self) -> Vec<TenantName> {
        self.inner.set.open_tenants()
    }

    /// Closes `tenant` here whatever it is doing (its work stays durable and resumes
    /// when it opens again, here or elsewhere): for a tenant being deleted. `false`
    /// when it was not open.
    pub async fn close_tenant(&self, tenant: &TenantName) -> bool {
        let slot = self.inner.set.slot(tenant);
        close_slot(&self.inner, &slot).await
    }

    /// Stops the sweep and closes every tenant; nothing opens afterwards.
    pub async fn close(&self) {
        self.inner.closing.cancel();
        let sweeper = self
            .inner
            .sweeper
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sweeper) = sweeper
            && let Err(error) = sweeper.await
        {
            tracing::warn!(%error, "the tenant sweep ended badly");
        }
        for slot in self.inner.set.all_slots() {
            close_slot(&self.inner, &slot).await;
        }
    }
}

/// Closes the slot's tenant if it is open, waiting for its lock.
async fn close_slot(inner: &Inner, slot: &open_set::Slot) -> bool {
    let mut state = slot.state.lock().await;
    let Some(group) = state.take() else {
        return false;
    };
    slot.mirror(None);
    group.close().await;
    inner.set.release();
    true
}

fn refuse_if_closing(inner: &Inner) -> Result<(), CatalogError> {
    if inner.closing.is_cancelled() {
        return Err(CatalogError::Unavailable(
            "the Hub's directory is closing".into(),
        ));
    }
    Ok(())
}
