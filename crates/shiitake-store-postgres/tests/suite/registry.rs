//! The Hub's registry on a real PostgreSQL: tenants and admission, tokens that
//! verify until revoked or rotated, web logins on an injected clock with their
//! bounds at the edge and one past, a code spent once across two pools, no secret
//! in clear in any row, and the Agents that have work waiting.
//!
//! Each test runs in a schema of its own (`search_path` on every connection, the
//! migrations applied there), so the registry's global tables are the test's alone.
//! The tests are in `registry/`, by capability; the credential parser's property
//! tests are here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use proptest::prelude::*;
use shiitake_protocol::{AgentName, TenantName, TokenId};
use shiitake_store_postgres::registry::{Credential, Registry};
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

/// Logs `caller` in once at the clock's time; the session's text.
async fn log_in(registry: &Registry, caller: Option<&TenantName>) -> String {
    let code = registry.issue_code(caller, MINUTE).await.unwrap();
    registry.redeem(&code, MINUTE).await.unwrap().unwrap().0
}

mod logins;
mod tenants;
mod tokens;

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
        let with = with.chars().next().unwrap();
        // The dot between the halves replaced by a dot is no change.
        prop_assume!(chars[at] != with);
        chars[at] = with;
        let text: String = chars.into_iter().collect();
        prop_assert_eq!(Credential::parse(&text), None);
    }
}
