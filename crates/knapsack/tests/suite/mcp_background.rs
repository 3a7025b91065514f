//! MCP servers connected in the background (`connect_in_background`): the catalog does
//! not wait for a server that hangs, a server's module appears once it has connected
//! (and is callable), the hanging one is still reported when its timeout passes, and
//! closing the source gives up on what has not connected.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::mcp_servers::{SECRET, ctx, good_tools, options, path, server, wait_until};
use crate::support::mcp::*;
use knapsack::Knapsack;
use knapsack::mcp::{McpConnected, McpError, McpUnavailable};
use serde_json::json;
use shiitake_capabilities::{CapabilitySource, Catalog, SourceId};

fn module_paths(catalog: &Catalog) -> Vec<String> {
    catalog.list().iter().map(|m| m.path.to_string()).collect()
}

#[tokio::test]
async fn a_hanging_server_does_not_hold_back_the_catalog_or_the_others() {
    let good = serve(Notes::new(good_tools()), Some(SECRET)).await;
    let hanging = serve(Notes::hanging(), None).await;
    let timeout = Duration::from_secs(2);
    let (mut options, reports) = options(timeout);
    let connected: Arc<Mutex<Vec<McpConnected>>> = Arc::default();
    let sink = connected.clone();
    options.on_connected = Arc::new(move |report| sink.lock().unwrap().push(report));
    let source = Arc::new(Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![server("hanging", &hanging.url), server("good", &good.url)],
        options,
    ));
    source.connect_in_background().await;
    let catalog = Catalog::new();
    catalog.add_source(source.clone()).await.unwrap();
    // Added without waiting: nothing has timed out yet.
    assert_eq!(*reports.lock().unwrap(), vec![]);

    // The good server appears once it has connected, while the other still hangs.
    tokio::time::timeout(Duration::from_secs(10), async {
        while !module_paths(&catalog).contains(&"env.mcp.good".to_owned()) {
            catalog.changed().await;
            catalog.refresh().await;
        }
    })
    .await
    .expect("the good server never appeared");
    assert_eq!(module_paths(&catalog), ["env.mcp.good"]);
    assert_eq!(*reports.lock().unwrap(), vec![]);
    assert_eq!(
        *connected.lock().unwrap(),
        vec![McpConnected {
            name: "good".to_owned(),
            tools: 4
        }]
    );
    let created = catalog
        .execute(
            &path("env.mcp.good.create_note"),
            json!({ "title": "groceries" }),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(created, json!({ "id": 1, "title": "groceries" }));

    // The hanging one is reported at its timeout, and the rest stays.
    wait_until(|| !reports.lock().unwrap().is_empty()).await;
    assert_eq!(
        *reports.lock().unwrap(),
        vec![McpUnavailable {
            name: "hanging".to_owned(),
            error: McpError::TimedOut {
                name: "hanging".to_owned(),
                after: timeout
            },
        }]
    );
    catalog.refresh().await;
    assert_eq!(module_paths(&catalog), ["env.mcp.good"]);
    assert_eq!(source.connected().await, ["good"]);
}

#[tokio::test]
async fn servers_keep_list_order_and_a_repeated_name_is_reported_at_once() {
    let first = serve(Notes::new(good_tools()), Some(SECRET)).await;
    let second = serve(Notes::new(vec![create_note()]), Some(SECRET)).await;
    let (options, reports) = options(Duration::from_secs(10));
    let source = Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![
            server("b", &first.url),
            server("a", &second.url),
            server("b", &second.url),
        ],
        options,
    );
    source.connect_in_background().await;
    assert_eq!(
        *reports.lock().unwrap(),
        vec![McpUnavailable {
            name: "b".to_owned(),
            error: McpError::DuplicateName {
                name: "b".to_owned()
            },
        }]
    );
    let mut connected = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while connected.len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            connected = source.connected().await;
        }
    })
    .await
    .unwrap();
    assert_eq!(connected, ["b", "a"]);
    // Starting again does nothing.
    source.connect_in_background().await;
    assert_eq!(reports.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn closing_the_source_gives_up_on_servers_still_connecting() {
    let notes = Notes::hanging();
    let hanging = serve(notes.clone(), None).await;
    let timeout = Duration::from_millis(500);
    let (options, reports) = options(timeout);
    let source = Knapsack::mcp_servers(
        SourceId::new("mcp"),
        vec![server("hanging", &hanging.url)],
        options,
    );
    source.connect_in_background().await;
    wait_until(|| !notes.initialize_started().is_empty()).await;
    source.close().await;
    // Past the timeout, nothing is reported: the attempt was cancelled, not timed out.
    tokio::time::sleep(timeout * 2).await;
    assert_eq!(*reports.lock().unwrap(), vec![]);
    assert_eq!(source.connected().await, Vec::<String>::new());
}
