//! Bearer-token authentication and the token file of a local host.
//!
//! Every route requires `Authorization: Bearer <token>` that the server's
//! [`crate::Credentials`] know, or the web page's session cookie (`web_auth.rs`). A wrong
//! or missing credential gets a bare `401` whatever the path, so a caller without a
//! token learns nothing about which routes or Sessions exist. A [`Token`] is compared
//! in constant time.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Why a token could not be made, read or stored.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token is empty or holds characters a header cannot carry.
    #[error("a token must be 16 to 256 visible ASCII characters")]
    Malformed,
    /// The system's random source failed.
    #[error("no randomness for a token: {0}")]
    Random(String),
    /// Reading or writing the token file failed.
    #[error("token file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

/// The secret every request must present; cloning shares it.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A token from text, such as one a host read from its own configuration.
    pub fn new(value: impl Into<String>) -> Result<Self, TokenError> {
        let value = value.into();
        let visible = value.bytes().all(|b| b.is_ascii_graphic());
        if !(16..=256).contains(&value.len()) || !visible {
            return Err(TokenError::Malformed);
        }
        Ok(Self(value.into()))
    }

    /// A fresh token of 32 random bytes, hex-encoded.
    pub fn generate() -> Result<Self, TokenError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| TokenError::Random(error.to_string()))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self(hex.into()))
    }

    /// The token text, to hand to a client.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, in time that depends only on this token's length.
    pub fn matches(&self, given: &str) -> bool {
        let expected = self.0.as_bytes();
        let given = given.as_bytes();
        let mut difference = expected.len() ^ given.len();
        for (at, byte) in expected.iter().enumerate() {
            let other = given.get(at).copied().unwrap_or(0);
            difference |= usize::from(byte ^ other);
        }
        difference == 0
    }
}

/// The token file of a data directory: `<dir>/token`.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join("token")
}

/// Reads `<dir>/token`, or creates it with a fresh token (mode 0600 on Unix) on first start.
///
/// Creation is atomic: the token is written to a private temporary file and
/// linked into place, so two hosts starting together agree on one token and a
/// crash never leaves a half-written file.
pub fn load_or_create_token(data_dir: &Path) -> Result<(Token, PathBuf), TokenError> {
    let path = token_path(data_dir);
    let file_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TokenError::File { path, source }
    };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(data_dir).map_err(file_error(data_dir))?;
    match std::fs::read_to_string(&path) {
        Ok(text) => return Ok((Token::new(text.trim())?, path)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(file_error(&path)(error)),
    }
    let token = Token::generate()?;
    let (temporary, mut file) = private_temporary(data_dir).map_err(file_error(data_dir))?;
    file.write_all(token.as_str().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(file_error(&temporary))?;
    drop(file);
    let linked = std::fs::hard_link(&temporary, &path);
    std::fs::remove_file(&temporary).map_err(file_error(&temporary))?;
    match linked {
        Ok(()) => Ok((token, path)),
        // Another host won the race: use its token.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path).map_err(file_error(&path))?;
            Ok((Token::new(text.trim())?, path))
        }
        Err(error) => Err(file_error(&path)(error)),
    }
}

/// A new private file `token.<pid>.<n>.tmp` in `dir`: `create_new`, so an existing
/// name (a symlink planted there included) is never opened or followed; the next
/// name is tried instead.
fn private_temporary(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let pid = std::process::id();
    let mut attempt = 0u32;
    loop {
        let path = dir.join(format!("token.{pid}.{attempt}.tmp"));
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempt < 64 => {
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// What the auth middleware checks against: the credentials, and the web page's
/// logins when the page is mounted.
#[derive(Clone, Debug)]
pub(crate) struct Gate {
    pub(crate) credentials: Arc<dyn crate::Credentials>,
    pub(crate) web: Option<Arc<dyn crate::WebLogins>>,
}

/// Middleware: lets a request through with a bearer token the credentials know, or
/// with a live browser session cookie under the CSRF rule (`web_auth.rs`), and puts
/// how ([`crate::web_auth::Via`]) and as whom ([`crate::Caller`]) in its extensions.
pub(crate) async fn require_token(
    State(gate): State<Gate>,
    mut request: Request,
    next: Next,
) -> Response {
    use crate::web_auth::{Denied, authorize};
    let decided = authorize(
        gate.credentials.as_ref(),
        gate.web.as_deref(),
        request.method(),
        request.headers(),
    )
    .await;
    match decided {
        Ok((via, caller)) => {
            // Routes that only the token may use (minting login links, the operator's
            // routes) look at `via`; the directory and those routes at `caller`.
            request.extensions_mut().insert(via);
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(Denied::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
        )
            .into_response(),
        Err(Denied::Csrf(reason)) => {
            crate::HttpError(shiitake_protocol::ShiitakeError::not_granted(reason)).into_response()
        }
        Err(Denied::Unavailable(error)) => crate::HttpError(error).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = Token::new("0123456789abcdef0123").unwrap();
        assert!(token.matches("0123456789abcdef0123"));
        assert!(!token.matches("0123456789abcdef012"));
        assert!(!token.matches("0123456789abcdef01234"));
        assert!(!token.matches("0123456789abcdef0124"));
        assert!(!token.matches(""));
    }

    #[test]
    fn a_token_is_16_to_256_bytes() {
        for len in [16, 17, 255, 256] {
            let token = Token::new("t".repeat(len)).unwrap();
            assert_eq!(token.as_str().len(), len);
        }
        for len in [0, 15, 257] {
            assert!(
                matches!(Token::new("t".repeat(len)), Err(TokenError::Malformed)),
                "{len} bytes"
            );
        }
    }

    #[test]
    fn the_token_file_is_created_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let (first, path) = load_or_create_token(dir.path()).unwrap();
        let (again, _) = load_or_create_token(dir.path()).unwrap();
        assert_eq!(first.as_str(), again.as_str());
        assert_eq!(first.as_str().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_temporary_token_file_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let pid = std::process::id();
        for name in [format!("token.{pid}.tmp"), format!("token.{pid}.0.tmp")] {
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
        }
        let (token, path) = load_or_create_token(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(path).unwrap(), token.as_str());
    }
}
