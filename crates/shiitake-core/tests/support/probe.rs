//! A test extension whose commands exercise every part of the extension host.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName};
use shiitake_core::extension::host::ToolTx;
use shiitake_core::extension::{
    AdmissionOutcome, Admitted, Contribution, Due, Extension, ExtensionDefinition, FiredTimer,
    Grants, HookError, Migration, RunContext, Settled, StateScope, StateView, Tx,
};
use shiitake_core::{Agent, AgentConfig};
use shiitake_model::ScriptedModel;
use shiitake_protocol::catalog::{Catalog, CatalogCommand, CatalogFormat, CatalogScope};
use shiitake_protocol::{ExtensionId, PromptDelivery, RequestId, SessionId};
use shiitake_store_sqlite::{Durability, SqliteStore};

pub const ID: &str = "test-probe";

/// The probe; `section` is the prompt section it contributes.
pub struct Probe {
    definition: ExtensionDefinition,
    pub section: String,
    /// Which Agent this instance runs in, recorded by Agent-scope timer firings.
    pub name: String,
    /// How many times an Agent-scope timer hook ran here (committed or not).
    pub attempts: Arc<std::sync::atomic::AtomicUsize>,
}

impl Probe {
    pub fn new() -> Self {
        Self::versioned(1, Vec::new())
    }

    pub fn versioned(schema_version: u32, migrations: Vec<Migration>) -> Self {
        Self {
            definition: ExtensionDefinition {
                id: ExtensionId::new(ID).unwrap(),
                namespace: "probe".into(),
                scopes: vec![StateScope::Session, StateScope::Agent],
                schema_version,
                migrations,
                configuration: json!({}),
            },
            section: "Probe context.".into(),
            name: "A".into(),
            attempts: Arc::default(),
        }
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    pub fn with_section(mut self, section: String) -> Self {
        self.section = section;
        self
    }
}

fn count(tx: &Tx<'_>, scope: StateScope, key: &str) -> Result<i64, HookError> {
    Ok(tx.get::<i64>(scope, "counts", key)?.unwrap_or(0))
}

fn bump(tx: &mut Tx<'_>, scope: StateScope, key: &str, by: i64) -> Result<i64, HookError> {
    let next = count(tx, scope, key)? + by;
    tx.put(scope, "counts", key, &next)?;
    Ok(next)
}

impl Extension for Probe {
    fn definition(&self) -> &ExtensionDefinition {
        &self.definition
    }

    fn command(&self, tx: &mut Tx<'_>, command: &str, input: Value) -> Result<Value, HookError> {
        let arg = |name: &str| input.get(name).cloned().unwrap_or(Value::Null);
        match command {
            "add" => {
                let by = arg("by")
                    .as_i64()
                    .ok_or_else(|| HookError::Invalid("`by` must be a number".into()))?;
                let scope = if tx.session_id().is_some() {
                    StateScope::Session
                } else {
                    StateScope::Agent
                };
                Ok(json!(bump(tx, scope, "added", by)?))
            }
            "admit" => {
                let text = arg("text").as_str().unwrap_or("admitted").to_owned();
                let correlation = arg("correlation").as_str().unwrap_or("probe").to_owned();
                tx.admit(&text, PromptDelivery::FollowUp, correlation)?;
                Ok(json!("admitted"))
            }
            "fail" => {
                bump(tx, StateScope::Session, "added", 100)?;
                tx.admit("should never run", PromptDelivery::FollowUp, "fail")?;
                Err(HookError::Failed("the probe failed on purpose".into()))
            }
            "panic" => {
                bump(tx, StateScope::Session, "added", 100)?;
                panic!("the probe panicked on purpose");
            }
            "timer" => {
                let after = arg("afterMs").as_u64().unwrap_or(0);
                let id = tx.set_timer(
                    Due::After(Duration::from_millis(after)),
                    json!({"kind": "test"}),
                )?;
                Ok(json!(id.as_str()))
            }
            "cron" => {
                let expression = arg("expression")
                    .as_str()
                    .unwrap_or("* * * * * *")
                    .to_owned();
                let id = tx.set_timer(Due::Cron(expression), json!({"kind": "cadence"}))?;
                Ok(json!(id.as_str()))
            }
            "arm" => {
                // Agent scope: `count` timers due at once.
                let count = arg("count").as_u64().unwrap_or(1);
                let at = arg("atMs").as_u64().unwrap_or(0);
                for n in 0..count {
                    tx.set_timer(Due::At(at), json!({"n": n}))?;
                }
                Ok(json!(count))
            }
            "admit_into" => {
                // Any scope: admit into the named Session, the occurrence as request id.
                let session = SessionId::new(arg("sessionId").as_str().unwrap_or_default())
                    .map_err(|error| HookError::Invalid(error.to_string()))?;
                let request = RequestId::new(arg("occurrence").as_str().unwrap_or_default())
                    .map_err(|error| HookError::Invalid(error.to_string()))?;
                let text = arg("text").as_str().unwrap_or("from the Agent").to_owned();
                let correlation = arg("correlation").as_str().unwrap_or("agent").to_owned();
                tx.admit_into(
                    &session,
                    request,
                    &text,
                    PromptDelivery::FollowUp,
                    correlation,
                )?;
                Ok(json!("admitting"))
            }
            "arm_admission" => {
                // Agent scope: a timer whose hook admits into a Session.
                let at = arg("atMs").as_u64().unwrap_or(0);
                tx.set_timer(Due::At(at), json!({"admitInto": input}))?;
                Ok(Value::Null)
            }
            "attention" => {
                let inbox = arg("inbox").as_bool().unwrap_or(true);
                tx.raise_attention("question", inbox, "Which option?")?;
                Ok(Value::Null)
            }
            "clear_attention" => {
                tx.clear_attention("question")?;
                Ok(Value::Null)
            }
            other => Err(HookError::UnknownCommand(other.to_owned())),
        }
    }

