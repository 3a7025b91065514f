//! The places for long responses one process keeps open: the HTTP API's event streams,
//! A2A streams and waits, MCP calls. One bound for all of them, so no protocol can open
//! more than the process allows; a response gives its place back when it ends.

use std::sync::Arc;

use shiitake_protocol::ShiitakeError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `bound` long responses open at once, shared by every route that clones it.
#[derive(Clone, Debug)]
pub struct StreamPlaces {
    places: Arc<Semaphore>,
    bound: usize,
}

impl StreamPlaces {
    /// Room for `bound` open responses.
    pub fn new(bound: usize) -> Self {
        Self {
            places: Arc::new(Semaphore::new(bound)),
            bound,
        }
    }

    /// A place for one more, held until the permit is dropped; `unavailable` when none
    /// is left.
    pub fn enter(&self) -> Result<OwnedSemaphorePermit, ShiitakeError> {
        self.places.clone().try_acquire_owned().map_err(|_| {
            ShiitakeError::unavailable(format!(
                "this server already has {} open event streams, its bound; close one or retry later",
                self.bound
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_admits_that_many_and_a_place_comes_back_when_dropped() {
        let places = StreamPlaces::new(2);
        let first = places.enter().unwrap();
        let _second = places.clone().enter().unwrap();
        let refused = places.enter().unwrap_err();
        assert_eq!(refused.code, shiitake_protocol::ErrorCode::Unavailable);
        drop(first);
        assert!(places.enter().is_ok());
    }
}
