//! A directory of two tenants' Agents behind fixed tokens, for the tenant tests: real
//! core Agents on SQLite files, the directory the server asks, the credentials and an
//! in-memory list of tenants for `/v1/hub/tenants` (the PostgreSQL ones are tested in
//! `shiitake-store-postgres` and `shiitake-roster-hub`).
//!
//! `acme` has two Agents (`acme`, `acme-helper`), `globex` one (`globex`). The
//! operator's default Agent is `acme`, and the browser App bridge is mounted for it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use knapsack::ui::{UiBridge, UiOptions};
use reqwest::StatusCode;
use serde_json::Value;
use shiitake_conformance::TestTools;
use shiitake_core::Agent;
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::{
    AgentApi, AgentName, IssueToken, IssuedToken, ShiitakeError, TenantEntry, TenantList,
    TenantName, TokenEntry, TokenId,
};
use shiitake_server::{
    AgentDirectoryApi, Caller, Credentials, HubTenants, ServerConfig, Token, WebLogin,
    directory_router,
};
use tempfile::TempDir;

use super::{Server, TOKEN, config, harness_open};

/// The bearer token of the tenant `acme`.
pub const ACME_TOKEN: &str = "acme-token-0123456789abcdef";
/// The bearer token of the tenant `globex`.
pub const GLOBEX_TOKEN: &str = "globex-token-0123456789abcdef";

pub fn tenant(name: &str) -> TenantName {
    TenantName::new(name).unwrap()
}

pub fn agent_name(name: &str) -> AgentName {
    AgentName::new(name).unwrap()
}

/// The operator's token ([`TOKEN`]) and the two tenants' tokens.
#[derive(Debug)]
pub struct FixedCredentials;

#[async_trait]
impl Credentials for FixedCredentials {
    async fn verify(&self, bearer: &str) -> Result<Option<Caller>, ShiitakeError> {
        Ok(match bearer {
            TOKEN => Some(Caller::Operator),
            ACME_TOKEN => Some(Caller::Tenant(tenant("acme"))),
            GLOBEX_TOKEN => Some(Caller::Tenant(tenant("globex"))),
            _ => None,
        })
    }
}

/// One hosted Agent and its owner.
struct Hosted {
    tenant: TenantName,
    name: AgentName,
    agent: Arc<Agent>,
    path: PathBuf,
}

/// The tenants' Agents, as a Hub's directory would hand them out.
pub struct Tenants {
    hosted: RwLock<Vec<Hosted>>,
    _dir: TempDir,
}

impl Tenants {
    pub async fn open() -> Arc<Self> {
        let dir = tempfile::tempdir().unwrap();
        let mut hosted = Vec::new();
        for (owner, name) in [
            ("acme", "acme"),
            ("acme", "acme-helper"),
            ("globex", "globex"),
        ] {
            let path = dir.path().join(format!("{name}.db"));
            hosted.push(Hosted {
                tenant: tenant(owner),
                name: agent_name(name),
                agent: Arc::new(open_agent(&path).await),
                path,
            });
        }
        Arc::new(Self {
            hosted: RwLock::new(hosted),
            _dir: dir,
        })
    }

    /// The Agent `name` as the host holds it now.
    pub fn local(&self, name: &str) -> Arc<Agent> {
        let hosted = self.hosted.read().unwrap();
        let found = hosted.iter().find(|hosted| hosted.name.as_str() == name);
        found.unwrap().agent.clone()
    }

    /// Closes the Agent `name` (as a host closes an idle one) and opens it again on
    /// its file: the directory hands out another `Arc` from now on.
    pub async fn reopen(&self, name: &str) -> (Arc<Agent>, Arc<Agent>) {
        let (old, path) = {
            let hosted = self.hosted.read().unwrap();
            let found = hosted.iter().find(|hosted| hosted.name.as_str() == name);
            let found = found.unwrap();
            (found.agent.clone(), found.path.clone())
        };
        old.close().await.unwrap();
        let new = Arc::new(open_agent(&path).await);
        let mut hosted = self.hosted.write().unwrap();
        let found = hosted
            .iter_mut()
            .find(|hosted| hosted.name.as_str() == name);
        found.unwrap().agent = new.clone();
        (old, new)
    }
}

