//! apply_patch is offered only when Home's port has a native patch engine (whatever the
//! other attachments have), and patches always go to Home's engine and jail.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::json;
use shiitake_ext_home::contract::*;
use shiitake_model::Turn;
use shiitake_protocol::extension::bind_session_extension;

const ADD_TWO: &str = "*** Begin Patch\n*** Add File: src/a.rs\n+fn a() {}\n*** Add File: computer://home/src/b.rs\n+// see computer://notes/todo.md\n*** End Patch";

#[tokio::test]
async fn home_without_an_engine_gets_no_apply_patch_even_beside_one_that_has() {
    let world = World::new();
    let notes = world.notes_without_patch();
    world.attach(&[&world.work, &notes]);
    let (agent, model) = agent(&world, vec![Turn::text("one"), Turn::text("two")]).await;
    let session = session(&agent).await;
    let home = bind_session_extension::<_, HomeContract>(&session);
    home.call(&Choose {
        name: "notes".into(),
    })
    .await
    .unwrap();
    run(&session, "no patch").await;
    let offered = tool_names(&model, 0);
    assert!(
        !offered.contains(&"files__apply_patch".to_owned()),
        "{offered:?}"
    );
    assert!(offered.contains(&"files__read".to_owned()));
    assert!(
        model.requests()[0]
            .system_prompt
            .contains("Home has no patch engine, so there is no apply_patch.")
    );
    let view = view(&session).await;
    let patch: Vec<bool> = view.attachments.iter().map(|a| a.patch).collect();
    assert_eq!(patch, [true, false]);

    // Home with an engine, beside one without: apply_patch is offered.
    home.call(&Choose {
        name: "work".into(),
    })
    .await
    .unwrap();
    run(&session, "patch").await;
    assert!(tool_names(&model, 1).contains(&"files__apply_patch".to_owned()));
    assert!(
        model.requests()[1]
            .system_prompt
            .contains("apply_patch edits Home only")
    );
}

#[tokio::test]
async fn patches_go_to_home_and_never_to_another_computer() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let other = "*** Begin Patch\n*** Add File: src/c.rs\n+c\n*** Update File: computer://notes/todo.md\n@@\n-- buy milk\n+- buy bread\n*** End Patch";
    let escape = "*** Begin Patch\n*** Add File: ../notes/evil.md\n+evil\n*** End Patch";
    let turns = vec![
        calls(&[
            ("files__apply_patch", json!({"patch": ADD_TWO})),
            ("files__apply_patch", json!({"patch": other})),
            ("files__apply_patch", json!({"patch": escape})),
        ]),
        Turn::text("patched"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let outcomes = run(&session, "patch").await;
    assert_eq!(
        outcomes[0].ok(),
        &json!({"changes": [{"path": "src/a.rs", "kind": "added"}, {"path": "src/b.rs", "kind": "added"}]})
    );
    assert_eq!(
        std::fs::read_to_string(world.path("work/src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("work/src/b.rs")).unwrap(),
        "// see computer://notes/todo.md\n",
        "file contents are not addresses"
    );

    assert_eq!(outcomes[1].kind(), "patch_outside_home");
    assert!(
        !world.path("work/src/c.rs").exists(),
        "a refused patch changes nothing"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("notes/todo.md")).unwrap(),
        "- buy milk\n"
    );

    assert_eq!(outcomes[2].err()["error"], "failed");
    assert!(!world.path("notes/evil.md").exists(), "Home's jail holds");
}

#[tokio::test]
async fn patch_text_is_bounded_like_knapsacks() {
    let world = World::new();
    world.attach(&[&world.work]);
    let body = "+x\n".repeat(knapsack::limits::TEXT_LIMIT_BYTES / 3);
    let too_large = format!("*** Begin Patch\n*** Add File: big.txt\n{body}*** End Patch");
    assert!(too_large.len() > knapsack::limits::TEXT_LIMIT_BYTES);
    let turns = vec![
        calls(&[("files__apply_patch", json!({"patch": too_large}))]),
        Turn::text("done"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    let outcomes = run(&session, "big").await;
    assert_eq!(
        outcomes[0].err()["error"],
        "invalid_input",
        "the schema's maxLength"
    );
    assert!(!world.path("work/big.txt").exists());
}
