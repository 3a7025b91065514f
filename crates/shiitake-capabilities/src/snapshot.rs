//! One immutable view of a catalog: modules, operations and tool names, plus diffs between views.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::module::{Module, ModuleDescriptor};
use crate::names::{ModulePath, OperationPath};
use crate::operation::Operation;
use crate::source::{SourceError, SourceId};
use crate::tool_name::{ToolName, flatten};

/// Something wrong a catalog noticed while (re)building; the rest stays available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogProblem {
    /// A source could not list its modules; its modules are left out until it recovers.
    #[error("source `{source_id}` failed: {error}")]
    SourceFailed {
        /// The failing source.
        source_id: SourceId,
        /// What it said.
        error: SourceError,
    },
    /// Two sources advertise the same module path; the later source's module is left out.
    #[error("module `{path}` of source `{second}` is already provided by `{first}`; ignored")]
    DuplicateModule {
        /// The contested path.
        path: ModulePath,
        /// The source that keeps it.
        first: SourceId,
        /// The source whose module is ignored.
        second: SourceId,
    },
    /// Two operations flatten to the same (hashed) tool name; the second is not offered as a tool.
    #[error("tool name `{tool_name}` of `{second}` is already used by `{first}`")]
    ToolNameCollision {
        /// The shared provider name.
        tool_name: ToolName,
        /// The operation that keeps it.
        first: OperationPath,
        /// The operation left out of the tool list (still reachable by path).
        second: OperationPath,
    },
}

/// What changed between two catalog views, by module path (each list sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogDiff {
    /// Modules that appeared.
    pub added: Vec<ModulePath>,
    /// Modules that went away (their source closed, failed or stopped advertising them).
    pub removed: Vec<ModulePath>,
    /// Modules whose descriptor (description, operations, schemas, replay) changed.
    pub changed: Vec<ModulePath>,
    /// Problems seen while building the new view.
    pub problems: Vec<CatalogProblem>,
}

impl CatalogDiff {
    /// Whether no module was added, removed or changed (problems aside).
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// One operation as a tool for the model: provider name, description, input schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The provider tool name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: ToolName,
    /// The operation path it stands for.
    pub path: OperationPath,
    /// The operation's description.
    pub description: String,
    /// The operation's input schema as advertised.
    pub input_schema: Value,
}

/// An immutable view; the catalog swaps in a new one after every change.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) modules: BTreeMap<ModulePath, ModuleDescriptor>,
    pub(crate) operations: BTreeMap<OperationPath, Operation>,
    pub(crate) tools: BTreeMap<ToolName, OperationPath>,
}

impl Snapshot {
    /// Builds a view from each source's modules, in source order.
    pub(crate) fn build<'a>(
        sources: impl IntoIterator<Item = (&'a SourceId, &'a [Module])>,
    ) -> (Self, Vec<CatalogProblem>) {
        let mut snapshot = Self::default();
        let mut owners: BTreeMap<ModulePath, SourceId> = BTreeMap::new();
        let mut problems = Vec::new();
        for (source_id, modules) in sources {
            for module in modules {
                if let Some(first) = owners.get(module.path()) {
                    problems.push(CatalogProblem::DuplicateModule {
                        path: module.path().clone(),
                        first: first.clone(),
                        second: source_id.clone(),
                    });
                    continue;
                }
                owners.insert(module.path().clone(), source_id.clone());
                snapshot.add_module(module, &mut problems);
            }
        }
        (snapshot, problems)
    }

    fn add_module(&mut self, module: &Module, problems: &mut Vec<CatalogProblem>) {
        for op in module.operations() {
            let path = module.path().operation(op.name());
            let tool_name = flatten(&path);
            match self.tools.get(&tool_name) {
                Some(first) => problems.push(CatalogProblem::ToolNameCollision {
                    tool_name,
                    first: first.clone(),
                    second: path.clone(),
                }),
                None => {
                    self.tools.insert(tool_name, path.clone());
                }
            }
            self.operations.insert(path, op.clone());
        }
        self.modules
            .insert(module.path().clone(), module.descriptor());
    }

    /// The tools in module-path order, then advertised order; colliding names left out.
    pub(crate) fn tools(&self) -> Vec<ToolSpec> {
        self.modules
            .values()
            .flat_map(|module| &module.operations)
            .filter(|op| self.tools.get(&op.tool_name) == Some(&op.path))
            .map(|op| ToolSpec {
                name: op.tool_name.clone(),
                path: op.path.clone(),
                description: op.description.clone(),
                input_schema: op.input_schema.clone(),
            })
            .collect()
    }

    /// What differs from `old` to `self`.
    pub(crate) fn diff_from(&self, old: &Snapshot, problems: Vec<CatalogProblem>) -> CatalogDiff {
        let mut diff = CatalogDiff {
            problems,
            ..CatalogDiff::default()
        };
        for (path, descriptor) in &self.modules {
            match old.modules.get(path) {
                None => diff.added.push(path.clone()),
                Some(previous) if previous != descriptor => diff.changed.push(path.clone()),
                Some(_) => {}
            }
        }
        diff.removed = old
            .modules
            .keys()
            .filter(|path| !self.modules.contains_key(*path))
            .cloned()
            .collect();
        diff
    }
}
