//! The unadvertised Agent-scope `seed` migration records an old attachment id only when no
//! choice exists, even a detached one, and never overwrites a choice; a person's choice
//! always replaces it.

#![allow(clippy::unwrap_used)]

use crate::support;

use crate::support::*;
use serde_json::json;
use shiitake_ext_home::contract::*;
use shiitake_model::Turn;
use shiitake_protocol::extension::{bind_agent_extension, bind_session_extension};
use shiitake_protocol::{AgentApi, ErrorCode, ExtensionId};

#[tokio::test]
async fn a_seed_is_recorded_without_a_choice_even_when_detached() {
    let world = World::new();
    world.attach(&[&world.work]);
    let (agent, model) = agent(&world, vec![Turn::text("seeded")]).await;
    let seeded = bind_agent_extension::<_, HomeContract>(&agent)
        .call(&Seed {
            attachment_id: id("att-old"),
        })
        .await
        .unwrap();
    let SeedOutcome::Recorded { choice } = seeded else {
        panic!("{seeded:?}")
    };
    assert_eq!(
        (choice.attachment_id.clone(), choice.by),
        (id("att-old"), ChoiceSource::Seed)
    );

    // The sole attachment is not adopted: the seeded choice stands, detached.
    let session = session(&agent).await;
    run(&session, "hi").await;
    assert_eq!(tool_names(&model, 0), ["host__detach_all"]);
    assert_eq!(
        view(&session).await,
        HomeView {
            home: HomeState::Detached {
                attachment_id: id("att-old")
            },
            choice: Some(choice.clone()),
            attachments: vec![AttachmentView {
                name: name("work"),
                attachment_id: id("att-work"),
                patch: true
            }],
            problems: vec![],
        }
    );

    // Later seeds keep the first.
    let again = bind_agent_extension::<_, HomeContract>(&agent)
        .call(&Seed {
            attachment_id: id("att-work"),
        })
        .await
        .unwrap();
    assert_eq!(again, SeedOutcome::Kept { choice });
}

#[tokio::test]
async fn seeds_never_overwrite_a_person_or_an_adoption() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let (agent, _model) = agent(&world, vec![]).await;
    let session = session(&agent).await;
    let person = bind_session_extension::<_, HomeContract>(&session)
        .call(&Choose {
            name: "notes".into(),
        })
        .await
        .unwrap();
    let seeded = bind_agent_extension::<_, HomeContract>(&agent)
        .call(&Seed {
            attachment_id: id("att-work"),
        })
        .await
        .unwrap();
    assert_eq!(seeded, SeedOutcome::Kept { choice: person });

    // An adopted choice is kept too.
    let other = World::new();
    other.attach(&[&other.work]);
    let (agent, _model) = agent_for(&other).await;
    let session = support::session(&agent).await;
    run(&session, "adopt").await;
    let adopted = view(&session).await.choice.unwrap();
    assert_eq!(adopted.by, ChoiceSource::Adopted);
    let seeded = bind_agent_extension::<_, HomeContract>(&agent)
        .call(&Seed {
            attachment_id: id("att-old"),
        })
        .await
        .unwrap();
    assert_eq!(seeded, SeedOutcome::Kept { choice: adopted });
}

async fn agent_for(
    world: &World,
) -> (
    shiitake_core::Agent,
    std::sync::Arc<shiitake_model::ScriptedModel>,
) {
    agent(
        world,
        vec![calls(&[("files__list", json!({}))]), Turn::text("adopted")],
    )
    .await
}

#[tokio::test]
async fn a_person_replaces_a_seed_and_bad_seeds_are_refused() {
    let world = World::new();
    world.attach(&[&world.work]);
    let (agent, _model) = agent(&world, vec![]).await;
    let home = ExtensionId::new(EXTENSION_ID).unwrap();
    agent
        .call_extension(
            &home,
            "seed",
            json!({"attachmentId": "att-old", "requestId": "m-1"}),
        )
        .await
        .unwrap();
    let retry = agent
        .call_extension(
            &home,
            "seed",
            json!({"attachmentId": "att-old", "requestId": "m-1"}),
        )
        .await
        .unwrap();
    assert_eq!(
        retry["outcome"], "recorded",
        "an exact retry answers the original"
    );
    for bad in [
        json!({"attachmentId": ""}),
        json!({}),
        json!({"attachmentId": "x", "extra": 1}),
    ] {
        let error = agent
            .call_extension(&home, "seed", bad.clone())
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::Invalid, "{bad}");
    }

    let session = session(&agent).await;
    let error = shiitake_protocol::SessionApi::call_extension(
        &session,
        &home,
        "seed",
        json!({"attachmentId": "att-work"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::Invalid,
        "seed is not a Session command"
    );
    let person = bind_session_extension::<_, HomeContract>(&session)
        .call(&Choose {
            name: "work".into(),
        })
        .await
        .unwrap();
    assert_eq!(person.by, ChoiceSource::Person);
    assert_eq!(
        view(&session).await.home,
        HomeState::Chosen {
            attachment_id: id("att-work"),
            name: name("work")
        }
    );
}
