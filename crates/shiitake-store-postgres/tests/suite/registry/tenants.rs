//! Tenants and their Agents: creation with the first Agent and token, admission at
//! the bound and one past (also under concurrency), deletion, and `wanted()` with
//! real Agents on the test's schema.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use shiitake_conformance::support::{new_session, send, terminal_of};
use shiitake_conformance::{TestTools, tools};
use shiitake_core::Agent;
use shiitake_core::store::{Op, Store, TimerKind, TimerRow};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{
    AgentApi, ExtensionId, TenantEntry, TenantList, TenantName, TerminalOutcome, TokenEntry,
    TokenId,
};
use shiitake_store_postgres::registry::{ManualClock, Registry, RegistryError};
use shiitake_store_postgres::{AgentKey, PostgresOptions, PostgresStore};

use super::{MINUTE, Schema, agent, log_in, tenant};
use crate::support;

#[tokio::test]
async fn a_tenant_comes_with_its_first_agent_and_one_token() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let clock = ManualClock::new(1_000);
    let registry = Registry::with_clock(db.pool.clone(), clock.clone());
    let acme = tenant("acme");
    let issued = registry.create_tenant(&acme).await.unwrap();
    assert_eq!(issued.tenant, acme);
    assert!(issued.token.starts_with(&format!("{}.", issued.id)));
    assert_eq!(
        registry.verify_token(&issued.token).await.unwrap(),
        Some(acme.clone())
    );

    clock.set(2_000);
    assert!(matches!(
        registry.create_tenant(&acme).await,
        Err(RegistryError::Exists(_))
    ));
    registry.add_agent(&acme, &agent("bob"), 10).await.unwrap();
    // "bob" the tenant cannot be made: its first Agent's name is taken on the Hub.
    assert!(matches!(
        registry.create_tenant(&tenant("bob")).await,
        Err(RegistryError::Exists(_))
    ));
    assert!(matches!(
        registry.ensure_tenant(&tenant("bob")).await,
        Err(RegistryError::Exists(_))
    ));
    assert!(registry.ensure_tenant(&tenant("solo")).await.unwrap());
    assert!(!registry.ensure_tenant(&tenant("solo")).await.unwrap());
    assert!(!registry.ensure_tenant(&acme).await.unwrap());

    assert_eq!(
        registry.tenants().await.unwrap(),
        TenantList {
            tenants: vec![
                TenantEntry {
                    name: acme.clone(),
                    created_at: 1_000,
                    agents: vec![agent("acme"), agent("bob")],
                    tokens: vec![TokenEntry {
                        id: issued.id.clone(),
                        created_at: 1_000,
                    }],
                },
                TenantEntry {
                    name: tenant("solo"),
                    created_at: 2_000,
                    agents: vec![agent("solo")],
                    tokens: vec![],
                },
            ],
        }
    );
    assert_eq!(
        registry.tenant_of_agent(&agent("bob")).await.unwrap(),
        Some(acme.clone())
    );
    assert_eq!(
        registry.tenant_of_agent(&agent("nobody")).await.unwrap(),
        None
    );
    assert_eq!(
        registry.agents(&tenant("solo")).await.unwrap(),
        vec![agent("solo")]
    );
    assert_eq!(registry.agents(&tenant("nobody")).await.unwrap(), vec![]);
    db.drop().await;
}

#[tokio::test]
async fn admission_refuses_at_the_bound_counted_with_the_insert() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let registry = Registry::new(db.pool.clone());
    let acme = tenant("acme");
    registry.create_tenant(&acme).await.unwrap();
    // A bound of 3: the first Agent and two more fit (the last reaches the bound)...
    registry
        .add_agent(&acme, &agent("acme-2"), 3)
        .await
        .unwrap();
    registry
        .add_agent(&acme, &agent("acme-3"), 3)
        .await
        .unwrap();
    // ...and one past it is refused, whatever its name.
    assert!(matches!(
        registry.add_agent(&acme, &agent("acme-4"), 3).await,
        Err(RegistryError::Refused { .. })
    ));
    assert!(matches!(
        registry.add_agent(&acme, &agent("acme-2"), 10).await,
        Err(RegistryError::Exists(_))
    ));
    assert!(matches!(
        registry.add_agent(&tenant("nobody"), &agent("x"), 10).await,
        Err(RegistryError::NotFound(_))
    ));
    assert_eq!(
        registry.agents(&acme).await.unwrap(),
        vec![agent("acme"), agent("acme-2"), agent("acme-3")]
    );

    // Twelve admissions at once on two pools against a bound of 5: exactly four pass.
    let wide = tenant("wide");
    registry.create_tenant(&wide).await.unwrap();
    let other = Registry::new(db.other_pool().await);
    let attempts = (0..12).map(|n| {
        let registry = if n % 2 == 0 { &registry } else { &other };
        let (wide, name) = (wide.clone(), agent(&format!("wide-{n}")));
        async move { registry.add_agent(&wide, &name, 5).await }
    });
    let results = futures::future::join_all(attempts).await;
    let admitted = results.iter().filter(|result| result.is_ok()).count();
    assert_eq!(admitted, 4, "{results:?}");
    assert!(
        results
            .iter()
            .all(|result| matches!(result, Ok(()) | Err(RegistryError::Refused { .. })))
    );
    assert_eq!(registry.agents(&wide).await.unwrap().len(), 5);
    db.drop().await;
}

/// An Agent named `name` on the test's schema, answering with `model`.
async fn open_agent(db: &Schema, name: &str, model: Arc<ScriptedModel>) -> (Agent, PostgresStore) {
    let options = PostgresOptions::new(db.url.clone(), AgentKey::new(name).unwrap());
    let store = PostgresStore::open(options).await.unwrap();
    let catalog = tools::catalog(Arc::new(TestTools::default())).await;
    let agent = Agent::open(Arc::new(store.clone()), catalog, support::config(model))
        .await
        .unwrap();
    (agent, store)
}

