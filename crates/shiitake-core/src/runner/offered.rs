//! What one run offers its model: the tools of the Agent and its extensions that the
//! host's [`ToolSet`] for the model's profile names, and the system prompt, both fixed
//! when the run starts.
//!
//! Both are built once per run, in a stable order (the Agent's catalog by module path,
//! then the extensions' by module path; sections in extension order) and byte for byte
//! the same on every call of the run, and on the next run while nothing they describe
//! changed: a server's prompt cache (llama.cpp's KV prefix, OpenAI's and Anthropic's
//! cached input) then skips them after the first call.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use shiitake_capabilities::{Catalog, ModulePath, SourceId, StaticSource};
use shiitake_model::{ModelProfile, ToolSpec};
use shiitake_protocol::{ExtensionId, ShiitakeError};

use super::compact::{compact_schema, first_sentence};
use super::{RunStart, ToolModules};
use crate::config::AgentConfig;
use crate::offer::ToolSet;

/// The tools of one run: the Agent's catalog plus the modules extensions contributed,
/// and which of them the model is offered.
pub(crate) struct RunTools {
    shared: Arc<Catalog>,
    contributed: Option<Catalog>,
    /// Which extension contributed each module of `contributed`.
    owners: HashMap<ModulePath, ExtensionId>,
    /// The offered tools as the model reads them, in their fixed order.
    specs: Vec<ToolSpec>,
    /// The names of `specs`.
    offered: HashSet<String>,
    /// For each extension that contributed tools: whether any of them is offered.
    extensions: HashMap<ExtensionId, bool>,
}

impl RunTools {
    /// The run's tools, offered as `set` says to a model of `profile`.
    pub(crate) async fn capture(
        start: &RunStart,
        set: &ToolSet,
        profile: ModelProfile,
    ) -> Result<Self, ShiitakeError> {
        let assembled = Assembled::new(start.agent.tools.clone(), &start.modules).await?;
        let mut extensions: HashMap<ExtensionId, bool> = HashMap::new();
        let mut specs = Vec::new();
        for (tool, owner) in assembled.each_tool() {
            let offered = set.offers(&tool.path);
            if let Some(owner) = owner {
                *extensions.entry(owner).or_default() |= offered;
            }
            if offered {
                specs.push(spec_for(tool, profile));
            }
        }
        let offered = specs.iter().map(|spec| spec.name.clone()).collect();
        Ok(Self {
            shared: assembled.shared,
            contributed: assembled.contributed,
            owners: assembled.owners,
            specs,
            offered,
            extensions,
        })
    }

    /// The offered tools, the same value on every call of the run.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    /// Whether the model was offered `tool_name` (a call of any other is refused).
    pub(crate) fn offers(&self, tool_name: &str) -> bool {
        self.offered.contains(tool_name)
    }

    /// The extension whose module offers `tool_name`, if an extension's does.
    pub(crate) fn extension_for(&self, tool_name: &str) -> Option<&ExtensionId> {
        let path = self.contributed.as_ref()?.resolve_tool_name(tool_name)?;
        self.owners.get(path.module())
    }

    /// The catalog that knows `tool_name`: an extension's first, then the Agent's.
    pub(crate) fn catalog_for(&self, tool_name: &str) -> &Catalog {
        match &self.contributed {
            Some(catalog) if catalog.resolve_tool_name(tool_name).is_some() => catalog,
            _ => &self.shared,
        }
    }

    /// Whether `extension`'s prompt section belongs in this run: unless it contributed
    /// tools and none of them is offered (its section would be about tools the model
    /// does not have, such as `agents.create` for a small model).
    fn keeps_section_of(&self, extension: &ExtensionId) -> bool {
        self.extensions.get(extension).copied().unwrap_or(true)
    }
}

/// The tools of a run before its tool set chooses: the Agent's catalog and the
/// modules extensions contributed, with the extension of each module. A run's
/// [`RunTools`] and the operator's list (`GET /v1/tools`) both read it.
pub(crate) struct Assembled {
    pub(crate) shared: Arc<Catalog>,
    pub(crate) contributed: Option<Catalog>,
    /// Which extension contributed each module of `contributed`.
    pub(crate) owners: HashMap<ModulePath, ExtensionId>,
}

impl Assembled {
    /// The Agent's catalog `shared` and the extensions' `modules`.
    pub(crate) async fn new(
        shared: Arc<Catalog>,
        modules: &ToolModules,
    ) -> Result<Self, ShiitakeError> {
        let contributed = if modules.is_empty() {
            None
        } else {
            let catalog = Catalog::new();
            let source = StaticSource::new(
                SourceId::new("extensions"),
                modules.iter().map(|(_, module)| module.clone()).collect(),
            );
            catalog
                .add_source(Arc::new(source))
                .await
                .map_err(|error| ShiitakeError::internal(format!("extension tools: {error}")))?;
            Some(catalog)
        };
        let owners = modules
            .iter()
            .map(|(extension, module)| (module.path().clone(), extension.clone()))
            .collect();
        Ok(Self {
            shared,
            contributed,
            owners,
        })
    }

    /// Every tool in the run's fixed order (the Agent's by module path, then the
    /// extensions' by module path), with the extension that contributed it.
    pub(crate) fn each_tool(
        &self,
    ) -> impl Iterator<Item = (shiitake_capabilities::ToolSpec, Option<ExtensionId>)> + '_ {
        let shared = self.shared.tools().into_iter().map(|tool| (tool, None));
        let own = self
            .contributed
            .iter()
            .flat_map(Catalog::tools)
            .map(|tool| {
                let owner = self.owners.get(tool.path.module()).cloned();
                (tool, owner)
            });
        shared.chain(own)
    }

    /// The catalog that knows `path`: an extension's first, then the Agent's.
    pub(crate) fn catalog_of(&self, path: &shiitake_capabilities::OperationPath) -> &Catalog {
        match &self.contributed {
            Some(catalog) if catalog.describe(path).is_some() => catalog,
            _ => &self.shared,
        }
    }
}

/// One tool as a model of `profile` reads it: whole, or for a small model with its
/// first sentence and its compact schema.
fn spec_for(tool: shiitake_capabilities::ToolSpec, profile: ModelProfile) -> ToolSpec {
    match profile {
        ModelProfile::Full => ToolSpec {
            name: tool.name.to_string(),
            description: tool.description,
            parameters: tool.input_schema,
        },
        ModelProfile::Small => ToolSpec {
            name: tool.name.to_string(),
            description: first_sentence(&tool.description),
            parameters: compact_schema(&tool.input_schema),
        },
    }
}

/// The run's system prompt: the Agent's (its short one for a small model), then each
/// kept extension section as its own paragraph (for a small model, its first sentence).
pub(crate) fn system_prompt(
    config: &AgentConfig,
    profile: ModelProfile,
    sections: &[(ExtensionId, String)],
    tools: &RunTools,
) -> String {
    let base = match profile {
        ModelProfile::Full => &config.system_prompt,
        ModelProfile::Small => &config.small_system_prompt,
    };
    let mut prompt = base.clone();
    for (extension, section) in sections {
        if !tools.keeps_section_of(extension) {
            continue;
        }
        let section = match profile {
            ModelProfile::Full => section.clone(),
            ModelProfile::Small => first_sentence(section),
        };
        if section.is_empty() {
            continue;
        }
        if !prompt.is_empty() {
            prompt.push_str("\n\n");
        }
        prompt.push_str(&section);
    }
    prompt
}
