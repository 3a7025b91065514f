//! Home's command tools, in a real Agent over attachments that run commands (plain, not
//! sandboxed: the sandbox is knapsack's and `shiitake serve`'s tests): `commands__exec`
//! routes by its `cwd` address, a Computer that runs none refuses, a background job is
//! listed and read through `jobs__*`, and an abort of the run ends a running command and
//! everything it started.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::support::*;
use knapsack::exec::{CommandLimits, LocalCommands};
use serde_json::json;
use shiitake_ext_home::contract::{HomeContract, KillJob};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, SessionApi, TerminalOutcome};

/// `world`'s `work` running commands in its directory; `notes` runs none.
fn with_commands(world: &World) -> shiitake_ext_home::Attachment {
    let commands = LocalCommands::new(&world.path("work"), CommandLimits::default()).unwrap();
    world.work.clone().with_commands(commands)
}

#[tokio::test]
async fn exec_routes_by_address_and_background_jobs_are_the_sessions_own() {
    let world = World::new();
    let work = with_commands(&world);
    world.attach(&[&work, &world.notes]);
    let turns = vec![
        calls(&[
            ("commands__exec", json!({"command": "cat src/lib.rs"})),
            (
                "commands__exec",
                json!({"argv": ["ls"], "cwd": "computer://work/src"}),
            ),
            (
                "commands__exec",
                json!({"command": "ls", "cwd": "computer://notes/"}),
            ),
            ("commands__exec", json!({"command": "ls", "argv": ["ls"]})),
            (
                "commands__exec",
                json!({"command": "echo up; sleep 30", "background": true}),
            ),
            ("jobs__list", json!({})),
            ("jobs__output", json!({"job": "job-000000-1"})),
        ]),
        Turn::text("done"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let outcomes = run(&session, "commands").await;
    assert_eq!(outcomes[0].ok()["stdout"]["head"], "fn work() {}\n");
    assert_eq!(outcomes[0].ok()["computer"], "work");
    assert_eq!(outcomes[1].ok()["stdout"]["head"], "lib.rs\n");
    assert_eq!(outcomes[2].err()["details"]["kind"], "no_commands");
    assert_eq!(outcomes[2].err()["details"]["known"], json!(["work"]));
    assert!(
        outcomes[3].err()["message"]
            .as_str()
            .unwrap()
            .contains("not both"),
        "{:?}",
        outcomes[3]
    );
    let started = outcomes[4].ok();
    assert_eq!(started["running"], true);
    let job = started["job"].as_str().unwrap();
    let listed = outcomes[5].ok();
    assert_eq!(listed["jobs"][0]["job"], job);
    assert_eq!(listed["jobs"][0]["computer"], "work");
    assert_eq!(listed["lost"], json!([]));
    assert_eq!(outcomes[6].err()["details"]["kind"], "no_such_job");
    agent.close().await.unwrap();
}

#[tokio::test]
async fn an_abort_ends_a_running_command_and_what_it_started() {
    let world = World::new();
    let work = with_commands(&world);
    world.attach(&[&work]);
    let marker = format!("{}.{}", 600 + std::process::id() % 100, std::process::id());
    let line = format!("(sleep {marker} &); sleep {marker}");
    let turns = vec![
        calls(&[("commands__exec", json!({"command": line}))]),
        Turn::text("never"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    let command = shiitake_conformance::support::send(&session, "run long").await;
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|entry| {
                std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&marker))
                    && !std::fs::read_to_string(entry.path().join("stat"))
                        .unwrap_or_default()
                        .rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive() < 2 {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    session.abort().await.unwrap();
    let terminal = shiitake_conformance::support::terminal_of(&session, &command).await;
    assert_eq!(terminal.outcome, TerminalOutcome::Cancelled, "{terminal:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive() > 0 {
        assert!(Instant::now() < deadline, "the aborted command goes on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_running_job_has_a_footer_row_whose_kill_ends_it() {
    let world = World::new();
    let work = with_commands(&world);
    world.attach(&[&work]);
    let turns = vec![
        calls(&[(
            "commands__exec",
            json!({"command": "sleep 30", "background": true}),
        )]),
        Turn::text("started"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    let outcomes = run(&session, "start a job").await;
    let job = outcomes[0].ok()["job"].as_str().unwrap().to_owned();
    let snapshot = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    let row = snapshot
        .footer
        .iter()
        .find(|row| row.kind == "job")
        .unwrap_or_else(|| panic!("no job row in {:?}", snapshot.footer));
    assert_eq!(row.key, job);
    assert!(
        row.text.starts_with(&format!("{job} on work: sleep 30")),
        "{}",
        row.text
    );
    assert_eq!(
        row.note.as_deref(),
        Some(format!("/kill {job} work").as_str())
    );
    assert_eq!(row.actions[0].label, "Kill");

    let home = bind_session_extension::<_, HomeContract>(&session);
    let refused = home
        .call(&KillJob {
            job: "job-000000-9".into(),
            computer: "work".into(),
        })
        .await
        .unwrap_err();
    assert!(refused.message.contains("no background job"), "{refused:?}");
    home.call(&KillJob {
        job: job.clone(),
        computer: "work".into(),
    })
    .await
    .unwrap();
    let commands = work.commands.clone().unwrap();
    let owner = session.session_id().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while commands.list_jobs(&owner)[0].running {
        assert!(Instant::now() < deadline, "the killed job goes on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    agent.close().await.unwrap();
}
