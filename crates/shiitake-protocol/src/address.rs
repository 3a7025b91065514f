//! Session addresses: one string that names a Session and the Agent that holds it
//! (seed 001's `ShiitakeSession.address`), turned back into a handle without I/O.
//!
//! The grammar (`docs/wire.md`, "Session addresses"):
//!
//! ```text
//! address  = origin "/v1" [ "/agents/" agent ] "/sessions/" session
//! origin   = "local:"                                  ; an Agent in this process
//!          / ( "http://" / "https://" ) authority path ; the base URL of a server
//! agent    = an Agent name (1 to 64 of A-Z a-z 0-9 - _, starting with a letter or digit)
//! session  = the Session id, percent-encoded as one URL path segment
//! ```
//!
//! A remote address is the URL of the Session's routes on its server
//! (`<address>/snapshot` reads it, `docs/http.md`); without an Agent segment it names
//! a single-Agent server's Agent or a directory's default one. A local address names
//! an Agent of the process that hosts it; it means nothing to another process. The
//! base URL keeps its own path (a server behind a proxy at `/shiitake`) and carries
//! no query, fragment or trailing `/`.
//!
//! ```
//! use shiitake_protocol::{SessionAddress, SessionId};
//!
//! let address: SessionAddress = "http://127.0.0.1:8717/v1/agents/planner/sessions/ses_1".parse()?;
//! assert_eq!(address.session_id(), &SessionId::new("ses_1")?);
//! assert_eq!(address.agent().map(|agent| agent.as_str()), Some("planner"));
//! assert_eq!(address.origin().base_url(), Some("http://127.0.0.1:8717"));
//! assert_eq!(address.to_string().parse::<SessionAddress>()?, address);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bounded::{BoundedId, SessionId};
use crate::directory::AgentName;

/// The scheme-like prefix of a local address.
const LOCAL: &str = "local:";

/// Longest address accepted, in bytes: a base URL of up to 2 KiB, the Agent and the
/// percent-encoded Session id (3 bytes per byte at worst).
pub const MAX_ADDRESS_BYTES: usize = 2048 + 64 + 3 * BoundedId::MAX_BYTES + 32;

/// Why a string is not a Session address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Longer than [`MAX_ADDRESS_BYTES`].
    #[error("a Session address is at most {MAX_ADDRESS_BYTES} bytes; this one is {0}")]
    TooLong(usize),
    /// Neither `local:` nor an `http://` or `https://` base URL.
    #[error("a Session address starts with `local:`, `http://` or `https://`: {0:?}")]
    Origin(String),
    /// The base URL holds what a base URL of an address may not.
    #[error("the base URL of a Session address {0}")]
    Base(&'static str),
    /// The path is not `/v1[/agents/{agent}]/sessions/{session}`.
    #[error(
        "a Session address ends in /v1/sessions/{{session}} or /v1/agents/{{agent}}/sessions/{{session}}: {0:?}"
    )]
    Path(String),
    /// The Agent segment is not an Agent name.
    #[error("the Agent of a Session address: {0}")]
    Agent(String),
    /// The Session segment is not a percent-encoded Session id.
    #[error("the Session of a Session address: {0}")]
    Session(String),
}

impl From<AddressError> for crate::ShiitakeError {
    fn from(error: AddressError) -> Self {
        crate::ShiitakeError::invalid(error.to_string())
    }
}

/// Where the Agent of an address is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AddressOrigin {
    /// In the process that made the address.
    Local,
    /// Behind the server at this base URL (no trailing `/`).
    Http(String),
}

impl AddressOrigin {
    /// A server's origin: `base` as a client is given it (`http://host:port`, maybe
    /// with a path), with a trailing `/` dropped.
    pub fn http(base: &str) -> Result<Self, AddressError> {
        let base = base.strip_suffix('/').unwrap_or(base);
        check_base(base)?;
        Ok(Self::Http(base.to_owned()))
    }

    /// The server's base URL, for a remote origin.
    pub fn base_url(&self) -> Option<&str> {
        match self {
            Self::Local => None,
            Self::Http(base) => Some(base),
        }
    }
}

fn check_base(base: &str) -> Result<(), AddressError> {
    let rest = base
        .strip_prefix("http://")
        .or_else(|| base.strip_prefix("https://"))
        .ok_or_else(|| AddressError::Origin(base.chars().take(64).collect()))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(AddressError::Base("has no host"));
    }
    if !rest.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AddressError::Base(
            "holds a space, a control or a non-ASCII character",
        ));
    }
    if rest.contains(['?', '#']) {
        return Err(AddressError::Base("holds a query or a fragment"));
    }
    if rest.ends_with('/') {
        return Err(AddressError::Base("ends in `/`"));
    }
    Ok(())
}

