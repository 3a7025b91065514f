//! One-time login links and the browser sessions they open, for the web page.
//!
//! A host mints a login link ([`WebLogin::login_url`]) and shows it to the person
//! (`shiitake serve` prints one). Opening it redeems its one-time code: the server
//! answers with an `HttpOnly; SameSite=Strict` cookie holding a fresh session
//! credential, never the bearer token, and the code is spent. The credential then
//! authenticates every API route like the token does (`auth.rs`), with a CSRF rule
//! on writes.
//!
//! Each code and session belongs to the [`Caller`] that minted the link (the operator,
//! or a tenant whose token called `POST /v1/web/login-links`), and the cookie reaches
//! what that caller's token reaches. [`WebLogin`] keeps them in memory only: a
//! restarted server forgets them and the person opens a new link (a Hub keeps its
//! logins in its database behind [`crate::WebLogins`]). Both are `<id>.<secret>`: the id finds the entry, the
//! secret is compared in constant time. The rules here are plain functions over an
//! injected `now`, so their bounds are tested at the edge without waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::auth::TokenError;
use crate::caller::Caller;

/// How long a login link stays valid when nobody opens it.
pub const DEFAULT_CODE_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a browser session lasts after login (also the cookie's `Max-Age`).
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Most unused login links kept; minting one more forgets the oldest.
pub const DEFAULT_MAX_CODES: usize = 8;
/// Most browser sessions kept; one more login ends the one closest to expiry.
pub const DEFAULT_MAX_SESSIONS: usize = 32;

/// The bounds of a [`WebLogin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebLoginLimits {
    /// Lifetime of an unused login code.
    pub code_ttl: Duration,
    /// Lifetime of a browser session.
    pub session_ttl: Duration,
    /// Most unused codes at once (at least 1).
    pub max_codes: usize,
    /// Most browser sessions at once (at least 1).
    pub max_sessions: usize,
}

impl Default for WebLoginLimits {
    fn default() -> Self {
        Self {
            code_ttl: DEFAULT_CODE_TTL,
            session_ttl: DEFAULT_SESSION_TTL,
            max_codes: DEFAULT_MAX_CODES,
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }
}

/// A secret of the form `<id>.<secret>`, as handed out.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Pair {
    id: String,
    secret: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pair({}, ..)", self.id)
    }
}

impl Pair {
    fn generate() -> Result<Self, TokenError> {
        Ok(Self {
            id: random_hex(8)?,
            secret: random_hex(32)?,
        })
    }

    /// The text form, `<id>.<secret>`.
    pub(crate) fn text(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// Reads `<id>.<secret>`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (id, secret) = text.split_once('.')?;
        let hex = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_hexdigit());
        (hex(id) && hex(secret) && id.len() <= 64 && secret.len() <= 128).then(|| Self {
            id: id.to_owned(),
            secret: secret.to_owned(),
        })
    }
}

fn random_hex(bytes: usize) -> Result<String, TokenError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| TokenError::Random(error.to_string()))?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two byte strings are equal, in time that depends only on `expected`'s length.
pub(crate) fn constant_time_eq(expected: &[u8], given: &[u8]) -> bool {
    let mut difference = expected.len() ^ given.len();
    for (at, byte) in expected.iter().enumerate() {
        let other = given.get(at).copied().unwrap_or(0);
        difference |= usize::from(byte ^ other);
    }
    difference == 0
}

/// One stored secret, whose it is, and when it stops working.
struct Entry {
    secret: String,
    caller: Caller,
    expires: Instant,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("caller", &self.caller)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// The codes and sessions; every rule takes `now`.
#[derive(Debug)]
pub(crate) struct Logins {
    limits: WebLoginLimits,
    codes: HashMap<String, Entry>,
    sessions: HashMap<String, Entry>,
}

/// Takes the entry `pair` names when its secret matches and it has not expired, and
/// answers whose it was; a matching but expired entry is removed too.
fn take_valid(map: &mut HashMap<String, Entry>, pair: &Pair, now: Instant) -> Option<Caller> {
    let entry = map.get(&pair.id)?;
    if !constant_time_eq(entry.secret.as_bytes(), pair.secret.as_bytes()) {
        return None;
    }
    map.remove(&pair.id)
        .filter(|entry| now < entry.expires)
        .map(|entry| entry.caller)
}

/// Makes room for one more entry: drops expired ones, then those closest to expiry.
fn make_room(map: &mut HashMap<String, Entry>, max: usize, now: Instant) {
    map.retain(|_, entry| now < entry.expires);
    while map.len() >= max.max(1) {
        let oldest = map
            .iter()
            .min_by_key(|(_, entry)| entry.expires)
            .map(|(id, _)| id.clone());
        match oldest {
            Some(id) => map.remove(&id),
            None => break,
        };
    }
}

impl Logins {
    pub(crate) fn new(limits: WebLoginLimits) -> Self {
        Self {
            limits,
            codes: HashMap::new(),
            sessions: HashMap::new(),
        }
    }