    fn on_settled(&self, tx: &mut Tx<'_>, settled: &Settled) -> Result<(), HookError> {
        let correlation = settled.origin.as_ref().map(|o| o.correlation.clone());
        tx.put(
            StateScope::Session,
            "settled",
            "last",
            &json!({"outcome": settled.outcome, "correlation": correlation}),
        )?;
        bump(tx, StateScope::Session, "settled", 1)?;
        Ok(())
    }

    fn on_timer(&self, tx: &mut Tx<'_>, timer: &FiredTimer) -> Result<(), HookError> {
        match tx.session_id() {
            Some(_) => {
                bump(tx, StateScope::Session, "fired", 1)?;
            }
            None if timer.payload.get("admitInto").is_some() => {
                let input = timer.payload["admitInto"].clone();
                self.command(tx, "admit_into", input)?;
            }
            None => {
                self.attempts
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let key = format!("{}-{}", timer.id.as_str(), self.name);
                tx.put(StateScope::Agent, "fired", &key, &true)?;
            }
        }
        Ok(())
    }

    fn on_admission(&self, tx: &mut Tx<'_>, admitted: &Admitted) -> Result<(), HookError> {
        let outcome = match &admitted.outcome {
            AdmissionOutcome::Accepted(command_id) => json!({"accepted": command_id}),
            AdmissionOutcome::Refused(error) => json!({"refused": error.code.as_str()}),
        };
        let key = admitted.request_id.as_str();
        let seen: i64 = tx
            .get(StateScope::Agent, "admission_runs", key)?
            .unwrap_or(0);
        tx.put(StateScope::Agent, "admission_runs", key, &(seen + 1))?;
        tx.put(
            StateScope::Agent,
            "admissions",
            key,
            &json!({
                "sessionId": admitted.session_id,
                "correlation": admitted.correlation,
                "outcome": outcome,
            }),
        )
    }

    fn projection(&self, state: &StateView<'_>) -> Option<Value> {
        let added: i64 = state
            .get(StateScope::Session, "counts", "added")
            .unwrap_or(0);
        let fired: i64 = state
            .get(StateScope::Session, "counts", "fired")
            .unwrap_or(0);
        let settled: i64 = state
            .get(StateScope::Session, "counts", "settled")
            .unwrap_or(0);
        let bumped: i64 = state
            .get(StateScope::Session, "counts", "bumped")
            .unwrap_or(0);
        let last: Option<Value> = state.get(StateScope::Session, "settled", "last");
        let admissions: serde_json::Map<String, Value> = state
            .scan(StateScope::Agent, "admissions")
            .into_iter()
            .collect();
        let admission_runs: serde_json::Map<String, Value> = state
            .scan(StateScope::Agent, "admission_runs")
            .into_iter()
            .collect();
        Some(json!({
            "added": added, "fired": fired, "settled": settled, "bumped": bumped, "last": last,
            "admissions": admissions, "admissionRuns": admission_runs,
        }))
    }

    fn contribute(&self, run: &RunContext<'_>, tools: ToolTx) -> Contribution {
        let directive = match run.origin {
            Some(origin) if origin.correlation == "continue" => " CONTINUE DIRECTIVE",
            _ => "",
        };
        let bump = Operation::from_fn(
            OperationName::new("bump").unwrap(),
            "Bumps the probe counter.",
            move |_input, _ctx| {
                let tools = tools.clone();
                async move {
                    tools
                        .run(|tx| Ok(json!(bump(tx, StateScope::Session, "bumped", 1)?)))
                        .await
                }
            },
        );
        let module = Module::new(ModulePath::new("probe").unwrap(), "Probe tools.")
            .with_operation(bump)
            .unwrap();
        let files = match run.files::<String>() {
            Ok(port) => format!("[files: {port}] "),
            Err(error) => format!("[files: {error}] "),
        };
        Contribution {
            prompt_section: Some(format!("{files}{}{directive}", self.section)),
            tools: Some(module),
            ..Contribution::default()
        }
    }

    fn catalog(&self) -> Option<Catalog> {
        Some(Catalog {
            format: CatalogFormat::V1,
            extension_id: ExtensionId::new(ID).unwrap(),
            commands: vec![CatalogCommand {
                name: "add".into(),
                summary: "Add to the probe counter".into(),
                scope: CatalogScope::Session,
                call: "add".into(),
                arguments: Vec::new(),
                steps: Vec::new(),
                flow: None,
            }],
        })
    }
}

/// An Agent with the probe and the given grants on `path`.
pub async fn agent(path: &Path, model: Arc<ScriptedModel>, probe: Probe, grants: Grants) -> Agent {
    agent_with(path, super::harness::config(model), probe, grants).await
}

/// An Agent with the probe, the given grants and configuration (a clock, ...) on `path`.
pub async fn agent_with(path: &Path, config: AgentConfig, probe: Probe, grants: Grants) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension(probe, grants)
    .open()
    .await
    .unwrap()
}

/// An Agent with the probe, the given grants, and a file port (a string) for it.
pub async fn agent_with_files(path: &Path, model: Arc<ScriptedModel>, grants: Grants) -> Agent {
    let store = SqliteStore::open(path, Durability::Normal).await.unwrap();
    let config: AgentConfig = super::harness::config(model);
    Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension_with_files(
        Probe::new(),
        grants,
        Arc::new("the host's files".to_owned()),
    )
    .open()
    .await
    .unwrap()
}

pub fn id() -> ExtensionId {
    ExtensionId::new(ID).unwrap()
}
