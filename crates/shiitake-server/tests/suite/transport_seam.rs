//! A host adds headers through the transport seam, or brings its own transport.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::{Server, TOKEN};
use async_trait::async_trait;
use axum::extract::Request;
use axum::middleware::Next;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use shiitake_client::{
    ClientOptions, RemoteAgent, ReqwestTransport, Transport, TransportError, WithHeaders,
};
use shiitake_conformance::TestTools;
use shiitake_model::{Script, ScriptedModel, Turn};
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, router};

/// Counts requests, then sends them the default way: a stand-in for a host's own HTTP stack.
struct Counting {
    sent: AtomicUsize,
    next: ReqwestTransport,
}

#[async_trait]
impl Transport for Counting {
    async fn send(&self, request: reqwest::Request) -> Result<reqwest::Response, TransportError> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        self.next.send(request).await
    }
}

/// A request path and the trace header it carried.
type Seen = (String, Option<String>);

#[tokio::test]
async fn headers_added_by_the_transport_reach_the_server_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![Turn::text("hi")])));
    let local = support::local_agent(&dir, Arc::new(TestTools::default()), model).await;
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let app = router(
        Arc::new(local),
        ServerConfig::new(Token::new(TOKEN).unwrap()),
    )
    .layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let record = record.clone();
            async move {
                let trace = request
                    .headers()
                    .get("x-host-trace")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                record
                    .lock()
                    .unwrap()
                    .push((request.uri().path().to_owned(), trace));
                next.run(request).await
            }
        },
    ));
    let server = Server::start(app, "127.0.0.1:0".parse().unwrap()).await;

    let counting = Arc::new(Counting {
        sent: AtomicUsize::new(0),
        next: ReqwestTransport::default(),
    });
    let mut headers = HeaderMap::new();
    headers.insert("x-host-trace", HeaderValue::from_static("trace-42"));
    let transport = Arc::new(WithHeaders::new(headers, counting.clone()));
    let agent = RemoteAgent::new(
        ClientOptions::new(server.url())
            .with_token(TOKEN)
            .with_transport(transport),
    )
    .unwrap();

    let id = agent
        .create_session(RequestId::new("r-seam").unwrap())
        .await
        .unwrap();
    let session = agent.session(id.clone());
    let watch = session.watch(ReadOptions::default()).await.unwrap();
    let accepted = session
        .send(PromptText::new("hello").unwrap(), SendOptions::default())
        .await
        .unwrap();
    let mut changes = watch.changes;
    while let Some(frame) = changes.next().await {
        if let SessionFrame::Update(update) = frame.unwrap()
            && update
                .terminals
                .iter()
                .any(|t| t.command_id == accepted.command_id)
        {
            break;
        }
    }

    let seen = seen.lock().unwrap().clone();
    let expected = vec![
        ("/v1/sessions".to_owned(), Some("trace-42".to_owned())),
        (
            format!("/v1/sessions/{id}/watch"),
            Some("trace-42".to_owned()),
        ),
        (
            format!("/v1/sessions/{id}/commands"),
            Some("trace-42".to_owned()),
        ),
    ];
    assert_eq!(seen, expected);
    assert_eq!(counting.sent.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn extension_binding_works_over_the_client() {
    use serde::Serialize;
    use shiitake_protocol::extension::{
        AgentScope, ContractCommand, ExtensionContract, SessionScope,
    };

    struct Counter;
    impl ExtensionContract for Counter {
        const EXTENSION_ID: &'static str = "example-counter";
        type Projection = u32;
    }
    #[derive(Serialize)]
    struct Increment {
        by: u32,
    }
    impl ContractCommand for Increment {
        type Contract = Counter;
        type Scope = SessionScope;
        type Output = u32;
        const NAME: &'static str = "increment";
    }
    #[derive(Serialize)]
    struct ResetAll;
    impl ContractCommand for ResetAll {
        type Contract = Counter;
        type Scope = AgentScope;
        type Output = ();
        const NAME: &'static str = "reset_all";
    }

    let fixture =
        <support::Remote as shiitake_conformance::Fixture>::start(Script::new(vec![])).await;
    let agent = &fixture.agent;
    let id = agent
        .create_session(RequestId::new("r-ext").unwrap())
        .await
        .unwrap();
    let session = agent.session(id);
    // The core Agent has no extensions yet: both scopes answer not_found through the binding.
    let error = shiitake_client::bind_session_extension::<_, Counter>(&session)
        .call(&Increment { by: 1 })
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    let error = shiitake_client::bind_agent_extension::<_, Counter>(agent)
        .call(&ResetAll)
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
}
