//! Extensions across the Agent's life: open (revisions and migrations), status,
//! resume, Agent-scope commands and catalogs.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

use serde_json::Value;
use shiitake_protocol::catalog::{CatalogEntry, SessionCatalogs};
use shiitake_protocol::{ExtensionId, ExtensionRunState, ExtensionStatusV0, ShiitakeError};

use super::agent_scope::{AgentScope, AgentScopeDeps, missing_session};
use super::definition::MigrationTx;
use super::host::{Failure, Host, Registered};
use super::{CommandScope, Grant};
use crate::store::{ExtensionRow, ExtensionStatusRow, Op, RowScope};

/// Brings every extension's stored state to its schema version, records revisions,
/// restores stopped reasons and loads Agent-scope rows.
pub(crate) async fn open_extensions(core: AgentScopeDeps<'_>) -> Result<(), ShiitakeError> {
    let store = core.store;
    let stored: HashMap<ExtensionId, ExtensionStatusRow> = store
        .extension_statuses()
        .await?
        .into_iter()
        .map(|status| (status.extension_id.clone(), status))
        .collect();
    let mut ops = Vec::new();
    for registered in &core.host.extensions {
        let definition = &registered.definition;
        let reason = match stored.get(&definition.id) {
            None => None,
            Some(status) if status.schema_version > definition.schema_version => {
                // Written by a newer build: refuse it, and leave its status row alone.
                let reason = format!(
                    "stored state is schema version {}, newer than this build's {}",
                    status.schema_version, definition.schema_version
                );
                core.host.mark_unreadable(&definition.id, reason);
                continue;
            }
            Some(status) if status.schema_version < definition.schema_version => {
                match migrate(core, registered, status.schema_version).await? {
                    Ok(rows) => {
                        ops.push(Op::ReplaceExtensionRows {
                            extension_id: definition.id.clone(),
                            rows,
                        });
                        status.stopped_reason.clone()
                    }
                    Err(reason) => {
                        // The rows and their status stay as they were, in the old shape,
                        // until a build that can read them (or a fixed migration) opens them.
                        core.host.mark_unreadable(&definition.id, reason);
                        continue;
                    }
                }
            }
            Some(status) => status.stopped_reason.clone(),
        };
        ops.push(Host::status_op(registered, reason.clone()));
        core.host.mark_stopped(&definition.id, reason);
    }
    if !ops.is_empty() {
        store.commit(ops).await?;
    }
    for stored in store.extension_rows(None, Some(&RowScope::Agent)).await? {
        let row = stored.row;
        let write = ((row.collection, row.key), Some(row.value));
        core.host
            .apply_agent_writes(&stored.extension_id, vec![write]);
    }
    Ok(())
}

/// Runs the migrations after `from_version`; `Err` carries the stop reason.
async fn migrate(
    core: AgentScopeDeps<'_>,
    registered: &Registered,
    from_version: u32,
) -> Result<Result<Vec<ExtensionRow>, String>, ShiitakeError> {
    let definition = &registered.definition;
    let mut tx = MigrationTx::default();
    for stored in core
        .store
        .extension_rows(Some(&definition.id), None)
        .await?
    {
        let row = stored.row;
        let key = (
            row.scope.kind(),
            row.scope.scope_id().to_owned(),
            row.collection,
            row.key,
        );
        tx.rows.insert(key, row.value);
    }
    let mut steps: Vec<_> = definition
        .migrations
        .iter()
        .filter(|m| m.to_version > from_version)
        .collect();
    steps.sort_by_key(|m| m.to_version);
    for step in steps {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| (step.apply)(&mut tx)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Ok(Err(format!("migration `{}` failed: {error}", step.name))),
            Err(_) => return Ok(Err(format!("migration `{}` panicked", step.name))),
        }
    }
    let mut rows = Vec::with_capacity(tx.rows.len());
    for ((scope, scope_id, collection, key), value) in tx.rows {
        // A migration rewrites values, never keys: a scope that does not read back
        // was stored corrupt, and the extension stops rather than lose the row.
        let scope = match RowScope::from_stored(scope, &scope_id) {
            Ok(scope) => scope,
            Err(error) => return Ok(Err(format!("migration kept an unreadable row: {error}"))),
        };
        rows.push(ExtensionRow {
            scope,
            collection,
            key,
            value,
        });
    }
    Ok(Ok(rows))
}

/// The listed status of one extension.
pub(crate) fn status(host: &Host, registered: &Registered) -> ExtensionStatusV0 {
    let state = match host.stopped(&registered.definition.id) {
        Some(reason) => ExtensionRunState::Stopped { reason },
        None => ExtensionRunState::Running,
    };
    ExtensionStatusV0 {
        extension_id: registered.definition.id.clone(),
        namespace: registered.definition.namespace.clone(),
        revision: registered.revision.clone(),
        state,
    }
}

