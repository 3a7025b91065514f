//! Headless Chromium for Shiitake's browser tests.
//!
//! **What it owns.** Finding a Chromium binary, launching it with flags that work
//! in a container (as root, without a GPU, without network of its own), and a few
//! helpers to drive pages from Rust over the DevTools protocol (`chromiumoxide`): open
//! a page (optionally with extra request headers, such as a bearer token), evaluate
//! JavaScript, wait for a condition in the page, save a screenshot (of the window or
//! the whole page).
//!
//! **Finding the browser.** [`find`] reads [`ENV_VAR`] (`SHIITAKE_CHROMIUM`) first:
//! when it is set, it must name a runnable file. Otherwise it looks for Debian's
//! `chromium` (and `chromium-browser`, `google-chrome`) on `PATH`. A test calls
//! [`Chromium::launch_or_skip`], which hands what [`find`] found to
//! `shiitake-test-services`: with no browser it prints one `SKIPPED` line and
//! returns `None`, so `cargo test` passes on a machine without a browser, unless
//! `SHIITAKE_REQUIRE_SERVICES=1` is set (as `cargo xtask test` does): then the test
//! fails, naming Chromium. `cargo xtask chromium` installs Debian's package when it
//! is missing and prints its path.
//!
//! **What it does not own.** What a page does: every test brings its own server and
//! page. This crate is a test-support crate and is not published.
//!
//! ```no_run
//! # async fn demo() -> Result<(), shiitake_chromium::ChromiumError> {
//! let Some(chromium) = shiitake_chromium::Chromium::launch_or_skip("demo").await? else {
//!     return Ok(()); // no browser here; a SKIPPED line was printed
//! };
//! let page = chromium.open("http://127.0.0.1:8080/", &[]).await?;
//! let title: String = shiitake_chromium::eval(&page, "document.title").await?;
//! # let _ = title;
//! chromium.close().await;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::network::{Headers, SetExtraHttpHeadersParams};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::ScreenshotParams;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use shiitake_test_services::{Missing, Service};
use tokio::task::JoinHandle;

pub use chromiumoxide::Page;

/// The variable that names the browser binary; when set it must work.
pub const ENV_VAR: &str = Service::Chromium.variable();

/// Names tried on `PATH` when [`ENV_VAR`] is not set, Debian's first.
pub const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// Launch flags that work on these machines: headless, as root (no sandbox), no
/// GPU, and nothing that reaches the network on its own (QUIC, component and
/// background updates, sync, the first-run page). The profile is a fresh
/// `--user-data-dir` per launch, added by [`Chromium::launch`].
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--hide-scrollbars",
];

/// How long one DevTools command may take before it fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a browser could not be found, started or driven.
#[derive(Debug, thiserror::Error)]
pub enum ChromiumError {
    /// [`ENV_VAR`] names something that is not a runnable file.
    #[error("{ENV_VAR}={path} is not an executable file")]
    NotExecutable {
        /// What the variable said.
        path: PathBuf,
    },
    /// The fresh profile directory could not be made.
    #[error("cannot create a profile directory: {0}")]
    Profile(#[source] std::io::Error),
    /// The browser did not start or did not answer on its DevTools socket.
    #[error("cannot launch {executable}: {message}")]
    Launch {
        /// The binary.
        executable: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A DevTools command failed (navigation, evaluation, screenshot ...).
    #[error("{what}: {message}")]
    Command {
        /// What the test asked for.
        what: String,
        /// What the browser said.
        message: String,
    },
    /// A condition in the page did not hold in time.
    #[error("timed out after {after:?} waiting for `{expression}`")]
    TimedOut {
        /// The JavaScript condition.
        expression: String,
        /// How long it waited.
        after: Duration,
    },
    /// Writing an artifact failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
}

fn command_error(
    what: impl Into<String>,
) -> impl FnOnce(chromiumoxide::error::CdpError) -> ChromiumError {
    let what = what.into();
    move |error| ChromiumError::Command {
        what,
        message: error.to_string(),
    }
}

/// The browser binary to use: [`ENV_VAR`] when set (it must be runnable), else
/// the first of [`CANDIDATES`] on `PATH`, else `None`.
pub fn find() -> Result<Option<PathBuf>, ChromiumError> {
    if let Some(value) = std::env::var_os(ENV_VAR).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(Some(path))
        } else {
            Err(ChromiumError::NotExecutable { path })
        };
    }
    Ok(find_on_path(std::env::var_os("PATH").as_deref()))
}

