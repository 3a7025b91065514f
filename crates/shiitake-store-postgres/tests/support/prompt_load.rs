//! Load that goes on through a fault: one driver per Session sends a prompt, waits
//! until it settles, and sends the next, as `cluster::drive_until` does, but it
//! records what happened instead of failing inside its task, so a test that meets a
//! stuck command can still report everything else.
//!
//! A prompt is sent under one request id, through one process after another, until a
//! process acknowledges it (the id makes the retries one command); once acknowledged
//! it is waited for until its terminal shows in a read. A driver checks for the stop
//! only between prompts, so no prompt is left half sent: every command the database
//! holds is one a client was told about, or one recorded here as sent and never
//! acknowledged. A prompt that does not settle holds its Session's driver, as it would
//! hold a client, until [`Load::stop`] gives up on it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shiitake_protocol::{
    AgentApi, CommandId, PromptText, ReadOptions, RequestId, SendOptions, SessionApi, SessionId,
};

use super::cluster::Cluster;

/// How long one call to one process may take before the driver tries the next.
const CALL_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a driver tries to have one prompt acknowledged before giving up on it.
const SEND_PATIENCE: Duration = Duration::from_secs(60);
/// How long a driver waits for one acknowledged prompt to settle while the load runs.
const SETTLE_PATIENCE: Duration = Duration::from_secs(90);
/// The pause between two attempts or two reads.
const POLL: Duration = Duration::from_millis(100);

/// One prompt a driver sent.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// The Session's index.
    pub session: usize,
    pub request: String,
    pub sent_at: Instant,
    /// Set once a process acknowledged it.
    pub command: Option<CommandId>,
    pub accepted_at: Option<Instant>,
    /// Set once a read showed its terminal.
    pub settled_at: Option<Instant>,
    /// Why the driver gave up on it.
    pub gave_up: Option<String>,
}

/// The drivers' shared state.
pub struct Load {
    cluster: Arc<Cluster>,
    sessions: Vec<SessionId>,
    stop: AtomicBool,
    /// After a stop: when a driver stops waiting for its prompt to settle.
    give_up_at: Mutex<Option<Instant>>,
    /// Per Session, its prompts in order.
    prompts: Vec<Mutex<Vec<Prompt>>>,
}

impl Load {
    /// Starts one driver per Session.
    pub fn start(
        cluster: Arc<Cluster>,
        sessions: &[SessionId],
    ) -> (Arc<Self>, Vec<tokio::task::JoinHandle<()>>) {
        let load = Arc::new(Self {
            cluster,
            sessions: sessions.to_vec(),
            stop: AtomicBool::new(false),
            give_up_at: Mutex::new(None),
            prompts: sessions.iter().map(|_| Mutex::default()).collect(),
        });
        let drivers = (0..sessions.len())
            .map(|index| tokio::spawn(drive(load.clone(), index)))
            .collect();
        (load, drivers)
    }

