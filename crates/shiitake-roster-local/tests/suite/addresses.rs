//! A Session address names its Agent: read back, it reaches the same Session on the
//! right Agent of the directory, in-process (`LocalDirectory::session_at`) and over
//! HTTP (`RemoteAgent::session_at` on a client of the default routes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use shiitake_conformance::support::*;
use shiitake_core::clock::SystemClock;
use shiitake_model::Turn;
use shiitake_protocol::*;
use std::sync::Arc;

#[tokio::test]
async fn an_address_reaches_its_session_on_the_agent_it_names() {
    let a = Gated::new(vec![Turn::text("from A")], 10);
    let b = Gated::new(vec![Turn::text("from B")], 10);
    let served = Served::start(vec![("A", a), ("B", b)], Arc::new(SystemClock)).await;

    // In-process: the Agents of the directory name their Sessions' addresses.
    let b_agent = served.directory.agent(&name("B")).unwrap();
    let local = new_session(&b_agent).await;
    let command = send(&local, "hello B").await;
    terminal_of(&local, &command).await;
    let address = local.address();
    assert_eq!(
        address.to_string(),
        format!("local:/v1/agents/B/sessions/{}", local.session_id())
    );
    let parsed: SessionAddress = address.to_string().parse().unwrap();
    let again = served.directory.session_at(&parsed).unwrap();
    let read = again.read(ReadOptions::default()).await.unwrap();
    assert_eq!(read.session_id, *local.session_id());
    assert_eq!(read.terminals.len(), 1);
    // The default Agent does not hold B's Session, and says so without I/O.
    let refused = served
        .directory
        .default_agent()
        .session_at(&parsed)
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused:?}");
    let unknown = parsed.for_agent(Some(name("nobody")));
    assert_eq!(
        served.directory.session_at(&unknown).unwrap_err().code,
        ErrorCode::Invalid
    );

    // Over HTTP: B's Session through B's routes has B's segment; a client of the
    // default routes turns that address into a handle on B.
    let remote_b = served.remote("B").session(local.session_id().clone());
    let remote_address = remote_b.address();
    assert_eq!(
        remote_address.to_string(),
        format!("{}/v1/agents/B/sessions/{}", served.url, local.session_id())
    );
    let default_client = served.client();
    let via_default = default_client
        .session_at(&remote_address.to_string().parse().unwrap())
        .unwrap();
    assert_eq!(via_default.address(), remote_address);
    let read = via_default.read(ReadOptions::default()).await.unwrap();
    assert_eq!(
        read.terminals,
        again.read(ReadOptions::default()).await.unwrap().terminals
    );
    // The address is the Session's URL: its snapshot route answers under it.
    let snapshot = reqwest::Client::new()
        .get(format!("{remote_address}/snapshot"))
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    assert!(snapshot.status().is_success(), "{}", snapshot.status());
    // A local address means nothing to a client of a server.
    assert_eq!(
        default_client.session_at(&parsed).unwrap_err().code,
        ErrorCode::Invalid
    );
    served.stop().await;
}
