//! What an extension is: identity, namespace, scopes, schema version, migrations,
//! configuration — together its revision.

use std::collections::BTreeMap;

use serde_json::Value;
use shiitake_protocol::ExtensionId;

use super::HookError;
use crate::store::StateScope;

/// One step from the previous schema version to `to_version`.
#[derive(Clone, Copy)]
pub struct Migration {
    /// The schema version this step produces.
    pub to_version: u32,
    /// A stable name; part of the revision.
    pub name: &'static str,
    /// Rewrites the stored rows; an error stops the extension and leaves the rows as they were.
    pub apply: fn(&mut MigrationTx) -> Result<(), HookError>,
}

impl std::fmt::Debug for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migration")
            .field("to_version", &self.to_version)
            .field("name", &self.name)
            .finish()
    }
}

/// The declaration an extension makes to the host.
#[derive(Clone, Debug)]
pub struct ExtensionDefinition {
    /// Its identity, such as `botanical-session-question`.
    pub id: ExtensionId,
    /// The namespace of its tools and commands, such as `question`.
    pub namespace: String,
    /// Where its state lives.
    pub scopes: Vec<StateScope>,
    /// The version of its state's shape.
    pub schema_version: u32,
    /// Ordered steps that bring older state to `schema_version`.
    pub migrations: Vec<Migration>,
    /// Host-chosen settings; part of the revision.
    pub configuration: Value,
}

impl ExtensionDefinition {
    /// A stable hash of everything that shapes the extension's state: `r-` and 16 hex digits.
    pub fn revision(&self) -> String {
        let migrations: Vec<Value> = self
            .migrations
            .iter()
            .map(|m| serde_json::json!([m.to_version, m.name]))
            .collect();
        let scopes: Vec<&str> = self.scopes.iter().map(|s| s.as_str()).collect();
        let identity = serde_json::json!({
            "id": self.id.as_str(),
            "namespace": self.namespace,
            "scopes": scopes,
            "schemaVersion": self.schema_version,
            "migrations": migrations,
            "configuration": canonical(&self.configuration),
        });
        format!("r-{:016x}", fnv1a(identity.to_string().as_bytes()))
    }
}

/// The same JSON with object keys sorted, so the revision does not depend on key order.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<_, _> =
                map.iter().map(|(k, v)| (k.clone(), canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One stored row of an extension: scope, scope id (Session id or empty), collection, key.
pub(crate) type RowKey = (StateScope, String, String, String);

/// Every row of one extension, open for rewriting by a migration.
#[derive(Debug, Default)]
pub struct MigrationTx {
    pub(crate) rows: BTreeMap<RowKey, Value>,
}

impl MigrationTx {
    /// Every row as (scope, scope id, collection, key) → value.
    pub fn rows(&self) -> impl Iterator<Item = (&StateScope, &str, &str, &str, &Value)> {
        self.rows
            .iter()
            .map(|((scope, id, collection, key), value)| {
                (scope, id.as_str(), collection.as_str(), key.as_str(), value)
            })
    }

    /// Rewrites every value of `collection` (in all scopes) with `rewrite`; `None` deletes it.
    pub fn rewrite(
        &mut self,
        collection: &str,
        mut rewrite: impl FnMut(&Value) -> Result<Option<Value>, HookError>,
    ) -> Result<(), HookError> {
        let keys: Vec<RowKey> = self
            .rows
            .keys()
            .filter(|k| k.2 == collection)
            .cloned()
            .collect();
        for key in keys {
            let Some(current) = self.rows.get(&key) else {
                continue;
            };
            match rewrite(current)? {
                Some(next) => {
                    self.rows.insert(key, next);
                }
                None => {
                    self.rows.remove(&key);
                }
            }
        }
        Ok(())
    }

    /// Drops every row of `collection`: a versioned discard of a superseded shape.
    pub fn discard(&mut self, collection: &str) {
        self.rows.retain(|key, _| key.2 != collection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(configuration: Value) -> ExtensionDefinition {
        ExtensionDefinition {
            id: ExtensionId::new("example-counter").unwrap(),
            namespace: "counter".into(),
            scopes: vec![StateScope::Session],
            schema_version: 2,
            migrations: vec![Migration {
                to_version: 2,
                name: "rename",
                apply: |_| Ok(()),
            }],
            configuration,
        }
    }

    #[test]
    fn the_revision_is_stable_and_follows_what_shapes_state() {
        let base = definition(json!({"a": 1, "b": [1, 2]}));
        assert_eq!(
            base.revision(),
            definition(json!({"b": [1, 2], "a": 1})).revision(),
            "key order does not matter"
        );
        assert_ne!(
            base.revision(),
            definition(json!({"a": 2, "b": [1, 2]})).revision()
        );
        let mut bumped = definition(json!({"a": 1, "b": [1, 2]}));
        bumped.schema_version = 3;
        assert_ne!(base.revision(), bumped.revision());
        assert!(base.revision().starts_with("r-") && base.revision().len() == 18);
    }

    #[test]
    fn discard_and_rewrite_touch_one_collection() {
        let mut tx = MigrationTx::default();
        tx.rows.insert(
            (StateScope::Session, "s".into(), "old".into(), "k".into()),
            json!(1),
        );
        tx.rows.insert(
            (StateScope::Session, "s".into(), "keep".into(), "k".into()),
            json!(2),
        );
        tx.rewrite("keep", |v| Ok(Some(json!(v.as_i64().unwrap_or(0) * 10))))
            .unwrap();
        tx.discard("old");
        let rows: Vec<_> = tx
            .rows()
            .map(|(_, _, c, _, v)| (c.to_owned(), v.clone()))
            .collect();
        assert_eq!(rows, vec![("keep".to_owned(), json!(20))]);
    }
}
