//! The Home extension on core's extension API: the choice commands, the projection, and
//! each run's capture of its table, Home, prompt and file tools.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shiitake_core::AgentBuilder;
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    Contribution, Extension, ExtensionDefinition, Grant, Grants, HookError, RunContext, StateScope,
    StateView, Tx,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogArgument, CatalogCommand, CatalogFormat, CatalogScope,
    CatalogStep,
};
use shiitake_protocol::extension::ContractCommand;

use crate::computers::{Attachment, Computers};
use crate::contract::{
    AttachmentView, CHOICE_COLLECTION, CHOICE_KEY, Choose, EXTENSION_ID, HomeChoice, HomeState,
    HomeView, MAX_NAME_BYTES, NAMESPACE, Seed, SeedOutcome,
};
use crate::state::{self, Entry};
use crate::tools::{Adoption, RunFiles};
use crate::{prompt, tools};

/// Exactly what the host grants Home: its choice (`state`), the Computer list as its file
/// port and the file tools over it (`files`), the run's section (`prompt`), the view
/// (`projection`) and `/home` and `seed` (`commands`).
pub fn home_grants() -> Grants {
    Grants::none()
        .with(Grant::State)
        .with(Grant::Files)
        .with(Grant::Prompt)
        .with(Grant::Projection)
        .with(Grant::Commands)
}

/// Adds Home over `computers` to an Agent with [`home_grants`], handing it the list as its
/// file port.
pub fn add_home(
    builder: AgentBuilder,
    computers: Arc<dyn Computers>,
) -> Result<AgentBuilder, HomeError> {
    let home = HomeExtension::new(computers)?;
    let port = home.port();
    Ok(builder.extension_with_files(home, home_grants(), port))
}

/// Why Home could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// The extension id does not satisfy the protocol's identifier rules.
    #[error("extension id: {0}")]
    Identity(#[from] shiitake_protocol::BoundError),
}

/// The Computer list as the port the host hands Home through core (`files` grant).
#[derive(Clone)]
pub struct HomePort(pub Arc<dyn Computers>);

impl std::fmt::Debug for HomePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HomePort").finish_non_exhaustive()
    }
}

/// The Agent-scope choice of an attached Computer, and each run's file tools on it.
pub struct HomeExtension {
    definition: ExtensionDefinition,
    computers: Arc<dyn Computers>,
}

impl std::fmt::Debug for HomeExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HomeExtension")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl HomeExtension {
    /// Home over the host's Computer list; see [`add_home`] to add it to an Agent.
    pub fn new(computers: Arc<dyn Computers>) -> Result<Self, HomeError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(EXTENSION_ID)?,
                namespace: NAMESPACE.into(),
                scopes: vec![StateScope::Agent],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
            computers,
        })
    }

    /// The list as the file port to hand core with `AgentBuilder::extension_with_files`.
    pub fn port(&self) -> Arc<HomePort> {
        Arc::new(HomePort(self.computers.clone()))
    }
}

/// The host's current attachments as a table (duplicates left out, reported).
fn table(
    computers: &dyn Computers,
) -> (
    Vec<Entry<Arc<dyn knapsack::Files>>>,
    Vec<crate::contract::AttachmentProblem>,
) {
    let entries = computers
        .read()
        .into_iter()
        .map(
            |Attachment {
                 name,
                 attachment_id,
                 port,
             }| Entry {
                name,
                attachment_id,
                value: port,
            },
        )
        .collect();
    state::table(entries)
}

/// Decodes a command's input, ignoring the `requestId` core uses for idempotence.
fn decode<T: DeserializeOwned>(command: &str, mut input: Value) -> Result<T, HookError> {
    if let Some(map) = input.as_object_mut() {
        map.remove("requestId");
    }
    serde_json::from_value(input).map_err(|error| HookError::Invalid(format!("{command}: {error}")))
}

