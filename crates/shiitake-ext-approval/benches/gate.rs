//! What the approval gate costs a run, measured as ratios within one run of this bench.
//!
//! `cargo bench -p shiitake-ext-approval --bench gate` prints, for runs of one Session
//! that each make nine `notes__write` calls and then answer (an instant scripted model,
//! `Durability::Normal` so the disk does not hide the gate):
//!
//! - gated and allowed vs ungated: the gate's transaction per call when the policy
//!   allows the tool (it asks the rule, writes nothing, commits nothing);
//! - gated and allowed for the Session vs ungated: the same after a person allowed the
//!   tool for the Session;
//! - asked and answered vs ungated: every call held, a person (a task watching the
//!   Session) allowing it once, the record of the held call and its start committed.
//!
//! Phases are interleaved in rounds, so each ratio compares phases that saw the same
//! machine; the median round is printed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use shiitake_ext_approval::contract::{AnswerApproval, ApprovalContract, Decision};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_ext_testkit::{TestAgent, projection, side_effect};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::*;

/// Tool calls per run, then one answer.
const CALLS: usize = 9;
/// Runs per phase and round.
const RUNS: usize = 20;
/// Rounds; the median is printed.
const ROUNDS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Ungated,
    Allowed,
    SessionAllowed,
    Answered,
}

fn turns() -> Vec<Turn> {
    (0..RUNS)
        .flat_map(|run| {
            (0..CALLS)
                .map(move |call| Turn::tool_call("notes__write", json!({"n": run * 100 + call})))
                .chain(std::iter::once(Turn::text("done")))
        })
        .collect()
}

async fn phase(phase: Phase) -> Duration {
    let (tools, runs) = side_effect::counted("notes", "write").await.unwrap();
    let builder = TestAgent::builder().turns(turns()).tools(tools);
    let builder = match phase {
        Phase::Ungated => builder,
        Phase::Allowed => builder
            .kit_extension(shiitake_ext_approval::extension(Policy::new(Ruling::Allow)).unwrap()),
        Phase::SessionAllowed | Phase::Answered => builder
            .kit_extension(shiitake_ext_approval::extension(Policy::new(Ruling::Ask)).unwrap()),
    };
    let kit = builder.open().await;
    let session = kit.session().await;
    if phase == Phase::SessionAllowed {
        // One call asked and allowed for the Session before the clock starts.
        let accepted = session
            .send(PromptText::new("warm").unwrap(), SendOptions::default())
            .await
            .unwrap();
        answer_all(&session, Decision::AllowSession, 1).await;
        wait_settled(&session, &accepted.command_id).await;
    }
    let person = (phase == Phase::Answered).then(|| {
        let session = session.clone();
        tokio::spawn(async move { answer_all(&session, Decision::AllowOnce, usize::MAX).await })
    });
    let started = Instant::now();
    let first = usize::from(phase == Phase::SessionAllowed);
    for _ in first..RUNS {
        let accepted = session
            .send(PromptText::new("write").unwrap(), SendOptions::default())
            .await
            .unwrap();
        wait_settled(&session, &accepted.command_id).await;
    }
    let took = started.elapsed();
    if let Some(person) = person {
        person.abort();
    }
    assert_eq!(runs.count(), RUNS * CALLS, "{phase:?}: every call ran once");
    // Per run, so a phase that warmed one run up compares alike.
    took / u32::try_from(RUNS - first).unwrap()
}

/// A person answering each waiting call as it shows, `limit` of them.
async fn answer_all(session: &impl SessionApi, decision: Decision, limit: usize) {
    let approvals = bind_session_extension::<_, ApprovalContract>(session);
    for n in 0..limit {
        let waiting = projection::until::<ApprovalContract>(session, |p| !p.approvals.is_empty())
            .await
            .approvals;
        approvals
            .call(&AnswerApproval {
                approval_id: waiting[0].approval_id.clone(),
                request_id: format!("bench-{n}"),
                decision,
                reason: None,
            })
            .await
            .unwrap();
    }
}

async fn wait_settled(session: &impl SessionApi, command: &CommandId) {
    loop {
        let snapshot = session.read(ReadOptions::default()).await.unwrap();
        if snapshot.terminals.iter().any(|t| &t.command_id == command) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let phases = [
        Phase::Ungated,
        Phase::Allowed,
        Phase::SessionAllowed,
        Phase::Answered,
    ];
    let mut took: Vec<Vec<Duration>> = vec![Vec::new(); phases.len()];
    for _ in 0..ROUNDS {
        for (at, phase) in phases.iter().enumerate() {
            took[at].push(self::phase(*phase).await);
        }
    }
    let medians: Vec<Duration> = took.into_iter().map(median).collect();
    let base = medians[0].as_secs_f64();
    println!(
        "a run of {CALLS} tool calls, median of {ROUNDS} rounds of {RUNS} runs: ungated {:.2} ms",
        base * 1e3
    );
    for (phase, median) in phases.iter().zip(&medians).skip(1) {
        println!(
            "{phase:?} vs ungated: {:.2}x ({:.2} ms a run)",
            median.as_secs_f64() / base,
            median.as_secs_f64() * 1e3
        );
    }
}
