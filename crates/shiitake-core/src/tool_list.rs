//! The operator's list of the tools a run would see (`GET /v1/tools`).
//!
//! It is a run's own assembly, not a second one: the running extensions contribute
//! through the owner's [`contribute`] (for a new Session: no Session rows of its own,
//! and tool handlers that are never called), the Agent's catalog and those modules
//! are put in the run's order by [`Assembled`], and the host's tool set for the
//! profile chooses. What a run would not see is listed with its reason: tools the set
//! leaves out, stopped extensions, and what the catalog's sources could not offer (an
//! MCP server that refused its credential).

use std::collections::BTreeMap;
use std::sync::Arc;

use shiitake_capabilities::{OperationPath, Replay};
use shiitake_model::ModelProfile;
use shiitake_protocol::{
    ExtensionId, LeftOutReason, LeftOutSource, ReplaySafety, ShiitakeError, ToolEntry, ToolList,
    ToolProfile, ToolSource,
};

use crate::agent_core::AgentCore;
use crate::extension::Provenance;
use crate::extension::host::{Rows, ToolTransaction, ToolTx, TxMailbox};
use crate::ids;
use crate::owner::contributions::{Asked, contribute};
use crate::runner::offered::Assembled;

/// The tool handlers of a listing have no owner: nothing calls them.
struct NoOwner;

#[async_trait::async_trait]
impl TxMailbox for NoOwner {
    async fn send_transaction(
        &self,
        _extension_id: ExtensionId,
        _transaction: ToolTransaction,
        _reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, ShiitakeError>>,
    ) -> bool {
        false
    }
}

/// The tools a run of a new Session of `core`'s Agent would see with a model of
/// `profile`, and what it would not, with why.
pub(crate) async fn list(
    core: &AgentCore,
    profile: ToolProfile,
) -> Result<ToolList, ShiitakeError> {
    let model_profile = match profile {
        ToolProfile::Full => ModelProfile::Full,
        ToolProfile::Small => ModelProfile::Small,
    };
    let set = core.config.offered_tools.for_profile(model_profile);
    let session_id = ids::session_id();
    let command_id = ids::command_id();
    let provenance = Provenance::default();
    let asked = Asked {
        session_id: &session_id,
        command_id: &command_id,
        provenance: &provenance,
    };
    static NO_ROWS: Rows = Rows::new();
    let mailbox: Arc<dyn TxMailbox> = Arc::new(NoOwner);
    let contributions = contribute(
        &core.host,
        &asked,
        |_| &NO_ROWS,
        |id| ToolTx {
            mailbox: mailbox.clone(),
            extension_id: id.clone(),
            changes: tokio::sync::watch::Sender::new(0).subscribe(),
        },
    );
    let assembled = Assembled::new(core.tools.clone(), &contributions.modules).await?;
    let mut tools = Vec::new();
    // Tools the set leaves out, by module: (module, extension) → tool names.
    let mut not_offered: BTreeMap<(String, Option<ExtensionId>), Vec<String>> = BTreeMap::new();
    for (tool, extension) in assembled.each_tool() {
        let module = tool.path.module().to_string();
        if !set.offers(&tool.path) {
            not_offered
                .entry((module, extension))
                .or_default()
                .push(tool.name.to_string());
            continue;
        }
        let path = tool.path.to_string();
        let (source, server) = ToolSource::of_path(&path, extension.is_some());
        tools.push(ToolEntry {
            name: tool.name.to_string(),
            path,
            source,
            server,
            extension,
            description: tool.description,
            schema: tool.input_schema,
            replay: replay(&assembled, &tool.path),
        });
    }
    let mut left_out: Vec<LeftOutSource> = not_offered
        .into_iter()
        .map(|((module, extension), names)| {
            let (source, _) = ToolSource::of_path(&module, extension.is_some());
            LeftOutSource {
                source,
                name: module,
                tools: names,
                reason: LeftOutReason::NotOffered,
                detail: Some(format!("the {} tool set is `{set}`", profile_name(profile))),
            }
        })
        .collect();
    left_out.extend(
        contributions
            .left_out
            .into_iter()
            .map(|(extension, reason, detail)| LeftOutSource {
                source: ToolSource::Extension,
                name: extension.as_str().to_owned(),
                tools: Vec::new(),
                reason,
                detail,
            }),
    );
    left_out.extend(core.tools.left_out().await.into_iter().map(|(_, part)| {
        let (source, server) = ToolSource::of_path(&part.name, false);
        LeftOutSource {
            source,
            name: server.unwrap_or(part.name),
            tools: Vec::new(),
            reason: LeftOutReason::Unavailable,
            detail: Some(part.reason),
        }
    }));
    Ok(ToolList {
        profile,
        tools,
        left_out,
    })
}

fn profile_name(profile: ToolProfile) -> &'static str {
    match profile {
        ToolProfile::Full => "full-profile",
        ToolProfile::Small => "small-profile",
    }
}

/// Whether a resumed run may repeat the operation at `path` (unknown ones are not).
fn replay(assembled: &Assembled, path: &OperationPath) -> ReplaySafety {
    match assembled.catalog_of(path).replay(path) {
        Some(Replay::Safe) => ReplaySafety::Safe,
        Some(Replay::Unsafe) | None => ReplaySafety::Unsafe,
    }
}
