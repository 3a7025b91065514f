//! The Hub's registry on a real PostgreSQL: tenants and admission, tokens that
//! verify until revoked or rotated, web logins on an injected clock with their
//! bounds at the edge and one past, a code spent once across two pools, no secret
//! in clear in any row, and the Agents that have work waiting.
//!
//! Each test runs in a schema of its own (`search_path` on every connection, the
//! migrations applied there), so the registry's global tables are the test's alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use shiitake_conformance::support::{new_session, send, terminal_of};
use shiitake_conformance::{TestTools, tools};
use shiitake_core::Agent;
use shiitake_core::store::{Op, Store, TimerKind, TimerRow};
use shiitake_model::{Script, ScriptedModel, Step, Turn};
use shiitake_protocol::{
    AgentApi, AgentName, ExtensionId, TenantEntry, TenantList, TenantName, TerminalOutcome,
    TokenEntry, TokenId,
};
use shiitake_store_postgres::registry::{
    Credential, MAX_CODES_PER_CALLER, MAX_SESSIONS_PER_CALLER, ManualClock, Registry, RegistryError,
};
use shiitake_store_postgres::{AgentKey, PostgresOptions, PostgresStore};
use sqlx::postgres::{PgPool, PgPoolOptions};

/// A schema of the test database for one test, with the crate's migrations.
struct Schema {
    /// The test database's URL with this schema first on the search path.
    url: String,
    name: String,
    pool: PgPool,
}

impl Schema {
    /// A fresh schema, or `None` (after the `SKIPPED` line) without a test database.
    async fn fresh() -> Option<Self> {
        let base = support::url()?;
        let name = format!(
            "registry_{}",
            ulid::Ulid::generate().to_string().to_lowercase()
        );
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&base)
            .await
            .unwrap();
        sqlx::query(&format!("CREATE SCHEMA {name}"))
            .execute(&admin)
            .await
            .unwrap();
        admin.close().await;
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options[search_path]={name}");
        let pool = Self::pool(&url).await;
        Registry::migrate(&pool).await.unwrap();
        Some(Self { url, name, pool })
    }

    async fn pool(url: &str) -> PgPool {
        PgPoolOptions::new()
            .max_connections(4)
            .connect(url)
            .await
            .unwrap()
    }

    /// A second, independent pool on the same schema: another process's view.
    async fn other_pool(&self) -> PgPool {
        Self::pool(&self.url).await
    }

    /// Counts the rows `sql` selects.
    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM ({sql}) AS counted"))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn drop(self) {
        self.pool.close().await;
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&support::url().unwrap())
            .await
            .unwrap();
        sqlx::query(&format!("DROP SCHEMA {} CASCADE", self.name))
            .execute(&admin)
            .await
            .unwrap();
        admin.close().await;
    }
}

fn tenant(name: &str) -> TenantName {
    TenantName::new(name).unwrap()
}

fn agent(name: &str) -> AgentName {
    AgentName::new(name).unwrap()
}

const MINUTE: Duration = Duration::from_secs(60);

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

