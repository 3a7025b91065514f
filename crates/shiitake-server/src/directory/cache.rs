//! The routers of the Agents a directory served, one per Agent as the directory
//! handed it out: a host that closes an idle Agent and opens it again hands out
//! another `Arc`, and the cache builds a router over that one rather than keep
//! serving the closed Agent. Bounded: past [`MAX_CACHED_ROUTERS`] Agents, the one
//! used longest ago is dropped (and rebuilt if it is asked for again).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use shiitake_protocol::AgentName;

/// Most Agents whose routers a directory keeps.
pub(crate) const MAX_CACHED_ROUTERS: usize = 1024;

/// One router, the Agent it serves and when it was last used.
struct Cached<A> {
    agent: Arc<A>,
    router: Router,
    used: u64,
}

/// Routers by Agent name, each valid for one `Arc` of its Agent.
pub(crate) struct RouterCache<A> {
    max: usize,
    clock: u64,
    entries: HashMap<AgentName, Cached<A>>,
}

impl<A> RouterCache<A> {
    /// A cache of at most `max` routers (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            clock: 0,
            entries: HashMap::new(),
        }
    }

    /// The router of `agent` under `name`: the cached one when it serves this very
    /// `Arc`, else `build`'s, which replaces it.
    pub(crate) fn get_or_build(
        &mut self,
        name: &AgentName,
        agent: Arc<A>,
        build: impl FnOnce(Arc<A>) -> Router,
    ) -> Router {
        self.clock += 1;
        let now = self.clock;
        if let Some(cached) = self.entries.get_mut(name)
            && Arc::ptr_eq(&cached.agent, &agent)
        {
            cached.used = now;
            return cached.router.clone();
        }
        if !self.entries.contains_key(name) && self.entries.len() >= self.max {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, cached)| cached.used)
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        let router = build(agent.clone());
        self.entries.insert(
            name.clone(),
            Cached {
                agent,
                router: router.clone(),
                used: now,
            },
        );
        router
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn name(value: &str) -> AgentName {
        AgentName::new(value).unwrap()
    }

    /// Looks `name` up with `agent`; whether a router was built.
    fn built(cache: &mut RouterCache<u32>, name: &AgentName, agent: &Arc<u32>) -> bool {
        let mut built = false;
        let _router = cache.get_or_build(name, agent.clone(), |_| {
            built = true;
            Router::new()
        });
        built
    }

    #[test]
    fn one_router_per_arc_and_another_arc_rebuilds() {
        let mut cache = RouterCache::new(4);
        let first = Arc::new(1);
        assert!(built(&mut cache, &name("a"), &first));
        assert!(!built(&mut cache, &name("a"), &first));
        let reopened = Arc::new(1);
        assert!(
            built(&mut cache, &name("a"), &reopened),
            "a re-opened Agent"
        );
        assert!(!built(&mut cache, &name("a"), &reopened));
        assert!(built(&mut cache, &name("a"), &first), "the old one again");
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn past_the_bound_the_router_used_longest_ago_goes() {
        let mut cache = RouterCache::new(2);
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        assert!(built(&mut cache, &name("a"), &a));
        assert!(built(&mut cache, &name("b"), &b));
        assert!(!built(&mut cache, &name("a"), &a), "a used after b");
        assert_eq!(cache.len(), 2, "at the bound both are kept");
        assert!(built(&mut cache, &name("c"), &c));
        assert_eq!(cache.len(), 2, "one past it, one goes");
        assert!(!built(&mut cache, &name("a"), &a), "a was used last");
        assert!(built(&mut cache, &name("b"), &b), "b was dropped");
    }
}
