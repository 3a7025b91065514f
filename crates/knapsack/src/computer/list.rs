//! `Knapsack::computers`: a capability source over a host-owned, changing Computer list.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use shiitake_capabilities::{
    CapabilitySource, Invalidations, Invalidator, Module, ModulePath, SourceError, SourceId,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ComputerConnection, ComputerError, capture};
use crate::limits::{COMPUTER_DESCRIBE_CONCURRENCY, COMPUTER_DESCRIBE_TIMEOUT};

/// A Computer left out of an acquisition, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// Its authority id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What went wrong.
    pub error: ComputerError,
}

/// How a [`ComputersSource`] describes its Computers.
#[derive(Clone)]
pub struct ComputersOptions {
    /// How long one Computer has to describe itself (default 10 s).
    pub timeout: Duration,
    /// How many Computers are described at once (default 8).
    pub concurrency: usize,
    /// Told about each Computer that is left out; the others stay available.
    pub on_unavailable: Arc<dyn Fn(Unavailable) + Send + Sync>,
}

impl Default for ComputersOptions {
    fn default() -> Self {
        Self {
            timeout: COMPUTER_DESCRIBE_TIMEOUT,
            concurrency: COMPUTER_DESCRIBE_CONCURRENCY,
            on_unavailable: Arc::new(|unavailable: Unavailable| {
                tracing::warn!(id = %unavailable.id, error = %unavailable.error, "computer unavailable");
            }),
        }
    }
}

impl std::fmt::Debug for ComputersOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputersOptions")
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// A source that captures every Computer of a host-owned list.
///
/// Each acquisition describes the current list, at most `concurrency` at a
/// time, each under `timeout`; a Computer that rejects, hangs or advertises
/// something unusable is reported through `on_unavailable` and left out with
/// its Files, while the rest stay. A change of the list invalidates the
/// source, so the catalog acquires again. Closing the source cancels any
/// acquisition in flight. Must be created inside a Tokio runtime.
pub struct ComputersSource {
    id: SourceId,
    list: watch::Receiver<Vec<ComputerConnection>>,
    options: ComputersOptions,
    invalidator: Arc<Invalidator>,
    closed: CancellationToken,
    authorities: Mutex<BTreeMap<ModulePath, String>>,
}

impl std::fmt::Debug for ComputersSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputersSource")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ComputersSource {
    /// Follows `list`; see [`crate::Knapsack::computers`].
    pub fn new(
        id: SourceId,
        list: watch::Receiver<Vec<ComputerConnection>>,
        options: ComputersOptions,
    ) -> Self {
        let invalidator = Arc::new(Invalidator::new());
        let closed = CancellationToken::new();
        let mut watcher = list.clone();
        let signal = invalidator.clone();
        let stop = closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    changed = watcher.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        signal.invalidate();
                    }
                }
            }
        });
        Self {
            id,
            list,
            options,
            invalidator,
            closed,
            authorities: Mutex::new(BTreeMap::new()),
        }
    }

    /// The authority id of the Computer whose module (commands or files) is at
    /// `path`, as of the last acquisition.
    pub fn authority(&self, path: &ModulePath) -> Option<String> {
        self.authorities
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
            .cloned()
    }

    /// Captures every Computer of the current list; cancelling `cancel` rejects
    /// the whole acquisition with [`ComputerError::Cancelled`].
    pub async fn acquire(&self, cancel: &CancellationToken) -> Result<Vec<Module>, ComputerError> {
        let connections = self.list.borrow().clone();
        let timeout = self.options.timeout;
        let concurrency = self.options.concurrency.max(1);
        let token = cancel.child_token();
        let _stop = token.clone().drop_guard();
        // Unordered, so a fast or failing Computer frees its slot at once; the
        // results are put back in list order afterwards.
        let captures = futures::stream::iter(connections.into_iter().enumerate())
            .map(|(index, connection)| {
                let token = token.clone();
                async move {
                    let result = capture(&connection, timeout, &token).await;
                    (index, connection, result)
                }
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>();
        let mut results = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ComputerError::Cancelled),
            results = captures => results,
        };
        results.sort_by_key(|(index, _, _)| *index);
        let mut modules = Vec::new();
        let mut authorities = BTreeMap::new();
        for (_, connection, result) in results {
            match result {
                Ok(captured) => {
                    for module in &captured {
                        authorities.insert(module.path().clone(), connection.id.clone());
                    }
                    modules.extend(captured);
                }
                Err(ComputerError::Cancelled) => return Err(ComputerError::Cancelled),
                Err(error) => (self.options.on_unavailable)(Unavailable {
                    id: connection.id.clone(),
                    name: connection.name.clone(),
                    error,
                }),
            }
        }
        *self
            .authorities
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = authorities;
        Ok(modules)
    }
}

#[async_trait]
impl CapabilitySource for ComputersSource {
    fn id(&self) -> &SourceId {
        &self.id
    }

    async fn modules(&self) -> Result<Vec<Module>, SourceError> {
        if self.closed.is_cancelled() {
            return Err(SourceError::Closed);
        }
        self.acquire(&self.closed)
            .await
            .map_err(|error| match error {
                ComputerError::Cancelled => SourceError::Closed,
                other => SourceError::Unavailable(other.to_string()),
            })
    }

    fn subscribe(&self) -> Invalidations {
        self.invalidator.subscribe()
    }

    async fn close(&self) {
        self.closed.cancel();
        self.invalidator.close();
    }
}

impl Drop for ComputersSource {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}