#[tokio::test]
async fn a_token_verifies_until_it_is_revoked_or_rotated_away() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let clock = ManualClock::new(10_000);
    let registry = Registry::with_clock(db.pool.clone(), clock.clone());
    // Another process: its own pool (on the same injected clock).
    let elsewhere = Registry::with_clock(db.other_pool().await, clock.clone());
    let (acme, beta) = (tenant("acme"), tenant("beta"));
    let first = registry.create_tenant(&acme).await.unwrap();
    let betas = registry.create_tenant(&beta).await.unwrap();
    clock.set(20_000);
    let second = registry.issue_token(&acme, false).await.unwrap();
    for token in [&first, &second] {
        assert_eq!(
            elsewhere.verify_token(&token.token).await.unwrap(),
            Some(acme.clone())
        );
    }
    let listed = registry.tenants().await.unwrap().tenants[0].tokens.clone();
    assert_eq!(
        listed,
        vec![
            TokenEntry {
                id: first.id.clone(),
                created_at: 10_000
            },
            TokenEntry {
                id: second.id.clone(),
                created_at: 20_000
            },
        ]
    );

    // A forged secret on a real id, malformed text and an unknown id reach nobody.
    let forged = format!("{}.{}", first.id, "0".repeat(Credential::SECRET_LEN));
    for text in [
        forged.as_str(),
        "",
        "acme",
        &first.token[..first.token.len() - 1],
    ] {
        assert_eq!(
            elsewhere.verify_token(text).await.unwrap(),
            None,
            "{text:?}"
        );
    }

    // Revoking one: gone everywhere, the other stays; another tenant cannot revoke it.
    assert!(matches!(
        registry.revoke_token(&beta, &second.id).await,
        Err(RegistryError::NotFound(_))
    ));
    registry.revoke_token(&acme, &first.id).await.unwrap();
    assert_eq!(elsewhere.verify_token(&first.token).await.unwrap(), None);
    assert_eq!(
        elsewhere.verify_token(&second.token).await.unwrap(),
        Some(acme.clone())
    );
    assert!(matches!(
        registry.revoke_token(&acme, &first.id).await,
        Err(RegistryError::NotFound(_))
    ));
    assert!(matches!(
        registry.issue_token(&tenant("nobody"), true).await,
        Err(RegistryError::NotFound(_))
    ));

    // A rotation: only the new token works, and acme's web logins end with the old
    // ones; beta's token and login and the operator's login are untouched.
    let login = |caller: Option<TenantName>| {
        let registry = registry.clone();
        async move {
            let code = registry.issue_code(caller.as_ref(), MINUTE).await.unwrap();
            registry.redeem(&code, MINUTE).await.unwrap().unwrap().0
        }
    };
    let acme_session = login(Some(acme.clone())).await;
    let acme_code = registry.issue_code(Some(&acme), MINUTE).await.unwrap();
    let beta_session = login(Some(beta.clone())).await;
    let operator_session = login(None).await;
    let third = registry.issue_token(&acme, true).await.unwrap();
    assert_eq!(elsewhere.verify_token(&second.token).await.unwrap(), None);
    assert_eq!(
        elsewhere.verify_token(&third.token).await.unwrap(),
        Some(acme.clone())
    );
    assert_eq!(
        elsewhere.verify_token(&betas.token).await.unwrap(),
        Some(beta.clone())
    );
    assert_eq!(elsewhere.check(&acme_session).await.unwrap(), None);
    assert_eq!(elsewhere.redeem(&acme_code, MINUTE).await.unwrap(), None);
    assert_eq!(
        elsewhere.check(&beta_session).await.unwrap(),
        Some(Some(beta.clone()))
    );
    assert_eq!(
        elsewhere.check(&operator_session).await.unwrap(),
        Some(None)
    );

    // Revoking a token ends its tenant's logins too (one may have come from it).
    let beta_second = registry.issue_token(&beta, false).await.unwrap();
    registry.revoke_token(&beta, &betas.id).await.unwrap();
    assert_eq!(elsewhere.check(&beta_session).await.unwrap(), None);
    assert_eq!(
        elsewhere.verify_token(&beta_second.token).await.unwrap(),
        Some(beta)
    );
    db.drop().await;
}