#[tokio::test]
async fn wanted_lists_the_agents_with_work_waiting_and_delete_takes_their_rows() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let registry = Registry::new(db.pool.clone());
    for name in ["busy", "idle", "timed", "empty"] {
        registry.ensure_tenant(&tenant(name)).await.unwrap();
    }
    // "idle": its one prompt has settled.
    let answers = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("done")])));
    let (idle, _) = open_agent(&db, "idle", answers).await;
    let session = new_session(&idle).await;
    let command = send(&session, "hello").await;
    assert_eq!(
        terminal_of(&session, &command).await.outcome,
        TerminalOutcome::Completed
    );
    // "busy": its prompt waits on a model that takes ten minutes.
    let slow = Turn::new(vec![Step::DelayMs(600_000), Step::Text("late".to_owned())]);
    let (busy, _) = open_agent(
        &db,
        "busy",
        Arc::new(ScriptedModel::new(Script::new(vec![slow]))),
    )
    .await;
    send(&new_session(&busy).await, "take your time").await;
    // "timed": an Agent-scope timer armed far in the future.
    let timed = PostgresStore::open(PostgresOptions::new(
        db.url.clone(),
        AgentKey::new("timed").unwrap(),
    ))
    .await
    .unwrap();
    timed
        .commit(vec![Op::PutTimer(TimerRow {
            id: "tmr_weekly".to_owned(),
            extension_id: ExtensionId::new("example-timers").unwrap(),
            session_id: None,
            due_at: 4_102_444_800_000,
            cadence: None,
            payload: json!({}),
            kind: TimerKind::Hook,
        })])
        .await
        .unwrap();
    timed.close().await;
    let wanted = vec![agent("busy"), agent("timed")];
    assert_eq!(registry.wanted().await.unwrap(), wanted);

    // Closed (drained), "busy" is still wanted: its work waits for a process.
    busy.close().await.unwrap();
    idle.close().await.unwrap();
    assert_eq!(registry.wanted().await.unwrap(), wanted);

    // Deleting a tenant takes its Agents' rows with it, and nobody else's.
    let rows_of = |agent: &str| {
        format!(
            "SELECT agent_id FROM sessions WHERE agent_id = '{agent}' \
             UNION ALL SELECT agent_id FROM commands WHERE agent_id = '{agent}' \
             UNION ALL SELECT agent_id FROM entries WHERE agent_id = '{agent}' \
             UNION ALL SELECT agent_id FROM timers WHERE agent_id = '{agent}'"
        )
    };
    assert!(db.count(&rows_of("busy")).await >= 2);
    let idle_rows = db.count(&rows_of("idle")).await;
    assert!(idle_rows >= 3);
    assert_eq!(
        registry.delete_tenant(&tenant("busy")).await.unwrap(),
        vec![agent("busy")]
    );
    assert_eq!(
        registry.delete_tenant(&tenant("timed")).await.unwrap(),
        vec![agent("timed")]
    );
    assert_eq!(db.count(&rows_of("busy")).await, 0);
    assert_eq!(db.count(&rows_of("timed")).await, 0);
    assert_eq!(db.count(&rows_of("idle")).await, idle_rows);
    assert_eq!(registry.wanted().await.unwrap(), vec![]);
    assert!(matches!(
        registry.delete_tenant(&tenant("busy")).await,
        Err(RegistryError::NotFound(_))
    ));
    // A tenant made again under the name starts empty.
    registry.create_tenant(&tenant("busy")).await.unwrap();
    let names: Vec<TenantName> = registry
        .tenants()
        .await
        .unwrap()
        .tenants
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    assert_eq!(names, vec![tenant("busy"), tenant("empty"), tenant("idle")]);
    db.drop().await;
}

#[tokio::test]
async fn deleting_a_tenant_removes_its_agents_tokens_and_logins() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let registry = Registry::new(db.pool.clone());
    let (acme, beta) = (tenant("acme"), tenant("beta"));
    let token = registry.create_tenant(&acme).await.unwrap().token;
    let kept = registry.create_tenant(&beta).await.unwrap().token;
    registry
        .add_agent(&acme, &agent("acme-2"), 4)
        .await
        .unwrap();
    let session = log_in(&registry, Some(&acme)).await;
    let code = registry.issue_code(Some(&acme), MINUTE).await.unwrap();
    let beta_session = log_in(&registry, Some(&beta)).await;
    assert_eq!(
        registry.delete_tenant(&acme).await.unwrap(),
        vec![agent("acme"), agent("acme-2")]
    );
    assert_eq!(registry.verify_token(&token).await.unwrap(), None);
    assert_eq!(registry.check(&session).await.unwrap(), None);
    assert_eq!(registry.redeem(&code, MINUTE).await.unwrap(), None);
    assert_eq!(
        registry.tenant_of_agent(&agent("acme-2")).await.unwrap(),
        None
    );
    assert_eq!(
        registry.verify_token(&kept).await.unwrap(),
        Some(beta.clone())
    );
    assert_eq!(
        registry.check(&beta_session).await.unwrap(),
        Some(Some(beta))
    );
    // The name of a deleted tenant's Agent is free again.
    registry.create_tenant(&tenant("acme-2")).await.unwrap();
    assert!(matches!(
        registry.delete_tenant(&acme).await,
        Err(RegistryError::NotFound(_))
    ));
    assert!(matches!(
        registry
            .revoke_token(&acme, &TokenId::new("00000000000000aa").unwrap())
            .await,
        Err(RegistryError::NotFound(_))
    ));
    db.drop().await;
}
