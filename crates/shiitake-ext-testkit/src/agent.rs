//! A real Agent on a temporary SQLite file with the scripted model and the extensions
//! a test registers.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use shiitake_capabilities::Catalog;
use shiitake_core::clock::{Clock, ManualClock};
use shiitake_core::extension::kit::KitExtension;
use shiitake_core::extension::{Extension, Grants};
use shiitake_core::store::Store;
use shiitake_core::{Agent, AgentBuilder, AgentConfig, FixedModel, LocalSession, RetryPolicy};
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::extension::ExtensionContract;
use shiitake_store_sqlite::{Durability, SqliteStore};
use tempfile::TempDir;

/// 2025-11-30T00:00:00Z, where [`paused_clock`] starts.
pub const START: u64 = 1_764_460_800_000;

/// A clock that reads [`START`] until the test moves it (`set`, `advance`), so a timer
/// a week away fires the moment the test says so and no test sleeps for real.
pub fn paused_clock() -> Arc<ManualClock> {
    ManualClock::new(START)
}

/// Retries a failed model call `max_attempts` times at most, 10 to 20 ms apart, so a
/// test of a failing model ends in milliseconds instead of the default backoff.
pub fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
    }
}

/// Adds an extension (or several) to the core builder when the Agent opens.
type Register = Box<dyn FnOnce(AgentBuilder) -> AgentBuilder + Send>;

/// An open Agent with what a test reads besides it: the scripted model (its
/// requests), the store, and the SQLite file to reopen it on.
pub struct TestAgent {
    /// The Agent.
    pub agent: Agent,
    /// The model every run of the Agent calls; it records the requests it received.
    pub model: Arc<ScriptedModel>,
    /// The store under the Agent, for what only the store shows (attention rows).
    pub store: Arc<SqliteStore>,
    path: PathBuf,
    dir: Option<TempDir>,
}

impl Debug for TestAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestAgent")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TestAgent {
    /// Starts building a test Agent: by default on a fresh temporary directory's
    /// `agent.db`, with an empty script, no tools, the system clock and no extensions.
    pub fn builder() -> TestAgentBuilder {
        TestAgentBuilder::default()
    }

    /// The SQLite file under the Agent, to open it again after a restart
    /// ([`TestAgentBuilder::file`]) or to read rows no API shows.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary directory the kit made for the file, when the test gave none;
    /// it lives as long as this value.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(TempDir::path)
    }

    /// A new Session of the Agent, for a test that needs one.
    pub async fn session(&self) -> LocalSession {
        shiitake_conformance::support::new_session(&self.agent).await
    }

    /// Gives up the temporary directory to the caller, so the file outlives this
    /// Agent (close it, then reopen on [`TestAgent::path`]).
    pub fn take_dir(&mut self) -> Option<TempDir> {
        self.dir.take()
    }
}

/// How a [`TestAgent`] is made: its file, script, tools, clock, configuration and
/// extensions. Everything has a default; a test states only what it depends on.
pub struct TestAgentBuilder {
    file: Option<PathBuf>,
    model: Option<Arc<ScriptedModel>>,
    script: Option<Script>,
    tools: Option<Arc<Catalog>>,
    /// The configuration so far; its model is set when the Agent opens.
    config: AgentConfig,
    register: Vec<Register>,
    wrap_store: Option<WrapStore>,
}

/// What stands in front of the test Agent's SQLite store (a store with a fault switch).
type WrapStore = Box<dyn FnOnce(Arc<dyn Store>) -> Arc<dyn Store> + Send>;

impl Default for TestAgentBuilder {
    fn default() -> Self {
        let unset = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
        Self {
            file: None,
            model: None,
            script: None,
            tools: None,
            config: AgentConfig::new(Arc::new(FixedModel(unset))),
            register: Vec::new(),
            wrap_store: None,
        }
    }
}

impl Debug for TestAgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestAgentBuilder")
            .field("file", &self.file)
            .field("extensions", &self.register.len())
            .finish_non_exhaustive()
    }
}

impl TestAgentBuilder {
    /// Puts what `wrap` makes of the SQLite store in front of it: the Agent opens on
    /// that (`shiitake_conformance::flaky_store`, to fail commits on purpose).
    #[must_use]
    pub fn wrap_store(
        mut self,
        wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store> + Send + 'static,
    ) -> Self {
        self.wrap_store = Some(Box::new(wrap));
        self
    }

