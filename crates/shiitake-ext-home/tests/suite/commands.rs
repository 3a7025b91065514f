//! Home's command tools, in a real Agent over attachments that run commands (plain, not
//! sandboxed: the sandbox is knapsack's and `shiitake serve`'s tests): `commands__exec`
//! routes by its `cwd` address, a Computer that runs none refuses, a background job is
//! listed and read through `jobs__*`, and an abort of the run ends a running command and
//! everything it started.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::support::*;
use knapsack::exec::{CommandLimits, JobLimits, LocalCommands};
use serde_json::json;
use shiitake_ext_home::contract::{
    HomeContract, JobList, JobState, KillJob, ListJobs, MAX_JOB_RECORDS, MAX_JOB_ROWS,
};
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, SessionApi, TerminalOutcome};

/// `world`'s `work` running commands in its directory; `notes` runs none.
fn with_commands(world: &World) -> shiitake_ext_home::Attachment {
    let commands = LocalCommands::new(&world.path("work"), CommandLimits::default()).unwrap();
    world.work.clone().with_commands(commands)
}

/// `world`'s `work` running commands, keeping `per_owner` jobs a Session.
fn with_jobs(world: &World, per_owner: usize) -> shiitake_ext_home::Attachment {
    let limits = CommandLimits {
        jobs: JobLimits {
            per_owner,
            per_computer: per_owner.max(16),
            ..JobLimits::default()
        },
        ..CommandLimits::default()
    };
    let commands = LocalCommands::new(&world.path("work"), limits).unwrap();
    world.work.clone().with_commands(commands)
}

/// A turn starting each of `lines` as a background job.
fn background(lines: &[&str]) -> Turn {
    let each: Vec<(&str, serde_json::Value)> = lines
        .iter()
        .map(|line| {
            (
                "commands__exec",
                json!({"command": line, "background": true}),
            )
        })
        .collect();
    calls(&each)
}

