//! The remote Agent: Session management and Agent-scope extensions over HTTP.

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::header::HeaderValue;
use reqwest::{Method, Url};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shiitake_protocol::{
    AddressOrigin, AgentApi, AgentList, AgentName, Cursor, ExtensionId, ExtensionStatusV0,
    HubNodeList, RequestId, SessionAddress, SessionId, SessionSummaryPage, ShiitakeError,
};

use crate::http::{Inner, NO_BODY};
use crate::session::RemoteSession;
use crate::transport::ReqwestTransport;
use crate::{ClientError, ClientOptions};

/// An Agent hosted by a `shiitake-server`, reached over HTTP.
///
/// Cloning is cheap and shares the connection pool.
#[derive(Clone)]
pub struct RemoteAgent {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for RemoteAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgent")
            .field("base_url", &self.inner.base.as_str())
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody<'a> {
    request_id: &'a RequestId,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    session_id: SessionId,
}

#[derive(Deserialize)]
struct Deleted {
    deleted: bool,
}

impl RemoteAgent {
    /// A client of the server at `options.base_url`; this does no I/O.
    pub fn new(options: ClientOptions) -> Result<Self, ClientError> {
        let base = Url::parse(&options.base_url).map_err(|error| ClientError::BaseUrl {
            url: options.base_url.clone(),
            reason: error.to_string(),
        })?;
        if base.cannot_be_a_base() {
            return Err(ClientError::BaseUrl {
                url: options.base_url.clone(),
                reason: "it cannot carry a path".to_owned(),
            });
        }
        let token = options
            .token
            .as_ref()
            .map(|token| {
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| ClientError::Token)?;
                value.set_sensitive(true);
                Ok(value)
            })
            .transpose()?;
        let transport = options
            .transport
            .clone()
            .unwrap_or_else(|| Arc::new(ReqwestTransport::default()));
        let origin = origin_of(&base).map_err(|reason| ClientError::BaseUrl {
            url: options.base_url.clone(),
            reason,
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                origin,
                token,
                transport,
                options,
            }),
        })
    }
}

/// The origin of the Session addresses of a client of `base`: the base URL without its
/// trailing `/`.
fn origin_of(base: &Url) -> Result<AddressOrigin, String> {
    AddressOrigin::http(base.as_str()).map_err(|error| error.to_string())
}

impl RemoteAgent {
    /// The Agent `name` of the same directory server, sharing this client's
    /// connection pool, token and transport; this does no I/O.
    pub fn agent(&self, name: AgentName) -> Self {
        self.for_agent(Some(name))
    }

    /// This client bound to the Agent `agent` of its server (`None`: the default one).
    fn for_agent(&self, agent: Option<AgentName>) -> Self {
        let mut options = self.inner.options.clone();
        options.agent = agent;
        Self {
            inner: Arc::new(Inner {
                base: self.inner.base.clone(),
                origin: self.inner.origin.clone(),
                token: self.inner.token.clone(),
                transport: self.inner.transport.clone(),
                options,
            }),
        }
    }

    /// The Agents the server serves (`GET /v1/agents`); a single-Agent server answers
    /// `not_found`.
    pub async fn agents(&self) -> Result<AgentList, ShiitakeError> {
        let url = self.inner.url_in(&["v1", "agents"], &Vec::new(), false)?;
        let response = self
            .inner
            .send(Method::GET, url, None, "application/json")
            .await?;
        crate::http::decode(response).await
    }

    /// The processes of the Hub serving this Agent (`GET /v1/hub/nodes`, the bearer
    /// token only); a server that is not a Hub answers `not_found`.
    pub async fn hub_nodes(&self) -> Result<HubNodeList, ShiitakeError> {
        let url = self
            .inner
            .url_in(&["v1", "hub", "nodes"], &Vec::new(), false)?;
        let response = self
            .inner
            .send(Method::GET, url, None, "application/json")
            .await?;
        crate::http::decode(response).await
    }
}

#[async_trait]
impl AgentApi for RemoteAgent {
    type Session = RemoteSession;

