//! The file tools one run captures: Knapsack's read, list, glob and grep routed by address
//! over the run's table, and apply_patch on Home's native engine when it has one.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use knapsack::patch::{parse_patch, print_patch};
use knapsack::{
    Files, FilesError, GlobInput, GrepInput, ListInput, PatchInput, ReadInput, input_schema,
    to_tool_error, validate_path,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_capabilities::{
    ForModelError, ForModelKind, InvocationContext, Module, ModulePath, NameError, Operation,
    OperationName, Replay, ToolError,
};
use shiitake_core::extension::StateScope;
use shiitake_core::extension::host::ToolTx;

use crate::contract::{AttachmentId, CHOICE_COLLECTION, CHOICE_KEY, HomeChoice, SCHEME};
use crate::errors::failed;
use crate::route::{Target, or_root, route};
use crate::state;

/// The module the tools live in: Knapsack's `files`, captured per run (no shared module).
pub(crate) const MODULE: &str = "files";

/// What one run captured: Home's port, every attachment's port by name (Home's too), and
/// the adoption to record on first use when Home was adopted rather than chosen.
pub(crate) struct RunFiles {
    pub(crate) home: Arc<dyn Files>,
    pub(crate) named: BTreeMap<String, Arc<dyn Files>>,
    pub(crate) adoption: Option<Adoption>,
    /// The run's Computers that run commands (`commands.rs`).
    #[cfg(unix)]
    pub(crate) commands: crate::run_commands::RunCommands,
}

/// A sole attachment this run adopted; recorded by the first tool call.
pub(crate) struct Adoption {
    pub(crate) attachment_id: AttachmentId,
    pub(crate) tools: ToolTx,
    pub(crate) pending: AtomicBool,
}

impl RunFiles {
    /// The port an address names and the checked path on it; `directory` tools take the
    /// target's root when the address gives no path.
    fn routed(
        &self,
        address: &str,
        directory: bool,
    ) -> Result<(Arc<dyn Files>, String), ToolError> {
        let (target, path) =
            route(address).map_err(|e| failed("no_such_computer", e.to_string()))?;
        let path = if directory { or_root(path) } else { path };
        validate_path(path).map_err(to_tool_error)?;
        let port = match target {
            Target::Home => self.home.clone(),
            Target::Named(name) => self.named.get(name).cloned().ok_or_else(|| {
                let known: Vec<&str> = self.named.keys().map(String::as_str).collect();
                ToolError::ForModel(
                    ForModelError::new(
                        ForModelKind::Failed,
                        format!("no Computer named `{name}` is attached to this run"),
                    )
                    .with_details(json!({"kind": "no_such_computer", "known": known})),
                )
            })?,
        };
        Ok((port, path.to_owned()))
    }

    /// Records the adoption the first time a tool of this run is used.
    pub(crate) async fn adopt_once(&self) {
        let Some(adoption) = &self.adoption else {
            return;
        };
        if !adoption.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let id = adoption.attachment_id.clone();
        let recorded = adoption
            .tools
            .run(move |tx| {
                let current: Option<HomeChoice> =
                    tx.get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY)?;
                if let Some(choice) = state::adopt(current.as_ref(), id, tx.now()) {
                    tx.put(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY, &choice)?;
                }
                Ok(Value::Null)
            })
            .await;
        if let Err(error) = recorded {
            // The run keeps its captured Home; the next call tries to record it again.
            adoption.pending.store(true, Ordering::SeqCst);
            tracing::warn!(%error, "Home could not record the adopted attachment");
        }
    }
}

