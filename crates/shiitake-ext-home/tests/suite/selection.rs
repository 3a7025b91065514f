//! Selection on a real Agent with two local-disk Computers: a sole attachment is adopted
//! once, none gives no file tools, several wait for a person's `/home <name>`, and the
//! Session command changes Agent state that other Sessions see on their next run.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::json;
use shiitake_ext_home::contract::*;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, ErrorCode};

#[tokio::test]
async fn a_sole_attachment_is_adopted_once_and_stays_home() {
    let world = World::new();
    world.attach(&[&world.work]);
    let turns = vec![
        calls(&[("files__read", json!({"path": "src/lib.rs"}))]),
        Turn::text("read"),
        Turn::text("second run"),
    ];
    let (agent, model) = agent(&world, turns).await;
    let session = session(&agent).await;
    assert_eq!(
        view(&session).await,
        HomeView {
            home: HomeState::Adoptable {
                attachment_id: id("att-work"),
                name: name("work")
            },
            choice: None,
            attachments: vec![AttachmentView {
                name: name("work"),
                attachment_id: id("att-work"),
                patch: true
            }],
            problems: vec![],
        }
    );

    let outcomes = run(&session, "read the lib").await;
    assert_eq!(outcomes[0].ok()["content"], "fn work() {}\n");
    let after = view(&session).await;
    let choice = after.choice.clone().unwrap();
    assert_eq!(
        (choice.attachment_id, choice.by),
        (id("att-work"), ChoiceSource::Adopted)
    );
    assert_eq!(
        after.home,
        HomeState::Chosen {
            attachment_id: id("att-work"),
            name: name("work")
        }
    );
    assert!(
        model.requests()[0]
            .system_prompt
            .contains("Home is the Computer `work`.")
    );

    // A second attachment arrives: the adopted Home stays, it is not a new choice to make.
    world.attach(&[&world.notes, &world.work]);
    run(&session, "again").await;
    let mut offered = FILE_TOOLS.map(String::from).to_vec();
    offered.push("files__apply_patch".into());
    offered.insert(0, "host__detach_all".into());
    assert_eq!(tool_names(&model, 2), offered);
    let prompt = &model.requests()[2].system_prompt;
    assert!(
        prompt.contains("Home is the Computer `work`.")
            && prompt.contains("reaches another attached Computer: notes."),
        "{prompt}"
    );
}

#[tokio::test]
async fn a_run_that_uses_no_file_tool_records_nothing() {
    let world = World::new();
    world.attach(&[&world.work]);
    let (agent, model) = agent(&world, vec![Turn::text("no tools"), Turn::text("later")]).await;
    let session = session(&agent).await;
    run(&session, "hi").await;
    assert_eq!(view(&session).await.choice, None, "adopted only when used");
    assert!(tool_names(&model, 0).contains(&"files__read".to_owned()));
    // The sole attachment changes: the next run adopts the new one.
    world.attach(&[&world.notes]);
    run(&session, "hi").await;
    assert!(
        model.requests()[1]
            .system_prompt
            .contains("Home is the Computer `notes`.")
    );
}

#[tokio::test]
async fn no_attachment_means_no_file_tools() {
    let world = World::new();
    let (agent, model) = agent(&world, vec![Turn::text("nothing")]).await;
    let session = session(&agent).await;
    run(&session, "hi").await;
    assert_eq!(tool_names(&model, 0), ["host__detach_all"]);
    assert!(
        model.requests()[0]
            .system_prompt
            .ends_with("No Computer is attached, so this run has no file tools.")
    );
    assert_eq!(
        view(&session).await.home,
        HomeState::Unchosen { attached: 0 }
    );
}

#[tokio::test]
async fn several_attachments_wait_for_a_person_whose_choice_every_session_sees() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let turns = vec![
        Turn::text("no home yet"),
        calls(&[("files__read", json!({"path": "todo.md"}))]),
        Turn::text("read"),
    ];
    let (agent, model) = agent(&world, turns).await;
    let first = session(&agent).await;
    let second = session(&agent).await;
    run(&first, "hi").await;
    assert_eq!(tool_names(&model, 0), ["host__detach_all"]);
    assert!(
        model.requests()[0]
            .system_prompt
            .contains("Several Computers are attached (work, notes) and none is Home")
    );
    assert_eq!(view(&first).await.home, HomeState::Unchosen { attached: 2 });

    let home = bind_session_extension::<_, HomeContract>(&first);
    let error = home
        .call(&Choose {
            name: "nowhere".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Invalid);
    assert!(error.message.contains("attached: work, notes"), "{error}");

    let choice = home
        .call(&Choose {
            name: "notes".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        (choice.attachment_id, choice.by),
        (id("att-notes"), ChoiceSource::Person)
    );

    // The other Session's next run works in the chosen Home.
    let outcomes = run(&second, "read todo").await;
    assert_eq!(outcomes[0].ok()["content"], "- buy milk\n");
    assert_eq!(
        view(&second).await.home,
        HomeState::Chosen {
            attachment_id: id("att-notes"),
            name: name("notes")
        }
    );
}

#[tokio::test]
async fn slash_home_is_published_and_seed_is_not() {
    let world = World::new();
    let (agent, _model) = agent(&world, vec![]).await;
    let catalogs = agent.catalogs().await.unwrap();
    let commands = &catalogs.catalogs[0].catalog.commands;
    // `/home`, and `/jobs` and `/kill` for background jobs; never `seed`.
    let names: Vec<&str> = commands
        .iter()
        .map(|command| command.name.as_str())
        .collect();
    assert_eq!(names, ["home", "jobs", "kill"]);
    assert!(commands.iter().all(|command| command.call != "seed"));
    assert_eq!(
        serde_json::to_value(&commands[0]).unwrap(),
        json!({"name": "home", "summary": "Choose the Computer every Session works in",
               "scope": "session", "call": "choose",
               "arguments": [{"name": "name", "description": "The attached Computer's name",
                              "kind": {"type": "text", "maxBytes": 64}, "required": true}],
               "steps": [{"argument": "name", "prompt": "Which Computer should be Home?"}]})
    );
}

#[test]
fn the_contract_bound_is_cores_section_bound() {
    assert_eq!(
        PROMPT_SECTION_BYTES,
        shiitake_core::extension::host::PROMPT_SECTION_LIMIT
    );
}
