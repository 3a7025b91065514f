//! Tenant tokens: verified before and not after revocation or rotation, on another
//! pool too, and no secret of any kind in clear in the registry's rows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use shiitake_protocol::{TenantName, TokenEntry};
use shiitake_store_postgres::registry::{Credential, ManualClock, Registry, RegistryError};

use super::{MINUTE, Schema, log_in, tenant};

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