fn encode(value: &impl serde::Serialize) -> Result<Value, HookError> {
    serde_json::to_value(value)
        .map_err(|error| HookError::Failed(format!("an answer did not encode: {error}")))
}

impl Extension for HomeExtension {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    /// `choose {name}` (`/home <name>`) and the unadvertised `seed {attachmentId}`.
    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        let current: Option<HomeChoice> =
            tx.get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY)?;
        match command {
            Choose::NAME => {
                let Choose { name } = decode(command, input)?;
                let (table, _) = table(self.computers.as_ref());
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
                encode(&choice)
            }
            Seed::NAME => {
                if tx.session_id().is_some() {
                    return Err(HookError::Invalid(
                        "seed is an Agent-scope host operation, not a Session command".into(),
                    ));
                }
                let Seed { attachment_id } = decode(command, input)?;
                let outcome = state::seed(current, attachment_id, tx.now());
                if let SeedOutcome::Recorded { choice } = &outcome {
                    tx.put(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY, choice)?;
                }
                encode(&outcome)
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let choice: Option<HomeChoice> =
            state.get(StateScope::Agent, CHOICE_COLLECTION, CHOICE_KEY);
        let (table, problems) = table(self.computers.as_ref());
        let view = HomeView {
            home: state::resolve(choice.as_ref(), &table),
            choice,
            attachments: table
                .iter()
                .map(|entry| AttachmentView {
                    name: entry.name.clone(),
                    attachment_id: entry.attachment_id.clone(),
                    patch: entry.value.patch_engine().is_some(),
                })
                .collect(),
            problems,
        };
        serde_json::to_value(view).ok()
    }

    /// Captures the run's table, Home and prompt once; the tools use only what was captured.
    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let computers = match run.files::<HomePort>() {
            Ok(port) => port,
            Err(error) => {
                return Contribution {
                    prompt_section: Some(format!(
                        "Home's file tools are not available to this run ({error})."
                    )),
                    tools: None,
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
            HomeState::Chosen { attachment_id, .. }
            | HomeState::Adoptable { attachment_id, .. } => Some(attachment_id.clone()),
            HomeState::Detached { .. } | HomeState::Unchosen { .. } => None,
        };
        let home = home_id.and_then(|id| table.iter().find(|e| e.attachment_id == id));
        let Some(home) = home else {
            return Contribution {
                prompt_section: Some(prompt::section(&home_state, &names, false)),
                tools: None,
            };
        };
        let patch = home.value.patch_engine().is_some();
        let adoption = match &home_state {
            HomeState::Adoptable { attachment_id, .. } => Some(Adoption {
                attachment_id: attachment_id.clone(),
                tools,
                pending: AtomicBool::new(true),
            }),
            _ => None,
        };
        let named: BTreeMap<String, _> = table
            .iter()
            .map(|entry| (entry.name.as_str().to_owned(), entry.value.clone()))
            .collect();
        let files = Arc::new(RunFiles {
            home: home.value.clone(),
            named,
            adoption,
        });
        let module = match tools::module(files) {
            Ok(module) => Some(module),
            Err(error) => {
                tracing::error!(%error, "Home's file tools could not be built");
                None
            }
        };
        Contribution {
            prompt_section: Some(prompt::section(&home_state, &names, patch)),
            tools: module,
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: self.definition.id.clone(),
            commands: vec![CatalogCommand {
                name: "home".into(),
                summary: "Choose the Computer every Session works in".into(),
                scope: CatalogScope::Session,
                call: Choose::NAME.into(),
                arguments: vec![CatalogArgument {
                    name: "name".into(),
                    description: "The attached Computer's name".into(),
                    kind: ArgumentKind::Text {
                        max_bytes: u32::try_from(MAX_NAME_BYTES).unwrap_or(u32::MAX),
                    },
                    required: true,
                }],
                steps: vec![CatalogStep {
                    argument: "name".into(),
                    prompt: "Which Computer should be Home?".into(),
                }],
                flow: None,
            }],
        })
    }
}
