//! Commit → SSE delivery latency with 1, 100 and 1,000 subscribers on one Session,
//! and remote vs in-process `read` latency. Run:
//! `cargo run --release -p shiitake-server --example sse_latency`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use shiitake_client::{ClientOptions, RemoteAgent};
use shiitake_core::{Agent, AgentConfig, FixedModel};
use shiitake_model::{Script, ScriptedModel};
use shiitake_protocol::*;
use shiitake_server::{ServerConfig, Token, router};
use shiitake_store_sqlite::{Durability, SqliteStore};

const TOKEN: &str = "bench-token-0123456789abcdef";
const ROUNDS: usize = 30;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bench.db"), Durability::Full)
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(Script::new(vec![])));
    let local = Arc::new(
        Agent::open(
            Arc::new(store),
            Arc::new(shiitake_capabilities::Catalog::new()),
            AgentConfig::new(Arc::new(FixedModel(model))),
        )
        .await
        .unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(local.clone(), ServerConfig::new(Token::new(TOKEN).unwrap()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let remote = RemoteAgent::new(ClientOptions::new(url).with_token(TOKEN)).unwrap();

    println!("| subscribers | p50 | p99 | max |");
    println!("| --- | --- | --- | --- |");
    for subscribers in [1usize, 100, 1000] {
        let id = remote
            .create_session(RequestId::new(format!("bench-{subscribers}")).unwrap())
            .await
            .unwrap();
        let session = remote.session(id.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
        let mut streams = Vec::new();
        for _ in 0..subscribers {
            streams.push(
                session
                    .subscribe(SubscribeOptions::default())
                    .await
                    .unwrap(),
            );
        }
        for mut stream in streams {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut round = 0;
                while let Some(Ok(frame)) = stream.next().await {
                    if let SessionFrame::Update(update) = frame
                        && !update.messages.is_empty()
                    {
                        let _ = tx.send((round, Instant::now()));
                        round += 1;
                    }
                }
            });
        }
        let mut latencies = Vec::new();
        for round in 0..ROUNDS {
            let start = Instant::now();
            session
                .operator(
                    RequestId::new(format!("op-{subscribers}-{round}")).unwrap(),
                    OperatorAuthor::Operator,
                    PromptText::new("tick").unwrap(),
                )
                .await
                .unwrap();
            for _ in 0..subscribers {
                let (seen_round, at) = rx.recv().await.unwrap();
                assert_eq!(seen_round, round);
                latencies.push(at - start);
            }
        }
        latencies.sort();
        println!(
            "| {subscribers} | {:.1} ms | {:.1} ms | {:.1} ms |",
            percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
            percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
            latencies.last().unwrap().as_secs_f64() * 1000.0,
        );
    }

    // read: the Session of the 1-subscriber round has 30 operator lines.
    let page = remote.list_sessions(None).await.unwrap();
    let id = page.sessions.last().unwrap().session_id().clone();
    let (local_session, remote_session) = (local.session(id.clone()), remote.session(id));
    let time = |reads: Vec<Duration>| -> Duration {
        let mut reads = reads;
        reads.sort();
        percentile(&reads, 0.5)
    };
    let mut local_reads = Vec::new();
    let mut remote_reads = Vec::new();
    for _ in 0..300 {
        let start = Instant::now();
        local_session.read(ReadOptions::default()).await.unwrap();
        local_reads.push(start.elapsed());
        let start = Instant::now();
        remote_session.read(ReadOptions::default()).await.unwrap();
        remote_reads.push(start.elapsed());
    }
    let (local_p50, remote_p50) = (time(local_reads), time(remote_reads));
    println!();
    println!(
        "read p50 (30 messages): in-process {:.3} ms, remote {:.3} ms, ratio {:.1}x",
        local_p50.as_secs_f64() * 1000.0,
        remote_p50.as_secs_f64() * 1000.0,
        remote_p50.as_secs_f64() / local_p50.as_secs_f64()
    );
}