/// The first of [`CANDIDATES`] in the directories of `path` (a `PATH` value).
pub fn find_on_path(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = path.map(|p| std::env::split_paths(p).collect())?;
    CANDIDATES.iter().find_map(|name| {
        dirs.iter()
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    })
}

/// `--headless` as chromiumoxide wants it (`headless`): it prefixes every key with `--`.
fn bare_key(flag: &str) -> &str {
    flag.trim_start_matches('-')
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// One running headless browser with its own fresh profile; [`Chromium::close`] ends it.
pub struct Chromium {
    browser: Browser,
    handler: JoinHandle<()>,
    executable: PathBuf,
    // Dropped after the browser: the profile outlives the process using it.
    _profile: tempfile::TempDir,
}

impl std::fmt::Debug for Chromium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chromium")
            .field("executable", &self.executable)
            .finish_non_exhaustive()
    }
}

impl Chromium {
    /// Launches `executable` headless with [`FLAGS`] and a fresh profile directory.
    pub async fn launch(executable: &Path) -> Result<Self, ChromiumError> {
        let profile = tempfile::Builder::new()
            .prefix("shiitake-chromium-")
            .tempdir()
            .map_err(ChromiumError::Profile)?;
        let launch_error = |message: String| ChromiumError::Launch {
            executable: executable.to_path_buf(),
            message,
        };
        // chromiumoxide's own default flags are off: exactly FLAGS, plus the
        // DevTools port (0: the browser picks one and prints it) and the profile.
        // chromiumoxide takes bare keys and writes the `--` itself.
        let config = BrowserConfig::builder()
            .chrome_executable(executable)
            .disable_default_args()
            .with_head() // "headful" for chromiumoxide: `--headless` comes from FLAGS
            .args(FLAGS.iter().map(|flag| bare_key(flag)))
            .user_data_dir(profile.path())
            .request_timeout(REQUEST_TIMEOUT)
            .launch_timeout(Duration::from_secs(30))
            .build()
            .map_err(launch_error)?;
        let (browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|error| launch_error(error.to_string()))?;
        // The handler drives the DevTools socket; it must be polled for anything to happen.
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Ok(Self {
            browser,
            handler,
            executable: executable.to_path_buf(),
            _profile: profile,
        })
    }

    /// Launches the browser [`find`] names. When there is none (or [`ENV_VAR`]
    /// names something that is not runnable), prints one `SKIPPED` line naming
    /// `test` and returns `None`, so the test can return early; with
    /// `SHIITAKE_REQUIRE_SERVICES=1` it panics instead, naming Chromium and how to
    /// provide it (see `shiitake-test-services`).
    pub async fn launch_or_skip(test: &str) -> Result<Option<Self>, ChromiumError> {
        let found = match find() {
            Ok(Some(executable)) => Ok(executable),
            Ok(None) => Err(Missing::new(format!(
                "{ENV_VAR} is not set and none of {} is on PATH",
                CANDIDATES.join(", ")
            ))),
            Err(error) => Err(Missing::new(error.to_string())),
        };
        match Service::Chromium.check_for(test, found) {
            Some(executable) => Self::launch(&executable).await.map(Some),
            None => Ok(None),
        }
    }

    /// The binary this browser runs.
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// The chromiumoxide browser, for anything the helpers do not cover.
    pub fn browser(&self) -> &Browser {
        &self.browser
    }