#[tokio::test]
async fn a_code_works_once_before_it_expires_and_a_session_lasts_its_ttl() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let start = 1_000_000;
    let clock = ManualClock::new(start);
    let registry = Registry::with_clock(db.pool.clone(), clock.clone());
    let acme = tenant("acme");
    registry.create_tenant(&acme).await.unwrap();
    let session_ttl = Duration::from_secs(600);

    let code = registry.issue_code(Some(&acme), MINUTE).await.unwrap();
    // A wrong secret neither works nor spends the code.
    let id = Credential::parse(&code).unwrap().id().to_owned();
    let forged = format!("{id}.{}", "0".repeat(Credential::SECRET_LEN));
    assert_eq!(registry.redeem(&forged, session_ttl).await.unwrap(), None);
    clock.set(start + 59_999);
    let (session, caller) = registry.redeem(&code, session_ttl).await.unwrap().unwrap();
    assert_eq!(caller, Some(acme.clone()));
    assert_eq!(
        registry.redeem(&code, session_ttl).await.unwrap(),
        None,
        "spent"
    );

    clock.set(start);
    let late = registry.issue_code(Some(&acme), MINUTE).await.unwrap();
    clock.set(start + 60_000);
    assert_eq!(
        registry.redeem(&late, session_ttl).await.unwrap(),
        None,
        "at the edge the code has expired"
    );
    assert_eq!(
        db.count("SELECT 1 FROM hub_login_codes").await,
        0,
        "and is gone"
    );

    // The session opened at start + 59 999 ms lasts 600 s from then.
    let opened = start + 59_999;
    clock.set(opened + 599_999);
    assert_eq!(
        registry.check(&session).await.unwrap(),
        Some(Some(acme.clone()))
    );
    let session_id = Credential::parse(&session).unwrap().id().to_owned();
    let forged = format!("{session_id}.{}", "0".repeat(Credential::SECRET_LEN));
    assert_eq!(registry.check(&forged).await.unwrap(), None);
    assert!(
        !registry.end(&forged).await.unwrap(),
        "a wrong secret ends nothing"
    );
    clock.set(opened + 600_000);
    assert_eq!(registry.check(&session).await.unwrap(), None);
    assert_eq!(
        db.count("SELECT 1 FROM hub_web_sessions").await,
        0,
        "removed on use"
    );

    // Logging out: the session ends, once.
    let code = registry.issue_code(None, MINUTE).await.unwrap();
    let (operator, caller) = registry.redeem(&code, session_ttl).await.unwrap().unwrap();
    assert_eq!(caller, None);
    assert_eq!(registry.check(&operator).await.unwrap(), Some(None));
    assert!(registry.end(&operator).await.unwrap());
    assert_eq!(registry.check(&operator).await.unwrap(), None);
    assert!(!registry.end(&operator).await.unwrap());
    assert!(matches!(
        registry.issue_code(Some(&tenant("nobody")), MINUTE).await,
        Err(RegistryError::NotFound(_))
    ));
    db.drop().await;
}

/// Logs `caller` in once at the clock's time; the session's text.
async fn log_in(registry: &Registry, caller: Option<&TenantName>) -> String {
    let code = registry.issue_code(caller, MINUTE).await.unwrap();
    registry.redeem(&code, MINUTE).await.unwrap().unwrap().0
}

