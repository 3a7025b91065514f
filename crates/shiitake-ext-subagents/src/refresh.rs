//! The refresher: the one task that reads children through the host's source and
//! shows the rows, so hooks and projections stay synchronous and free of I/O.

use std::sync::Arc;

use shiitake_core::Agent;
use shiitake_protocol::{AgentApi, SessionId};

use crate::contract::MAX_ROWS;
use crate::shared::Shared;
use crate::state;

/// Reads the rows of Sessions that were read (or poll while a child works or waits)
/// and publishes them to the Sessions' watchers. It sleeps on the Agent's clock and
/// wakes when a Session is read; it never polls a Session nobody reads.
pub struct Refresher {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Refresher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refresher").finish_non_exhaustive()
    }
}

/// Tells Subagents that a Session's children changed (it sent work to an Agent, or
/// created one), so its rows are read again at once; cheap to clone.
#[derive(Clone)]
pub struct SubagentsHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SubagentsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentsHandle").finish_non_exhaustive()
    }
}

impl SubagentsHandle {
    /// The Session sent work to or created an Agent: read its rows again now,
    /// however fresh they are, and show them to its watchers.
    pub fn children_changed(&self, session_id: &SessionId) {
        self.shared.children_changed(session_id);
    }
}

/// What one pass found to do.
struct Plan {
    refresh: Vec<SessionId>,
    republish: Vec<SessionId>,
    next: Option<u64>,
}

impl Refresher {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// A handle the host keeps to say that a Session's children changed; take it
    /// before spawning the refresher.
    pub fn handle(&self) -> SubagentsHandle {
        SubagentsHandle {
            shared: self.shared.clone(),
        }
    }

    /// Runs the refresher for `agent` on its own task; abort the handle when the Agent closes.
    pub fn spawn(self, agent: Agent) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.run(agent))
    }

    /// Runs until the task is aborted.
    pub async fn run(self, agent: Agent) {
        loop {
            let now = self.shared.clock.now_ms();
            let plan = self.plan(now);
            let busy = !plan.refresh.is_empty() || !plan.republish.is_empty();
            for session_id in plan.refresh {
                self.refresh(&agent, session_id).await;
            }
            for session_id in plan.republish {
                self.show(&agent, &session_id).await;
            }
            if busy {
                continue;
            }
            // A read or a toggle since the plan left a permit in `wake`, so nothing is missed.
            match plan.next {
                Some(at) => {
                    tokio::select! {
                        () = self.shared.wake.notified() => {}
                        () = self.shared.clock.sleep_until(at) => {}
                    }
                }
                None => self.shared.wake.notified().await,
            }
        }
    }

    /// Which Sessions to read now, which only to show again, and when to look next.
    /// Forgets quiet Sessions that show nothing.
    fn plan(&self, now: u64) -> Plan {
        let mut footers = self.shared.footers();
        footers.retain(|_, footer| {
            !(footer.rows.is_empty() && !footer.collapsed && footer.tracking.forgettable(now))
        });
        let mut plan = Plan {
            refresh: Vec::new(),
            republish: Vec::new(),
            next: None,
        };
        for (session_id, footer) in footers.iter_mut() {
            match footer.tracking.due_at() {
                Some(at) if at <= now => {
                    plan.refresh.push(session_id.clone());
                    footer.republish = false;
                    continue;
                }
                Some(at) => plan.next = Some(plan.next.map_or(at, |next| next.min(at))),
                None => {}
            }
            if std::mem::take(&mut footer.republish) {
                plan.republish.push(session_id.clone());
            }
        }
        plan
    }

    /// Reads one Session's children and shows them.
    async fn refresh(&self, agent: &Agent, session_id: SessionId) {
        // The rows are as of when the refresh began: polls follow the schedule, not
        // how long reading took.
        let now = self.shared.clock.now_ms();
        let source = &self.shared.source;
        let read = match source.read(&session_id, MAX_ROWS).await {
            Ok(page) => {
                let mut rows = Vec::with_capacity(page.children.len().min(MAX_ROWS));
                for child in page.children.iter().take(MAX_ROWS) {
                    let state = source.open(child).await.map_err(|error| error.to_string());
                    rows.push(state::row(&child.agent, child.session_id.as_str(), &state));
                }
                let beyond =
                    u32::try_from(page.children.len().saturating_sub(MAX_ROWS)).unwrap_or(u32::MAX);
                Some((rows, page.rest.saturating_add(beyond)))
            }
            Err(error) => {
                // Keep the rows shown last; look again at the next read.
                tracing::warn!(session = %session_id, %error, "sub-agent rows could not be read");
                None
            }
        };
        let (live, shows_something) = {
            let mut footers = self.shared.footers();
            let footer = footers.entry(session_id.clone()).or_default();
            let showed = !footer.rows.is_empty() || footer.more > 0;
            if let Some((rows, more)) = read {
                footer.rows = rows;
                footer.more = more;
            }
            let live = footer.rows.iter().any(|row| row.status.is_live());
            footer.tracking.refreshed(now, live, false);
            (live, showed || !footer.rows.is_empty() || footer.more > 0)
        };
        // A Session that reached nobody shows no footer before and after: its watchers
        // get no frame (an empty republish would still reach every one of them).
        if !shows_something {
            return;
        }
        // Shown with the time they were read; reaching a watcher counts as a read.
        if self.show(agent, &session_id).await
            && let Some(footer) = self.shared.footers().get_mut(&session_id)
        {
            footer.tracking.refreshed(now, live, true);
        }
    }

    /// Publishes the Session's slots to its watchers; whether anyone received them.
    async fn show(&self, agent: &Agent, session_id: &SessionId) -> bool {
        match agent
            .session(session_id.clone())
            .republish_extensions()
            .await
        {
            Ok(watched) => watched,
            Err(error) => {
                tracing::debug!(session = %session_id, %error, "sub-agent rows not shown");
                false
            }
        }
    }
}