    /// Stores a fresh one-time code of the operator, valid until `now + code_ttl`.
    pub(crate) fn issue_code(&mut self, now: Instant) -> Result<Pair, TokenError> {
        self.issue_code_for(Caller::Operator, now)
    }

    /// Stores a fresh one-time code of `caller`, valid until `now + code_ttl`.
    pub(crate) fn issue_code_for(
        &mut self,
        caller: Caller,
        now: Instant,
    ) -> Result<Pair, TokenError> {
        let pair = Pair::generate()?;
        make_room(&mut self.codes, self.limits.max_codes, now);
        self.codes.insert(
            pair.id.clone(),
            Entry {
                secret: pair.secret.clone(),
                caller,
                expires: now + self.limits.code_ttl,
            },
        );
        Ok(pair)
    }

    /// Spends `code` and opens a session; `None` when the code is unknown, spent or expired.
    #[cfg(test)]
    pub(crate) fn redeem(&mut self, code: &Pair, now: Instant) -> Result<Option<Pair>, TokenError> {
        Ok(self.redeem_for(code, now)?.map(|(session, _)| session))
    }

    /// [`Self::redeem`], with the caller the new session belongs to (the code's).
    pub(crate) fn redeem_for(
        &mut self,
        code: &Pair,
        now: Instant,
    ) -> Result<Option<(Pair, Caller)>, TokenError> {
        let Some(caller) = take_valid(&mut self.codes, code, now) else {
            return Ok(None);
        };
        let session = Pair::generate()?;
        make_room(&mut self.sessions, self.limits.max_sessions, now);
        self.sessions.insert(
            session.id.clone(),
            Entry {
                secret: session.secret.clone(),
                caller: caller.clone(),
                expires: now + self.limits.session_ttl,
            },
        );
        Ok(Some((session, caller)))
    }

    /// Whether `credential` names a live session.
    #[cfg(test)]
    pub(crate) fn check(&self, credential: &Pair, now: Instant) -> bool {
        self.caller_of(credential, now).is_some()
    }

    /// The caller of the live session `credential` names, if any.
    pub(crate) fn caller_of(&self, credential: &Pair, now: Instant) -> Option<Caller> {
        self.sessions
            .get(&credential.id)
            .filter(|entry| {
                constant_time_eq(entry.secret.as_bytes(), credential.secret.as_bytes())
                    && now < entry.expires
            })
            .map(|entry| entry.caller.clone())
    }

