//! The one-line form of a server a host takes from its command line:
//! `name=URL[,header=Name:Value]...`, where `${VAR}` in a value reads the environment.

use super::error::McpConfigError;
use super::server::McpServer;

/// What separates the URL from each header, and one header from the next.
const HEADER_SEPARATOR: &str = ",header=";

impl McpServer {
    /// Parses `name=URL[,header=Name:Value]...` (e.g.
    /// `notes=https://notes.example/mcp,header=Authorization:Bearer ${NOTES_TOKEN}`).
    ///
    /// A header value may hold `${VAR}`, replaced by `env("VAR")`, so a secret need not
    /// appear on a command line; an unset variable is an error. A `$` not followed by
    /// `{` is literal. A URL may contain commas, but not the text `,header=`.
    /// Errors never repeat the specification, which may hold a secret.
    pub fn from_spec(
        spec: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, McpConfigError> {
        let invalid = |reason| McpConfigError::InvalidSpec { reason };
        let (name, rest) = spec
            .split_once('=')
            .ok_or_else(|| invalid("expected name=URL"))?;
        let mut parts = rest.split(HEADER_SEPARATOR);
        let url = parts.next().unwrap_or_default();
        let mut server = Self::new(name.trim(), url.trim())?;
        for header in parts {
            let (header_name, value) = header
                .split_once(':')
                .ok_or_else(|| invalid("expected header=Name:Value"))?;
            let value = expand(value.trim_start(), &env)?;
            server = server.with_header(header_name, &value)?;
        }
        Ok(server)
    }
}

/// Replaces each `${VAR}` in `text` by the variable's value.
fn expand(text: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, McpConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(McpConfigError::InvalidSpec {
            reason: "a `${` in a header value is not closed by `}`",
        })?;
        let variable = &after[..end];
        let valid = variable
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && variable
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(McpConfigError::InvalidSpec {
                reason: "`${...}` in a header value must name an environment variable",
            });
        }
        let value = env(variable).ok_or_else(|| McpConfigError::MissingVariable {
            name: variable.to_owned(),
        })?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_plain_server() {
        let server = McpServer::from_spec("notes=http://127.0.0.1:8080/mcp", no_env).unwrap();
        assert_eq!(server.name(), "notes");
        assert_eq!(server.url().as_str(), "http://127.0.0.1:8080/mcp");
        assert!(server.headers().is_empty());
    }

    #[test]
    fn headers_with_a_value_from_the_environment() {
        let env = |name: &str| (name == "NOTES_TOKEN").then(|| "tok-1".to_owned());
        let server = McpServer::from_spec(
            "notes=https://x.example/mcp?a=1,b,header=Authorization:Bearer ${NOTES_TOKEN},header=X-Team: blue",
            env,
        )
        .unwrap();
        assert_eq!(server.url().as_str(), "https://x.example/mcp?a=1,b");
        assert_eq!(
            server.headers().names().collect::<Vec<_>>(),
            ["authorization", "x-team"]
        );
        let map = server.headers().to_map();
        let value = |name: &str| {
            let (_, value) = map.iter().find(|(k, _)| k.as_str() == name).unwrap();
            value.to_str().unwrap().to_owned()
        };
        assert_eq!(value("authorization"), "Bearer tok-1");
        assert_eq!(value("x-team"), "blue");
    }

    #[test]
    fn a_dollar_without_a_brace_is_literal() {
        assert_eq!(expand("a$b$", &no_env).unwrap(), "a$b$");
    }

    #[test]
    fn bad_specs_are_refused_without_echoing_them() {
        let cases = [
            ("notes", "expected name=URL"),
            (
                "notes=http://x/mcp,header=NoColon-secret",
                "expected header",
            ),
            (
                "notes=http://x/mcp,header=K:${UNCLOSED-secret",
                "not closed",
            ),
            ("notes=http://x/mcp,header=K:${1BAD}", "must name"),
        ];
        for (spec, expected) in cases {
            let error = McpServer::from_spec(spec, no_env).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(expected), "{spec}: {text}");
            assert!(!text.contains("secret"), "{spec}: {text}");
        }
        assert_eq!(
            McpServer::from_spec("notes=http://x/mcp,header=K:${MISSING}", no_env).unwrap_err(),
            McpConfigError::MissingVariable {
                name: "MISSING".into()
            }
        );
    }

    proptest! {
        /// Any server printed in the one-line form parses back to the same server.
        #[test]
        fn printed_servers_parse_back(
            name in "[a-z][a-z0-9]{0,8}(_[a-z0-9]{1,4}){0,2}",
            path in "[a-z0-9/,]{0,12}",
            headers in proptest::collection::vec(("x-[a-z]{1,8}", "[!-~][ -~]{0,20}"), 0..4),
        ) {
            let url = format!("http://127.0.0.1:9/{path}");
            let mut spec = format!("{name}={url}");
            for (header, value) in &headers {
                spec.push_str(&format!(",header={header}:{value}"));
            }
            // Values here hold no `${`; a literal `,header=` would be ambiguous.
            prop_assume!(!spec[name.len()..].contains("${"));
            prop_assume!(headers.iter().all(|(_, v)| !v.contains(",header=")));
            let server = McpServer::from_spec(&spec, no_env).unwrap();
            prop_assert_eq!(server.name(), name.as_str());
            let parsed = reqwest::Url::parse(&url).unwrap();
            prop_assert_eq!(server.url().as_str(), parsed.as_str());
            let mut expected = std::collections::BTreeMap::new();
            for (header, value) in &headers {
                expected.insert(header.clone(), value.trim_start().to_owned());
            }
            let got: std::collections::BTreeMap<_, _> = server
                .headers()
                .to_map()
                .into_iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
                .collect();
            prop_assert_eq!(got, expected);
        }

        /// Expansion replaces exactly the named variables and keeps the rest.
        #[test]
        fn expansion_replaces_variables(
            parts in proptest::collection::vec(("[a-zA-Z0-9 $]{0,6}", "[A-Z_][A-Z0-9_]{0,6}"), 0..4),
            tail in "[a-zA-Z0-9 ]{0,6}",
        ) {
            let env = |name: &str| Some(format!("<{name}>"));
            let mut text = String::new();
            let mut expected = String::new();
            for (literal, variable) in &parts {
                text.push_str(literal);
                text.push_str(&format!("${{{variable}}}"));
                expected.push_str(literal);
                expected.push_str(&format!("<{variable}>"));
            }
            text.push_str(&tail);
            expected.push_str(&tail);
            // A literal ending in `$` followed by `${` still expands the variable.
            prop_assert_eq!(expand(&text, &env).unwrap(), expected);
        }
    }
}