/// Restarts a stopped extension.
pub(crate) async fn resume(
    core: AgentScopeDeps<'_>,
    id: &ExtensionId,
) -> Result<ExtensionStatusV0, ShiitakeError> {
    let registered = core
        .host
        .find(id)
        .ok_or_else(|| ShiitakeError::not_found(format!("no extension {id} in this Agent")))?;
    if core.host.unreadable(id) {
        return Err(ShiitakeError::conflict(format!(
            "extension {id} cannot read its stored state; open it with a build that can"
        )));
    }
    if core.host.stopped(id).is_some() {
        core.store
            .commit(vec![Host::status_op(registered, None)])
            .await?;
        core.host.mark_stopped(id, None);
        // Its timers waited while it was stopped.
        core.host.timers_changed.notify_one();
    }
    Ok(status(core.host, registered))
}

/// Refuses a command that the extension declares for the other scope than `route`'s,
/// before anything runs or any receipt is read: one `requestId` then has one effect,
/// whichever route carried it.
pub(crate) fn check_scope(
    registered: &Registered,
    command: &str,
    route: CommandScope,
) -> Result<(), ShiitakeError> {
    match registered.extension.command_scope(command) {
        Some(scope) if scope != route => {
            let id = &registered.definition.id;
            let through = match scope {
                CommandScope::Agent => format!(
                    "the Agent's extension controls (/v1/extensions/{id}/commands/{command})"
                ),
                CommandScope::Session => format!(
                    "a Session's extension controls (/v1/sessions/{{sessionId}}/extensions/{id}/{command})"
                ),
            };
            Err(ShiitakeError::invalid(format!(
                "command `{command}` of extension {id} is {scope}-scope, not {route}-scope: call it through {through}"
            )))
        }
        _ => Ok(()),
    }
}

/// `AgentExtensionControls::call`: an Agent-scope command, idempotent by `requestId`.
pub(crate) async fn call_agent_command(
    core: AgentScopeDeps<'_>,
    id: &ExtensionId,
    command: &str,
    input: Value,
) -> Result<Value, ShiitakeError> {
    let registered = core
        .host
        .find(id)
        .ok_or_else(|| ShiitakeError::not_found(format!("no extension {id} in this Agent")))?;
    if !registered.grants.has(Grant::Commands) {
        return Err(ShiitakeError::not_granted(format!(
            "extension {id} was not granted commands"
        )));
    }
    check_scope(registered, command, CommandScope::Agent)?;
    if let Some(reason) = core.host.stopped(id) {
        return Err(ShiitakeError::stopped(format!(
            "extension {id} is stopped: {reason}"
        )));
    }
    let payload = serde_json::json!([command, input]).to_string();
    let request_id = input
        .get("requestId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(request_id) = &request_id {
        match core
            .store
            .extension_request(id, &RowScope::Agent, request_id)
            .await?
        {
            Some(receipt) if receipt.payload == payload => return Ok(receipt.response),
            Some(_) => {
                return Err(ShiitakeError::conflict(format!(
                    "request id {request_id} was already used for a different command"
                )));
            }
            None => {}
        }
    }
    let command = command.to_owned();
    let scope = AgentScope::lock(core, registered).await;
    match scope.run_command(|extension, tx| extension.command(tx, &command, input)) {
        Ok(finished) => {
            if let Some(missing) = missing_session(core.store, &finished).await? {
                return Err(ShiitakeError::not_found(format!(
                    "no Session {missing} in this Agent"
                )));
            }
            let mut ops = Vec::new();
            if let Some(request_id) = request_id {
                ops.push(Op::PutExtensionRequest {
                    extension_id: id.clone(),
                    scope: RowScope::Agent,
                    request_id,
                    payload,
                    response: finished.value.clone(),
                });
            }
            Ok(scope.commit(ops, finished).await?)
        }
        Err(Failure::Caller(error)) => Err(error.into()),
        Err(Failure::Stop(reason)) => {
            scope.stop(Vec::new(), reason.clone()).await?;
            Err(ShiitakeError::stopped(format!(
                "extension {id} stopped: {reason}"
            )))
        }
    }
}

/// The catalogs of extensions granted commands.
pub(crate) fn catalogs(host: &Host) -> SessionCatalogs {
    let catalogs = host
        .extensions
        .iter()
        .filter(|registered| registered.grants.has(Grant::Commands))
        .filter_map(|registered| {
            let catalog = registered.extension.catalog()?;
            Some(CatalogEntry {
                catalog,
                state: status(host, registered).state,
            })
        })
        .collect();
    SessionCatalogs { catalogs }
}