async fn open_agent(path: &std::path::Path) -> Agent {
    let model = Arc::new(ScriptedModel::new(Script::new(Vec::new())));
    harness_open(path, Arc::new(TestTools::default()), config(model)).await
}

fn reaches(caller: &Caller, owner: &TenantName) -> bool {
    match caller {
        Caller::Operator => true,
        Caller::Tenant(tenant) => tenant == owner,
    }
}

#[async_trait]
impl AgentDirectoryApi for Tenants {
    type Agent = Agent;

    async fn agent(&self, name: &AgentName, caller: &Caller) -> Result<Arc<Agent>, ShiitakeError> {
        let hosted = self.hosted.read().unwrap();
        hosted
            .iter()
            .find(|hosted| &hosted.name == name && reaches(caller, &hosted.tenant))
            .map(|hosted| hosted.agent.clone())
            .ok_or_else(|| ShiitakeError::not_found(format!("no Agent named {name}")))
    }

    async fn names(&self, caller: &Caller) -> Result<Vec<AgentName>, ShiitakeError> {
        let hosted = self.hosted.read().unwrap();
        Ok(hosted
            .iter()
            .filter(|hosted| reaches(caller, &hosted.tenant))
            .map(|hosted| hosted.name.clone())
            .collect())
    }

    fn default_name(&self, caller: &Caller) -> Option<AgentName> {
        let hosted = self.hosted.read().unwrap();
        hosted
            .iter()
            .find(|hosted| reaches(caller, &hosted.tenant))
            .map(|hosted| hosted.name.clone())
    }
}

/// The operator's list of tenants, in memory; token ids count up from 1.
#[derive(Debug, Default)]
pub struct MemoryTenants {
    tenants: Mutex<Vec<TenantEntry>>,
    next: Mutex<u64>,
}

impl MemoryTenants {
    fn token(&self, tenant: &TenantName) -> (TokenEntry, IssuedToken) {
        let mut next = self.next.lock().unwrap();
        *next += 1;
        let id = TokenId::new(format!("{:016x}", *next)).unwrap();
        let issued = IssuedToken {
            tenant: tenant.clone(),
            id: id.clone(),
            token: format!("{id}.secret{next}"),
        };
        (
            TokenEntry {
                id,
                created_at: *next,
            },
            issued,
        )
    }
}

fn no_tenant(name: &TenantName) -> ShiitakeError {
    ShiitakeError::not_found(format!("no tenant named {name}"))
}

#[async_trait]
impl HubTenants for MemoryTenants {
    async fn create(&self, name: &TenantName) -> Result<IssuedToken, ShiitakeError> {
        let (entry, issued) = self.token(name);
        let mut tenants = self.tenants.lock().unwrap();
        if tenants.iter().any(|tenant| &tenant.name == name) {
            return Err(ShiitakeError::conflict(format!("{name} exists")));
        }
        tenants.push(TenantEntry {
            name: name.clone(),
            created_at: entry.created_at,
            agents: vec![name.first_agent()],
            tokens: vec![entry],
        });
        Ok(issued)
    }

    async fn list(&self) -> Result<TenantList, ShiitakeError> {
        let tenants = self.tenants.lock().unwrap().clone();
        Ok(TenantList { tenants })
    }

    async fn delete(&self, name: &TenantName) -> Result<(), ShiitakeError> {
        let mut tenants = self.tenants.lock().unwrap();
        let before = tenants.len();
        tenants.retain(|tenant| &tenant.name != name);
        if tenants.len() == before {
            return Err(no_tenant(name));
        }
        Ok(())
    }

    async fn issue_token(
        &self,
        name: &TenantName,
        request: &IssueToken,
    ) -> Result<IssuedToken, ShiitakeError> {
        let (entry, issued) = self.token(name);
        let mut tenants = self.tenants.lock().unwrap();
        let tenant = tenants.iter_mut().find(|tenant| &tenant.name == name);
        let tenant = tenant.ok_or_else(|| no_tenant(name))?;
        if request.revoke_others {
            tenant.tokens.clear();
        }
        tenant.tokens.push(entry);
        Ok(issued)
    }

