//! `Knapsack::files`: one Files port projected as the `files` module and its direct tools.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_capabilities::{
    ForModelError, ForModelKind, InvocationContext, Module, ModulePath, NameError, Operation,
    OperationName, Replay, SourceId, StaticSource, ToolError,
};

use crate::edit::edit;
use crate::error::FilesError;
use crate::path::validate_path;
use crate::port::Files;
use crate::types::{EditInput, GlobInput, GrepInput, ListInput, PatchInput, ReadInput};

/// The tools one Files port offers, ready to place in a module or a catalog.
///
/// `read`, `list`, `glob` and `grep` are replay-safe; `edit` and
/// `apply_patch` change files and are not. `apply_patch` exists only when the
/// port has a [`crate::PatchEngine`]. Every input decodes through the serde
/// types of [`crate::types`], whose schemars schemas are the advertised ones.
#[derive(Debug, Clone)]
pub struct FilesConnection {
    operations: Vec<Operation>,
}

impl FilesConnection {
    /// Builds the tools of `port`.
    pub fn new(port: Arc<dyn Files>) -> Result<Self, NameError> {
        let mut operations = vec![
            tool::<ReadInput, _, _, _>(
                &port,
                "read",
                "Reads a window of lines of a UTF-8 file (at most 128 KiB; continue from nextOffset).",
                Replay::Safe,
                |port, input| async move {
                    validate_path(&input.path)?;
                    port.read(input).await
                },
            )?,
            tool::<ListInput, _, _, _>(
                &port,
                "list",
                "Lists a directory's visible entries (at most 256; truncated says when more exist).",
                Replay::Safe,
                |port, input| async move {
                    validate_path(&input.path)?;
                    port.list(input).await
                },
            )?,
            tool::<GlobInput, _, _, _>(
                &port,
                "glob",
                "Finds visible files and directories whose root-relative path matches a glob (at most 256).",
                Replay::Safe,
                |port, input| async move {
                    validate_path(&input.path)?;
                    port.glob(input).await
                },
            )?,
            tool::<GrepInput, _, _, _>(
                &port,
                "grep",
                "Searches visible files for lines matching a regular expression (at most 256 matches).",
                Replay::Safe,
                |port, input| async move {
                    validate_path(&input.path)?;
                    port.grep(input).await
                },
            )?,
            tool::<EditInput, _, _, _>(
                &port,
                "edit",
                "Replaces oldText with newText in one file; oldText must occur once unless replaceAll.",
                Replay::Unsafe,
                |port, input| async move { edit(port.as_ref(), input).await },
            )?,
        ];
        if port.patch_engine().is_some() {
            operations.push(tool::<PatchInput, _, _, _>(
                &port,
                "apply_patch",
                "Applies a patch in the Codex grammar (*** Begin Patch ... *** End Patch); every file changes or none does.",
                Replay::Unsafe,
                |port, input| async move {
                    match port.patch_engine() {
                        Some(engine) => engine.apply_patch(&input.patch).await,
                        None => Err(FilesError::NoPatchEngine),
                    }
                },
            )?);
        }
        Ok(Self { operations })
    }

    /// The tools, in the order `read, list, glob, grep, edit[, apply_patch]`.
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The tools as a module at `path` (`files`, or `env.computers.<name>.files`).
    pub fn module_at(&self, path: ModulePath) -> Result<Module, NameError> {
        let mut module = Module::new(
            path,
            "Bounded text files under one root: read, list, glob, grep, edit and patch.",
        );
        for operation in &self.operations {
            module.add_operation(operation.clone())?;
        }
        Ok(module)
    }

    /// The tools as the `files` module.
    pub fn module(&self) -> Result<Module, NameError> {
        self.module_at(ModulePath::new("files")?)
    }

    /// A capability source advertising the `files` module.
    pub fn source(&self, id: SourceId) -> Result<StaticSource, NameError> {
        Ok(StaticSource::new(id, vec![self.module()?]))
    }
}

/// The advertised input schema of a request type.
pub fn input_schema<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
    }
    schema
}

fn tool<I, O, F, Fut>(
    port: &Arc<dyn Files>,
    name: &str,
    description: &str,
    replay: Replay,
    call: F,
) -> Result<Operation, NameError>
where
    I: DeserializeOwned + JsonSchema + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(Arc<dyn Files>, I) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<O, FilesError>> + Send + 'static,
{
    let port = port.clone();
    let operation = Operation::from_fn(
        OperationName::new(name)?,
        description,
        move |input: Value, ctx: InvocationContext| {
            let port = port.clone();
            let call = call.clone();
            async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    ToolError::ForModel(ForModelError::new(
                        ForModelKind::InvalidInput,
                        e.to_string(),
                    ))
                })?;
                let output = tokio::select! {
                    biased;
                    () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
                    output = call(port, input) => output,
                };
                let output = output.map_err(to_tool_error)?;
                serde_json::to_value(output)
                    .map_err(|e| ToolError::fatal_from("a files result did not serialise", e))
            }
        },
    )
    .with_input_schema(input_schema::<I>())
    .with_replay(replay);
    Ok(operation)
}

/// A Files error as the model sees it: the message, and `details.kind` for programs.
pub fn to_tool_error(error: FilesError) -> ToolError {
    let details = match &error {
        FilesError::Edit(edit) => serde_json::to_value(edit).ok(),
        FilesError::Patch(patch) => serde_json::to_value(patch).ok(),
        other => Some(json!({ "kind": other.kind() })),
    };
    let mut model = ForModelError::new(ForModelKind::Failed, error.to_string());
    if let Some(details) = details {
        model = model.with_details(details);
    }
    ToolError::ForModel(model)
}

impl FilesError {
    /// A stable snake_case name of the variant, for programs reading tool errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidPath { .. } => "invalid_path",
            Self::OutsideRoot { .. } => "outside_root",
            Self::InvalidName { .. } => "invalid_name",
            Self::NotFound { .. } => "not_found",
            Self::NotAFile { .. } => "not_a_file",
            Self::NotADirectory { .. } => "not_a_directory",
            Self::NotText { .. } => "not_text",
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidPattern { .. } => "invalid_pattern",
            Self::Edit(_) => "edit",
            Self::Patch(_) => "patch",
            Self::NoPatchEngine => "no_patch_engine",
            Self::Io { .. } => "io",
        }
    }
}
