//! The processes of a Hub, as the operator sees them at `GET /v1/hub/nodes`.
//!
//! A Hub is several processes serving one Agent from one PostgreSQL database
//! (`docs/hub.md`). Each process is a *node*: it holds the leases of some Sessions,
//! beats a heartbeat on its own database connection, and drains (takes no more
//! Sessions) while it stops.

use serde::{Deserialize, Serialize};

/// One process of a Hub.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubNode {
    /// Its name in lease rows (a ULID minted when its store opened).
    pub holder: String,
    /// The Agent (tenant) it serves.
    pub agent: String,
    /// When it registered, in Unix milliseconds on the database's clock.
    pub started_at: u64,
    /// Milliseconds since its last heartbeat: a paused or overloaded process shows a
    /// growing age while its connection stays up.
    pub heartbeat_age_ms: u64,
    /// It is leaving: it takes no more Sessions and hands its own over.
    pub draining: bool,
    /// Its database connection is up; a process whose connection went is removed
    /// (and its Sessions freed) at the next heartbeat of any other.
    pub connected: bool,
    /// Sessions whose lease it holds.
    pub sessions: u64,
    /// Runs in progress in those Sessions.
    pub open_runs: u64,
}

/// What `GET /v1/hub/nodes` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubNodeList {
    /// Every process of the Agent, oldest first.
    pub nodes: Vec<HubNode>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_node_list_has_the_documented_shape() {
        let list = HubNodeList {
            nodes: vec![HubNode {
                holder: "01J0000000000000000000000A".to_owned(),
                agent: "acme".to_owned(),
                started_at: 1_700_000_000_000,
                heartbeat_age_ms: 120,
                draining: false,
                connected: true,
                sessions: 3,
                open_runs: 1,
            }],
        };
        let json = serde_json::to_string(&list).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"nodes":[{"holder":"01J0000000000000000000000A","agent":"acme","startedAt":1700000000000,"heartbeatAgeMs":120,"draining":false,"connected":true,"sessions":3,"openRuns":1}]}"#
        );
    }

    proptest! {
        #[test]
        fn a_node_list_reads_back_as_written(
            holder in "[0-9A-Z]{26}",
            agent in "[A-Za-z0-9_.:-]{1,64}",
            started_at in any::<u64>(),
            heartbeat_age_ms in any::<u64>(),
            draining in any::<bool>(),
            connected in any::<bool>(),
            sessions in any::<u64>(),
            open_runs in any::<u64>(),
        ) {
            let list = HubNodeList {
                nodes: vec![HubNode {
                    holder, agent, started_at, heartbeat_age_ms, draining, connected, sessions, open_runs,
                }],
            };
            let json = serde_json::to_string(&list).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let back: HubNodeList = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, list);
        }
    }
}