    async fn create_session(&self, request_id: RequestId) -> Result<SessionId, ShiitakeError> {
        let body = CreateBody {
            request_id: &request_id,
        };
        let created: Created = self
            .inner
            .call(Method::POST, &["v1", "sessions"], &Vec::new(), Some(&body))
            .await?;
        Ok(created.session_id)
    }

    async fn delete_session(&self, session_id: &SessionId) -> Result<bool, ShiitakeError> {
        let deleted: Deleted = self
            .inner
            .call(
                Method::DELETE,
                &["v1", "sessions", session_id.as_str()],
                &Vec::new(),
                NO_BODY,
            )
            .await?;
        Ok(deleted.deleted)
    }

    async fn list_sessions(
        &self,
        after: Option<&Cursor>,
    ) -> Result<SessionSummaryPage, ShiitakeError> {
        let query = after
            .map(|after| vec![("after", after.as_str().to_owned())])
            .unwrap_or_default();
        self.inner
            .call(Method::GET, &["v1", "sessions"], &query, NO_BODY)
            .await
    }

    fn session(&self, session_id: SessionId) -> RemoteSession {
        RemoteSession::new(self.inner.clone(), session_id)
    }

    /// The Session of `address` on its Agent of this client's server (another Agent of a
    /// directory shares this client's pool and token); an address of another server or
    /// of an in-process Agent is `invalid`.
    fn session_at(&self, address: &SessionAddress) -> Result<RemoteSession, ShiitakeError> {
        match address.origin() {
            origin if origin == &self.inner.origin => {}
            AddressOrigin::Local => {
                return Err(ShiitakeError::invalid(format!(
                    "{address} is a Session of an in-process Agent, not of the server at {}",
                    self.inner.origin.base_url().unwrap_or_default()
                )));
            }
            AddressOrigin::Http(base) => {
                return Err(ShiitakeError::invalid(format!(
                    "{address} is a Session of the server at {base}; this client talks to {}",
                    self.inner.origin.base_url().unwrap_or_default()
                )));
            }
        }
        let agent = if address.agent() == self.inner.options.agent.as_ref() {
            self.clone()
        } else {
            self.for_agent(address.agent().cloned())
        };
        Ok(agent.session(address.session_id().clone()))
    }

    async fn catalogs(&self) -> Result<shiitake_protocol::catalog::SessionCatalogs, ShiitakeError> {
        self.inner
            .call(Method::GET, &["v1", "catalogs"], &Vec::new(), NO_BODY)
            .await
    }

    async fn tools(
        &self,
        profile: shiitake_protocol::ToolProfile,
    ) -> Result<shiitake_protocol::ToolList, ShiitakeError> {
        let profile = match profile {
            shiitake_protocol::ToolProfile::Full => "full",
            shiitake_protocol::ToolProfile::Small => "small",
        };
        let query = vec![("profile", profile.to_owned())];
        self.inner
            .call(Method::GET, &["v1", "tools"], &query, NO_BODY)
            .await
    }

    async fn list_extensions(&self) -> Result<Vec<ExtensionStatusV0>, ShiitakeError> {
        self.inner
            .call(Method::GET, &["v1", "extensions"], &Vec::new(), NO_BODY)
            .await
    }

    async fn resume_extension(
        &self,
        extension_id: &ExtensionId,
    ) -> Result<ExtensionStatusV0, ShiitakeError> {
        let segments = ["v1", "extensions", extension_id.as_str(), "resume"];
        self.inner
            .call(Method::POST, &segments, &Vec::new(), NO_BODY)
            .await
    }

    async fn call_extension(
        &self,
        extension_id: &ExtensionId,
        command: &str,
        input: Value,
    ) -> Result<Value, ShiitakeError> {
        let segments = [
            "v1",
            "extensions",
            extension_id.as_str(),
            "commands",
            command,
        ];
        self.inner
            .call(Method::POST, &segments, &Vec::new(), Some(&input))
            .await
    }

    /// Closing a client releases nothing on the server: the remote Agent keeps running.
    async fn close(&self) -> Result<(), ShiitakeError> {
        Ok(())
    }
}
