//! The bridge: one browser host per Session, found or opened on demand.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use shiitake_capabilities::Module;
use shiitake_protocol::SessionId;

use super::error::{Refusal, UiError};
use super::host::{BrowserStream, SessionHost};
use super::limits::DEFAULT_CLAIM_TIMEOUT;
use super::module::ui_module;
use super::wire::{ClaimBody, ResultBody};

/// How a bridge behaves.
#[derive(Clone, Debug)]
pub struct UiOptions {
    /// How long a request waits for a tab to claim it (10 s by default); past it the
    /// run gets `browser_not_connected` and the command has not run.
    pub claim_timeout: Duration,
}

impl Default for UiOptions {
    fn default() -> Self {
        Self {
            claim_timeout: DEFAULT_CLAIM_TIMEOUT,
        }
    }
}

pub(crate) struct Inner {
    options: UiOptions,
    closed: AtomicBool,
    hosts: Mutex<HashMap<SessionId, Weak<SessionHost>>>,
}

impl Inner {
    fn hosts(&self) -> MutexGuard<'_, HashMap<SessionId, Weak<SessionHost>>> {
        self.hosts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `session`'s entry if it still names `host` (which is being dropped).
    pub(crate) fn forget(&self, session: &SessionId, host: &SessionHost) {
        let mut hosts = self.hosts();
        if hosts
            .get(session)
            .is_some_and(|entry| std::ptr::eq(entry.as_ptr(), host))
        {
            hosts.remove(session);
        }
    }
}

/// The browser App bridge (`Knapsack.ui`): lends each run of a Session the `ui`
/// module and serves the Session's tabs their requests.
///
/// Cloning shares the bridge. It authenticates nothing: the host mounts its
/// routes behind its own admission and checks that a Session exists before
/// [`connect`](Self::connect)ing a tab to it.
#[derive(Clone)]
pub struct UiBridge {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for UiBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiBridge")
            .field("hosts", &self.hosts())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Default for UiBridge {
    fn default() -> Self {
        Self::new(UiOptions::default())
    }
}

impl UiBridge {
    /// A bridge with no hosts yet.
    pub fn new(options: UiOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                closed: AtomicBool::new(false),
                hosts: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// How many Sessions have a live host (an open stream or a lent module holds it).
    pub fn hosts(&self) -> usize {
        self.inner
            .hosts()
            .values()
            .filter(|host| host.strong_count() > 0)
            .count()
    }

    /// How many tabs are connected to `session`.
    pub fn connections(&self, session: &SessionId) -> usize {
        self.existing(session).map_or(0, |host| host.connections())
    }

    fn existing(&self, session: &SessionId) -> Option<Arc<SessionHost>> {
        self.inner.hosts().get(session).and_then(Weak::upgrade)
    }

    fn host(&self, session: &SessionId) -> Result<Arc<SessionHost>, UiError> {
        // Checked under the lock `close` takes, so no host opens after it.
        let mut hosts = self.inner.hosts();
        if self.is_closed() {
            return Err(UiError::Closed);
        }
        if let Some(host) = hosts.get(session).and_then(Weak::upgrade) {
            return Ok(host);
        }
        let host = Arc::new(SessionHost::new(
            session.clone(),
            Arc::downgrade(&self.inner),
            self.inner.options.claim_timeout,
        ));
        hosts.insert(session.clone(), Arc::downgrade(&host));
        Ok(host)
    }

    /// Opens a tab's events stream for `session` (a stored Session: the caller
    /// checks), opening the Session's host if no one holds it yet.
    pub fn connect(&self, session: &SessionId) -> Result<BrowserStream, UiError> {
        self.host(session)?.connect()
    }

    /// The `ui` module for one run of `session`: `ui.discover` and `ui.execute`.
    /// The module holds the Session's host open; the run returns it by dropping it.
    pub fn lend(&self, session: &SessionId) -> Result<Module, UiError> {
        ui_module(self.host(session)?)
    }

    /// A tab claims a request; the first claim wins.
    pub fn claim(&self, session: &SessionId, body: &ClaimBody) -> Result<(), Refusal> {
        if self.is_closed() {
            return Err(Refusal::Closed);
        }
        // No host: no stream is open, so no connection id can be valid.
        let host = self.existing(session).ok_or(Refusal::UnknownConnection)?;
        host.claim(body)
    }

    /// The claimer answers its request; anything else is refused.
    pub fn answer(&self, session: &SessionId, body: ResultBody) -> Result<(), Refusal> {
        if self.is_closed() {
            return Err(Refusal::Closed);
        }
        let host = self.existing(session).ok_or(Refusal::UnknownConnection)?;
        host.answer(body)
    }

    /// Ends every stream (each tab gets `end`), fails every outstanding request
    /// with `browser_closed`, and refuses everything after: later tab requests
    /// are refused with [`Refusal::Closed`] (HTTP 410) and later runs fail to borrow.
    pub fn close(&self) {
        let hosts: Vec<Arc<SessionHost>> = {
            let hosts = self.inner.hosts();
            self.inner.closed.store(true, Ordering::Release);
            hosts.values().filter_map(Weak::upgrade).collect()
        };
        for host in hosts {
            host.close();
        }
    }
}
