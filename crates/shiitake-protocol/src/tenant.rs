//! The tenants of a Hub and their tokens, as the operator manages them at
//! `/v1/hub/tenants` (`docs/hub.md`).
//!
//! A tenant is a customer of a hosted Hub: it owns one or more Agents and the tokens
//! that reach them. A tenant token reaches only its own tenant's Agents; the
//! operator's token manages tenants. A token's secret is shown once, when it is
//! issued ([`IssuedToken`]); the Hub keeps only a hash of it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::AgentName;

/// Longest tenant name, in bytes (the same rule as an Agent name).
pub const MAX_TENANT_NAME_BYTES: usize = 64;

/// Why a name is not a tenant name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a tenant name is 1 to {MAX_TENANT_NAME_BYTES} ASCII letters, digits, `-` or `_`, starting with a letter or digit; got {0:?}"
)]
pub struct TenantNameError(pub String);

/// A tenant's name: 1 to 64 ASCII letters, digits, `-` and `_`, starting with a
/// letter or a digit. A new tenant's first Agent has the same name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantName(String);

impl TenantName {
    /// Checks `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, TenantNameError> {
        let name = name.into();
        match AgentName::new(name.as_str()) {
            Ok(_) => Ok(Self(name)),
            Err(_) => Err(TenantNameError(name)),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of the tenant's first Agent, which is the tenant's own name.
    pub fn first_agent(&self) -> AgentName {
        // Both names follow one rule, checked in `new`.
        AgentName::new(self.0.as_str()).unwrap_or_default()
    }
}

impl TryFrom<String> for TenantName {
    type Error = TenantNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<TenantName> for String {
    fn from(value: TenantName) -> Self {
        value.0
    }
}

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why text is not a token id.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a token id is 16 lowercase hexadecimal digits; got {0:?}")]
pub struct TokenIdError(pub String);

/// The public half of a tenant token: it names the token in lists and in
/// `DELETE /v1/hub/tenants/{tenant}/tokens/{id}`, and starts the token's text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenId(String);

impl TokenId {
    /// Digits in an id.
    pub const LEN: usize = 16;

    /// Checks `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, TokenIdError> {
        let id = id.into();
        let valid = id.len() == Self::LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if valid {
            Ok(Self(id))
        } else {
            Err(TokenIdError(id))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TokenId {
    type Error = TokenIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<TokenId> for String {
    fn from(value: TokenId) -> Self {
        value.0
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One live token of a tenant, without its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenEntry {
    /// Its id.
    pub id: TokenId,
    /// When it was issued, in Unix milliseconds.
    pub created_at: u64,
}

/// One tenant as the operator lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantEntry {
    /// Its name.
    pub name: TenantName,
    /// When it was created, in Unix milliseconds.
    pub created_at: u64,
    /// Its Agents, first one first.
    pub agents: Vec<AgentName>,
    /// Its live tokens, oldest first.
    pub tokens: Vec<TokenEntry>,
}

/// What `GET /v1/hub/tenants` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantList {
    /// Every tenant, by name.
    pub tenants: Vec<TenantEntry>,
}

/// The body of `POST /v1/hub/tenants`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateTenant {
    /// The new tenant's name (and its first Agent's).
    pub name: TenantName,
}

/// The body of `POST /v1/hub/tenants/{tenant}/tokens`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueToken {
    /// Revoke the tenant's other tokens in the same step (a rotation); `false` adds
    /// a token beside them.
    #[serde(default)]
    pub revoke_others: bool,
}

/// A token just issued: the only time its secret is shown.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedToken {
    /// The tenant it reaches.
    pub tenant: TenantName,
    /// Its id.
    pub id: TokenId,
    /// The whole bearer token, `<id>.<secret>`.
    pub token: String,
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tenant_names_follow_the_agent_name_rule_at_its_bounds() {
        assert!(TenantName::new("a".repeat(MAX_TENANT_NAME_BYTES)).is_ok());
        assert!(TenantName::new("a".repeat(MAX_TENANT_NAME_BYTES + 1)).is_err());
        assert!(TenantName::new("").is_err());
        assert!(TenantName::new("-acme").is_err());
        assert!(TenantName::new("ac/me").is_err());
        let acme = TenantName::new("acme-2").unwrap();
        assert_eq!(acme.first_agent().as_str(), "acme-2");
        assert!(serde_json::from_str::<TenantName>("\"a b\"").is_err());
    }

    #[test]
    fn token_ids_are_sixteen_lowercase_hex_digits() {
        assert!(TokenId::new("0123456789abcdef").is_ok());
        assert!(TokenId::new("0123456789abcde").is_err());
        assert!(TokenId::new("0123456789abcdef0").is_err());
        assert!(TokenId::new("0123456789ABCDEF").is_err());
        assert!(TokenId::new("0123456789abcdeg").is_err());
    }

    #[test]
    fn the_wire_shapes_are_the_documented_ones() {
        let list = TenantList {
            tenants: vec![TenantEntry {
                name: TenantName::new("acme").unwrap(),
                created_at: 1,
                agents: vec![AgentName::new("acme").unwrap()],
                tokens: vec![TokenEntry {
                    id: TokenId::new("00000000000000aa").unwrap(),
                    created_at: 2,
                }],
            }],
        };
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"{"tenants":[{"name":"acme","createdAt":1,"agents":["acme"],"tokens":[{"id":"00000000000000aa","createdAt":2}]}]}"#
        );
        let issue: IssueToken = serde_json::from_str(r#"{"revokeOthers":true}"#).unwrap();
        assert!(issue.revoke_others);
        assert!(
            !serde_json::from_str::<IssueToken>("{}")
                .unwrap()
                .revoke_others
        );
        assert!(serde_json::from_str::<IssueToken>(r#"{"other":1}"#).is_err());
        let issued = IssuedToken {
            tenant: TenantName::new("acme").unwrap(),
            id: TokenId::new("00000000000000aa").unwrap(),
            token: "00000000000000aa.secret".to_owned(),
        };
        assert!(!format!("{issued:?}").contains("secret"));
    }
}
