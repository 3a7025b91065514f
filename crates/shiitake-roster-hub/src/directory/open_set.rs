//! The open set: one slot per tenant this process has used, how many are open, and
//! which was used least recently.
//!
//! A slot's asynchronous lock is held while its tenant opens or closes, so
//! concurrent first uses open it once and a reopen waits for a close to finish. No
//! lock here is held across another tenant's open: the map's lock is synchronous
//! and brief, and a tenant is closed to make room only if its lock is free
//! (`try_lock`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use shiitake_protocol::{AgentName, TenantName};

use super::tenant::Group;

/// One tenant's place in the set.
pub(super) struct Slot {
    pub(super) tenant: TenantName,
    /// The open group, or `None` while the tenant is closed. Held across its open
    /// and its close.
    pub(super) state: tokio::sync::Mutex<Option<Arc<Group>>>,
    /// What `state` holds, readable without waiting for its lock (requests for an
    /// open tenant read this only).
    mirror: RwLock<Option<Arc<Group>>>,
    /// The clock's reading at its latest use.
    last_used_ms: AtomicU64,
    /// Grows with every use: a close that began before a use sees it and gives up,
    /// even when the clock stood still between the two.
    uses: AtomicU64,
}

impl Slot {
    fn new(tenant: TenantName) -> Self {
        Self {
            tenant,
            state: tokio::sync::Mutex::new(None),
            mirror: RwLock::new(None),
            last_used_ms: AtomicU64::new(0),
            uses: AtomicU64::new(0),
        }
    }

    /// Records a use at `now_ms`. Called before the group is read, so a close that
    /// seals the group after this sees the use and gives up.
    pub(super) fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::SeqCst);
        self.uses.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn last_used_ms(&self) -> u64 {
        self.last_used_ms.load(Ordering::SeqCst)
    }

    pub(super) fn uses(&self) -> u64 {
        self.uses.load(Ordering::SeqCst)
    }

    pub(super) fn is_open(&self) -> bool {
        self.peek().is_some()
    }

    /// Records what `state` now holds; called with `state` locked, as it changes.
    pub(super) fn mirror(&self, group: Option<Arc<Group>>) {
        *self.mirror.write().unwrap_or_else(PoisonError::into_inner) = group;
    }

    /// The open group, without waiting for the slot's lock (whoever holds it may be
    /// closing the group; the group says so once sealed).
    pub(super) fn peek(&self) -> Option<Arc<Group>> {
        self.mirror
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Default)]
struct Slots {
    by_tenant: HashMap<TenantName, Arc<Slot>>,
    /// Tenants open or opening: the count the bound applies to.
    reserved: usize,
}

/// Every tenant slot of this process.
#[derive(Default)]
pub(super) struct OpenSet {
    slots: Mutex<Slots>,
}

impl OpenSet {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tenant's slot, made on first use.
    pub(super) fn slot(&self, tenant: &TenantName) -> Arc<Slot> {
        self.slots()
            .by_tenant
            .entry(tenant.clone())
            .or_insert_with(|| Arc::new(Slot::new(tenant.clone())))
            .clone()
    }

    /// The open slot whose group holds `agent`, without I/O.
    pub(super) fn holding(&self, agent: &AgentName) -> Option<(Arc<Slot>, Arc<Group>)> {
        let open: Vec<Arc<Slot>> = self.open_slots();
        open.into_iter().find_map(|slot| {
            let group = slot.peek()?;
            group.holds(agent).then_some((slot, group))
        })
    }

    /// Every open slot.
    pub(super) fn open_slots(&self) -> Vec<Arc<Slot>> {
        self.slots()
            .by_tenant
            .values()
            .filter(|slot| slot.is_open())
            .cloned()
            .collect()
    }

    /// Every slot, open or not (for closing all).
    pub(super) fn all_slots(&self) -> Vec<Arc<Slot>> {
        self.slots().by_tenant.values().cloned().collect()
    }

    /// The open slots other than `except`, least recently used first.
    pub(super) fn least_recently_used(&self, except: &TenantName) -> Vec<Arc<Slot>> {
        let mut open: Vec<Arc<Slot>> = self
            .open_slots()
            .into_iter()
            .filter(|slot| &slot.tenant != except)
            .collect();
        open.sort_by_key(|slot| (slot.last_used_ms(), slot.uses()));
        open
    }

    /// Takes one place under the bound `max`; `false` when every place is taken.
    pub(super) fn try_reserve(&self, max: usize) -> bool {
        let mut slots = self.slots();
        if slots.reserved < max {
            slots.reserved += 1;
            true
        } else {
            false
        }
    }

    /// Gives a place back (a tenant closed, or its open failed).
    pub(super) fn release(&self) {
        let mut slots = self.slots();
        slots.reserved = slots.reserved.saturating_sub(1);
    }

    /// The open tenants, by name.
    pub(super) fn open_tenants(&self) -> Vec<TenantName> {
        let mut open: Vec<TenantName> = self
            .open_slots()
            .into_iter()
            .map(|slot| slot.tenant.clone())
            .collect();
        open.sort();
        open
    }
}
