//! The Agent Card: who the Agent is, where its JSON-RPC endpoint is, what it offers
//! (streaming, no push notifications), how to authenticate (a bearer token), and its
//! skills: general work in words, plus the commands of its extensions' catalogs.
//!
//! The endpoint's URL is the one the client reached the card through (its `Host`
//! and original path, before a directory rewrote it), so the same card is right
//! behind any prefix: `/v1/agents/acme/a2a/.well-known/agent-card.json` names
//! `http://HOST/v1/agents/acme/a2a`.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::OriginalUri;
use axum::http::{HeaderMap, Uri};
use serde::Serialize;
use shiitake_protocol::catalog::SessionCatalogs;

use super::AgentIdentity;

/// Where a card is served, under the endpoint's path.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The JSON-RPC endpoint of an Agent served without a prefix.
pub const ENDPOINT_PATH: &str = "/v1/a2a";

/// The card, as ProtoJSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    name: String,
    description: String,
    version: &'static str,
    supported_interfaces: Vec<Interface>,
    capabilities: Capabilities,
    security_schemes: BTreeMap<&'static str, SecurityScheme>,
    security_requirements: Vec<SecurityRequirement>,
    default_input_modes: Vec<&'static str>,
    default_output_modes: Vec<&'static str>,
    skills: Vec<Skill>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Interface {
    url: String,
    protocol_binding: &'static str,
    protocol_version: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    streaming: bool,
    push_notifications: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct SecurityScheme {
    http_auth_security_scheme: HttpAuth,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct HttpAuth {
    scheme: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct SecurityRequirement {
    schemes: BTreeMap<&'static str, ScopeList>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct ScopeList {
    list: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Skill {
    id: String,
    name: String,
    description: String,
    tags: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    examples: Vec<String>,
}

/// The skill every Agent has: work given in words.
fn work_skill() -> Skill {
    Skill {
        id: "work".to_owned(),
        name: "Work".to_owned(),
        description: "Give the agent work in words: it runs it with its tools and answers, \
            asking (input-required) when it needs a person. A context is a conversation: \
            later messages with its contextId continue it."
            .to_owned(),
        tags: vec!["general".to_owned()],
        examples: Vec::new(),
    }
}

/// One skill per catalog command, ids unique (a name offered twice keeps its first).
fn command_skills(catalogs: &SessionCatalogs) -> Vec<Skill> {
    let mut taken = BTreeSet::from(["work".to_owned()]);
    let mut skills = Vec::new();
    for entry in &catalogs.catalogs {
        for command in &entry.catalog.commands {
            if !taken.insert(command.name.clone()) {
                continue;
            }
            skills.push(Skill {
                id: command.name.clone(),
                name: format!("/{}", command.name),
                description: command.summary.clone(),
                tags: vec!["command".to_owned(), entry.catalog.extension_id.to_string()],
                examples: Vec::new(),
            });
        }
    }
    skills
}

/// The card of `identity`, its endpoint at `url`, with the skills of `catalogs`.
pub fn card(
    identity: &AgentIdentity,
    url: String,
    catalogs: Option<&SessionCatalogs>,
) -> AgentCard {
    let mut skills = vec![work_skill()];
    if let Some(catalogs) = catalogs {
        skills.extend(command_skills(catalogs));
    }
    AgentCard {
        name: identity.name.clone(),
        description: identity.description.clone(),
        version: env!("CARGO_PKG_VERSION"),
        supported_interfaces: vec![Interface {
            url,
            protocol_binding: "JSONRPC",
            protocol_version: "1.0",
        }],
        capabilities: Capabilities {
            streaming: true,
            push_notifications: false,
        },
        security_schemes: BTreeMap::from([(
            "bearer",
            SecurityScheme {
                http_auth_security_scheme: HttpAuth { scheme: "Bearer" },
            },
        )]),
        security_requirements: vec![SecurityRequirement {
            schemes: BTreeMap::from([("bearer", ScopeList { list: Vec::new() })]),
        }],
        default_input_modes: vec!["text/plain"],
        default_output_modes: vec!["text/plain"],
        skills,
    }
}

/// The absolute URL of the JSON-RPC endpoint, for a card request with `headers`
/// that reached this server as `original` (or `uri` when nothing rewrote it).
pub fn endpoint_url(headers: &HeaderMap, original: Option<&OriginalUri>, uri: &Uri) -> String {
    let uri = original.map_or(uri, |original| &original.0);
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
    let scheme = if https { "https" } else { "http" };
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .filter(|host| !host.is_empty() && host.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_owned)
        .or_else(|| uri.authority().map(ToString::to_string))
        .unwrap_or_else(|| "localhost".to_owned());
    let path = uri.path().strip_suffix(CARD_PATH).unwrap_or(ENDPOINT_PATH);
    let path = if path.is_empty() { ENDPOINT_PATH } else { path };
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_url_is_the_endpoint_as_the_client_reached_it() {
        let host = headers(&[("host", "example.test:8080")]);
        let url = |original: Option<&str>, uri: &str, headers: &HeaderMap| {
            let original = original.map(|path| OriginalUri(path.parse().unwrap()));
            endpoint_url(headers, original.as_ref(), &uri.parse().unwrap())
        };
        let prefixed = "/v1/agents/acme/a2a/.well-known/agent-card.json";
        assert_eq!(
            url(Some(prefixed), "/v1/a2a/.well-known/agent-card.json", &host),
            "http://example.test:8080/v1/agents/acme/a2a"
        );
        assert_eq!(
            url(None, "/v1/a2a/.well-known/agent-card.json", &host),
            "http://example.test:8080/v1/a2a"
        );
        assert_eq!(
            url(None, "/.well-known/agent-card.json", &host),
            "http://example.test:8080/v1/a2a"
        );
        let proxied = headers(&[("host", "agents.example"), ("x-forwarded-proto", "https")]);
        assert_eq!(
            url(None, "/v1/a2a/.well-known/agent-card.json", &proxied),
            "https://agents.example/v1/a2a"
        );
    }

    #[test]
    fn the_card_has_what_the_clients_require() {
        let identity = AgentIdentity {
            name: "acme".into(),
            description: "Does things.".into(),
        };
        let catalogs: SessionCatalogs = serde_json::from_value(json!({"catalogs": [
            {"state": {"status": "running"}, "catalog": {"format": "whistle.catalog/v1", "extensionId": "home",
              "commands": [
                {"name": "jobs", "summary": "List jobs.", "scope": "session", "call": "list_jobs"},
                {"name": "work", "summary": "Clashes.", "scope": "session", "call": "x"},
                {"name": "jobs", "summary": "Twice.", "scope": "session", "call": "y"}]}}]}))
        .unwrap();
        let card = serde_json::to_value(card(&identity, "http://h/v1/a2a".into(), Some(&catalogs)))
            .unwrap();
        assert_eq!(card["name"], "acme");
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": "http://h/v1/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
        );
        assert_eq!(
            card["capabilities"],
            json!({"streaming": true, "pushNotifications": false})
        );
        assert_eq!(
            card["securitySchemes"],
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
        );
        assert_eq!(
            card["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}])
        );
        let ids: Vec<&str> = card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["work", "jobs"]);
        assert_eq!(card["skills"][1]["description"], "List jobs.");
    }
}
