//! The Home extension on core's extension kit: the choice commands, the projection, and
//! each run's capture of its table, Home, prompt and file tools.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use shiitake_core::AgentBuilder;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::kit::{ExtensionKit, KitError, KitExtension};
use shiitake_core::extension::{
    Contribution, Grant, HookError, RunContext, StateScope, StateView, Tx,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
    CatalogStep,
};
use shiitake_protocol::extension::ContractCommand;

use crate::computers::{Attachment, Computers};
use crate::contract::{
    AttachmentProblem, AttachmentView, CHOICE_COLLECTION, CHOICE_KEY, Choose, HomeChoice,
    HomeContract, HomeState, HomeView, MAX_NAME_BYTES, NAMESPACE, Seed, SeedOutcome,
};
use crate::state::{self, Entry};
use crate::tools::{Adoption, RunFiles};
use crate::{jobs_panel, prompt, tools};

/// The Computer list as the port the host hands Home through core (`files` grant).
#[derive(Clone)]
pub struct HomePort(pub Arc<dyn Computers>);

impl std::fmt::Debug for HomePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HomePort").finish_non_exhaustive()
    }
}

/// Home over the host's Computer list, declared on core's kit: `choose` (`/home <name>`,
/// Session scope) and the unadvertised `seed` (Agent scope), the view, and each run's
/// prompt and file tools, read from the list the host hands as the file port
/// ([`HomePort`], see [`add_home`]). Its grants: state, files, commands, projection,
/// prompt and tools.
pub fn extension(computers: Arc<dyn Computers>) -> Result<KitExtension<HomeContract>, KitError> {
    let viewed = computers.clone();
    let footed = computers.clone();
    let killed = computers.clone();
    let listed = computers.clone();
    ExtensionKit::<HomeContract>::new(NAMESPACE)?
        .agent_state()
        // The background jobs a Session started, so a host that restarts lists them lost.
        .session_state()
        .uses(Grant::Files)
        .command(move |tx, input: Choose| choose(tx, computers.as_ref(), input))
        .command(seed)
        .command(move |tx, input: crate::contract::KillJob| {
            jobs_panel::kill(tx, killed.as_ref(), input)
        })
        .command(move |tx, input: crate::contract::ListJobs| {
            jobs_panel::list(tx, listed.as_ref(), input)
        })
        .projection(move |state| Some(view(state, viewed.as_ref())))
        .footer(move |state, id| jobs_panel::rows(state, id, footed.as_ref()))
        .run_contribution(capture)
        .catalog(catalog)
        .build()
}

/// Adds Home over `computers` to an Agent with exactly its grants, handing it the list as
/// its file port.
pub fn add_home(
    builder: AgentBuilder,
    computers: Arc<dyn Computers>,
) -> Result<AgentBuilder, KitError> {
    let port = Arc::new(HomePort(computers.clone()));
    Ok(builder.kit_extension_with_files(extension(computers)?, port))
}

/// The host's current attachments as a table (duplicates left out, reported).
fn table(computers: &dyn Computers) -> (Vec<Entry<Attachment>>, Vec<AttachmentProblem>) {
    let entries = computers
        .read()
        .into_iter()
        .map(|attachment| Entry {
            name: attachment.name.clone(),
            attachment_id: attachment.attachment_id.clone(),
            value: attachment,
        })
        .collect();
    state::table(entries)
}

fn current(tx: &Tx<'_>) -> Result<Option<HomeChoice>, HookError> {
    tx.get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY)
}

/// `/home <name>`: a person's choice among the current attachments.
fn choose(
    tx: &mut Tx<'_>,
    computers: &dyn Computers,
    Choose { name }: Choose,
) -> Result<HomeChoice, HookError> {
    let (table, _) = table(computers);
    let Some(entry) = table.iter().find(|e| e.name.as_str() == name) else {
        let attached: Vec<&str> = table.iter().map(|e| e.name.as_str()).collect();
        return Err(HookError::Invalid(format!(
            "no attached Computer is named `{name}`; attached: {}",
            if attached.is_empty() {
                "none".to_owned()
            } else {
                attached.join(", ")
            }
        )));
    };
    let choice = state::choose(entry.attachment_id.clone(), tx.now());
    tx.put(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY, &choice)?;
    Ok(choice)
}

/// The host's `seed` migration; the host refuses it on a Session's route (Agent scope).
fn seed(tx: &mut Tx<'_>, Seed { attachment_id }: Seed) -> Result<SeedOutcome, HookError> {
    let outcome = state::seed(current(tx)?, attachment_id, tx.now());
    if let SeedOutcome::Recorded { choice } = &outcome {
        tx.put(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY, choice)?;
    }
    Ok(outcome)
}

fn view(state: &StateView<'_>, computers: &dyn Computers) -> HomeView {
    let choice: Option<HomeChoice> = state.get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY);
    let (table, problems) = table(computers);
    HomeView {
        home: state::resolve(choice.as_ref(), &table),
        choice,
        attachments: table
            .iter()
            .map(|entry| AttachmentView {
                name: entry.name.clone(),
                attachment_id: entry.attachment_id.clone(),
                patch: entry.value.port.patch_engine().is_some(),
            })
            .collect(),
        problems,
    }
}

