//! The hand-off between the committers of a store and its one writer (group commit).
//!
//! Owners queue their commits and wait for the answer; the writer takes whatever is
//! waiting (up to [`MAX_GROUP`]) as one group, commits it in one transaction, and
//! answers each caller. How a group is committed is the writer's own (SQLite's thread on
//! rusqlite, PostgreSQL's task on sqlx); the queue is the same for both.

use std::sync::{Mutex, PoisonError};

use shiitake_core::store::StoreError;
use shiitake_core::telemetry;
use tokio::sync::{mpsc, oneshot};

/// Most requests committed in one transaction.
pub const MAX_GROUP: usize = 256;

/// Queued commits accepted before callers wait for room.
const QUEUE: usize = 4096;

/// One caller's commit (`work`: its statements or ops) and where its answer goes.
#[derive(Debug)]
pub struct Request<T> {
    /// What to commit.
    pub work: T,
    reply: oneshot::Sender<Answer<T>>,
}

/// A request's outcome, with its work handed back: the committer frees it on its own
/// thread. Freed on the writer's, every allocation of it would go back to another
/// thread's heap, which glibc does under that heap's lock.
#[derive(Debug)]
struct Answer<T> {
    result: Result<(), StoreError>,
    work: T,
}

/// The committers' side: submit a commit and wait for its answer.
#[derive(Debug)]
pub struct Queue<T> {
    sender: Mutex<Option<mpsc::Sender<Request<T>>>>,
    /// Fails (its sender dropped) once the writer let go of its [`Groups`].
    stopped: tokio::sync::Mutex<Option<oneshot::Receiver<()>>>,
}

/// The writer's side: the groups to commit, until every committer is gone. The writer
/// drops it when it has stopped (its connection closed), which [`Queue::close`] waits for.
#[derive(Debug)]
pub struct Groups<T> {
    receiver: mpsc::Receiver<Request<T>>,
    _running: oneshot::Sender<()>,
}

impl<T> Queue<T> {
    /// A queue and the writer's end of it.
    pub fn new() -> (Self, Groups<T>) {
        let (sender, receiver) = mpsc::channel(QUEUE);
        let (running, stopped) = oneshot::channel();
        let queue = Self {
            sender: Mutex::new(Some(sender)),
            stopped: tokio::sync::Mutex::new(Some(stopped)),
        };
        let groups = Groups {
            receiver,
            _running: running,
        };
        (queue, groups)
    }

    /// Hands `work` to the writer and waits for its answer; [`StoreError::Closed`] once
    /// the queue is closed or the writer stopped.
    pub async fn submit(&self, work: T) -> Result<(), StoreError> {
        let sender = self
            .sender
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or(StoreError::Closed)?;
        let (reply, answer) = oneshot::channel();
        let handed = std::time::Instant::now();
        sender
            .send(Request { work, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        let Answer { result, work } = answer.await.map_err(|_| StoreError::Closed)?;
        telemetry::store_commit(handed.elapsed());
        drop(work);
        result
    }

    /// Takes no more commits, and waits until the writer committed what it was handed
    /// and stopped (it dropped its [`Groups`]).
    pub async fn close(&self) {
        drop(
            self.sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(stopped) = self.stopped.lock().await.take() {
            // Never sent: it fails when the writer drops its end, which is the signal.
            let _stopped = stopped.await;
        }
    }
}

impl<T> Groups<T> {
    /// Waits for the next request on a task, then takes whatever else is waiting into
    /// `group`; `false` when the queue is closed and empty.
    pub async fn next(&mut self, group: &mut Vec<Request<T>>) -> bool {
        match self.receiver.recv().await {
            Some(first) => self.gather(first, group),
            None => false,
        }
    }

    /// As [`Groups::next`], on a thread of its own.
    pub fn blocking_next(&mut self, group: &mut Vec<Request<T>>) -> bool {
        match self.receiver.blocking_recv() {
            Some(first) => self.gather(first, group),
            None => false,
        }
    }

    fn gather(&mut self, first: Request<T>, group: &mut Vec<Request<T>>) -> bool {
        group.push(first);
        while group.len() < MAX_GROUP {
            match self.receiver.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        true
    }
}

/// Answers every request of `group` with its result, in order, and empties it.
pub fn answer<T>(group: &mut Vec<Request<T>>, results: Vec<Result<(), StoreError>>) {
    telemetry::store_group(group.len());
    for (request, result) in group.drain(..).zip(results) {
        // Counted here, once, whichever of the group's runs found the fence.
        if matches!(result, Err(StoreError::Fenced(_))) {
            telemetry::fenced_commit();
        }
        // A caller that stopped waiting (its task was cancelled): what committed stands.
        let answer = Answer {
            result,
            work: request.work,
        };
        if request.reply.send(answer).is_err() {
            tracing::trace!("a committer left before its answer");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};

    use super::*;
    use crate::Expect;

    /// Counts the fenced commits recorded on this thread.
    #[derive(Default)]
    struct FencedCommits(Arc<AtomicU64>);

    impl metrics::Recorder for FencedCommits {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            if key.name() == telemetry::HUB_FENCED_COMMITS {
                Counter::from_arc(self.0.clone())
            } else {
                Counter::noop()
            }
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    fn request() -> (Request<()>, oneshot::Receiver<Answer<()>>) {
        let (reply, answer) = oneshot::channel();
        (Request { work: (), reply }, answer)
    }

    /// A fenced request is checked in the group's pipeline and again when the group
    /// runs request by request; it is one fenced commit, counted with its answer.
    #[test]
    fn a_fenced_request_counts_once_however_often_its_fence_was_checked() {
        let recorder = FencedCommits::default();
        let (fenced, mut fenced_answer) = request();
        let (kept, mut kept_answer) = request();
        let mut group = vec![fenced, kept];
        metrics::with_local_recorder(&recorder, || {
            let first = Expect::Fence.check(0);
            let again = Expect::Fence.check(0);
            assert!(matches!(first, Err(StoreError::Fenced(_))));
            assert_eq!(recorder.0.load(Ordering::Relaxed), 0);
            answer(&mut group, vec![again, Expect::Fence.check(1)]);
        });
        assert_eq!(recorder.0.load(Ordering::Relaxed), 1);
        assert!(matches!(
            fenced_answer.try_recv().unwrap().result,
            Err(StoreError::Fenced(_))
        ));
        assert!(kept_answer.try_recv().unwrap().result.is_ok());
    }
}