    /// Per Session, how many prompts acknowledged at or after `since` have settled.
    pub fn settled_since(&self, since: Instant) -> Vec<usize> {
        self.prompts
            .iter()
            .map(|prompts| {
                prompts
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|p| p.accepted_at.is_some_and(|at| at >= since))
                    .filter(|p| p.settled_at.is_some())
                    .count()
            })
            .collect()
    }

    /// Polls until every Session has at least `each` prompts acknowledged at or after
    /// `since` and settled, or `patience` has passed; the Sessions that have not.
    pub async fn wait_for_each(
        &self,
        since: Instant,
        each: usize,
        patience: Duration,
    ) -> Vec<usize> {
        let deadline = Instant::now() + patience;
        loop {
            let behind: Vec<usize> = self
                .settled_since(since)
                .iter()
                .enumerate()
                .filter(|(_, settled)| **settled < each)
                .map(|(index, _)| index)
                .collect();
            if behind.is_empty() || Instant::now() >= deadline {
                return behind;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops the drivers: each ends after its current prompt settles, or `grace`
    /// from now if it does not. Every prompt sent, in order per Session.
    pub async fn stop(
        &self,
        drivers: Vec<tokio::task::JoinHandle<()>>,
        grace: Duration,
    ) -> Vec<Prompt> {
        *self.give_up_at.lock().unwrap() = Some(Instant::now() + grace);
        self.stop.store(true, Ordering::SeqCst);
        for driver in drivers {
            driver.await.unwrap();
        }
        self.prompts
            .iter()
            .flat_map(|prompts| prompts.lock().unwrap().clone())
            .collect()
    }

    fn stopping_and_past_grace(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            && self
                .give_up_at
                .lock()
                .unwrap()
                .is_some_and(|at| Instant::now() >= at)
    }

    fn update(&self, index: usize, update: impl FnOnce(&mut Prompt)) {
        let mut prompts = self.prompts[index].lock().unwrap();
        update(prompts.last_mut().unwrap());
    }
}

/// One Session's driver: prompt, wait until settled, again, until the stop.
async fn drive(load: Arc<Load>, index: usize) {
    let session = load.sessions[index].clone();
    let mut number = 0;
    while !load.stop.load(Ordering::SeqCst) {
        let request = format!("s{index}-p{number}");
        let text = format!("prompt {number} of session {index}");
        load.prompts[index].lock().unwrap().push(Prompt {
            session: index,
            request: request.clone(),
            sent_at: Instant::now(),
            command: None,
            accepted_at: None,
            settled_at: None,
            gave_up: None,
        });
        let command = match send(&load, index + number, &session, &request, &text).await {
            Ok(command) => command,
            Err(why) => {
                load.update(index, |prompt| prompt.gave_up = Some(why));
                return;
            }
        };
        let accepted_at = Instant::now();
        load.update(index, |prompt| {
            prompt.command = Some(command.clone());
            prompt.accepted_at = Some(accepted_at);
        });
        match settle(&load, index + number + 1, &session, &command, accepted_at).await {
            Ok(()) => load.update(index, |prompt| prompt.settled_at = Some(Instant::now())),
            Err(why) => {
                load.update(index, |prompt| prompt.gave_up = Some(why));
                return;
            }
        }
        number += 1;
    }
}

/// Sends one prompt through the processes from `start` on until one acknowledges it;
/// its command, or why it never was.
async fn send(
    load: &Load,
    start: usize,
    session: &SessionId,
    request: &str,
    text: &str,
) -> Result<CommandId, String> {
    let request = RequestId::new(request).unwrap();
    let text = PromptText::new(text).unwrap();
    let deadline = Instant::now() + SEND_PATIENCE;
    let mut last = String::new();
    for attempt in start.. {
        if Instant::now() >= deadline {
            return Err(format!(
                "not acknowledged within {SEND_PATIENCE:?}; last: {last}"
            ));
        }
        let client = load.cluster.client(attempt % 3);
        let options = SendOptions {
            delivery: None,
            request_id: Some(request.clone()),
        };
        let handle = client.session(session.clone());
        let sent = handle.send(text.clone(), options);
        match tokio::time::timeout(CALL_TIMEOUT, sent).await {
            Ok(Ok(acceptance)) => return Ok(acceptance.command_id),
            Ok(Err(error)) => last = format!("process {}: {error}", attempt % 3),
            Err(_) => last = format!("process {} stalled", attempt % 3),
        }
        tokio::time::sleep(POLL).await;
    }
    unreachable!("the attempts never end")
}

/// Reads the Session through the processes in turn until its terminal for `command`
/// shows; why not, when the driver gave up.
async fn settle(
    load: &Load,
    start: usize,
    session: &SessionId,
    command: &CommandId,
    accepted_at: Instant,
) -> Result<(), String> {
    for attempt in start.. {
        if load.stopping_and_past_grace() {
            return Err("not settled when the load stopped and its grace ran out".to_owned());
        }
        if accepted_at.elapsed() >= SETTLE_PATIENCE {
            return Err(format!("not settled within {SETTLE_PATIENCE:?}"));
        }
        let client = load.cluster.client(attempt % 3);
        let handle = client.session(session.clone());
        let read = handle.read(ReadOptions::default());
        if let Ok(Ok(snapshot)) = tokio::time::timeout(CALL_TIMEOUT, read).await
            && snapshot.terminals.iter().any(|t| t.command_id == *command)
        {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
    unreachable!("the attempts never end")
}
