//! The catalog: every live module of every source, with describe, execute and refresh.

use std::sync::{Arc, PoisonError, RwLock};

use futures::future::{join_all, select_all};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::context::InvocationContext;
use crate::error::{ForModelError, ForModelKind, ToolError};
use crate::execute::execute_operation;
use crate::module::{Module, ModuleDescriptor};
use crate::names::OperationPath;
use crate::operation::{OperationDescriptor, Replay};
use crate::snapshot::{CatalogDiff, CatalogProblem, Snapshot, ToolSpec};
use crate::source::{
    CapabilitySource, Invalidations, LeftOutPart, SourceError, SourceId, SourceState,
};

/// Why a catalog refused a change to its set of sources.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// A source with this id is already in the catalog.
    #[error("a source `{0}` is already in the catalog")]
    DuplicateSource(SourceId),
    /// No source has this id.
    #[error("no source `{0}` in the catalog")]
    UnknownSource(SourceId),
}

struct Slot {
    source: Arc<dyn CapabilitySource>,
    watch: Invalidations,
    seen: Option<SourceState>,
    modules: Vec<Module>,
    failed: bool,
    closed: bool,
}

impl Slot {
    /// Re-reads the source if its state moved since the last read or the last read failed.
    async fn reload(&mut self) -> Option<CatalogProblem> {
        let state = self.watch.current();
        if state == SourceState::Closed {
            self.closed = true;
            return None;
        }
        if self.seen == Some(state) && !self.failed {
            return None;
        }
        self.seen = Some(state);
        self.failed = false;
        match self.source.modules().await {
            Ok(modules) => {
                self.modules = modules;
                None
            }
            Err(SourceError::Closed) => {
                self.closed = true;
                None
            }
            Err(error) => {
                self.failed = true;
                self.modules.clear();
                Some(CatalogProblem::SourceFailed {
                    source_id: self.source.id().clone(),
                    error,
                })
            }
        }
    }
}

/// All live modules of a set of sources: what the model can call, and the door to call it.
///
/// Reads (`list`, `tools`, `describe`, `execute`) work on an immutable view
/// that is swapped after each change, so a call in flight is never blocked by
/// a refresh. Changes (`add_source`, `remove_source`, `refresh`, `close`) are
/// serialised and each returns a [`CatalogDiff`].
pub struct Catalog {
    slots: Mutex<Vec<Slot>>,
    view: RwLock<Arc<Snapshot>>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field(
                "modules",
                &self.current().modules.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self {
            slots: Mutex::new(Vec::new()),
            view: RwLock::new(Arc::new(Snapshot::default())),
        }
    }

    /// Adds a source and reads its modules now.
    pub async fn add_source(
        &self,
        source: Arc<dyn CapabilitySource>,
    ) -> Result<CatalogDiff, CatalogError> {
        let mut slots = self.slots.lock().await;
        if slots.iter().any(|s| s.source.id() == source.id()) {
            return Err(CatalogError::DuplicateSource(source.id().clone()));
        }
        let mut slot = Slot {
            watch: source.subscribe(),
            source,
            seen: None,
            modules: Vec::new(),
            failed: false,
            closed: false,
        };
        let problems = slot.reload().await.into_iter().collect();
        if !slot.closed {
            slots.push(slot);
        }
        Ok(self.rebuild(&slots, problems))
    }

    /// Removes a source, closes it and drops its modules.
    pub async fn remove_source(&self, id: &SourceId) -> Result<CatalogDiff, CatalogError> {
        let mut slots = self.slots.lock().await;
        let index = slots
            .iter()
            .position(|s| s.source.id() == id)
            .ok_or_else(|| CatalogError::UnknownSource(id.clone()))?;
        let slot = slots.remove(index);
        slot.source.close().await;
        Ok(self.rebuild(&slots, Vec::new()))
    }

    /// Re-reads, concurrently, every source invalidated since its last read or
    /// whose last read failed, and drops closed sources; returns what changed.
    pub async fn refresh(&self) -> CatalogDiff {
        let mut slots = self.slots.lock().await;
        let problems: Vec<CatalogProblem> = join_all(slots.iter_mut().map(Slot::reload))
            .await
            .into_iter()
            .flatten()
            .collect();
        slots.retain(|slot| !slot.closed);
        self.rebuild(&slots, problems)
    }

    /// Waits until any source present now is invalidated or closed; then call [`Catalog::refresh`].
    ///
    /// Returns at once if a source changed since the last refresh; pends
    /// forever when no source can change.
    pub async fn changed(&self) {
        let mut watches: Vec<Invalidations> = self
            .slots
            .lock()
            .await
            .iter()
            .map(|slot| slot.watch.clone())
            .collect();
        if watches.is_empty() {
            return std::future::pending().await;
        }
        select_all(watches.iter_mut().map(|w| Box::pin(w.changed()))).await;
    }

