//! What the directory tests share: a tenant catalog in memory with one SQLite file
//! per Agent, scripted models by Agent name, and a directory over them.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use shiitake_core::clock::ManualClock;
use shiitake_core::store::Store;
use shiitake_core::{AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{AgentName, TenantName};
use shiitake_roster_hub::directory::HubDirectoryOptions;
use shiitake_roster_hub::{CatalogError, HubDirectory, HubLimits, TenantCatalog};
use shiitake_store_sqlite::{Durability, SqliteStore};

pub fn agent(name: &str) -> AgentName {
    AgentName::new(name).unwrap()
}

pub fn tenant(name: &str) -> TenantName {
    TenantName::new(name).unwrap()
}

/// Tenants in memory, each Agent's Sessions in `<dir>/<agent>.db`: the host's
/// catalog as the tests need it, with a count of every store opened.
pub struct MemoryCatalog {
    dir: PathBuf,
    tenants: Mutex<Vec<(TenantName, Vec<AgentName>)>>,
    opened: Mutex<HashMap<AgentName, usize>>,
    /// The store last opened for each Agent, for a test to write behind its Agent.
    stores: Mutex<HashMap<AgentName, Arc<dyn Store>>>,
    /// How long opening a store takes, to widen the window of concurrent first uses.
    pub open_delay: Duration,
}

impl MemoryCatalog {
    pub fn new(dir: &tempfile::TempDir, tenants: &[(&str, &[&str])]) -> Arc<Self> {
        Self::with_open_delay(dir, tenants, Duration::ZERO)
    }

    pub fn with_open_delay(
        dir: &tempfile::TempDir,
        tenants: &[(&str, &[&str])],
        open_delay: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            dir: dir.path().to_owned(),
            tenants: Mutex::new(
                tenants
                    .iter()
                    .map(|(name, agents)| (tenant(name), agents.iter().map(|a| agent(a)).collect()))
                    .collect(),
            ),
            opened: Mutex::new(HashMap::new()),
            stores: Mutex::new(HashMap::new()),
            open_delay,
        })
    }

    /// How many times the store of `name` was opened.
    pub fn stores_opened(&self, name: &str) -> usize {
        self.opened
            .lock()
            .unwrap()
            .get(&agent(name))
            .copied()
            .unwrap_or(0)
    }

    /// The store the Agent `name` has open now (the last one opened).
    pub fn open_store(&self, name: &str) -> Arc<dyn Store> {
        self.stores
            .lock()
            .unwrap()
            .get(&agent(name))
            .unwrap()
            .clone()
    }

    fn path(&self, name: &AgentName) -> PathBuf {
        self.dir.join(format!("{name}.db"))
    }

    fn all_agents(&self) -> Vec<AgentName> {
        let tenants = self.tenants.lock().unwrap();
        tenants
            .iter()
            .flat_map(|(_, agents)| agents.clone())
            .collect()
    }
}

#[async_trait]
impl TenantCatalog for MemoryCatalog {
    async fn tenant_of(&self, name: &AgentName) -> Result<Option<TenantName>, CatalogError> {
        let tenants = self.tenants.lock().unwrap();
        Ok(tenants
            .iter()
            .find(|(_, agents)| agents.contains(name))
            .map(|(tenant, _)| tenant.clone()))
    }

    async fn agents(&self, tenant: &TenantName) -> Result<Vec<AgentName>, CatalogError> {
        let tenants = self.tenants.lock().unwrap();
        tenants
            .iter()
            .find(|(known, _)| known == tenant)
            .map(|(_, agents)| agents.clone())
            .ok_or_else(|| CatalogError::NotFound(format!("no tenant {tenant}")))
    }

    async fn add_agent(
        &self,
        tenant: &TenantName,
        name: &AgentName,
        max_per_tenant: usize,
    ) -> Result<(), CatalogError> {
        let mut tenants = self.tenants.lock().unwrap();
        if tenants.iter().any(|(_, agents)| agents.contains(name)) {
            return Err(CatalogError::Exists(format!(
                "an Agent named {name} exists"
            )));
        }
        let (_, agents) = tenants
            .iter_mut()
            .find(|(known, _)| known == tenant)
            .ok_or_else(|| CatalogError::NotFound(format!("no tenant {tenant}")))?;
        if agents.len() >= max_per_tenant {
            return Err(CatalogError::Refused(format!(
                "the tenant {tenant} has {max_per_tenant} Agents, the most it may have"
            )));
        }
        agents.push(name.clone());
        Ok(())
    }