/// Captures the run's table, Home and prompt once, from one reading of the list; the
/// tools use only what was captured.
fn capture(run: &RunContext<'_>, tools: ToolTx) -> Contribution {
    let computers = match run.files::<HomePort>() {
        Ok(port) => port,
        Err(error) => {
            return Contribution {
                prompt_section: Some(format!(
                    "Home's file tools are not available to this run ({error})."
                )),
                ..Contribution::default()
            };
        }
    };
    let choice: Option<HomeChoice> =
        run.state
            .get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY);
    let (table, _) = table(computers.0.as_ref());
    let home_state = state::resolve(choice.as_ref(), &table);
    let names: Vec<_> = table.iter().map(|entry| &entry.name).collect();
    let home_id = match &home_state {
        HomeState::Chosen { attachment_id, .. } | HomeState::Adoptable { attachment_id, .. } => {
            Some(attachment_id.clone())
        }
        HomeState::Detached { .. } | HomeState::Unchosen { .. } => None,
    };
    let home = home_id.and_then(|id| table.iter().find(|e| e.attachment_id == id));
    let Some(home) = home else {
        return Contribution {
            prompt_section: Some(prompt::section(&home_state, &names, false)),
            ..Contribution::default()
        };
    };
    let patch = home.value.port.patch_engine().is_some();
    let adoption = match &home_state {
        HomeState::Adoptable { attachment_id, .. } => Some(Adoption {
            attachment_id: attachment_id.clone(),
            tools: tools.clone(),
            pending: AtomicBool::new(true),
        }),
        _ => None,
    };
    let named: BTreeMap<String, _> = table
        .iter()
        .map(|entry| (entry.name.as_str().to_owned(), entry.value.port.clone()))
        .collect();
    #[cfg(unix)]
    let commands = crate::run_commands::RunCommands::capture(run, home, &table, &tools);
    let files = Arc::new(RunFiles {
        home: home.value.port.clone(),
        named,
        adoption,
        #[cfg(unix)]
        commands,
    });
    let module = tools::module(files.clone())
        .inspect_err(|error| tracing::error!(%error, "Home's file tools could not be built"))
        .ok();
    #[cfg(unix)]
    let more_tools = crate::commands::modules(&files)
        .inspect_err(|error| tracing::error!(%error, "Home's command tools could not be built"))
        .unwrap_or_default();
    #[cfg(not(unix))]
    let more_tools = Vec::new();
    Contribution {
        prompt_section: Some(prompt::section(&home_state, &names, patch)),
        tools: module,
        more_tools,
    }
}

fn catalog(extension_id: ExtensionId) -> Catalog {
    Catalog {
        format: CatalogFormat::V1,
        extension_id,
        commands: vec![
            CatalogCommand {
                name: "home".into(),
                summary: "Choose the Computer every Session works in".into(),
                scope: CatalogScope::Session,
                call: Choose::NAME.into(),
                arguments: vec![CatalogArgument::required(
                    "name",
                    "The attached Computer's name",
                    ArgumentKind::text(MAX_NAME_BYTES),
                )],
                steps: vec![CatalogStep {
                    argument: "name".into(),
                    prompt: "Which Computer should be Home?".into(),
                }],
                flow: None,
            },
            CatalogCommand {
                name: "jobs".into(),
                summary: "List this Session's background jobs, each running one with its /kill"
                    .into(),
                scope: CatalogScope::Session,
                call: crate::contract::ListJobs::NAME.into(),
                arguments: Vec::new(),
                steps: Vec::new(),
                flow: None,
            },
            CatalogCommand {
                name: "kill".into(),
                summary: "End a background job of this Session (the footer lists them)".into(),
                scope: CatalogScope::Session,
                call: crate::contract::KillJob::NAME.into(),
                arguments: vec![
                    CatalogArgument::required("job", "The job's id", ArgumentKind::text(64)),
                    CatalogArgument::required(
                        "computer",
                        "The Computer it runs on",
                        ArgumentKind::text(MAX_NAME_BYTES),
                    ),
                ],
                steps: vec![
                    CatalogStep {
                        argument: "job".into(),
                        prompt: "Which job should end?".into(),
                    },
                    CatalogStep {
                        argument: "computer".into(),
                        prompt: "On which Computer does it run?".into(),
                    },
                ],
                flow: None,
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use shiitake_protocol::CommandScope;

    use super::*;
    use crate::computers::ComputerList;

    #[test]
    fn its_grants_and_command_scopes_are_what_it_declares() {
        let home = extension(Arc::new(ComputerList::default())).expect("Home builds");
        let grants = home.grants();
        for grant in [
            Grant::State,
            Grant::Files,
            Grant::Commands,
            Grant::Projection,
            Grant::Prompt,
            Grant::Tools,
        ] {
            assert!(grants.has(grant), "{grant}");
        }
        for grant in [Grant::Timers, Grant::Admissions, Grant::Attention] {
            assert!(!grants.has(grant), "{grant}");
        }
        let commands: Vec<_> = home.commands().collect();
        assert_eq!(
            commands,
            [
                ("choose", CommandScope::Session),
                ("kill_job", CommandScope::Session),
                ("list_jobs", CommandScope::Session),
                ("seed", CommandScope::Agent)
            ]
        );
    }
}
