//! The rules of one Session's browser host, without I/O: which tabs are connected,
//! which request is outstanding, and which tab claimed it.
//!
//! At most one request is outstanding. A request is delivered to every connected
//! tab; the first claim wins and every other is refused; only the claimer's result
//! for that request settles it. A claimer that disconnects leaves the outcome
//! unknown (`browser_execution_indeterminate`); when the last tab leaves before
//! anyone claimed, the command never ran (`browser_not_connected`). `close` ends it all.

use std::collections::BTreeSet;

use super::error::{Refusal, UiError};
use super::wire::{BrowserRequestId, ConnectionId};

/// The outstanding request and its claimer, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outstanding {
    pub(crate) id: BrowserRequestId,
    pub(crate) claimed_by: Option<ConnectionId>,
}

/// One Session's host state.
#[derive(Debug, Default)]
pub(crate) struct Machine {
    closed: bool,
    connections: BTreeSet<ConnectionId>,
    outstanding: Option<Outstanding>,
}

impl Machine {
    /// Whether `close` ran.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// How many tabs are connected.
    pub(crate) fn connections(&self) -> usize {
        self.connections.len()
    }

    /// The outstanding request, if any.
    #[cfg(test)]
    pub(crate) fn outstanding(&self) -> Option<&Outstanding> {
        self.outstanding.as_ref()
    }

    /// A tab connected. Answers the unclaimed outstanding request, which the new
    /// tab must be sent too (it may be the one that claims it).
    pub(crate) fn connect(
        &mut self,
        connection: ConnectionId,
    ) -> Result<Option<BrowserRequestId>, UiError> {
        if self.closed {
            return Err(UiError::Closed);
        }
        self.connections.insert(connection);
        Ok(self
            .outstanding
            .as_ref()
            .filter(|o| o.claimed_by.is_none())
            .map(|o| o.id.clone()))
    }

    /// A tab's stream ended. Answers the request this settles, with its error.
    pub(crate) fn disconnect(
        &mut self,
        connection: &ConnectionId,
    ) -> Option<(BrowserRequestId, UiError)> {
        if !self.connections.remove(connection) {
            return None;
        }
        let outstanding = self.outstanding.as_ref()?;
        let error = match &outstanding.claimed_by {
            Some(claimer) if claimer == connection => UiError::ExecutionIndeterminate,
            None if self.connections.is_empty() => UiError::NotConnected,
            _ => return None,
        };
        let settled = self.outstanding.take()?;
        Some((settled.id, error))
    }

    /// A run asks for `id`: refused when closed, busy, or with no tab connected.
    pub(crate) fn begin(&mut self, id: BrowserRequestId) -> Result<(), UiError> {
        if self.closed {
            return Err(UiError::Closed);
        }
        if self.outstanding.is_some() {
            return Err(UiError::Busy);
        }
        if self.connections.is_empty() {
            return Err(UiError::NotConnected);
        }
        self.outstanding = Some(Outstanding {
            id,
            claimed_by: None,
        });
        Ok(())
    }

    /// `connection` claims `id`. The first claim wins; the winner repeating its
    /// claim is answered the same; everyone else is refused.
    pub(crate) fn claim(
        &mut self,
        id: &BrowserRequestId,
        connection: &ConnectionId,
    ) -> Result<(), Refusal> {
        if self.closed {
            return Err(Refusal::Closed);
        }
        if !self.connections.contains(connection) {
            return Err(Refusal::UnknownConnection);
        }
        let outstanding = match &mut self.outstanding {
            Some(outstanding) if &outstanding.id == id => outstanding,
            _ => return Err(Refusal::NotOutstanding),
        };
        match &outstanding.claimed_by {
            None => {
                outstanding.claimed_by = Some(connection.clone());
                Ok(())
            }
            Some(claimer) if claimer == connection => Ok(()),
            Some(_) => Err(Refusal::ClaimedByAnother),
        }
    }

    /// `connection` answers `id`: accepted only from its claimer; the request is settled.
    pub(crate) fn finish(
        &mut self,
        id: &BrowserRequestId,
        connection: &ConnectionId,
    ) -> Result<(), Refusal> {
        if self.closed {
            return Err(Refusal::Closed);
        }
        match &self.outstanding {
            Some(outstanding) if &outstanding.id == id => match &outstanding.claimed_by {
                Some(claimer) if claimer == connection => {
                    self.outstanding = None;
                    Ok(())
                }
                Some(_) => Err(Refusal::ClaimedByAnother),
                None => Err(Refusal::NotClaimed),
            },
            _ => Err(Refusal::NotOutstanding),
        }
    }

    /// The run gave up on `id` (cancelled, past its deadline): forget it, claimed or
    /// not. Answers whether it was still outstanding.
    pub(crate) fn abandon(&mut self, id: &BrowserRequestId) -> bool {
        if self.outstanding.as_ref().is_some_and(|o| &o.id == id) {
            self.outstanding = None;
            true
        } else {
            false
        }
    }

