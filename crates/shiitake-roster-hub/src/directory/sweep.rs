//! Closing tenants: the idle ones on the sweep, the least recently used idle one
//! to make room, and the background task that also opens the tenants with work.

use std::sync::Arc;
use std::time::Duration;

use shiitake_protocol::TenantName;
use tokio_util::sync::CancellationToken;

use super::catalog::CatalogError;
use super::open_set::Slot;
use super::{HubDirectory, Inner};

/// What one sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Tenants closed because they were idle, by name.
    pub closed: Vec<TenantName>,
    /// Tenants opened because the catalog wants their work done, by name.
    pub opened: Vec<TenantName>,
}

/// When a tenant may be closed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Unused {
    /// Unused for at least this long (the sweep).
    For(Duration),
    /// At any age (to make room for another tenant).
    AtAll,
}

impl Inner {
    /// Closes the tenant of `slot` if it is free, open, unused as `unused` says and has
    /// no work in progress; the slot stays locked through the close, so a use that
    /// comes meanwhile waits and reopens it.
    pub(super) async fn close_if_idle(&self, slot: &Arc<Slot>, unused: Unused) -> bool {
        // A held lock means the tenant is opening, closing or being looked at: in use.
        let Ok(mut state) = slot.state.try_lock() else {
            return false;
        };
        let Some(group) = state.clone() else {
            return false;
        };
        let uses = slot.uses();
        if let Unused::For(idle) = unused {
            let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
            let unused_ms = self
                .options
                .clock
                .now_ms()
                .saturating_sub(slot.last_used_ms());
            if unused_ms < idle_ms {
                return false;
            }
        }
        if group.has_work().await {
            return false;
        }
        if !group.seal_unless_used(uses, || slot.uses()) {
            return false;
        }
        group.close().await;
        *state = None;
        slot.mirror(None);
        self.set.release();
        tracing::info!(tenant = %slot.tenant, "closed an idle tenant");
        true
    }

    /// Takes a place under the bound for `tenant`, closing the least recently used
    /// idle tenant when every place is taken.
    pub(super) async fn make_room(&self, tenant: &TenantName) -> Result<(), CatalogError> {
        let max = self.options.limits.max_open_tenants;
        loop {
            if self.set.try_reserve(max) {
                return Ok(());
            }
            let mut freed = false;
            for slot in self.set.least_recently_used(tenant) {
                if self.close_if_idle(&slot, Unused::AtAll).await {
                    freed = true;
                    break;
                }
            }
            if !freed {
                return Err(CatalogError::Unavailable(format!(
                    "the tenant {tenant} cannot open here: this process holds at most {max} open tenants and every one has work in progress; try again later"
                )));
            }
        }
    }
}

impl HubDirectory {
    /// Closes every tenant unused for the idle time with no work in progress, then
    /// opens the tenant of every Agent the catalog wants open (work waiting) that is
    /// not open here: after a process dies, the survivors take its tenants up, and
    /// core's leases decide who owns each Session.
    pub async fn sweep(&self) -> Swept {
        let inner = &self.inner;
        let mut swept = Swept::default();
        for slot in inner.set.open_slots() {
            if inner
                .close_if_idle(&slot, Unused::For(inner.options.limits.idle))
                .await
            {
                swept.closed.push(slot.tenant.clone());
            }
        }
        let wanted = match inner.options.catalog.wanted().await {
            Ok(wanted) => wanted,
            Err(error) => {
                tracing::warn!(%error, "could not read which Agents have work waiting");
                return swept;
            }
        };
        for agent in wanted {
            if inner.closing.is_cancelled() {
                break;
            }
            if inner.set.holding(&agent).is_some() {
                continue;
            }
            match self.reach(&agent).await {
                Ok((_, Some(tenant))) => swept.opened.push(tenant),
                Ok((_, None)) => {}
                Err(error) => {
                    tracing::warn!(%agent, %error, "an Agent with work waiting could not be opened here");
                }
            }
        }
        swept.closed.sort();
        swept.opened.sort();
        swept.opened.dedup();
        swept
    }
}

/// Sweeps every `every` by the directory's clock until the directory closes (or is
/// dropped: the task holds it weakly between sweeps).
pub(super) async fn run(
    directory: std::sync::Weak<Inner>,
    every: Duration,
    closing: CancellationToken,
) {
    let every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
    loop {
        let Some(inner) = directory.upgrade() else {
            return;
        };
        let clock = inner.options.clock.clone();
        drop(inner);
        let next = clock.now_ms().saturating_add(every_ms);
        tokio::select! {
            biased;
            () = closing.cancelled() => return,
            () = clock.sleep_until(next) => {}
        }
        let Some(inner) = directory.upgrade() else {
            return;
        };
        let swept = HubDirectory { inner }.sweep().await;
        if !swept.closed.is_empty() || !swept.opened.is_empty() {
            tracing::debug!(closed = ?swept.closed, opened = ?swept.opened, "swept the tenants");
        }
    }
}
