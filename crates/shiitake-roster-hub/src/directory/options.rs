//! What a Hub host chooses for its directory: the catalog, what every Agent gets,
//! each tenant's Computers, and the bounds.

use std::sync::Arc;
use std::time::Duration;

use shiitake_capabilities::Catalog;
use shiitake_core::clock::{Clock, SystemClock};
use shiitake_core::{AgentConfig, ModelResolver};
use shiitake_ext_approval::policy::Policy;
use shiitake_ext_home::{ComputerList, Computers};
use shiitake_ext_skills::SkillLibrary;
use shiitake_protocol::{AgentName, TenantName};

use super::catalog::TenantCatalog;

/// Each Agent's configuration, by name (model, retries, clock).
pub type ConfigFor = Arc<dyn Fn(&AgentName) -> AgentConfig + Send + Sync>;

/// Each tenant's Computers: the host roots every tenant's apart, so one tenant's file
/// tools never see another's files. Asked once each time the tenant opens.
pub type ComputersFor = Arc<dyn Fn(&TenantName) -> Arc<dyn Computers> + Send + Sync>;

/// The host's rules for how much one process holds open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubLimits {
    /// Most tenants open at once in this process; one more first closes the least
    /// recently used idle tenant, or is refused when none is idle.
    pub max_open_tenants: usize,
    /// How long a tenant stays open unused before the sweep closes it (if it has no
    /// work in progress).
    pub idle: Duration,
    /// Most Agents one tenant may have (`agents.create` is refused at it).
    pub max_agents_per_tenant: usize,
    /// How often the background sweep runs (idle close, `wanted` opens); `None` runs
    /// none, and the host calls [`HubDirectory::sweep`](super::HubDirectory::sweep).
    pub sweep_every: Option<Duration>,
}

impl Default for HubLimits {
    /// 256 open tenants, 10 minutes idle, 16 Agents per tenant, a sweep every 30 s.
    fn default() -> Self {
        Self {
            max_open_tenants: 256,
            idle: Duration::from_secs(600),
            max_agents_per_tenant: 16,
            sweep_every: Some(Duration::from_secs(30)),
        }
    }
}

/// A bound the directory cannot run with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hub directory: {limit} {reason}")]
pub struct LimitError {
    /// Which [`HubLimits`] field.
    pub limit: &'static str,
    /// What it must be.
    pub reason: &'static str,
}

impl HubLimits {
    /// Refuses bounds that would make the directory useless: nothing may open, no
    /// Agent may exist, or a tenant would close the moment it opens.
    pub fn check(&self) -> Result<(), LimitError> {
        let refuse = |limit, reason| Err(LimitError { limit, reason });
        if self.max_open_tenants == 0 {
            return refuse("max_open_tenants", "must be at least 1");
        }
        if self.max_agents_per_tenant == 0 {
            return refuse("max_agents_per_tenant", "must be at least 1");
        }
        if self.idle.is_zero() {
            return refuse("idle", "must be longer than zero");
        }
        if self.sweep_every.is_some_and(|every| every.is_zero()) {
            return refuse("sweep_every", "must be longer than zero");
        }
        Ok(())
    }
}

/// How [`HubDirectory::start`](super::HubDirectory::start) builds the directory: the
/// per-process parts every Hub Agent gets, and the host's rules.
#[derive(Clone)]
pub struct HubDirectoryOptions {
    /// Where the tenants, their Agents and their stores are.
    pub catalog: Arc<dyn TenantCatalog>,
    /// The tools every Agent's runs get besides the extensions'.
    pub tools: Arc<Catalog>,
    /// Each Agent's configuration.
    pub config: ConfigFor,
    /// The host's skills, if any.
    pub skills: Option<Arc<SkillLibrary>>,
    /// Which tool calls wait for a person's approval, in every Agent.
    pub approval: Policy,
    /// Each tenant's Computers.
    pub computers: ComputersFor,
    /// The bounds.
    pub limits: HubLimits,
    /// The clock idle time is measured by and the sweep waits on (a
    /// [`ManualClock`](shiitake_core::clock::ManualClock) in tests).
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for HubDirectoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubDirectoryOptions")
            .field("limits", &self.limits)
            .field("approval", &self.approval)
            .finish_non_exhaustive()
    }
}

impl HubDirectoryOptions {
    /// Defaults over `catalog` with `models` for every Agent: no extra tools, no
    /// skills, no Computers, approvals asked before edits, the default
    /// [`HubLimits`], the system clock.
    pub fn new(catalog: Arc<dyn TenantCatalog>, models: Arc<dyn ModelResolver>) -> Self {
        Self {
            catalog,
            tools: Arc::new(Catalog::new()),
            config: Arc::new(move |_| AgentConfig::new(models.clone())),
            skills: None,
            approval: Policy::asks_before_edits(),
            computers: Arc::new(|_| Arc::new(ComputerList::default())),
            limits: HubLimits::default(),
            clock: Arc::new(SystemClock),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_refused_below_their_edge() {
        assert_eq!(HubLimits::default().check(), Ok(()));
        let edge = HubLimits {
            max_open_tenants: 1,
            idle: Duration::from_millis(1),
            max_agents_per_tenant: 1,
            sweep_every: Some(Duration::from_millis(1)),
        };
        assert_eq!(edge.check(), Ok(()));
        let refused = |limits: HubLimits| limits.check().map_err(|error| error.limit);
        assert_eq!(
            refused(HubLimits {
                max_open_tenants: 0,
                ..edge
            }),
            Err("max_open_tenants")
        );
        assert_eq!(
            refused(HubLimits {
                max_agents_per_tenant: 0,
                ..edge
            }),
            Err("max_agents_per_tenant")
        );
        assert_eq!(
            refused(HubLimits {
                idle: Duration::ZERO,
                ..edge
            }),
            Err("idle")
        );
        assert_eq!(
            refused(HubLimits {
                sweep_every: Some(Duration::ZERO),
                ..edge
            }),
            Err("sweep_every")
        );
        assert_eq!(
            HubLimits {
                sweep_every: None,
                ..edge
            }
            .check(),
            Ok(())
        );
    }
}