    /// No tab claimed `id` in time: forget it if it is still unclaimed.
    pub(crate) fn expire_unclaimed(&mut self, id: &BrowserRequestId) -> bool {
        let unclaimed = self
            .outstanding
            .as_ref()
            .is_some_and(|o| &o.id == id && o.claimed_by.is_none());
        if unclaimed {
            self.outstanding = None;
        }
        unclaimed
    }

    /// Ends everything: every tab is let go, the outstanding request (returned)
    /// fails, and every later call is refused.
    pub(crate) fn close(&mut self) -> Option<BrowserRequestId> {
        self.closed = true;
        self.connections.clear();
        self.outstanding.take().map(|o| o.id)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn tab(n: u8) -> ConnectionId {
        ConnectionId::new(format!("c{n}")).unwrap()
    }

    fn req(n: u8) -> BrowserRequestId {
        BrowserRequestId::new(format!("r{n}")).unwrap()
    }

    #[test]
    fn the_first_claim_wins_and_only_its_result_settles() {
        let mut m = Machine::default();
        m.connect(tab(1)).unwrap();
        m.connect(tab(2)).unwrap();
        m.begin(req(1)).unwrap();
        assert_eq!(m.finish(&req(1), &tab(1)), Err(Refusal::NotClaimed));
        assert_eq!(m.claim(&req(1), &tab(2)), Ok(()));
        assert_eq!(
            m.claim(&req(1), &tab(2)),
            Ok(()),
            "a repeated claim by the winner"
        );
        assert_eq!(m.claim(&req(1), &tab(1)), Err(Refusal::ClaimedByAnother));
        assert_eq!(m.claim(&req(9), &tab(1)), Err(Refusal::NotOutstanding));
        assert_eq!(m.finish(&req(1), &tab(1)), Err(Refusal::ClaimedByAnother));
        assert_eq!(m.finish(&req(9), &tab(2)), Err(Refusal::NotOutstanding));
        assert_eq!(m.finish(&req(1), &tab(2)), Ok(()));
        assert_eq!(m.finish(&req(1), &tab(2)), Err(Refusal::NotOutstanding));
        assert_eq!(m.outstanding(), None);
    }

    #[test]
    fn one_outstanding_request_and_none_without_a_tab() {
        let mut m = Machine::default();
        assert_eq!(m.begin(req(1)), Err(UiError::NotConnected));
        m.connect(tab(1)).unwrap();
        m.begin(req(1)).unwrap();
        assert_eq!(m.begin(req(2)), Err(UiError::Busy));
    }

    #[test]
    fn a_claimer_that_leaves_makes_the_outcome_unknown() {
        let mut m = Machine::default();
        m.connect(tab(1)).unwrap();
        m.connect(tab(2)).unwrap();
        m.begin(req(1)).unwrap();
        m.claim(&req(1), &tab(1)).unwrap();
        assert_eq!(m.disconnect(&tab(2)), None);
        assert_eq!(
            m.disconnect(&tab(1)),
            Some((req(1), UiError::ExecutionIndeterminate))
        );
    }

    #[test]
    fn the_last_tab_leaving_before_a_claim_means_not_connected() {
        let mut m = Machine::default();
        m.connect(tab(1)).unwrap();
        m.connect(tab(2)).unwrap();
        m.begin(req(1)).unwrap();
        assert_eq!(m.disconnect(&tab(1)), None);
        assert_eq!(
            m.connect(tab(3)).unwrap(),
            Some(req(1)),
            "a late tab is sent it"
        );
        assert_eq!(m.disconnect(&tab(2)), None);
        assert_eq!(m.disconnect(&tab(3)), Some((req(1), UiError::NotConnected)));
    }

    #[test]
    fn close_fails_the_outstanding_request_and_everything_after() {
        let mut m = Machine::default();
        m.connect(tab(1)).unwrap();
        m.begin(req(1)).unwrap();
        assert_eq!(m.close(), Some(req(1)));
        assert!(m.is_closed());
        assert_eq!(m.connections(), 0);
        assert_eq!(m.connect(tab(2)), Err(UiError::Closed));
        assert_eq!(m.begin(req(2)), Err(UiError::Closed));
        assert_eq!(m.claim(&req(1), &tab(1)), Err(Refusal::Closed));
        assert_eq!(m.finish(&req(1), &tab(1)), Err(Refusal::Closed));
    }

    #[test]
    fn expiry_forgets_only_an_unclaimed_request() {
        let mut m = Machine::default();
        m.connect(tab(1)).unwrap();
        m.begin(req(1)).unwrap();
        m.claim(&req(1), &tab(1)).unwrap();
        assert!(!m.expire_unclaimed(&req(1)));
        assert!(m.abandon(&req(1)));
        m.begin(req(2)).unwrap();
        assert!(m.expire_unclaimed(&req(2)));
        assert_eq!(m.outstanding(), None);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Connect(u8),
        Disconnect(u8),
        Begin,
        Claim(u8, u8),
        Finish(u8, u8),
        Abandon(u8),
        Expire(u8),
        Close,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u8..4).prop_map(Step::Connect),
            3 => (0u8..4).prop_map(Step::Disconnect),
            4 => Just(Step::Begin),
            5 => (0u8..3, 0u8..4).prop_map(|(r, c)| Step::Claim(r, c)),
            4 => (0u8..3, 0u8..4).prop_map(|(r, c)| Step::Finish(r, c)),
            1 => (0u8..3).prop_map(Step::Abandon),
            1 => (0u8..3).prop_map(Step::Expire),
            1 => Just(Step::Close),
        ]
    }

    proptest! {
        /// Every begun request settles exactly once; at most one claim per request
        /// is accepted (repeats by the winner aside); a result is accepted only from
        /// the claimer; and a settlement by disconnect says the right thing.
        #[test]
        fn requests_settle_once_and_only_the_claimer_answers(steps in prop::collection::vec(step(), 1..80)) {
            let mut m = Machine::default();
            let mut next = 0u8;
            let mut begun: Vec<BrowserRequestId> = Vec::new();
            let mut settled: Vec<BrowserRequestId> = Vec::new();
            let mut winners: std::collections::BTreeMap<BrowserRequestId, ConnectionId> = Default::default();
            for step in steps {
                let before = m.outstanding().cloned();
                // Request 0 stands for the outstanding one, so most steps aim at it.
                let pick = |r: u8| match (r, &before) {
                    (0, Some(o)) => o.id.clone(),
                    _ => req(r),
                };
                match step {
                    Step::Connect(c) => {
                        let delivered = m.connect(tab(c));
                        if m.is_closed() {
                            prop_assert_eq!(delivered, Err(UiError::Closed));
                        } else {
                            let expected = before.filter(|o| o.claimed_by.is_none()).map(|o| o.id);
                            prop_assert_eq!(delivered, Ok(expected));
                        }
                    }
                    Step::Disconnect(c) => {
                        if let Some((id, error)) = m.disconnect(&tab(c)) {
                            let was = before.unwrap();
                            prop_assert_eq!(&id, &was.id);
                            match was.claimed_by {
                                Some(claimer) => {
                                    prop_assert_eq!(claimer, tab(c));
                                    prop_assert_eq!(error, UiError::ExecutionIndeterminate);
                                }
                                None => {
                                    prop_assert_eq!(m.connections(), 0);
                                    prop_assert_eq!(error, UiError::NotConnected);
                                }
                            }
                            settled.push(id);
                        }
                    }
                    Step::Begin => {
                        next += 1;
                        let id = req(next);
                        match m.begin(id.clone()) {
                            Ok(()) => {
                                prop_assert!(before.is_none());
                                prop_assert!(m.connections() > 0);
                                begun.push(id);
                            }
                            Err(UiError::Busy) => prop_assert!(before.is_some()),
                            Err(UiError::NotConnected) => prop_assert_eq!(m.connections(), 0),
                            Err(UiError::Closed) => prop_assert!(m.is_closed()),
                            Err(other) => prop_assert!(false, "unexpected {other:?}"),
                        }
                    }
                    Step::Claim(r, c) => {
                        let id = pick(r);
                        if m.claim(&id, &tab(c)).is_ok() {
                            let winner = winners.entry(id).or_insert_with(|| tab(c));
                            prop_assert_eq!(winner, &tab(c), "two tabs won one request");
                        }
                    }
                    Step::Finish(r, c) => {
                        let id = pick(r);
                        if m.finish(&id, &tab(c)).is_ok() {
                            prop_assert_eq!(winners.get(&id), Some(&tab(c)));
                            settled.push(id);
                        }
                    }
                    Step::Abandon(r) => {
                        let id = pick(r);
                        if m.abandon(&id) {
                            settled.push(id);
                        }
                    }
                    Step::Expire(r) => {
                        let id = pick(r);
                        if m.expire_unclaimed(&id) {
                            prop_assert!(!winners.contains_key(&id));
                            settled.push(id);
                        }
                    }
                    Step::Close => {
                        if let Some(id) = m.close() {
                            settled.push(id);
                        }
                    }
                }
                // At most one outstanding, and it is the last begun and not yet settled.
                if let Some(o) = m.outstanding() {
                    prop_assert_eq!(begun.last(), Some(&o.id));
                    prop_assert!(!settled.contains(&o.id));
                }
            }
            if let Some(id) = m.close() {
                settled.push(id);
            }
            let mut sorted = settled.clone();
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), settled.len(), "a request settled twice");
            let mut all = begun.clone();
            all.sort();
            prop_assert_eq!(sorted, all, "every begun request settles");
        }
    }
}
