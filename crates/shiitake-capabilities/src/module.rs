//! Modules: a namespace path and the operations under it.

use serde::{Deserialize, Serialize};

use crate::names::{ModulePath, NameError, OperationName};
use crate::operation::{Operation, OperationDescriptor};

/// A set of operations under one namespace path, such as `files` or `env.mcp.notes`.
///
/// Operation names are unique within a module; adding a second operation with
/// the same name is a [`NameError::Collision`] naming both originals.
#[derive(Debug, Clone)]
pub struct Module {
    path: ModulePath,
    description: String,
    operations: Vec<Operation>,
}

impl Module {
    /// An empty module.
    pub fn new(path: ModulePath, description: impl Into<String>) -> Self {
        Self {
            path,
            description: description.into(),
            operations: Vec::new(),
        }
    }

    /// Adds an operation, refusing a name already taken.
    pub fn add_operation(&mut self, operation: Operation) -> Result<(), NameError> {
        if let Some(existing) = self.operation(operation.name()) {
            let original = |op: &Operation| {
                op.foreign_name()
                    .map_or_else(|| op.name().to_string(), str::to_owned)
            };
            return Err(NameError::Collision {
                first: original(existing),
                second: original(&operation),
                mapped: operation.name().to_string(),
            });
        }
        self.operations.push(operation);
        Ok(())
    }

    /// [`Module::add_operation`] in builder form.
    pub fn with_operation(mut self, operation: Operation) -> Result<Self, NameError> {
        self.add_operation(operation)?;
        Ok(self)
    }

    /// The module's path.
    pub fn path(&self) -> &ModulePath {
        &self.path
    }

    /// What the module is for.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The operations, in the order they were added.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation called `name`, if any.
    pub fn operation(&self, name: &OperationName) -> Option<&Operation> {
        self.operations.iter().find(|op| op.name() == name)
    }

    /// The module as the catalog lists it.
    pub fn descriptor(&self) -> ModuleDescriptor {
        ModuleDescriptor {
            path: self.path.clone(),
            description: self.description.clone(),
            operations: self
                .operations
                .iter()
                .map(|op| op.descriptor(self.path.operation(op.name())))
                .collect(),
        }
    }
}

/// A module's description as the catalog lists and diffs it (camelCase JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleDescriptor {
    /// The module path.
    pub path: ModulePath,
    /// What the module is for.
    pub description: String,
    /// Its operations, in advertised order.
    pub operations: Vec<OperationDescriptor>,
}
