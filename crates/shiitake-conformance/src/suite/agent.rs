//! Agent-level behaviour: create, address, delete, list.

use shiitake_model::{Script, Step, Turn};
use shiitake_protocol::*;

use crate::Fixture;
use crate::support::*;

/// The same request id creates one Session; another creates another.
pub async fn create_is_idempotent<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let agent = fixture.agent();
    let key = unique_request("same");
    let first = agent.create_session(key.clone()).await.unwrap();
    let again = agent.create_session(key).await.unwrap();
    let other = agent.create_session(unique_request("other")).await.unwrap();
    assert_eq!(first, again);
    assert_ne!(first, other);
}

/// Addressing an unknown Session does no I/O; using it is `not_found`.
pub async fn unknown_sessions_are_not_found<F: Fixture>() {
    let fixture = F::start(Script::new(vec![])).await;
    let session = fixture
        .agent()
        .session(SessionId::new("ses_does_not_exist").unwrap());
    let read = session.read(ReadOptions::default()).await.unwrap_err();
    assert_eq!(read.code, ErrorCode::NotFound);
    let sent = session
        .send(text("hello?"), SendOptions::default())
        .await
        .unwrap_err();
    assert_eq!(sent.code, ErrorCode::NotFound);
}

/// Deleting removes the Session and its history; a second delete finds nothing.
pub async fn delete_removes_a_session<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("bye")])).await;
    let agent = fixture.agent();
    let session = new_session(agent).await;
    let command = send(&session, "hello").await;
    terminal_of(&session, &command).await;
    let id = session.session_id().clone();
    assert!(agent.delete_session(&id).await.unwrap());
    assert_eq!(
        session.read(ReadOptions::default()).await.unwrap_err().code,
        ErrorCode::NotFound
    );
    assert!(!agent.delete_session(&id).await.unwrap());
}

fn states(page: &SessionSummaryPage) -> Vec<(SessionId, String)> {
    page.sessions
        .iter()
        .map(|row| match row {
            SessionSummaryRow::Available {
                session_id,
                summary,
            } => (
                session_id.clone(),
                serde_json::to_value(summary.state)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            SessionSummaryRow::Unavailable { session_id } => {
                (session_id.clone(), "unavailable".to_owned())
            }
        })
        .collect()
}

/// Running Sessions come before settled ones; each group newest activity first;
/// reading a Session does not change its place.
pub async fn list_orders_running_before_settled<F: Fixture>() {
    let script = Script::new(vec![
        Turn::text("first"),
        Turn::new(vec![Step::DelayMs(20_000), Step::Text("never".into())]),
    ]);
    let fixture = F::start(script).await;
    let agent = fixture.agent();
    let done = new_session(agent).await;
    let command = send(&done, "finish quickly").await;
    terminal_of(&done, &command).await;
    let running = new_session(agent).await;
    send(&running, "take your time").await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let fresh = new_session(agent).await;

    let page = agent.list_sessions(None).await.unwrap();
    let expected = vec![
        (running.session_id().clone(), "running".to_owned()),
        (fresh.session_id().clone(), "done".to_owned()),
        (done.session_id().clone(), "done".to_owned()),
    ];
    assert_eq!(states(&page), expected);
    assert_eq!(page.next, None);
    let titles: Vec<_> = page
        .sessions
        .iter()
        .map(|row| match row {
            SessionSummaryRow::Available { summary, .. } => summary.title.clone(),
            SessionSummaryRow::Unavailable { .. } => String::new(),
        })
        .collect();
    assert_eq!(titles, vec!["take your time", "", "finish quickly"]);

    done.read(ReadOptions::default()).await.unwrap();
    assert_eq!(states(&agent.list_sessions(None).await.unwrap()), expected);
    running.abort().await.unwrap();
}

/// A Session's address names it and its Agent; read back from text, it is a handle on
/// the same Session of the same Agent, made without I/O (an unknown Session's address
/// gives a handle that fails on first use); an address of another Agent or another
/// origin never reaches this Agent's Session.
pub async fn an_address_leads_back_to_its_session<F: Fixture>() {
    let fixture = F::start(Script::new(vec![Turn::text("addressed")])).await;
    let agent = fixture.agent();
    let session = new_session(agent).await;
    let command = send(&session, "hello").await;
    terminal_of(&session, &command).await;

    let address = session.address();
    assert_eq!(address.session_id(), session.session_id());
    let text = address.to_string();
    let parsed: SessionAddress = text.parse().unwrap();
    assert_eq!(parsed, address, "{text}");
    let again = agent.session_at(&parsed).unwrap();
    assert_eq!(again.session_id(), session.session_id());
    assert_eq!(again.address(), address);
    let first = session.read(ReadOptions::default()).await.unwrap();
    let through_address = again.read(ReadOptions::default()).await.unwrap();
    assert_eq!(through_address.messages, first.messages);
    assert_eq!(through_address.terminals, first.terminals);

    // No I/O: an unknown Session's address is a handle, which fails on first use.
    let unknown = agent
        .session_at(&address.for_session(SessionId::new("ses_never_created").unwrap()))
        .unwrap();
    let error = unknown.read(ReadOptions::default()).await.unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);

    // Another Agent's address is refused, or names that Agent, which does not hold
    // this Session: either way it does not reach it.
    let elsewhere = address.for_agent(Some(AgentName::new("someone-else").unwrap()));
    match agent.session_at(&elsewhere) {
        Err(error) => assert_eq!(error.code, ErrorCode::Invalid, "{error:?}"),
        Ok(handle) => {
            assert_eq!(handle.address(), elsewhere);
            let error = handle.read(ReadOptions::default()).await.unwrap_err();
            assert_eq!(error.code, ErrorCode::NotFound, "{error:?}");
        }
    }
    // An address of another origin (an in-process Agent for a client, a server for an
    // in-process Agent) is refused before anything is sent.
    let other_origin = match address.origin() {
        AddressOrigin::Local => AddressOrigin::http("http://127.0.0.1:9").unwrap(),
        AddressOrigin::Http(_) => AddressOrigin::Local,
    };
    let foreign = SessionAddress::new(
        other_origin,
        address.agent().cloned(),
        address.session_id().clone(),
    );
    let refused = agent.session_at(&foreign).err().unwrap();
    assert_eq!(refused.code, ErrorCode::Invalid, "{refused:?}");
}
