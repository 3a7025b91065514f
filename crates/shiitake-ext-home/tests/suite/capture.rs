//! Each run captures its table, Home and prompt once: a list change during a run does not
//! reach it; detaching Home keeps the choice and removes the file tools until Home returns
//! or a person chooses again; reordering never changes Home.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::json;
use shiitake_ext_home::contract::*;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;

#[tokio::test]
async fn a_run_keeps_what_it_captured_when_the_host_detaches_everything() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let turns = vec![
        calls(&[
            ("files__read", json!({"path": "src/lib.rs"})),
            ("host__detach_all", json!({})),
            ("files__read", json!({"path": "src/lib.rs"})),
            ("files__read", json!({"path": "computer://notes/todo.md"})),
        ]),
        Turn::text("done"),
        Turn::text("next run"),
    ];
    let (agent, model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let outcomes = run(&session, "work").await;
    assert_eq!(outcomes[0].ok()["content"], "fn work() {}\n");
    assert_eq!(outcomes[1], Outcome::Ok(json!("detached")));
    assert_eq!(
        outcomes[2].ok()["content"],
        "fn work() {}\n",
        "captured Home"
    );
    assert_eq!(
        outcomes[3].ok()["content"],
        "- buy milk\n",
        "captured table"
    );
    assert_eq!(
        model.requests()[1].system_prompt,
        model.requests()[0].system_prompt,
        "the prompt was captured once"
    );

    run(&session, "again").await;
    assert_eq!(tool_names(&model, 2), ["host__detach_all"]);
    assert_eq!(
        view(&session).await.home,
        HomeState::Detached {
            attachment_id: id("att-work")
        }
    );
}

#[tokio::test]
async fn detached_home_keeps_the_choice_until_it_returns_or_a_person_chooses() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let turns = vec![
        Turn::text("detached"),
        calls(&[("files__read", json!({"path": "src/lib.rs"}))]),
        Turn::text("back"),
        calls(&[("files__read", json!({"path": "todo.md"}))]),
        Turn::text("chosen again"),
    ];
    let (agent, model) = agent(&world, turns).await;
    let session = session(&agent).await;
    let home = bind_session_extension::<_, HomeContract>(&session);
    home.call(&Choose {
        name: "work".into(),
    })
    .await
    .unwrap();

    // Home leaves; a sole other attachment is not adopted, the choice stays.
    world.attach(&[&world.notes]);
    run(&session, "while detached").await;
    assert_eq!(tool_names(&model, 0), ["host__detach_all"]);
    let prompt = &model.requests()[0].system_prompt;
    assert!(
        prompt.contains("Home is the Computer attachment `att-work`, which is not attached now, so this run has no file tools. A person can choose another with /home <name>; attached: notes."),
        "{prompt}"
    );
    let detached = view(&session).await;
    assert_eq!(
        detached.choice.as_ref().unwrap().attachment_id,
        id("att-work")
    );
    assert_eq!(detached.choice.unwrap().by, ChoiceSource::Person);

    // It returns: Home works again with no new choice.
    world.attach(&[&world.notes, &world.work]);
    let outcomes = run(&session, "reattached").await;
    assert_eq!(outcomes[0].ok()["content"], "fn work() {}\n");

    // Detached again, a person chooses another.
    world.attach(&[&world.notes]);
    home.call(&Choose {
        name: "notes".into(),
    })
    .await
    .unwrap();
    let outcomes = run(&session, "chosen again").await;
    assert_eq!(outcomes[0].ok()["content"], "- buy milk\n");
}

#[tokio::test]
async fn reordering_the_attachments_never_changes_home() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let read = || calls(&[("files__read", json!({"path": "todo.md"}))]);
    let turns = vec![
        read(),
        Turn::text("1"),
        read(),
        Turn::text("2"),
        read(),
        Turn::text("3"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "notes").await;
    let expected = HomeState::Chosen {
        attachment_id: id("att-notes"),
        name: name("notes"),
    };
    for order in [
        [&world.work, &world.notes],
        [&world.notes, &world.work],
        [&world.work, &world.notes],
    ] {
        world.attach(&order);
        assert_eq!(view(&session).await.home, expected);
        let outcomes = run(&session, "read").await;
        assert_eq!(outcomes[0].ok()["content"], "- buy milk\n");
    }
}

#[tokio::test]
async fn a_duplicate_name_or_id_is_left_out_and_reported() {
    let world = World::new();
    let twin = attachment("work", "att-twin", world.notes.port.clone());
    let same_id = attachment("other", "att-work", world.notes.port.clone());
    world.attach(&[&world.work, &twin, &same_id]);
    let (agent, _model) = agent(&world, vec![]).await;
    let session = session(&agent).await;
    let view = view(&session).await;
    assert_eq!(view.attachments.len(), 1);
    assert_eq!(
        view.problems,
        vec![
            AttachmentProblem {
                name: name("work"),
                attachment_id: id("att-twin"),
                problem: AttachmentRule::DuplicateName
            },
            AttachmentProblem {
                name: name("other"),
                attachment_id: id("att-work"),
                problem: AttachmentRule::DuplicateId
            },
        ]
    );
    assert!(matches!(view.home, HomeState::Adoptable { .. }));
}