/// The run's `files` module: read, list, glob, grep, and apply_patch when Home's port has a
/// native patch engine.
pub(crate) fn module(run: Arc<RunFiles>) -> Result<Module, NameError> {
    let mut module = Module::new(
        ModulePath::new(MODULE)?,
        "Files on Home and the other attached Computers (computer://<name>/<path>).",
    );
    module.add_operation(tool::<ReadInput, _, _>(
        &run,
        "read",
        "Reads a window of lines of a UTF-8 file (at most 128 KiB; continue from nextOffset). \
         A bare path or computer://home/<path> is on Home; computer://<name>/<path> is on another \
         attached Computer.",
        |run, mut input| async move {
            let port;
            (port, input.path) = run.routed(&input.path, false)?;
            call(port.read(input).await)
        },
    )?)?;
    module.add_operation(tool::<ListInput, _, _>(
        &run,
        "list",
        "Lists a directory's visible entries (at most 256). Paths route as for read.",
        |run, mut input| async move {
            let port;
            (port, input.path) = run.routed(&input.path, true)?;
            call(port.list(input).await)
        },
    )?)?;
    module.add_operation(tool::<GlobInput, _, _>(
        &run,
        "glob",
        "Finds visible entries whose path under `path` matches a glob (at most 256). Paths route \
         as for read.",
        |run, mut input| async move {
            let port;
            (port, input.path) = run.routed(&input.path, true)?;
            call(port.glob(input).await)
        },
    )?)?;
    module.add_operation(tool::<GrepInput, _, _>(
        &run,
        "grep",
        "Searches visible files for lines matching a regular expression (at most 256 matches). \
         Paths route as for read.",
        |run, mut input| async move {
            let port;
            (port, input.path) = run.routed(&input.path, true)?;
            call(port.grep(input).await)
        },
    )?)?;
    if run.home.patch_engine().is_some() {
        let mut patch = tool::<PatchInput, _, _>(
            &run,
            "apply_patch",
            "Applies a patch in the Codex grammar (*** Begin Patch ... *** End Patch) to Home, \
             with Home's engine and jail: every file changes or none does. Paths are Home paths \
             (computer://home/ may prefix them; other Computers cannot be patched).",
            |run, input| async move {
                let text = home_patch(&input.patch)?;
                match run.home.patch_engine() {
                    Some(engine) => call(engine.apply_patch(&text).await),
                    None => call::<()>(Err(FilesError::NoPatchEngine)),
                }
            },
        )?;
        patch = patch.with_replay(Replay::Unsafe);
        module.add_operation(patch)?;
    }
    Ok(module)
}

fn call<O: Serialize>(result: Result<O, FilesError>) -> Result<Value, ToolError> {
    let output = result.map_err(to_tool_error)?;
    serde_json::to_value(output)
        .map_err(|e| ToolError::fatal_from("a files result did not serialise", e))
}

/// The patch text Home's engine gets: `computer://home/` prefixes are dropped from its
/// paths; a path on another Computer is refused, since patches apply to Home only.
pub(crate) fn home_patch(text: &str) -> Result<String, ToolError> {
    if !text.contains(SCHEME) {
        return Ok(text.to_owned());
    }
    let mut patch = parse_patch(text).map_err(|e| to_tool_error(FilesError::Patch(e)))?;
    let mut addressed = false;
    let rewrite = |path: &mut String, addressed: &mut bool| -> Result<(), ToolError> {
        match route(path).map_err(|e| failed("no_such_computer", e.to_string()))? {
            (Target::Home, rest) if path.starts_with(SCHEME) => {
                *path = rest.to_owned();
                *addressed = true;
                Ok(())
            }
            (Target::Home, _) => Ok(()),
            (Target::Named(name), _) => Err(failed(
                "patch_outside_home",
                format!("apply_patch edits Home only; `{path}` is on the Computer `{name}`"),
            )),
        }
    };
    for operation in &mut patch.operations {
        match operation {
            knapsack::patch::FileOperation::Add { path, .. }
            | knapsack::patch::FileOperation::Delete { path } => rewrite(path, &mut addressed)?,
            knapsack::patch::FileOperation::Update { path, move_to, .. } => {
                rewrite(path, &mut addressed)?;
                if let Some(to) = move_to {
                    rewrite(to, &mut addressed)?;
                }
            }
        }
    }
    // Only `computer://` inside file contents: the text goes to the engine unchanged.
    Ok(if addressed {
        print_patch(&patch)
    } else {
        text.to_owned()
    })
}

pub(crate) fn tool<I, F, Fut>(
    run: &Arc<RunFiles>,
    name: &str,
    description: &str,
    handler: F,
) -> Result<Operation, NameError>
where
    I: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(Arc<RunFiles>, I) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    tool_with_context(run, name, description, move |run, input, _context| {
        handler(run, input)
    })
}

/// [`tool`] whose handler also gets the call's context (its progress, its deadline).
pub(crate) fn tool_with_context<I, F, Fut>(
    run: &Arc<RunFiles>,
    name: &str,
    description: &str,
    handler: F,
) -> Result<Operation, NameError>
where
    I: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(Arc<RunFiles>, I, InvocationContext) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let run = run.clone();
    let operation = Operation::from_fn(
        OperationName::new(name)?,
        description,
        move |input: Value, ctx: InvocationContext| {
            let run = run.clone();
            let handler = handler.clone();
            async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    ToolError::ForModel(ForModelError::new(
                        ForModelKind::InvalidInput,
                        e.to_string(),
                    ))
                })?;
                tokio::select! {
                    biased;
                    () = ctx.cancellation().cancelled() => Err(ToolError::Cancelled),
                    output = async {
                        run.adopt_once().await;
                        handler(run.clone(), input, ctx.clone()).await
                    } => output,
                }
            }
        },
    )
    .with_input_schema(input_schema::<I>())
    .with_replay(Replay::Safe);
    Ok(operation)
}