/// One Session and the Agent that holds it, as one string; see the [module](self)
/// for the grammar. Making one, printing it and parsing it do no I/O.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionAddress {
    origin: AddressOrigin,
    agent: Option<AgentName>,
    session_id: SessionId,
}

impl SessionAddress {
    /// The address of `session_id` held by the Agent `agent` (none: the only or the
    /// default Agent) at `origin`.
    pub fn new(origin: AddressOrigin, agent: Option<AgentName>, session_id: SessionId) -> Self {
        Self {
            origin,
            agent,
            session_id,
        }
    }

    /// Where the Agent is.
    pub fn origin(&self) -> &AddressOrigin {
        &self.origin
    }

    /// The Agent's name; `None` for a single-Agent server's Agent, a directory's
    /// default Agent, or an in-process Agent its host did not name.
    pub fn agent(&self) -> Option<&AgentName> {
        self.agent.as_ref()
    }

    /// The Session.
    pub fn session_id(&self) -> &SessionId {
        &self.session_id
    }

    /// The same Agent's Session `session_id`.
    #[must_use]
    pub fn for_session(&self, session_id: SessionId) -> Self {
        Self {
            session_id,
            ..self.clone()
        }
    }

    /// The same origin's Session `session_id` of the Agent `agent`.
    #[must_use]
    pub fn for_agent(&self, agent: Option<AgentName>) -> Self {
        Self {
            agent,
            ..self.clone()
        }
    }
}

impl fmt::Display for SessionAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            AddressOrigin::Local => f.write_str(LOCAL)?,
            AddressOrigin::Http(base) => f.write_str(base)?,
        }
        f.write_str("/v1")?;
        if let Some(agent) = &self.agent {
            write!(f, "/agents/{agent}")?;
        }
        f.write_str("/sessions/")?;
        for byte in self.session_id.as_str().bytes() {
            if keeps(byte) {
                write!(f, "{}", char::from(byte))?;
            } else {
                write!(f, "%{byte:02X}")?;
            }
        }
        Ok(())
    }
}

/// Whether `byte` stands for itself in a path segment (RFC 3986 `pchar` without `%`).
fn keeps(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte)
}

fn decode_segment(segment: &str) -> Result<String, AddressError> {
    let bad = |why: &str| AddressError::Session(format!("{why} in {segment:?}"));
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' => {
                let hex = segment
                    .get(at + 1..at + 3)
                    .ok_or_else(|| bad("a `%` without two hex digits"))?;
                let byte =
                    u8::from_str_radix(hex, 16).map_err(|_| bad("a `%` without two hex digits"))?;
                out.push(byte);
                at += 3;
            }
            byte if keeps(byte) => {
                out.push(byte);
                at += 1;
            }
            _ => return Err(bad("a character that must be percent-encoded")),
        }
    }
    String::from_utf8(out).map_err(|_| bad("bytes that are not UTF-8"))
}

impl FromStr for SessionAddress {
    type Err = AddressError;

    fn from_str(text: &str) -> Result<Self, AddressError> {
        if text.len() > MAX_ADDRESS_BYTES {
            return Err(AddressError::TooLong(text.len()));
        }
        let path_error = || AddressError::Path(text.chars().take(256).collect());
        // The Session segment holds no `/`, so the path is read from the right.
        let (rest, session) = text.rsplit_once('/').ok_or_else(path_error)?;
        let rest = rest.strip_suffix("/sessions").ok_or_else(path_error)?;
        let (origin, agent) = match rest.strip_suffix("/v1") {
            Some(origin) => (origin, None),
            None => {
                let (rest, agent) = rest.rsplit_once('/').ok_or_else(path_error)?;
                let origin = rest.strip_suffix("/v1/agents").ok_or_else(path_error)?;
                let agent = AgentName::new(agent)
                    .map_err(|error| AddressError::Agent(error.to_string()))?;
                (origin, Some(agent))
            }
        };
        let origin = if origin == LOCAL {
            AddressOrigin::Local
        } else {
            check_base(origin)?;
            AddressOrigin::Http(origin.to_owned())
        };
        let session_id = SessionId::new(decode_segment(session)?)
            .map_err(|error| AddressError::Session(error.to_string()))?;
        Ok(Self {
            origin,
            agent,
            session_id,
        })
    }
}

