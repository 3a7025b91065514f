//! Messages are stored packed (migration 0002): a database whose entries were written
//! as JSON text before reads them back unchanged after the migration, and entries
//! written after are packed.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use shiitake_core::store::{Op, Store, StoredEntry};
use shiitake_protocol::message::{Message, UserMessage};
use shiitake_protocol::{EntryId, SessionId};
use shiitake_store_postgres::{AgentKey, PostgresOptions, PostgresStore};
use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor, PgConnection};

/// A database of its own, since the shared one is already past migration 1.
async fn own_database(url: &str) -> (PgConnectOptions, String) {
    let name = format!(
        "packed_{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let server: PgConnectOptions = url.parse().unwrap();
    let mut admin = server.connect().await.unwrap();
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    admin.close().await.unwrap();
    (server.database(&name), name)
}

#[tokio::test]
async fn json_written_before_the_migration_reads_back_and_new_entries_are_packed() {
    let Some(url) = support::url() else { return };
    let (options, name) = own_database(&url).await;
    let mut conn = PgConnection::connect_with(&options).await.unwrap();
    let mut migrator = Migrator::new(Path::new("migrations/postgres"))
        .await
        .unwrap();
    migrator.migrations = Cow::Owned(
        migrator
            .migrations
            .iter()
            .filter(|migration| migration.version <= 1)
            .cloned()
            .collect(),
    );
    migrator.run_direct(&mut conn).await.unwrap();
    let answer = r#"{"role":"assistant","content":[{"type":"text","text":"one"}],"api":"scripted","provider":"scripted","model":"scripted","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}"#;
    conn.execute(
        "INSERT INTO sessions (agent_id, id, created_at, last_activity_at, head_sequence, \
         leaf_entry_id) VALUES ('old', 'ses_old', 1, 1, 2, 'ent_1')",
    )
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO entries (agent_id, session_id, id, sequence, message) \
         VALUES ('old', 'ses_old', 'ent_1', 2, $1)",
    )
    .bind(answer)
    .execute(&mut conn)
    .await
    .unwrap();

    let url = options.to_url_lossy().to_string();
    let mut store_options = PostgresOptions::new(url, AgentKey::new("old").unwrap());
    store_options.lease_ttl = Duration::from_secs(5);
    let store = PostgresStore::open(store_options).await.unwrap();
    let session = SessionId::new("ses_old").unwrap();
    let first = EntryId::new("ent_1").unwrap();
    let stored = store.entry(&session, &first).await.unwrap().unwrap();
    assert_eq!(
        stored.message,
        serde_json::from_str::<Message>(answer).unwrap()
    );
    let next = StoredEntry {
        id: EntryId::new("ent_2").unwrap(),
        parent: Some(first.clone()),
        sequence: 3,
        command_id: None,
        message: Message::User(UserMessage::text("read notes.txt and say what it holds", 3)),
    };
    store
        .commit(vec![Op::InsertEntry {
            session_id: session.clone(),
            entry: next.clone(),
        }])
        .await
        .unwrap();
    let lineage = store
        .lineage(&session, &EntryId::new("ent_2").unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(lineage.len(), 2);
    assert_eq!(lineage[0], next);
    assert_eq!(lineage[1], stored);
    store.close().await;

    let first_bytes: Vec<i32> =
        sqlx::query_scalar("SELECT get_byte(message, 0) FROM entries ORDER BY sequence")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        first_bytes,
        [i32::from(b'{'), 2],
        "the old row stays JSON, the new one is packed"
    );
    conn.close().await.unwrap();
    let server: PgConnectOptions = support::url().unwrap().parse().unwrap();
    let mut admin = server.connect().await.unwrap();
    admin
        .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
}
