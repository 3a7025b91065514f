//! What the extension's declarations and its refresher share: each Session's footer,
//! kept in memory, and the signal that wakes the refresher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use shiitake_core::clock::Clock;
use shiitake_protocol::SessionId;
use tokio::sync::Notify;

use crate::contract::{ChildRow, FooterView};
use crate::source::SubagentsSource;
use crate::state::{self, Tracking};

/// One Session's footer as kept in memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Footer {
    pub(crate) collapsed: bool,
    pub(crate) rows: Vec<ChildRow>,
    pub(crate) more: u32,
    pub(crate) tracking: Tracking,
    /// Show it again without reading (after `/agents`).
    pub(crate) republish: bool,
}

impl Footer {
    /// What the Session shows: `None` while it reached nobody.
    fn view(&self) -> Option<FooterView> {
        if self.rows.is_empty() && self.more == 0 {
            return None;
        }
        Some(FooterView {
            collapsed: self.collapsed,
            rows: if self.collapsed {
                Vec::new()
            } else {
                self.rows.clone()
            },
            summary: state::summary(&self.rows),
            more: self.more,
            refreshed_at: self.tracking.refreshed_at,
        })
    }
}

/// The footers of every Session and how to read them again.
pub(crate) struct Shared {
    pub(crate) source: Arc<dyn SubagentsSource>,
    pub(crate) clock: Arc<dyn Clock>,
    footers: Mutex<HashMap<SessionId, Footer>>,
    /// Woken when a Session was read or toggled, so the refresher looks again.
    pub(crate) wake: Notify,
}

impl Shared {
    pub(crate) fn new(source: Arc<dyn SubagentsSource>, clock: Arc<dyn Clock>) -> Self {
        Self {
            source,
            clock,
            footers: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        }
    }

    /// The footers; a panic elsewhere while holding them leaves rows that are still
    /// worth showing, so poisoning is ignored.
    pub(crate) fn footers(&self) -> MutexGuard<'_, HashMap<SessionId, Footer>> {
        self.footers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `session_id` shows now, read from memory only.
    pub(crate) fn view(&self, session_id: &SessionId) -> Option<FooterView> {
        self.footers().get(session_id)?.view()
    }

    /// `/agents`: collapses (`Some(true)`), expands (`Some(false)`) or toggles the
    /// Session's rows; whether they are collapsed now.
    pub(crate) fn toggle(&self, session_id: SessionId, collapsed: Option<bool>) -> bool {
        let collapsed = {
            let mut footers = self.footers();
            let footer = footers.entry(session_id).or_default();
            footer.collapsed = collapsed.unwrap_or(!footer.collapsed);
            footer.republish = true;
            footer.collapsed
        };
        self.wake.notify_one();
        collapsed
    }

    /// A client reads `session_id`: wake the refresher when its rows are old.
    pub(crate) fn observed(&self, session_id: &SessionId) {
        let now = self.clock.now_ms();
        let wanted = {
            let mut footers = self.footers();
            let footer = footers.entry(session_id.clone()).or_default();
            footer.tracking.observed(now);
            footer.tracking.wanted
        };
        if wanted {
            self.wake.notify_one();
        }
    }

    /// The Session's children changed: read its rows again now, however fresh.
    pub(crate) fn children_changed(&self, session_id: &SessionId) {
        self.footers()
            .entry(session_id.clone())
            .or_default()
            .tracking
            .wanted = true;
        self.wake.notify_one();
    }
}