impl Serialize for SessionAddress {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionAddress {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> Result<SessionAddress, AddressError> {
        text.parse()
    }

    #[test]
    fn each_form_parses_and_prints_back() {
        for text in [
            "local:/v1/sessions/ses_1",
            "local:/v1/agents/main/sessions/ses_1",
            "http://127.0.0.1:8717/v1/sessions/ses_1",
            "https://example.invalid/shiitake/v1/agents/planner-2/sessions/ses_01J",
            "http://h/v1/sessions/a%2Fb%3Fc%23d%25e",
        ] {
            let address = parse(text).unwrap_or_else(|error| panic!("{text}: {error}"));
            assert_eq!(address.to_string(), text);
        }
        let odd = parse("http://h/v1/sessions/a%2Fb%3Fc%23d%25e").unwrap();
        assert_eq!(odd.session_id().as_str(), "a/b?c#d%e");
        assert_eq!(odd.agent(), None);
        // A base URL whose own path ends like an address part stays the base.
        let nested = parse("http://h/v1/sessions/v1/agents/a/sessions/s").unwrap();
        assert_eq!(nested.origin().base_url(), Some("http://h/v1/sessions"));
        assert_eq!(nested.agent().map(AgentName::as_str), Some("a"));
    }

    #[test]
    fn what_the_grammar_refuses_is_refused_with_the_reason() {
        type Expect = fn(&AddressError) -> bool;
        let cases: [(&str, Expect); 12] = [
            ("ses_1", |e| matches!(e, AddressError::Path(_))),
            ("local:/v1/ses_1", |e| matches!(e, AddressError::Path(_))),
            ("local:/v2/sessions/s", |e| {
                matches!(e, AddressError::Path(_))
            }),
            ("local:/v1/agents/sessions/s", |e| {
                matches!(e, AddressError::Path(_))
            }),
            ("ftp://h/v1/sessions/s", |e| {
                matches!(e, AddressError::Origin(_))
            }),
            ("http:///v1/sessions/s", |e| {
                matches!(e, AddressError::Base(_))
            }),
            ("http://h?x=1/v1/sessions/s", |e| {
                matches!(e, AddressError::Base(_))
            }),
            ("http://h/ /v1/sessions/s", |e| {
                matches!(e, AddressError::Base(_))
            }),
            ("local:/v1/agents/-x/sessions/s", |e| {
                matches!(e, AddressError::Agent(_))
            }),
            ("local:/v1/sessions/", |e| {
                matches!(e, AddressError::Session(_))
            }),
            ("local:/v1/sessions/a%2", |e| {
                matches!(e, AddressError::Session(_))
            }),
            ("local:/v1/sessions/a b", |e| {
                matches!(e, AddressError::Session(_))
            }),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert!(expected(&error), "{text}: {error:?}");
        }
        // A decoded id must be a Session id: visible ASCII only.
        assert!(matches!(
            parse("local:/v1/sessions/a%20b"),
            Err(AddressError::Session(_))
        ));
    }

    #[test]
    fn the_length_is_bounded_at_its_edge() {
        let at = |len: usize| {
            let prefix = "http://h/";
            let suffix = "/v1/sessions/s";
            format!(
                "{prefix}{}{suffix}",
                "p".repeat(len - prefix.len() - suffix.len())
            )
        };
        assert!(parse(&at(MAX_ADDRESS_BYTES)).is_ok());
        assert_eq!(
            parse(&at(MAX_ADDRESS_BYTES + 1)),
            Err(AddressError::TooLong(MAX_ADDRESS_BYTES + 1))
        );
    }

    #[test]
    fn a_base_url_loses_its_trailing_slash_only() {
        assert_eq!(
            AddressOrigin::http("http://127.0.0.1:1/").unwrap(),
            AddressOrigin::Http("http://127.0.0.1:1".into())
        );
        assert!(AddressOrigin::http("http://h//").is_err());
        assert!(AddressOrigin::http("127.0.0.1:1").is_err());
    }

    #[test]
    fn it_travels_as_a_json_string() {
        let address = parse("local:/v1/agents/main/sessions/ses_1").unwrap();
        let json = serde_json::to_string(&address).unwrap();
        assert_eq!(json, r#""local:/v1/agents/main/sessions/ses_1""#);
        assert_eq!(
            serde_json::from_str::<SessionAddress>(&json).unwrap(),
            address
        );
        assert!(serde_json::from_str::<SessionAddress>(r#""nope""#).is_err());
    }
}
