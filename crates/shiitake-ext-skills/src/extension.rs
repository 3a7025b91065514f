//! The Skills extension on core's extension API: prompt section, `skill.load`, `/skills`.

use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_core::AgentBuilder;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, Tx,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};

use crate::contract::{EXTENSION_ID, ListSkills, NAMESPACE};
use crate::library::SkillLibrary;
use crate::{prompt, tools};
use shiitake_protocol::extension::ContractCommand;

/// Exactly what the host grants Skills: the library as its file port (`files`), the
/// metadata section (`prompt`), `skill.load` (`tools`) and `/skills` (`commands`).
pub fn skills_grants() -> Grants {
    Grants::none()
        .with(Grant::Files)
        .with(Grant::Prompt)
        .with(Grant::Tools)
        .with(Grant::Commands)
}

/// Adds Skills over `library` to an Agent with [`skills_grants`], handing it the library
/// as its file port.
pub fn add_skills(
    builder: AgentBuilder,
    library: Arc<SkillLibrary>,
) -> Result<AgentBuilder, SkillsError> {
    let extension = SkillsExtension::new(library.clone())?;
    Ok(builder.extension_with_files(extension, skills_grants(), library))
}

/// Why the extension could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    /// The extension id does not satisfy the protocol's identifier rules.
    #[error("extension id: {0}")]
    Identity(#[from] shiitake_protocol::BoundError),
}

/// Host-supplied, read-only skills: metadata in every run's prompt, `skill.load` through
/// the port the host handed (the `files` grant), and `/skills` listing skills and problems.
/// It keeps no state.
#[derive(Debug)]
pub struct SkillsExtension {
    definition: ExtensionDefinition,
    library: Arc<SkillLibrary>,
}

impl SkillsExtension {
    /// The extension over a discovered library (see [`SkillLibrary::discover`]).
    pub fn new(library: Arc<SkillLibrary>) -> Result<Self, SkillsError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(EXTENSION_ID)?,
                namespace: NAMESPACE.into(),
                scopes: Vec::new(),
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            library,
        })
    }
}

impl Extension for SkillsExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `list` (`/skills`): the skills and the problems, as [`crate::contract::SkillsList`].
    fn command(&self, _tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            ListSkills::NAME => {
                let mut input = input;
                if let Some(map) = input.as_object_mut() {
                    map.remove("requestId");
                }
                serde_json::from_value::<ListSkills>(input)
                    .map_err(|error| HookError::Invalid(format!("list: {error}")))?;
                serde_json::to_value(self.library.list()).map_err(|error| {
                    HookError::Failed(format!("the listing did not encode: {error}"))
                })
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn contribute(&self, run: &RunContext<'_>, _tools: ToolTx) -> Contribution {
        let tools = match run.files::<SkillLibrary>() {
            Ok(library) => match tools::module(library) {
                Ok(module) => Some(module),
                Err(error) => {
                    tracing::error!(%error, "skill.load could not be built");
                    None
                }
            },
            Err(error) => {
                tracing::debug!(%error, "no skill.load this run");
                None
            }
        };
        // The metadata tells the model to call skill.load: without the tool, no section.
        let prompt_section = tools
            .as_ref()
            .and_then(|_| prompt::section(self.library.skills()));
        Contribution {
            prompt_section,
            tools,
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: self.definition.id.clone(),
            commands: vec![CatalogCommand {
                name: "skills".into(),
                summary: "List the skills and why any folder is not one".into(),
                scope: CatalogScope::Session,
                call: ListSkills::NAME.into(),
                arguments: Vec::new(),
                steps: Vec::new(),
                flow: None,
            }],
        })
    }
}
