//! Capability sources: async providers of modules that can be invalidated and closed.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::module::Module;

/// Names a source within a catalog (e.g. `files`, `computers`, `mcp:notes`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SourceId(String);

impl SourceId {
    /// Wraps a name the host chose.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a source could not list its modules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The provider could not be reached or advertised something unusable.
    #[error("source unavailable: {0}")]
    Unavailable(String),
    /// The source has been closed.
    #[error("source is closed")]
    Closed,
}

/// Where a source is in its life, as its invalidation channel carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceState {
    /// Live; the generation grows by one on every invalidation.
    Live {
        /// How many times the source has been invalidated.
        generation: u64,
    },
    /// Closed for good; its modules leave the catalog.
    Closed,
}

/// A provider of modules: Files, the Computers list, one MCP server, an extension's tools.
///
/// The catalog calls [`modules`](CapabilitySource::modules) when the source is
/// added and again after each invalidation signalled on
/// [`subscribe`](CapabilitySource::subscribe). A source owns its own timeouts
/// for slow providers.
#[async_trait]
pub trait CapabilitySource: Send + Sync {
    /// The source's name within a catalog.
    fn id(&self) -> &SourceId;

    /// The modules the source advertises now.
    async fn modules(&self) -> Result<Vec<Module>, SourceError>;

    /// A receiver of invalidations and of closure; [`Invalidations::never`] for a fixed source.
    fn subscribe(&self) -> Invalidations;

    /// Releases the source's resources; called when the catalog drops it. Idempotent.
    async fn close(&self);

    /// What the source could not offer now, and why (an MCP server that refused its
    /// credential), for an operator's view of the tools; none by default.
    fn left_out(&self) -> Vec<LeftOutPart> {
        Vec::new()
    }
}

/// A part of a source it could not offer: its name and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOutPart {
    /// The module it would have offered (`env.mcp.locked`), or the source's id when
    /// the whole source failed.
    pub name: String,
    /// Why, in the source's words.
    pub reason: String,
}

/// The sending side of a source's invalidation channel, kept by the source.
#[derive(Debug)]
pub struct Invalidator {
    tx: watch::Sender<SourceState>,
}

impl Default for Invalidator {
    fn default() -> Self {
        Self::new()
    }
}

impl Invalidator {
    /// A live channel at generation 0.
    pub fn new() -> Self {
        Self {
            tx: watch::Sender::new(SourceState::Live { generation: 0 }),
        }
    }

    /// Signals that the advertised modules changed (e.g. the host's Computer list changed).
    pub fn invalidate(&self) {
        self.tx.send_modify(|state| {
            if let SourceState::Live { generation } = state {
                *generation += 1;
            }
        });
    }

    /// Signals that the source is closed for good.
    pub fn close(&self) {
        self.tx.send_replace(SourceState::Closed);
    }

    /// The current state.
    pub fn state(&self) -> SourceState {
        *self.tx.borrow()
    }

    /// A new receiver; it wakes on changes after the current state.
    pub fn subscribe(&self) -> Invalidations {
        Invalidations {
            rx: self.tx.subscribe(),
        }
    }
}

/// The receiving side: wait for the next invalidation without polling.
#[derive(Debug, Clone)]
pub struct Invalidations {
    rx: watch::Receiver<SourceState>,
}

impl Invalidations {
    /// A receiver for a source that never changes.
    pub fn never() -> Self {
        let (_, rx) = watch::channel(SourceState::Live { generation: 0 });
        Self { rx }
    }

    /// The latest state, marking it seen.
    pub fn current(&mut self) -> SourceState {
        *self.rx.borrow_and_update()
    }

    /// Waits until the state changes after the last one seen, and returns it.
    ///
    /// Pends forever once the sender is gone (a source that cannot change again).
    pub async fn changed(&mut self) -> SourceState {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
        self.current()
    }
}

/// A source with a fixed list of modules that its owner may replace or close.
///
/// Enough for an extension's tools (`question`) and for sources that rebuild
/// their module list themselves and then call [`StaticSource::replace`].
#[derive(Debug)]
pub struct StaticSource {
    id: SourceId,
    modules: Mutex<Vec<Module>>,
    invalidator: Invalidator,
}

impl StaticSource {
    /// A live source advertising `modules`.
    pub fn new(id: SourceId, modules: Vec<Module>) -> Self {
        Self {
            id,
            modules: Mutex::new(modules),
            invalidator: Invalidator::new(),
        }
    }

    /// Replaces the advertised modules and invalidates the source.
    pub fn replace(&self, modules: Vec<Module>) {
        *self.modules.lock().unwrap_or_else(PoisonError::into_inner) = modules;
        self.invalidator.invalidate();
    }

    /// Closes the source without a catalog asking (its modules leave at the next refresh).
    pub fn close_now(&self) {
        self.invalidator.close();
    }
}

#[async_trait]
impl CapabilitySource for StaticSource {
    fn id(&self) -> &SourceId {
        &self.id
    }

    async fn modules(&self) -> Result<Vec<Module>, SourceError> {
        if self.invalidator.state() == SourceState::Closed {
            return Err(SourceError::Closed);
        }
        Ok(self
            .modules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }

    fn subscribe(&self) -> Invalidations {
        self.invalidator.subscribe()
    }

    async fn close(&self) {
        self.invalidator.close();
    }
}