#[tokio::test]
async fn each_caller_keeps_at_most_8_codes_and_32_sessions() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let clock = ManualClock::new(1_000);
    let registry = Registry::with_clock(db.pool.clone(), clock.clone());
    let acme = tenant("acme");
    registry.create_tenant(&acme).await.unwrap();
    let codes_of = |caller: &str| {
        format!("SELECT 1 FROM hub_login_codes WHERE tenant IS NOT DISTINCT FROM {caller}")
    };
    let operator_code = registry.issue_code(None, MINUTE).await.unwrap();

    let mut codes = Vec::new();
    for n in 0..MAX_CODES_PER_CALLER {
        clock.advance(Duration::from_millis(1));
        codes.push(registry.issue_code(Some(&acme), MINUTE).await.unwrap());
        assert_eq!(db.count(&codes_of("'acme'")).await, n as i64 + 1);
    }
    // At the bound (8) every code is kept; one past it, the oldest goes.
    clock.advance(Duration::from_millis(1));
    codes.push(registry.issue_code(Some(&acme), MINUTE).await.unwrap());
    assert_eq!(db.count(&codes_of("'acme'")).await, 8);
    assert_eq!(
        db.count(&codes_of("NULL")).await,
        1,
        "the operator's are counted apart"
    );
    assert_eq!(registry.redeem(&codes[0], MINUTE).await.unwrap(), None);
    assert!(registry.redeem(&codes[1], MINUTE).await.unwrap().is_some());
    assert!(registry.redeem(&codes[8], MINUTE).await.unwrap().is_some());
    assert!(
        registry
            .redeem(&operator_code, MINUTE)
            .await
            .unwrap()
            .is_some()
    );

    // Sessions of the operator: 32 kept, the 33rd ends the one closest to expiry.
    registry.end_sessions_of(None).await.unwrap();
    let sessions_of_operator = "SELECT 1 FROM hub_web_sessions WHERE tenant IS NULL";
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS_PER_CALLER {
        clock.advance(Duration::from_millis(1));
        sessions.push(log_in(&registry, None).await);
    }
    assert_eq!(db.count(sessions_of_operator).await, 32);
    for session in &sessions {
        assert_eq!(registry.check(session).await.unwrap(), Some(None));
    }
    clock.advance(Duration::from_millis(1));
    sessions.push(log_in(&registry, None).await);
    assert_eq!(db.count(sessions_of_operator).await, 32);
    assert_eq!(registry.check(&sessions[0]).await.unwrap(), None);
    assert_eq!(registry.check(&sessions[1]).await.unwrap(), Some(None));
    assert_eq!(registry.check(&sessions[32]).await.unwrap(), Some(None));

    // Sixteen codes minted at once on two pools: the bound still holds.
    let other = Registry::with_clock(db.other_pool().await, clock.clone());
    let beta = tenant("beta");
    registry.create_tenant(&beta).await.unwrap();
    let minted = futures::future::join_all((0..16).map(|n| {
        let registry = if n % 2 == 0 { &registry } else { &other };
        let beta = beta.clone();
        async move { registry.issue_code(Some(&beta), MINUTE).await }
    }))
    .await;
    assert!(minted.iter().all(Result::is_ok), "{minted:?}");
    assert_eq!(db.count(&codes_of("'beta'")).await, 8);

    // Expired rows go at the sweep; live ones stay.
    let live_before = db.count("SELECT 1 FROM hub_web_sessions").await
        + db.count("SELECT 1 FROM hub_login_codes").await;
    clock.advance(MINUTE + Duration::from_secs(1));
    let fresh = registry
        .issue_code(Some(&acme), Duration::from_secs(3600))
        .await
        .unwrap();
    let swept = registry.sweep().await.unwrap();
    // The fresh code's insert already dropped acme's expired codes.
    assert!(
        swept > 0 && swept < live_before as u64,
        "{swept} of {live_before}"
    );
    assert_eq!(db.count("SELECT 1 FROM hub_web_sessions").await, 0);
    assert_eq!(db.count("SELECT 1 FROM hub_login_codes").await, 1);
    assert!(registry.redeem(&fresh, MINUTE).await.unwrap().is_some());
    db.drop().await;
}

#[tokio::test]
async fn a_code_redeemed_through_one_pool_is_spent_for_every_other() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let first = Registry::new(db.pool.clone());
    let second = Registry::new(db.other_pool().await);
    let acme = tenant("acme");
    first.create_tenant(&acme).await.unwrap();
    for _ in 0..5 {
        let code = first.issue_code(Some(&acme), MINUTE).await.unwrap();
        let (a, b) = tokio::join!(first.redeem(&code, MINUTE), second.redeem(&code, MINUTE));
        let opened: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
        assert_eq!(opened.len(), 1, "exactly one redemption wins");
        assert_eq!(second.redeem(&code, MINUTE).await.unwrap(), None);
        assert_eq!(first.redeem(&code, MINUTE).await.unwrap(), None);
        // The session works on both, and logging out on one ends it on the other.
        let (session, _) = &opened[0];
        assert_eq!(
            first.check(session).await.unwrap(),
            Some(Some(acme.clone()))
        );
        assert_eq!(
            second.check(session).await.unwrap(),
            Some(Some(acme.clone()))
        );
        assert!(second.end(session).await.unwrap());
        assert_eq!(first.check(session).await.unwrap(), None);
    }
    db.drop().await;
}

