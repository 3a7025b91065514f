//! End to end: one scripted run on a real Agent with Skills and Home loads a skill, then
//! edits a file in Home through apply_patch as the skill says.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use serde_json::json;
use shiitake_ext_home::add_home;
use shiitake_ext_skills::{SkillLibrary, SkillRoot, add_skills};
use shiitake_model::Turn;

const PATCH: &str = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-fn work() {}\n+/// Documented, as the house style asks.\n+fn work() {}\n*** End Patch";

#[tokio::test]
async fn a_run_loads_a_skill_then_patches_home() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    write(
        &world.path("skills/house-style/SKILL.md"),
        "---\nname: house-style\ndescription: How code is written here. Use before editing code.\n---\nEvery function has a doc comment.\n",
    );
    let library = Arc::new(SkillLibrary::discover(&[SkillRoot::new(world.path("skills"))]).await);
    let turns = vec![
        calls(&[("skill__load", json!({"name": "house-style"}))]),
        calls(&[("files__apply_patch", json!({"patch": PATCH}))]),
        Turn::text("Documented work()."),
    ];
    let list = world.list.clone();
    let kit = builder(&world, turns)
        .await
        .compose(move |builder| add_skills(builder, library))
        .compose(move |builder| add_home(builder, list))
        .open()
        .await;
    let (agent, model) = (kit.agent, kit.model);
    let session = session(&agent).await;
    shiitake_protocol::extension::bind_session_extension::<
        _,
        shiitake_ext_home::contract::HomeContract,
    >(&session)
    .call(&shiitake_ext_home::contract::Choose {
        name: "work".into(),
    })
    .await
    .unwrap();

    let outcomes = run(&session, "Document work() the house way.").await;
    assert_eq!(
        outcomes[0].ok()["content"],
        "Every function has a doc comment.\n"
    );
    assert_eq!(
        outcomes[1].ok(),
        &json!({"changes": [{"path": "src/lib.rs", "kind": "updated"}]})
    );
    assert_eq!(
        std::fs::read_to_string(world.path("work/src/lib.rs")).unwrap(),
        "/// Documented, as the house style asks.\nfn work() {}\n"
    );
    let first = &model.requests()[0];
    assert!(
        first
            .system_prompt
            .contains("- house-style: How code is written here.")
    );
    assert!(first.system_prompt.contains("Home is the Computer `work`."));
    let offered: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        offered.contains(&"skill__load") && offered.contains(&"files__apply_patch"),
        "{offered:?}"
    );
}
