//! Who a request to the Hub is: the operator's token (from the process's token file
//! or `--token`), or a tenant token the registry keeps hashed; and the web page's
//! logins in the database, so a link minted on one process works on another and a
//! cookie outlives restarts.
//!
//! Token answers are cached for [`CACHE_TTL`] so a burst of requests costs one lookup,
//! and no longer: a revoked or rotated token stops working on every process within
//! that time (the issue asks for 1 s).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shiitake_protocol::{ShiitakeError, TenantName};
use shiitake_server::{Caller, Credentials, LoginSecret, Token, WebLogins};
use shiitake_store_postgres::registry::{Credential, Registry, RegistryError};

/// How long a token's answer is reused before the registry is asked again.
pub const CACHE_TTL: Duration = Duration::from_millis(250);
/// Most answers cached; past it the cache starts over (a flood of made-up tokens
/// cannot grow it).
const MAX_CACHED: usize = 4096;

/// The Hub's credentials: the operator's token, else the registry's tenant tokens.
#[derive(Debug)]
pub struct HubCredentials {
    operator: Token,
    registry: Registry,
    cache: Mutex<HashMap<String, (Option<TenantName>, Instant)>>,
}

impl HubCredentials {
    /// Credentials over `operator` and the tenants' tokens in `registry`.
    pub fn new(operator: Token, registry: Registry) -> Self {
        Self {
            operator,
            registry,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, bearer: &str, now: Instant) -> Option<Option<TenantName>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (tenant, at) = cache.get(bearer)?;
        (now.duration_since(*at) < CACHE_TTL).then(|| tenant.clone())
    }

    fn remember(&self, bearer: &str, tenant: Option<TenantName>, now: Instant) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (_, at)| now.duration_since(*at) < CACHE_TTL);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(bearer.to_owned(), (tenant, now));
    }
}

/// A registry failure as the `503` the server answers it with.
pub fn unavailable(error: RegistryError) -> ShiitakeError {
    ShiitakeError::unavailable(format!("the Hub's registry: {error}"))
}

#[async_trait]
impl Credentials for HubCredentials {
    async fn verify(&self, bearer: &str) -> Result<Option<Caller>, ShiitakeError> {
        if self.operator.matches(bearer) {
            return Ok(Some(Caller::Operator));
        }
        // Text that cannot be a tenant token is nobody, without a look-up or a place in
        // the cache (a flood of made-up tokens would push real ones out).
        if Credential::parse(bearer).is_none() {
            return Ok(None);
        }
        let now = Instant::now();
        let tenant = match self.cached(bearer, now) {
            Some(tenant) => tenant,
            None => {
                let tenant = self
                    .registry
                    .verify_token(bearer)
                    .await
                    .map_err(unavailable)?;
                self.remember(bearer, tenant.clone(), now);
                tenant
            }
        };
        Ok(tenant.map(Caller::Tenant))
    }
}

/// The web page's login codes and sessions, in the registry.
#[derive(Debug)]
pub struct HubWebLogins {
    pub registry: Registry,
    pub code_ttl: Duration,
    pub session_ttl: Duration,
}

fn caller_of(tenant: Option<TenantName>) -> Caller {
    tenant.map_or(Caller::Operator, Caller::Tenant)
}

fn tenant_of(caller: &Caller) -> Option<&TenantName> {
    match caller {
        Caller::Operator => None,
        Caller::Tenant(tenant) => Some(tenant),
    }
}

fn secret(text: String) -> Result<LoginSecret, ShiitakeError> {
    LoginSecret::new(text)
        .ok_or_else(|| ShiitakeError::internal("a login secret of an unexpected form"))
}

#[async_trait]
impl WebLogins for HubWebLogins {
    async fn issue(&self, caller: &Caller) -> Result<LoginSecret, ShiitakeError> {
        let code = self
            .registry
            .issue_code(tenant_of(caller), self.code_ttl)
            .await
            .map_err(unavailable)?;
        secret(code)
    }

    async fn redeem(
        &self,
        code: &LoginSecret,
    ) -> Result<Option<(LoginSecret, Caller)>, ShiitakeError> {
        let redeemed = self
            .registry
            .redeem(code.as_str(), self.session_ttl)
            .await
            .map_err(unavailable)?;
        redeemed
            .map(|(session, tenant)| Ok((secret(session)?, caller_of(tenant))))
            .transpose()
    }

    async fn check(&self, credential: &LoginSecret) -> Result<Option<Caller>, ShiitakeError> {
        let checked = self
            .registry
            .check(credential.as_str())
            .await
            .map_err(unavailable)?;
        Ok(checked.map(caller_of))
    }

    async fn end(&self, credential: &LoginSecret) -> Result<(), ShiitakeError> {
        self.registry
            .end(credential.as_str())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    fn session_ttl(&self) -> Duration {
        self.session_ttl
    }
}