    /// Opens on this SQLite file instead of a fresh one: a second Agent on the same
    /// database (a restart, a second process) or several Agents in one directory.
    #[must_use]
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.file = Some(path.into());
        self
    }

    /// The model answers with these turns, one per model call, in order.
    #[must_use]
    pub fn turns(self, turns: Vec<Turn>) -> Self {
        self.script(Script::new(turns))
    }

    /// The model plays this script (for `cycle` and the other script options).
    #[must_use]
    pub fn script(mut self, script: Script) -> Self {
        self.script = Some(script);
        self
    }

    /// The model is this one, shared with another Agent (the one before a restart)
    /// so the script goes on where it was; overrides [`Self::turns`].
    #[must_use]
    pub fn model(mut self, model: Arc<ScriptedModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The host's tools besides the extensions' own (none by default).
    #[must_use]
    pub fn tools(mut self, tools: Arc<Catalog>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The clock of timers and extension transactions; [`paused_clock`] for a test
    /// that moves time itself.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// Changes the Agent's configuration now (retries, deadlines, compaction); the
    /// model is the kit's and is set when the Agent opens.
    #[must_use]
    pub fn configure(mut self, change: impl FnOnce(&mut AgentConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Registers an extension with exactly these grants.
    #[must_use]
    pub fn extension(mut self, extension: impl Extension, grants: Grants) -> Self {
        self.register.push(Box::new(move |builder| {
            builder.extension(extension, grants)
        }));
        self
    }

    /// Registers an extension built with core's kit, granted what its declarations use.
    #[must_use]
    pub fn kit_extension<C, R>(mut self, extension: KitExtension<C, R>) -> Self
    where
        C: ExtensionContract,
        R: Clone + Send + Sync + 'static,
    {
        self.register
            .push(Box::new(move |builder| builder.kit_extension(extension)));
        self
    }

    /// Registers an extension with these grants and the file port its tools use.
    #[must_use]
    pub fn extension_with_files<F: Send + Sync + 'static>(
        mut self,
        extension: impl Extension,
        grants: Grants,
        files: Arc<F>,
    ) -> Self {
        self.register.push(Box::new(move |builder| {
            builder.extension_with_files(extension, grants, files)
        }));
        self
    }

    /// Registers extensions through a host's own composition function (such as an
    /// extension crate's `add_*`), which adds one or several with their grants.
    #[must_use]
    pub fn compose<E: Debug>(
        mut self,
        add: impl FnOnce(AgentBuilder) -> Result<AgentBuilder, E> + Send + 'static,
    ) -> Self {
        self.register
            .push(Box::new(move |builder| match add(builder) {
                Ok(builder) => builder,
                Err(error) => panic!("the test's composition refused to build: {error:?}"),
            }));
        self
    }

    /// Opens the store and the Agent; panics with the reason if either fails, as a
    /// test fixture does.
    pub async fn open(self) -> TestAgent {
        let (dir, path) = match self.file {
            Some(path) => (None, path),
            None => {
                let dir = match tempfile::tempdir() {
                    Ok(dir) => dir,
                    Err(error) => panic!("no temporary directory for the test Agent: {error}"),
                };
                let path = dir.path().join("agent.db");
                (Some(dir), path)
            }
        };
        let store = match SqliteStore::open(&path, Durability::Normal).await {
            Ok(store) => Arc::new(store),
            Err(error) => panic!("the test store at {} did not open: {error}", path.display()),
        };
        let model = self.model.unwrap_or_else(|| {
            Arc::new(ScriptedModel::new(
                self.script.unwrap_or_else(|| Script::new(Vec::new())),
            ))
        });
        let mut config = self.config;
        config.models = Arc::new(FixedModel(model.clone()));
        let tools = self.tools.unwrap_or_else(|| Arc::new(Catalog::new()));
        let opened_on: Arc<dyn Store> = match self.wrap_store {
            Some(wrap) => wrap(store.clone()),
            None => store.clone(),
        };
        let builder = self
            .register
            .into_iter()
            .fold(Agent::builder(opened_on, tools, config), |builder, add| {
                add(builder)
            });
        let agent = match builder.open().await {
            Ok(agent) => agent,
            Err(error) => panic!("the test Agent at {} did not open: {error}", path.display()),
        };
        TestAgent {
            agent,
            model,
            store,
            path,
            dir,
        }
    }
}