#[tokio::test]
async fn the_database_holds_no_secret_in_clear() {
    let Some(db) = Schema::fresh().await else {
        return;
    };
    let registry = Registry::new(db.pool.clone());
    let acme = tenant("acme");
    let mut texts = vec![registry.create_tenant(&acme).await.unwrap().token];
    texts.push(registry.issue_token(&acme, false).await.unwrap().token);
    texts.push(registry.issue_code(Some(&acme), MINUTE).await.unwrap());
    texts.push(registry.issue_code(None, MINUTE).await.unwrap());
    texts.push(log_in(&registry, Some(&acme)).await);
    texts.push(log_in(&registry, None).await);
    let secrets: Vec<String> = texts
        .iter()
        .map(|text| text.split_once('.').unwrap().1.to_owned())
        .collect();
    // Every column of every registry table, as text (BYTEA as hex): the secret's
    // text, and the hex of its text's bytes, appear nowhere.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_name LIKE 'hub\\_%' \
           AND table_name <> 'hub_nodes' ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "hub_agents",
            "hub_login_codes",
            "hub_tenants",
            "hub_tokens",
            "hub_web_sessions"
        ]
    );
    let mut cells = Vec::new();
    for table in &tables {
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1",
        )
        .bind(table)
        .fetch_all(&db.pool)
        .await
        .unwrap();
        for (column, kind) in columns {
            let as_text = if kind == "bytea" {
                format!("encode({column}, 'hex')")
            } else {
                format!("{column}::text")
            };
            let values: Vec<Option<String>> =
                sqlx::query_scalar(&format!("SELECT {as_text} FROM {table}"))
                    .fetch_all(&db.pool)
                    .await
                    .unwrap();
            cells.extend(values.into_iter().flatten());
        }
    }
    assert!(cells.len() > 20, "{cells:?}");
    for secret in &secrets {
        let hex_of_text: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        for cell in &cells {
            assert!(!cell.contains(secret.as_str()), "a secret in clear: {cell}");
            assert!(!cell.contains(&hex_of_text), "a secret's bytes: {cell}");
        }
    }
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

/// Whether `text` has the credential shape: 16 lowercase hex, a dot, 64 lowercase hex.
fn credential_shaped(text: &str) -> bool {
    let hex = |part: &str, len: usize| {
        part.len() == len && part.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
    };
    text.split_once('.')
        .is_some_and(|(id, secret)| hex(id, 16) && hex(secret, 64))
}

proptest! {
    #[test]
    fn a_well_formed_credential_parses_into_its_halves(
        id in "[0-9a-f]{16}",
        secret in "[0-9a-f]{64}",
    ) {
        let text = format!("{id}.{secret}");
        let credential = Credential::parse(&text).unwrap();
        prop_assert_eq!(credential.id(), id.as_str());
        prop_assert_eq!(credential.text(), text);
        prop_assert!(TokenId::new(credential.id()).is_ok());
    }

    #[test]
    fn anything_else_is_refused_without_a_panic(text in "\\PC{0,90}|[0-9a-fA-F.]{78,84}") {
        prop_assert_eq!(Credential::parse(&text).is_some(), credential_shaped(&text));
    }

    #[test]
    fn one_changed_character_breaks_a_credential(
        id in "[0-9a-f]{16}",
        secret in "[0-9a-f]{64}",
        at in 0usize..81,
        with in "[^0-9a-f]",
    ) {
        let mut chars: Vec<char> = format!("{id}.{secret}").chars().collect();
        chars[at] = with.chars().next().unwrap();
        let text: String = chars.into_iter().collect();
        prop_assert_eq!(Credential::parse(&text), None);
    }
}
