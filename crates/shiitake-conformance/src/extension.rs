//! The extension every conformance Agent carries: a tally with a human command
//! flow, so catalogs, flows and extension commands are checked on both transports.

use serde_json::{Value, json};
use shiitake_core::extension::{
    Extension, ExtensionDefinition, Grant, Grants, HookError, StateScope, StateView, Tx,
};
use shiitake_protocol::ExtensionId;
use shiitake_protocol::catalog::{
    ArgumentKind, Catalog, CatalogChoice, CatalogCommand, CatalogFormat, CatalogScope, FlowStep,
};

/// The tally's identity.
pub const TALLY_ID: &str = "conformance-tally";

/// A number per Session; `/tally` adds to it through a server-owned flow.
pub struct Tally {
    definition: ExtensionDefinition,
}

impl Tally {
    /// The tally extension.
    pub fn new() -> Result<Self, shiitake_protocol::BoundError> {
        Ok(Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(TALLY_ID)?,
                namespace: "tally".into(),
                scopes: vec![StateScope::Session],
                schema_version: 1,
                migrations: Vec::new(),
                configuration: json!({}),
            },
        })
    }

    /// What the fixtures grant it.
    pub fn grants() -> Grants {
        Grants::none()
            .with(Grant::State)
            .with(Grant::Commands)
            .with(Grant::Projection)
    }
}

fn count(tx: &Tx<'_>) -> Result<i64, HookError> {
    Ok(tx
        .get::<i64>(StateScope::Session, "tally", "count")?
        .unwrap_or(0))
}

/// The `/tally` flow: ask how much (a choice or any whole number), then confirm.
fn flow(collected: &Value) -> FlowStep {
    match collected.get("by").and_then(Value::as_str) {
        None => FlowStep::Ask {
            argument: "by".into(),
            prompt: "Add how much?".into(),
            kind: ArgumentKind::Choice {
                choices: ["1", "10"]
                    .iter()
                    .map(|n| CatalogChoice {
                        label: (*n).into(),
                        value: (*n).into(),
                    })
                    .collect(),
                multiple: false,
                free_text: true,
            },
        },
        Some(text) => match text.trim().parse::<i64>() {
            Ok(by) => FlowStep::Confirm {
                summary: format!("Add {by} to the tally"),
                input: json!({"by": by}),
            },
            Err(_) => FlowStep::Unavailable {
                message: format!("{text:?} is not a whole number"),
            },
        },
    }
}

impl Extension for Tally {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        match command {
            "add" => {
                let by = input["by"]
                    .as_i64()
                    .ok_or_else(|| HookError::Invalid("`by` is a whole number".into()))?;
                let next = count(tx)? + by;
                tx.put(StateScope::Session, "tally", "count", &next)?;
                Ok(json!(next))
            }
            "add_flow" => Ok(json!(flow(&input))),
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let count: i64 = state
            .get(StateScope::Session, "tally", "count")
            .unwrap_or(0);
        Some(json!({"count": count}))
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: self.definition.id.clone(),
            commands: vec![CatalogCommand {
                name: "tally".into(),
                summary: "Add to the tally".into(),
                scope: CatalogScope::Session,
                call: "add".into(),
                arguments: Vec::new(),
                steps: Vec::new(),
                flow: Some("add_flow".into()),
            }],
        })
    }
}
