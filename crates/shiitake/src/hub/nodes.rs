//! `shiitake hub nodes`: the processes of a Hub (`serve --database postgres://…`),
//! as the operator sees them at `GET /v1/hub/nodes`.

use shiitake_protocol::{HubNode, HubNodeList};

use crate::render::style::inert_line;

/// The list as lines: a header, then one line per process.
pub fn table(list: &HubNodeList) -> String {
    if list.nodes.is_empty() {
        return "(no processes)\n".to_owned();
    }
    let rows: Vec<[String; 7]> = list.nodes.iter().map(row).collect();
    let header = [
        "holder",
        "agent",
        "started",
        "heartbeat",
        "state",
        "sessions",
        "runs",
    ]
    .map(str::to_owned);
    super::table::aligned(&header, &rows)
}

fn row(node: &HubNode) -> [String; 7] {
    let started = super::table::utc(node.started_at);
    let state = match (node.connected, node.draining) {
        (false, _) => "gone",
        (true, true) => "draining",
        (true, false) => "serving",
    };
    [
        inert_line(&node.holder),
        inert_line(&node.agent),
        started,
        format!("{} ms ago", node.heartbeat_age_ms),
        state.to_owned(),
        node.sessions.to_string(),
        node.open_runs.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(holder: &str, draining: bool, connected: bool) -> HubNode {
        HubNode {
            holder: holder.to_owned(),
            agent: "acme".to_owned(),
            started_at: 1_796_047_320_000,
            heartbeat_age_ms: 120,
            draining,
            connected,
            sessions: 12,
            open_runs: 3,
        }
    }

    #[test]
    fn each_process_is_one_aligned_line() {
        let list = HubNodeList {
            nodes: vec![
                node("01J0000000000000000000000A", false, true),
                node("01J0000000000000000000000B", true, true),
                node("01J0000000000000000000000C", false, false),
            ],
        };
        assert_eq!(
            table(&list),
            "holder                      agent  started               heartbeat   state     sessions  runs\n\
             01J0000000000000000000000A  acme   2026-11-30T14:02:00Z  120 ms ago  serving   12        3\n\
             01J0000000000000000000000B  acme   2026-11-30T14:02:00Z  120 ms ago  draining  12        3\n\
             01J0000000000000000000000C  acme   2026-11-30T14:02:00Z  120 ms ago  gone      12        3\n"
        );
        assert_eq!(
            table(&HubNodeList { nodes: Vec::new() }),
            "(no processes)\n"
        );
    }

    #[test]
    fn what_the_server_says_is_printed_inert() {
        let list = HubNodeList {
            nodes: vec![node("evil\u{1b}[31m\nholder", false, true)],
        };
        let printed = table(&list);
        assert!(!printed.contains('\u{1b}'), "{printed:?}");
        assert_eq!(printed.lines().count(), 2, "{printed:?}");
    }
}
