//! The Skills extension on core's extension kit: the prompt section, `skill.load` and
//! `/skills`.

use std::sync::Arc;

use shiitake_core::AgentBuilder;
use shiitake_core::extension::Grant;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};
use shiitake_protocol::extension::ContractCommand;

use crate::contract::{ListSkills, NAMESPACE, SkillsContract};
use crate::library::SkillLibrary;
use crate::{prompt, tools};

/// What each run's `skill.load` reads through: the library the host handed core as the
/// file port, or `None` when the run may not read it (no `files` grant, no port).
pub type RunLibrary = Option<Arc<SkillLibrary>>;

/// Host-supplied, read-only skills over `library`: metadata in every run's prompt,
/// `skill.load` through the file port (declared with the `files` grant; the host hands
/// the same library as the port, see [`add_skills`]) and `/skills` listing skills and
/// problems. It keeps no state; its grants are files, prompt, tools and commands.
pub fn extension(
    library: Arc<SkillLibrary>,
) -> Result<KitExtension<SkillsContract, RunLibrary>, KitError> {
    ExtensionKit::<SkillsContract, RunLibrary>::with_run_facts(NAMESPACE, run_library)?
        .uses(Grant::Files)
        .command(move |_tx, _: ListSkills| Ok(library.list()))
        .tool(tools::load_tool()?)
        .tools_description("Host-supplied skills: instructions for particular tasks.")
        // The metadata tells the model to call skill.load: without the port, no section.
        .prompt(|run| run_library(run).and_then(|library| prompt::section(library.skills())))
        .catalog(catalog)
        .build()
}

/// Adds Skills over `library` to an Agent with exactly its grants, handing it the
/// library as its file port.
pub fn add_skills(
    builder: AgentBuilder,
    library: Arc<SkillLibrary>,
) -> Result<AgentBuilder, KitError> {
    Ok(builder.kit_extension_with_files(extension(library.clone())?, library))
}

fn run_library(run: &shiitake_core::extension::RunContext<'_>) -> RunLibrary {
    run.files::<SkillLibrary>()
        .inspect_err(|error| tracing::debug!(%error, "no skill.load this run"))
        .ok()
}

fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![CatalogCommand {
            name: "skills".into(),
            summary: "List the skills and why any folder is not one".into(),
            scope: CatalogScope::Session,
            call: ListSkills::NAME.into(),
            arguments: Vec::new(),
            steps: Vec::new(),
            flow: None,
        }],
    }
}