/// Home's `work` keeping one job more than `bound` a Session, and an Agent whose model
/// starts `bound` background jobs running `line` in the first run and one more in the
/// second; the Session, with `work` chosen and no run yet.
async fn bound_then_one_past(
    world: &World,
    line: &str,
    bound: usize,
) -> (
    shiitake_ext_home::Attachment,
    shiitake_core::Agent,
    shiitake_core::LocalSession,
) {
    let work = with_jobs(world, bound + 1);
    world.attach(&[&work]);
    let turns = vec![
        background(&vec![line; bound]),
        Turn::text("all"),
        background(&[line]),
        Turn::text("one past"),
    ];
    let (agent, _model) = agent(world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    (work, agent, session)
}

/// The host after a restart: the same Agent file, and `work`'s commands in a new life
/// (they know no job of the last one); the Session `id` there.
async fn restarted(
    world: &World,
    id: &shiitake_protocol::SessionId,
) -> (shiitake_core::Agent, shiitake_core::LocalSession) {
    let reborn = with_jobs(world, 2);
    let list = std::sync::Arc::new(shiitake_ext_home::ComputerList::new(vec![reborn]));
    let (agent, _model) = agent_over(world, list, Vec::new()).await;
    let session = agent.session(id.clone());
    (agent, session)
}

/// `/jobs` of `session`.
async fn list_jobs(session: &shiitake_core::LocalSession) -> JobList {
    bind_session_extension::<_, HomeContract>(session)
        .call(&ListJobs {})
        .await
        .unwrap()
}

/// Ends every job `work` runs for `session`.
fn kill_all(work: &shiitake_ext_home::Attachment, session: &shiitake_core::LocalSession) {
    let commands = work.commands.clone().unwrap();
    let owner = session.session_id().to_string();
    for job in commands.list_jobs(&owner) {
        let _ended = commands.request_kill(&job.job, &owner);
    }
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

#[tokio::test]
async fn jobs_lists_every_job_the_session_started_with_where_it_is() {
    let world = World::new();
    let work = with_jobs(&world, 2);
    world.attach(&[&work]);
    let turns = vec![
        background(&["sleep 30", "exit 3"]),
        Turn::text("two"),
        background(&["sleep 29"]),
        Turn::text("three"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let first = run(&session, "start two").await;
    let job_of = |outcome: &Outcome| outcome.ok()["job"].as_str().unwrap().to_owned();
    let (running, exited) = (job_of(&first[0]), job_of(&first[1]));
    let commands = work.commands.clone().unwrap();
    let owner = session.session_id().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while commands
        .list_jobs(&owner)
        .iter()
        .any(|job| job.job.as_str() == exited && job.running)
    {
        assert!(Instant::now() < deadline, "`exit 3` goes on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let listed = list_jobs(&session).await.jobs;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0].job, exited, "newest first: {listed:?}");
    assert_eq!(listed[0].state, JobState::Exited { code: 3 });
    assert_eq!(listed[0].kill, None);
    assert_eq!(listed[1].job, running);
    assert_eq!(listed[1].state, JobState::Running);
    assert_eq!(listed[1].command, "sleep 30");
    assert_eq!(listed[1].computer, "work");
    assert_eq!(
        listed[1].kill.as_deref(),
        Some(format!("/kill {running} work").as_str())
    );

    // A third job takes the place of the one that ended: it is forgotten, not lost.
    let second = run(&session, "one more").await;
    let third = job_of(&second[0]);
    let listed = list_jobs(&session).await.jobs;
    let states: Vec<(String, JobState)> = listed
        .iter()
        .map(|line| (line.job.clone(), line.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            (third, JobState::Running),
            (exited, JobState::Forgotten),
            (running, JobState::Running),
        ]
    );
    let wire = serde_json::to_value(&listed[1]).unwrap();
    assert_eq!(wire["state"], "forgotten", "{wire}");
    kill_all(&work, &session);
    agent.close().await.unwrap();

    // The host restarts: its jobs died with it, and every record says lost.
    let (agent, session) = restarted(&world, session.session_id()).await;
    let listed = list_jobs(&session).await.jobs;
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|line| line.state == JobState::Lost && line.kill.is_none()),
        "{listed:?}"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn a_session_remembers_its_newest_jobs_up_to_the_bound() {
    let world = World::new();
    let (work, agent, session) = bound_then_one_past(&world, "true", MAX_JOB_RECORDS).await;
    drop(work);
    let started = run(&session, "start many").await;
    let oldest = started[0].ok()["job"].as_str().unwrap().to_owned();
    let listed = list_jobs(&session).await.jobs;
    assert_eq!(listed.len(), MAX_JOB_RECORDS);
    assert_eq!(listed.last().unwrap().job, oldest, "{listed:?}");
    run(&session, "one more").await;
    agent.close().await.unwrap();

    // After a restart only the Session's records list its jobs: the newest ones.
    let (agent, session) = restarted(&world, session.session_id()).await;
    let listed = list_jobs(&session).await.jobs;
    assert_eq!(listed.len(), MAX_JOB_RECORDS);
    assert!(listed.iter().all(|line| line.job != oldest), "{listed:?}");
    assert_eq!(
        listed.last().unwrap().job,
        started[1].ok()["job"],
        "{listed:?}"
    );
    agent.close().await.unwrap();
}

#[tokio::test]
async fn the_footer_shows_at_most_its_bound_of_job_rows() {
    let world = World::new();
    let (work, agent, session) = bound_then_one_past(&world, "sleep 30", MAX_JOB_ROWS).await;
    let rows = |snapshot: shiitake_protocol::SessionSnapshot| {
        snapshot
            .footer
            .iter()
            .filter(|row| row.kind == "job")
            .count()
    };
    run(&session, "start many").await;
    let at_bound = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(rows(at_bound), MAX_JOB_ROWS);
    run(&session, "one more").await;
    let past = session
        .read(shiitake_protocol::ReadOptions::default())
        .await
        .unwrap();
    assert_eq!(rows(past), MAX_JOB_ROWS);
    assert_eq!(list_jobs(&session).await.jobs.len(), MAX_JOB_ROWS + 1);
    kill_all(&work, &session);
    agent.close().await.unwrap();
}