    /// Closes every source and empties the catalog.
    pub async fn close(&self) -> CatalogDiff {
        let mut slots = self.slots.lock().await;
        join_all(slots.iter().map(|slot| slot.source.close())).await;
        slots.clear();
        self.rebuild(&slots, Vec::new())
    }

    /// The ids of the sources in the catalog, in the order they were added.
    pub async fn source_ids(&self) -> Vec<SourceId> {
        let slots = self.slots.lock().await;
        slots.iter().map(|s| s.source.id().clone()).collect()
    }

    /// What the sources could not offer now, each with its source: their own
    /// [`CapabilitySource::left_out`], and a source whose last read failed whole.
    pub async fn left_out(&self) -> Vec<(SourceId, LeftOutPart)> {
        let slots = self.slots.lock().await;
        let mut out = Vec::new();
        for slot in slots.iter() {
            let id = slot.source.id();
            out.extend(
                slot.source
                    .left_out()
                    .into_iter()
                    .map(|part| (id.clone(), part)),
            );
            if slot.failed {
                out.push((
                    id.clone(),
                    LeftOutPart {
                        name: id.to_string(),
                        reason: "the source could not list its modules".to_owned(),
                    },
                ));
            }
        }
        out
    }

    /// Every live module, sorted by path.
    pub fn list(&self) -> Vec<ModuleDescriptor> {
        self.current().modules.values().cloned().collect()
    }

    /// Every operation as a model tool, sorted by module path, then advertised order.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.current().tools()
    }

    /// The operation path a provider tool name (what the model called) stands for.
    pub fn resolve_tool_name(&self, tool_name: &str) -> Option<OperationPath> {
        self.current().tools.get(tool_name).cloned()
    }

    /// The descriptor of the operation at `path` (`inputSchema` etc.), if it is live.
    pub fn describe(&self, path: &OperationPath) -> Option<OperationDescriptor> {
        self.current()
            .operations
            .get(path)
            .map(|op| op.descriptor(path.clone()))
    }

    /// Whether the operation at `path` may be re-run after a crash; `None` if it is not live.
    pub fn replay(&self, path: &OperationPath) -> Option<Replay> {
        self.current().operations.get(path).map(|op| op.replay())
    }

    /// What a person deciding about a call of `path` with `input` should know besides
    /// its arguments (empty when the operation says nothing or is not live).
    pub fn call_facts(&self, path: &OperationPath, input: &Value) -> crate::CallFacts {
        self.current()
            .operations
            .get(path)
            .map(|op| op.call_facts(input))
            .unwrap_or_default()
    }

    /// The execute door for `path`: see [`execute_operation`]; an unknown path is
    /// a `unknown_operation` error for the model.
    pub async fn execute(
        &self,
        path: &OperationPath,
        input: Value,
        ctx: &InvocationContext,
    ) -> Result<Value, ToolError> {
        execute_in(&self.current(), path, input, ctx).await
    }

    /// [`Catalog::execute`] by provider tool name, as the model called it.
    pub async fn execute_tool(
        &self,
        tool_name: &str,
        input: Value,
        ctx: &InvocationContext,
    ) -> Result<Value, ToolError> {
        // One snapshot both resolves the name and runs the operation.
        let snapshot = self.current();
        match snapshot.tools.get(tool_name) {
            Some(path) => execute_in(&snapshot, path, input, ctx).await,
            None => Err(unknown(tool_name.to_owned())),
        }
    }

    fn current(&self) -> Arc<Snapshot> {
        self.view
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn rebuild(&self, slots: &[Slot], mut problems: Vec<CatalogProblem>) -> CatalogDiff {
        let (snapshot, structural) = Snapshot::build(
            slots
                .iter()
                .map(|slot| (slot.source.id(), slot.modules.as_slice())),
        );
        problems.extend(structural);
        for problem in &problems {
            tracing::warn!(%problem, "capability catalog problem");
        }
        let mut view = self.view.write().unwrap_or_else(PoisonError::into_inner);
        let diff = snapshot.diff_from(&view, problems);
        *view = Arc::new(snapshot);
        diff
    }
}

/// Runs the operation at `path` as `snapshot` has it, borrowing it from the
/// snapshot (kept alive by the caller) rather than cloning it.
async fn execute_in(
    snapshot: &Snapshot,
    path: &OperationPath,
    input: Value,
    ctx: &InvocationContext,
) -> Result<Value, ToolError> {
    let Some(operation) = snapshot.operations.get(path) else {
        return Err(unknown(path.to_string()));
    };
    execute_operation(path, operation, input, ctx).await
}

fn unknown(name: String) -> ToolError {
    ToolError::ForModel(ForModelError::new(
        ForModelKind::UnknownOperation,
        format!("no tool `{name}` is available"),
    ))
}