    /// Opens a new tab on `url`, sending `headers` with every request the tab makes
    /// (its page, scripts, `fetch`), and waits for the page to load.
    pub async fn open(&self, url: &str, headers: &[(&str, &str)]) -> Result<Page, ChromiumError> {
        let page = self
            .browser
            .new_page("about:blank")
            .await
            .map_err(command_error("open a tab"))?;
        if !headers.is_empty() {
            let map: serde_json::Map<String, serde_json::Value> = headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).into()))
                .collect();
            page.execute(SetExtraHttpHeadersParams::new(Headers::new(map)))
                .await
                .map_err(command_error("set extra headers"))?;
        }
        page.goto(url)
            .await
            .map_err(command_error(format!("navigate to {url}")))?;
        Ok(page)
    }

    /// Closes the browser and waits for its process to end.
    pub async fn close(mut self) {
        // A browser that already died answers neither; the process is reaped below.
        if self.browser.close().await.is_err() {
            self.browser.kill().await;
        }
        // Best effort: the process has been told to stop; reaping it is the runtime's job.
        drop(self.browser.wait().await);
        self.handler.abort();
    }
}

/// Evaluates `expression` in `page` (awaiting it when it is a promise) and decodes the value.
pub async fn eval<T: DeserializeOwned>(page: &Page, expression: &str) -> Result<T, ChromiumError> {
    let result = page
        .evaluate(expression)
        .await
        .map_err(command_error(format!("evaluate `{expression}`")))?;
    result.into_value().map_err(|error| ChromiumError::Command {
        what: format!("decode the value of `{expression}`"),
        message: error.to_string(),
    })
}

/// Waits until the JavaScript `condition` is truthy in `page`, checking in the page
/// every 10 ms, for at most `timeout`.
pub async fn wait_for(
    page: &Page,
    condition: &str,
    timeout: Duration,
) -> Result<(), ChromiumError> {
    let millis = timeout.as_millis();
    let script = format!(
        "new Promise((resolve) => {{ const until = Date.now() + {millis}; \
         const check = () => {{ let ok = false; try {{ ok = !!({condition}); }} catch (_) {{}} \
         if (ok) resolve(true); else if (Date.now() > until) resolve(false); \
         else setTimeout(check, 10); }}; check(); }})"
    );
    if eval::<bool>(page, &script).await? {
        Ok(())
    } else {
        Err(ChromiumError::TimedOut {
            expression: condition.to_owned(),
            after: timeout,
        })
    }
}

/// Saves a PNG screenshot of `page` (what the window shows) to `path`, creating its directory.
pub async fn screenshot(page: &Page, path: &Path) -> Result<(), ChromiumError> {
    save_screenshot(page, path, false).await
}

/// Saves a PNG screenshot of the whole of `page`, past the window's height, to `path`
/// (a conversation longer than one screen, for the docs).
pub async fn screenshot_full_page(page: &Page, path: &Path) -> Result<(), ChromiumError> {
    save_screenshot(page, path, true).await
}

async fn save_screenshot(page: &Page, path: &Path, full_page: bool) -> Result<(), ChromiumError> {
    let bytes = page
        .screenshot(
            ScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Png)
                .full_page(full_page)
                .build(),
        )
        .await
        .map_err(command_error("take a screenshot"))?;
    let write_error = |source| ChromiumError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(write_error)?;
    }
    std::fs::write(path, bytes).map_err(write_error)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn flags_reach_chromiumoxide_without_their_dashes() {
        assert_eq!(bare_key("--no-sandbox"), "no-sandbox");
        assert_eq!(bare_key("headless"), "headless");
        assert!(
            FLAGS
                .iter()
                .all(|flag| flag.starts_with("--") && !bare_key(flag).starts_with('-'))
        );
    }

    #[test]
    fn the_first_candidate_on_path_wins_and_a_plain_file_does_not_count() {
        use std::os::unix::fs::PermissionsExt;
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        // Not executable: skipped.
        std::fs::write(first.path().join("chromium"), "").unwrap();
        let runnable = second.path().join("chromium");
        std::fs::write(&runnable, "").unwrap();
        std::fs::set_permissions(&runnable, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([first.path(), second.path()]).unwrap();
        assert_eq!(find_on_path(Some(&path)), Some(runnable));
        let empty = tempfile::tempdir().unwrap();
        let path = std::env::join_paths([empty.path()]).unwrap();
        assert_eq!(find_on_path(Some(&path)), None);
        assert_eq!(find_on_path(None), None);
    }
}
