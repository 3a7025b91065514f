//! The prompts waiting to enter the conversation, in acceptance order, and the
//! signal a run reads to know that a steer waits for its next boundary.

use std::collections::VecDeque;

use shiitake_protocol::{
    CommandId, PromptDelivery, PromptText, SessionPendingPrompt, SessionPendingPrompts,
};
use tokio::sync::watch;

use crate::extension::Provenance;

/// A prompt waiting to enter the conversation.
#[derive(Clone, Debug)]
pub(super) struct QueuedPrompt {
    pub(super) command_id: CommandId,
    pub(super) text: PromptText,
    pub(super) delivery: PromptDelivery,
    /// The extension that admitted it and the Agent that sent it, if any.
    pub(super) provenance: Provenance,
}

impl QueuedPrompt {
    fn steers(&self) -> bool {
        self.delivery == PromptDelivery::Steer
    }
}

/// Queued prompts, and the steer signal: raised while a run is active and a steer
/// waits for its next model-call boundary.
pub(super) struct PromptQueue {
    prompts: VecDeque<QueuedPrompt>,
    steer_waiting: watch::Sender<bool>,
    /// This queue's part of the process's queued-prompts gauge.
    depth: crate::telemetry::GaugeShare,
}

impl PromptQueue {
    pub(super) fn new() -> Self {
        Self {
            prompts: VecDeque::new(),
            steer_waiting: watch::Sender::new(false),
            depth: crate::telemetry::GaugeShare::new(crate::telemetry::QUEUED_PROMPTS),
        }
    }

    /// Queues prompts behind the others; a steer raises the signal when a run is
    /// active to take it.
    pub(super) fn extend(
        &mut self,
        prompts: impl IntoIterator<Item = QueuedPrompt>,
        run_active: bool,
    ) {
        for prompt in prompts {
            if run_active && prompt.steers() {
                self.steer_waiting.send_replace(true);
            }
            self.prompts.push_back(prompt);
        }
        self.depth.set(self.prompts.len());
    }

    /// Queues one prompt behind the others (see [`extend`](Self::extend)).
    pub(super) fn push(&mut self, prompt: QueuedPrompt, run_active: bool) {
        self.extend(std::iter::once(prompt), run_active);
    }

    /// The prompt that runs next.
    pub(super) fn front(&self) -> Option<&QueuedPrompt> {
        self.prompts.front()
    }

    /// Takes out a waiting prompt, with its place so it can be put back.
    pub(super) fn remove(&mut self, command_id: &CommandId) -> Option<(usize, QueuedPrompt)> {
        let index = self
            .prompts
            .iter()
            .position(|queued| &queued.command_id == command_id)?;
        let removed = self.prompts.remove(index).map(|prompt| (index, prompt));
        self.depth.set(self.prompts.len());
        removed
    }

    /// Puts a removed prompt back where it was (its removal was not committed).
    pub(super) fn restore(&mut self, index: usize, prompt: QueuedPrompt) {
        self.prompts.insert(index, prompt);
        self.depth.set(self.prompts.len());
    }

    /// Takes the prompt that starts the next run off the front.
    pub(super) fn pop_front(&mut self) -> Option<QueuedPrompt> {
        let front = self.prompts.pop_front();
        self.depth.set(self.prompts.len());
        front
    }

    /// The waiting steers, in order, for the running work's boundary.
    pub(super) fn steers(&self) -> Vec<QueuedPrompt> {
        self.prompts
            .iter()
            .filter(|queued| queued.steers())
            .cloned()
            .collect()
    }

    /// Forgets the steers: they entered the running work. The signal goes down.
    pub(super) fn drop_steers(&mut self) {
        self.prompts.retain(|queued| !queued.steers());
        self.depth.set(self.prompts.len());
        self.steer_waiting.send_replace(false);
    }

    /// For a run about to start: the signal, raised when a steer already waits.
    pub(super) fn steer_signal(&self) -> watch::Receiver<bool> {
        let waiting = self.prompts.iter().any(QueuedPrompt::steers);
        self.steer_waiting.send_replace(waiting);
        self.steer_waiting.subscribe()
    }

    pub(super) fn len(&self) -> usize {
        self.prompts.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }

    /// The first `limit` waiting prompts, as snapshots and frames show them.
    pub(super) fn view(&self, limit: usize) -> SessionPendingPrompts {
        SessionPendingPrompts {
            prompts: self
                .prompts
                .iter()
                .take(limit)
                .map(|queued| SessionPendingPrompt {
                    command_id: queued.command_id.clone(),
                    text: queued.text.clone(),
                    delivery: queued.delivery,
                })
                .collect(),
            has_more: self.prompts.len() > limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(n: usize, delivery: PromptDelivery) -> QueuedPrompt {
        QueuedPrompt {
            command_id: CommandId::new(format!("cmd_{n:03}")).unwrap(),
            text: PromptText::new(format!("prompt {n}")).unwrap(),
            delivery,
            provenance: Provenance::default(),
        }
    }

    #[test]
    fn a_steer_raises_the_signal_only_while_a_run_can_take_it() {
        let mut queue = PromptQueue::new();
        let signal = queue.steer_signal();
        queue.push(prompt(1, PromptDelivery::Steer), false);
        assert!(!*signal.borrow(), "no run: nothing to signal");
        let signal = queue.steer_signal();
        assert!(*signal.borrow(), "a run starting sees the steer waiting");
        queue.push(prompt(2, PromptDelivery::FollowUp), true);
        queue.push(prompt(3, PromptDelivery::Steer), true);
        assert_eq!(queue.steers().len(), 2);
        queue.drop_steers();
        assert!(!*signal.borrow());
        assert_eq!(queue.len(), 1);
        assert_eq!(
            queue.front().map(|q| q.delivery),
            Some(PromptDelivery::FollowUp)
        );
    }

    #[test]
    fn a_removed_prompt_goes_back_to_its_place() {
        let mut queue = PromptQueue::new();
        for n in 0..3 {
            queue.push(prompt(n, PromptDelivery::FollowUp), false);
        }
        let (index, removed) = queue
            .remove(&prompt(1, PromptDelivery::FollowUp).command_id)
            .unwrap();
        assert_eq!(index, 1);
        assert!(queue.remove(&removed.command_id).is_none());
        queue.restore(index, removed);
        let order: Vec<_> = queue
            .view(10)
            .prompts
            .into_iter()
            .map(|p| p.command_id)
            .collect();
        let expected: Vec<_> = (0..3)
            .map(|n| prompt(n, PromptDelivery::FollowUp).command_id)
            .collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn the_view_is_bounded_and_says_when_more_wait() {
        let mut queue = PromptQueue::new();
        for n in 0..3 {
            queue.push(prompt(n, PromptDelivery::FollowUp), false);
        }
        let view = queue.view(2);
        assert_eq!(view.prompts.len(), 2);
        assert!(view.has_more);
        assert!(!queue.view(3).has_more);
    }
}
