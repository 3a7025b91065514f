//! Where the web page's logins are kept: the [`WebLogins`] a server asks to mint a
//! login link, redeem it for a cookie, check the cookie on every request and end it.
//!
//! [`WebLogin`] keeps them in one process's memory (a Local host); a Hub keeps them in
//! its database so that a link minted on one process works on another and a cookie
//! outlives a restart. Either way a login belongs to the [`Caller`] that minted its
//! link, and its cookie reaches what that caller's token reaches.

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shiitake_protocol::ShiitakeError;

use crate::caller::Caller;
use crate::web_login::{Pair, WebLogin};

/// Longest login code or cookie credential accepted, in bytes.
pub const MAX_LOGIN_SECRET_BYTES: usize = 256;

/// A login code or a cookie credential as the browser presents it: 1 to
/// [`MAX_LOGIN_SECRET_BYTES`] bytes of `A-Z a-z 0-9 . _ -`. Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginSecret(String);

impl LoginSecret {
    /// Checks `text`; `None` when it cannot be a code or credential of any host.
    pub fn new(text: impl Into<String>) -> Option<Self> {
        let text = text.into();
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        let fits = (1..=MAX_LOGIN_SECRET_BYTES).contains(&text.len());
        (fits && text.bytes().all(allowed)).then_some(Self(text))
    }

    /// The text, for the cookie or the link.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LoginSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoginSecret(..)")
    }
}

/// The path that redeems the one-time `code`, `/login?code=…`, to append to the
/// server's base URL.
pub fn login_path(code: &LoginSecret) -> String {
    login_path_of(code.as_str())
}

/// [`login_path`] of a code's text.
pub(crate) fn login_path_of(code: &str) -> String {
    format!("/login?code={code}")
}

/// The logins of the web page: one-time codes and the browser sessions they open.
///
/// Every error is answered `503 unavailable` (the store behind is down); a code or a
/// credential that is unknown, spent or expired is `None`, never an error.
#[async_trait]
pub trait WebLogins: Send + Sync + fmt::Debug + 'static {
    /// A fresh one-time code whose session will belong to `caller`.
    async fn issue(&self, caller: &Caller) -> Result<LoginSecret, ShiitakeError>;

    /// Spends `code`: the new session's cookie credential and its caller.
    async fn redeem(
        &self,
        code: &LoginSecret,
    ) -> Result<Option<(LoginSecret, Caller)>, ShiitakeError>;

    /// The caller of the live session `credential` names.
    async fn check(&self, credential: &LoginSecret) -> Result<Option<Caller>, ShiitakeError>;

    /// Ends the session `credential` names, if it is live.
    async fn end(&self, credential: &LoginSecret) -> Result<(), ShiitakeError>;

    /// How long a session lasts: the cookie's `Max-Age`.
    fn session_ttl(&self) -> Duration;
}

/// The randomness of a code failed: nothing a retry of the request would not also meet.
fn no_randomness(error: &crate::TokenError) -> ShiitakeError {
    ShiitakeError::internal(error.to_string())
}

/// The in-memory text form, `<id>.<secret>`.
fn pair(secret: &LoginSecret) -> Option<Pair> {
    Pair::parse(secret.as_str())
}

fn secret(pair: &Pair) -> Result<LoginSecret, ShiitakeError> {
    LoginSecret::new(pair.text())
        .ok_or_else(|| ShiitakeError::internal("a login secret of an unexpected form"))
}

#[async_trait]
impl WebLogins for WebLogin {
    async fn issue(&self, caller: &Caller) -> Result<LoginSecret, ShiitakeError> {
        let code = self
            .lock()
            .issue_code_for(caller.clone(), Instant::now())
            .map_err(|error| no_randomness(&error))?;
        secret(&code)
    }

    async fn redeem(
        &self,
        code: &LoginSecret,
    ) -> Result<Option<(LoginSecret, Caller)>, ShiitakeError> {
        let Some(code) = pair(code) else {
            return Ok(None);
        };
        let redeemed = self
            .lock()
            .redeem_for(&code, Instant::now())
            .map_err(|error| no_randomness(&error))?;
        redeemed
            .map(|(session, caller)| Ok((secret(&session)?, caller)))
            .transpose()
    }

    async fn check(&self, credential: &LoginSecret) -> Result<Option<Caller>, ShiitakeError> {
        Ok(pair(credential).and_then(|pair| self.lock().caller_of(&pair, Instant::now())))
    }

    async fn end(&self, credential: &LoginSecret) -> Result<(), ShiitakeError> {
        if let Some(pair) = pair(credential) {
            self.lock().end(&pair, Instant::now());
        }
        Ok(())
    }

    fn session_ttl(&self) -> Duration {
        self.session_ttl
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use shiitake_protocol::TenantName;

    #[test]
    fn a_login_secret_is_1_to_256_bytes_of_its_alphabet() {
        for len in [1, MAX_LOGIN_SECRET_BYTES] {
            assert!(LoginSecret::new("a".repeat(len)).is_some(), "{len}");
        }
        assert!(LoginSecret::new("").is_none());
        assert!(LoginSecret::new("a".repeat(MAX_LOGIN_SECRET_BYTES + 1)).is_none());
        assert!(LoginSecret::new("ab.CD_ef-09").is_some());
        for bad in ["a b", "a;b", "a=b", "a\"b", "é"] {
            assert!(LoginSecret::new(bad).is_none(), "{bad:?}");
        }
        assert_eq!(
            format!("{:?}", LoginSecret::new("secret").unwrap()),
            "LoginSecret(..)"
        );
    }

    #[tokio::test]
    async fn a_tenant_link_opens_a_session_of_that_tenant_until_it_ends() {
        let logins = WebLogin::default();
        let acme = Caller::Tenant(TenantName::new("acme").unwrap());
        let code = logins.issue(&acme).await.unwrap();
        let (cookie, caller) = logins.redeem(&code).await.unwrap().unwrap();
        assert_eq!(caller, acme);
        assert_eq!(logins.check(&cookie).await.unwrap(), Some(acme));
        assert_eq!(logins.redeem(&code).await.unwrap(), None, "spent");
        logins.end(&cookie).await.unwrap();
        assert_eq!(logins.check(&cookie).await.unwrap(), None);
        let stranger = LoginSecret::new("nothing-here").unwrap();
        assert_eq!(logins.check(&stranger).await.unwrap(), None);
        assert_eq!(logins.redeem(&stranger).await.unwrap(), None);
        logins.end(&stranger).await.unwrap();
    }
}