    /// Ends the session `credential` names; whether there was one.
    pub(crate) fn end(&mut self, credential: &Pair, now: Instant) -> bool {
        take_valid(&mut self.sessions, credential, now).is_some()
    }
}

/// The login links and browser sessions of one server; cloning shares them.
#[derive(Clone, Debug)]
pub struct WebLogin {
    pub(crate) logins: Arc<Mutex<Logins>>,
    pub(crate) session_ttl: Duration,
}

impl Default for WebLogin {
    fn default() -> Self {
        Self::new(WebLoginLimits::default())
    }
}

impl WebLogin {
    /// Logins bounded by `limits`.
    pub fn new(limits: WebLoginLimits) -> Self {
        Self {
            logins: Arc::new(Mutex::new(Logins::new(limits))),
            session_ttl: limits.session_ttl,
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Logins> {
        // The state is a pair of maps updated in single calls: a panic cannot leave it half-done.
        self.logins.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Mints a one-time login path, `/login?code=...`, to append to the server's base URL.
    pub fn login_path(&self) -> Result<String, TokenError> {
        let code = self.lock().issue_code(Instant::now())?;
        Ok(crate::web_logins::login_path_of(&code.text()))
    }

    /// Mints a one-time login link on `base` (such as `http://127.0.0.1:8080`).
    pub fn login_url(&self, base: &str) -> Result<String, TokenError> {
        Ok(format!(
            "{}{}",
            base.trim_end_matches('/'),
            self.login_path()?
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn limits() -> WebLoginLimits {
        WebLoginLimits {
            code_ttl: Duration::from_secs(60),
            session_ttl: Duration::from_secs(600),
            max_codes: 2,
            max_sessions: 2,
        }
    }

    #[test]
    fn a_code_works_once_and_only_before_it_expires() {
        let start = Instant::now();
        let mut logins = Logins::new(limits());
        let code = logins.issue_code(start).unwrap();
        let almost = start + Duration::from_secs(60) - Duration::from_millis(1);
        let session = logins.redeem(&code, almost).unwrap().unwrap();
        assert!(logins.check(&session, almost));
        assert_eq!(logins.redeem(&code, almost).unwrap(), None, "spent");

        let late = logins.issue_code(start).unwrap();
        assert_eq!(
            logins
                .redeem(&late, start + Duration::from_secs(60))
                .unwrap(),
            None,
            "at the edge the code has expired"
        );
        assert_eq!(logins.redeem(&late, start).unwrap(), None, "and is gone");
    }

    #[test]
    fn a_wrong_secret_neither_works_nor_spends_the_code() {
        let now = Instant::now();
        let mut logins = Logins::new(limits());
        let code = logins.issue_code(now).unwrap();
        let forged = Pair {
            id: code.id.clone(),
            secret: "00".repeat(32),
        };
        assert_eq!(logins.redeem(&forged, now).unwrap(), None);
        assert!(logins.redeem(&code, now).unwrap().is_some());
    }

    #[test]
    fn a_session_lasts_its_ttl_and_ends_on_logout() {
        let start = Instant::now();
        let mut logins = Logins::new(limits());
        let code = logins.issue_code(start).unwrap();
        let session = logins.redeem(&code, start).unwrap().unwrap();
        let ttl = Duration::from_secs(600);
        assert!(logins.check(&session, start + ttl - Duration::from_millis(1)));
        assert!(!logins.check(&session, start + ttl));
        let forged = Pair {
            id: session.id.clone(),
            secret: "0".repeat(session.secret.len()),
        };
        assert!(!logins.check(&forged, start));
        assert!(logins.end(&session, start));
        assert!(!logins.check(&session, start));
        assert!(!logins.end(&session, start));
    }

    #[test]
    fn minting_past_the_bound_forgets_the_oldest_code() {
        let start = Instant::now();
        let mut logins = Logins::new(limits());
        let first = logins.issue_code(start).unwrap();
        let second = logins.issue_code(start + Duration::from_millis(1)).unwrap();
        // At the bound (2): both kept. One past it: the oldest goes.
        assert_eq!(logins.codes.len(), 2);
        let third = logins.issue_code(start + Duration::from_millis(2)).unwrap();
        assert_eq!(logins.codes.len(), 2);
        assert_eq!(logins.redeem(&first, start).unwrap(), None);
        assert!(logins.redeem(&second, start).unwrap().is_some());
        assert!(logins.redeem(&third, start).unwrap().is_some());
    }

    #[test]
    fn logging_in_past_the_bound_ends_the_oldest_session() {
        let start = Instant::now();
        let mut logins = Logins::new(limits());
        let mut sessions = Vec::new();
        for n in 0..3u64 {
            let at = start + Duration::from_millis(n);
            let code = logins.issue_code(at).unwrap();
            sessions.push(logins.redeem(&code, at).unwrap().unwrap());
            assert_eq!(logins.sessions.len(), (n as usize + 1).min(2));
        }
        assert!(!logins.check(&sessions[0], start));
        assert!(logins.check(&sessions[1], start));
        assert!(logins.check(&sessions[2], start));
    }

    #[test]
    fn only_id_dot_hex_secret_parses() {
        let pair = Pair::generate().unwrap();
        assert_eq!(Pair::parse(&pair.text()), Some(pair));
        for bad in ["", ".", "ab.", ".ab", "ab", "xy.ab", "ab.cd.ef", "ab.c d"] {
            assert_eq!(Pair::parse(bad), None, "{bad:?}");
        }
        assert!(Pair::parse(&format!("{}.ab", "a".repeat(64))).is_some());
        assert!(Pair::parse(&format!("{}.ab", "a".repeat(65))).is_none());
        assert!(Pair::parse(&format!("ab.{}", "a".repeat(128))).is_some());
        assert!(Pair::parse(&format!("ab.{}", "a".repeat(129))).is_none());
    }
}