    async fn store(&self, name: &AgentName) -> Result<Arc<dyn Store>, CatalogError> {
        if !self.open_delay.is_zero() {
            tokio::time::sleep(self.open_delay).await;
        }
        let store = SqliteStore::open(&self.path(name), Durability::Normal)
            .await
            .map_err(|error| CatalogError::Unavailable(error.to_string()))?;
        *self.opened.lock().unwrap().entry(name.clone()).or_default() += 1;
        let store: Arc<dyn Store> = Arc::new(store);
        self.stores
            .lock()
            .unwrap()
            .insert(name.clone(), store.clone());
        Ok(store)
    }

    /// Agents whose database has a Session with open work or an armed timer, read
    /// from their files as the Hub's catalog reads its tables.
    async fn wanted(&self) -> Result<Vec<AgentName>, CatalogError> {
        let unavailable =
            |error: shiitake_core::store::StoreError| CatalogError::Unavailable(error.to_string());
        let mut wanted = Vec::new();
        for name in self.all_agents() {
            let path = self.path(&name);
            if !path.exists() {
                continue;
            }
            let store = SqliteStore::open(&path, Durability::Normal)
                .await
                .map_err(unavailable)?;
            let work = !store
                .sessions_with_open_work()
                .await
                .map_err(unavailable)?
                .is_empty();
            let timers = store.next_timer().await.map_err(unavailable)?.is_some();
            store.close().await;
            if work || timers {
                wanted.push(name);
            }
        }
        Ok(wanted)
    }
}

/// One scripted model per Agent name, kept across reopens so a script goes on where
/// it was; an Agent without a script echoes.
#[derive(Default)]
pub struct Models {
    by_agent: Mutex<HashMap<AgentName, Arc<ScriptedModel>>>,
}

impl Models {
    pub fn new(scripts: Vec<(&str, Vec<Turn>)>) -> Arc<Self> {
        let models = Self::default();
        for (name, turns) in scripts {
            models.by_agent.lock().unwrap().insert(
                agent(name),
                Arc::new(ScriptedModel::new(Script::new(turns))),
            );
        }
        Arc::new(models)
    }

    pub fn of(&self, name: &str) -> Arc<ScriptedModel> {
        self.model(&agent(name))
    }

    fn model(&self, name: &AgentName) -> Arc<ScriptedModel> {
        self.by_agent
            .lock()
            .unwrap()
            .entry(name.clone())
            .or_insert_with(|| {
                Arc::new(ScriptedModel::new(
                    Script::new(vec![Turn::echo()]).cycle(true),
                ))
            })
            .clone()
    }
}

/// Limits for tests: the sweep only when a test calls it.
pub fn limits(max_open_tenants: usize, idle: Duration, max_agents_per_tenant: usize) -> HubLimits {
    HubLimits {
        max_open_tenants,
        idle,
        max_agents_per_tenant,
        sweep_every: None,
    }
}

/// Directory options over `catalog` and `models`, idle time read from `clock`; a
/// Session's owner leaves 50 ms after its last request, so a tenant without work
/// has no owner soon.
pub fn options(
    catalog: Arc<MemoryCatalog>,
    models: Arc<Models>,
    clock: Arc<ManualClock>,
    limits: HubLimits,
) -> HubDirectoryOptions {
    let fixed = Arc::new(FixedModel(models.model(&agent("unused"))));
    let mut options = HubDirectoryOptions::new(catalog, fixed);
    options.config = Arc::new(move |name| {
        let mut config = AgentConfig::new(Arc::new(FixedModel(models.model(name))));
        config.owner_idle = Duration::from_millis(50);
        config
    });
    options.limits = limits;
    options.clock = clock;
    options
}

pub fn start(options: HubDirectoryOptions) -> HubDirectory {
    HubDirectory::start(options).unwrap()
}

/// Waits (bounded) until no Session of `name` has an owner in memory.
pub async fn owners_gone(directory: &HubDirectory, name: &str) {
    let agent = directory.agent(&agent(name)).await.unwrap();
    shiitake_conformance::support::eventually(|| agent.live_sessions() == 0).await;
}

/// A model turn that waits an hour in its call (cancellable) before it answers: a
/// run that stays in progress for as long as a test looks.
pub fn an_hours_wait() -> Turn {
    Turn::new(vec![Step::DelayMs(3_600_000), Step::Text("Late.".into())])
}

/// Runs `prompt` in a new Session of `agent` to its terminal; the transcript's outline.
pub async fn prompt_once(agent: &shiitake_core::Agent, prompt: &str) -> Vec<String> {
    use shiitake_conformance::support::*;
    let session = new_session(agent).await;
    let sent = send(&session, prompt).await;
    terminal_of(&session, &sent).await;
    outline(&transcript(&session).await)
}