    async fn revoke_token(&self, name: &TenantName, id: &TokenId) -> Result<(), ShiitakeError> {
        let mut tenants = self.tenants.lock().unwrap();
        let tenant = tenants.iter_mut().find(|tenant| &tenant.name == name);
        let tenant = tenant.ok_or_else(|| no_tenant(name))?;
        let before = tenant.tokens.len();
        tenant.tokens.retain(|token| &token.id != id);
        if tenant.tokens.len() == before {
            return Err(ShiitakeError::not_found(format!("no token {id}")));
        }
        Ok(())
    }
}

/// The tenants' Agents served over HTTP, with the page, the bridge and the
/// operator's routes.
pub struct Hub {
    pub server: Server,
    pub tenants: Arc<Tenants>,
    pub hub_tenants: Arc<MemoryTenants>,
    pub login: WebLogin,
    pub bridge: UiBridge,
    pub http: reqwest::Client,
}

impl Hub {
    pub async fn start() -> Self {
        let tenants = Tenants::open().await;
        let hub_tenants = Arc::new(MemoryTenants::default());
        let login = WebLogin::default();
        let bridge = UiBridge::new(UiOptions::default());
        let config = ServerConfig::new(Token::new(TOKEN).unwrap())
            .with_credentials(Arc::new(FixedCredentials))
            .with_web(login.clone())
            .with_browser(bridge.clone())
            .with_hub_tenants(hub_tenants.clone());
        let server = Server::start(
            directory_router(tenants.clone(), config),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            server,
            tenants,
            hub_tenants,
            login,
            bridge,
            http,
        }
    }

    /// A request with `token` (or no `Authorization`: `None`) and any other headers.
    pub async fn send(
        &self,
        token: Option<&str>,
        headers: &[(&str, &str)],
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::Response {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.server.url()));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().await.unwrap()
    }

    /// The status of a request with `token`, and its body when it is not a stream.
    pub async fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, String) {
        let response = self.send(Some(token), &[], method, path, body).await;
        let status = response.status();
        let streaming = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
        if streaming {
            return (status, String::new());
        }
        (status, response.text().await.unwrap())
    }

    /// Opens a login link minted by `token` at `POST /v1/web/login-links`; the
    /// `Cookie` header line it set.
    pub async fn cookie_of(&self, token: &str) -> String {
        let (status, body) = self.call(token, "POST", "/v1/web/login-links", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let link: Value = serde_json::from_str(&body).unwrap();
        self.open_link(link["path"].as_str().unwrap()).await
    }

    /// Opens a link the host minted for the operator; the `Cookie` header line it set.
    pub async fn operator_cookie(&self) -> String {
        let link = self.login.login_url(&self.server.url()).unwrap();
        let path = link.strip_prefix(&self.server.url()).unwrap().to_owned();
        self.open_link(&path).await
    }

    async fn open_link(&self, path: &str) -> String {
        let response = self.send(None, &[], "GET", path, None).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let set = response.headers()[reqwest::header::SET_COOKIE]
            .to_str()
            .unwrap();
        set.split(';').next().unwrap().to_owned()
    }
}

/// Asserts that `(status, body)` is the canonical `404 not_found`.
pub fn assert_not_found(answer: &(StatusCode, String), what: &str) {
    assert_eq!(answer.0, StatusCode::NOT_FOUND, "{what}: {}", answer.1);
    let error: ShiitakeError = serde_json::from_str(&answer.1)
        .unwrap_or_else(|_| panic!("{what}: not a ShiitakeError: {}", answer.1));
    assert_eq!(error.code, shiitake_protocol::ErrorCode::NotFound, "{what}");
}

/// Everything a tenant could see or change of `agent`: its Sessions and each one's
/// whole snapshot, as JSON.
pub async fn state_of(agent: &Agent) -> Value {
    use shiitake_protocol::{ReadOptions, SessionApi};
    let page = agent.list_sessions(None).await.unwrap();
    let mut sessions = Vec::new();
    for summary in &page.sessions {
        let snapshot = agent
            .session(summary.session_id().clone())
            .read(ReadOptions::default())
            .await
            .unwrap();
        sessions.push(serde_json::to_value(snapshot).unwrap());
    }
    serde_json::json!({ "list": page, "sessions": sessions })
}
