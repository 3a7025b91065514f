//! Web logins in the database: the in-memory rules on an injected clock, the bounds
//! per caller at the edge and one past, and a code spent once across two pools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use shiitake_store_postgres::registry::{
    Credential, MAX_CODES_PER_CALLER, MAX_SESSIONS_PER_CALLER, ManualClock, Registry, RegistryError,
};

use super::{MINUTE, Schema, log_in, tenant};

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
