//! The open connections of one server: which are busy (a request in flight, its
//! response still streaming) and which are idle (reading a request head, or kept alive
//! between requests), so the one idle longest can be closed to make room.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio_util::sync::CancellationToken;

/// The connection table, shared by the accept loop and every connection task.
#[derive(Default)]
pub(crate) struct Table {
    state: Mutex<State>,
    /// Woken whenever a connection has ended (its socket is closed).
    ended: Notify,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// Orders idleness: a connection's place in `idle` is the value when it went idle.
    next_idle: u64,
    entries: HashMap<u64, Entry>,
    /// Idle connections, longest idle first: (went idle at, id).
    idle: BTreeMap<u64, u64>,
    /// Connections asked to close that have not ended yet.
    closing: usize,
}

struct Entry {
    /// Requests in flight, each until its response body is done.
    busy: usize,
    /// The connection's key in `idle` while it is idle.
    idle_key: Option<u64>,
    /// Asked to close by [`Table::close_idlest`], and counted in `closing`.
    closing: bool,
    stop: CancellationToken,
}

impl Table {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections open and not asked to close: what the connection bound counts.
    pub(crate) fn live(&self) -> usize {
        let state = self.state();
        state.entries.len() - state.closing
    }

    /// Registers a new connection, idle until its first request head is read; it is
    /// stopped with `parent` too.
    pub(crate) fn open(self: &Arc<Self>, parent: &CancellationToken) -> Connection {
        let stop = parent.child_token();
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        let key = state.next_idle;
        state.next_idle += 1;
        state.idle.insert(key, id);
        state.entries.insert(
            id,
            Entry {
                busy: 0,
                idle_key: Some(key),
                closing: false,
                stop: stop.clone(),
            },
        );
        Connection {
            table: self.clone(),
            id,
            stop,
        }
    }

    /// Asks the connection idle longest to close; false when every connection is busy.
    pub(crate) fn close_idlest(&self) -> bool {
        let mut guard = self.state();
        let state = &mut *guard;
        let Some((_, id)) = state.idle.pop_first() else {
            return false;
        };
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.idle_key = None;
            entry.closing = true;
            entry.stop.cancel();
            state.closing += 1;
        }
        true
    }

    /// Resolves once a connection ends after this call.
    pub(crate) fn ended(&self) -> Notified<'_> {
        self.ended.notified()
    }

    fn enter(&self, id: u64) {
        let mut guard = self.state();
        let state = &mut *guard;
        let Some(entry) = state.entries.get_mut(&id) else {
            return;
        };
        entry.busy += 1;
        if let Some(key) = entry.idle_key.take() {
            state.idle.remove(&key);
        }
    }

    fn leave(&self, id: u64) {
        let mut guard = self.state();
        let state = &mut *guard;
        let key = state.next_idle;
        let Some(entry) = state.entries.get_mut(&id) else {
            return;
        };
        entry.busy = entry.busy.saturating_sub(1);
        // One being stopped stays out of the idle order.
        if entry.busy == 0 && !entry.stop.is_cancelled() {
            entry.idle_key = Some(key);
            state.next_idle += 1;
            state.idle.insert(key, id);
        }
    }

    fn end(&self, id: u64) {
        let mut guard = self.state();
        let state = &mut *guard;
        if let Some(entry) = state.entries.remove(&id) {
            if let Some(key) = entry.idle_key {
                state.idle.remove(&key);
            }
            if entry.closing {
                state.closing -= 1;
            }
        }
        drop(guard);
        self.ended.notify_waiters();
    }
}

/// One open connection's place in the table; dropping it (when the connection task
/// ends and its socket is closed) removes it.
pub(crate) struct Connection {
    table: Arc<Table>,
    id: u64,
    stop: CancellationToken,
}

impl Connection {
    /// Cancelled when the table closes this connection to make room, or the server stops.
    pub(crate) fn stop(&self) -> &CancellationToken {
        &self.stop
    }

    /// Marks one request in flight until the returned guard is dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.table.enter(self.id);
        Busy {
            table: self.table.clone(),
            id: self.id,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.table.end(self.id);
    }
}

/// One request in flight on a connection (held by its response body).
pub(crate) struct Busy {
    table: Arc<Table>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.table.leave(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idlest_connection_closes_first_and_busy_ones_never() {
        let table = Arc::new(Table::default());
        let server = CancellationToken::new();
        let first = table.open(&server);
        let second = table.open(&server);
        let third = table.open(&server);
        assert_eq!(table.live(), 3);

        // The first is busy, so the second is the idlest; then the third.
        let request = first.busy();
        assert!(table.close_idlest());
        assert!(second.stop().is_cancelled());
        assert!(!third.stop().is_cancelled());
        assert_eq!(table.live(), 2);
        assert!(table.close_idlest());
        assert!(third.stop().is_cancelled());
        assert!(!table.close_idlest(), "only a busy connection is left");
        assert!(!first.stop().is_cancelled());

        // Once its response is done the first is idle again, and may be closed.
        drop(request);
        drop(second);
        drop(third);
        assert_eq!(table.live(), 1);
        assert!(table.close_idlest());
        assert!(first.stop().is_cancelled());
        drop(first);
        assert_eq!(table.live(), 0);
    }

    #[test]
    fn a_connection_that_went_idle_again_is_behind_those_idle_longer() {
        let table = Arc::new(Table::default());
        let server = CancellationToken::new();
        let first = table.open(&server);
        let second = table.open(&server);
        drop(first.busy());
        assert!(table.close_idlest());
        assert!(second.stop().is_cancelled());
        assert!(!first.stop().is_cancelled());
    }

    #[test]
    fn stopping_the_server_stops_every_connection() {
        let table = Arc::new(Table::default());
        let server = CancellationToken::new();
        let one = table.open(&server);
        let two = table.open(&server);
        let _busy = two.busy();
        server.cancel();
        assert!(one.stop().is_cancelled() && two.stop().is_cancelled());
    }
}
