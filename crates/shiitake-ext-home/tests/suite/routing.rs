//! `computer://` routing: bare paths and `computer://home/` are on Home,
//! `computer://<name>/` on another captured attachment (Home's own name included), and each
//! port's jail still applies; returned paths stay the port's own.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use serde_json::json;
use shiitake_model::Turn;

#[tokio::test]
async fn addresses_reach_home_and_the_other_computers() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let turns = vec![
        calls(&[
            ("files__read", json!({"path": "src/lib.rs"})),
            ("files__read", json!({"path": "computer://home/src/lib.rs"})),
            ("files__read", json!({"path": "computer://work/src/lib.rs"})),
            ("files__read", json!({"path": "computer://notes/todo.md"})),
            ("files__list", json!({"path": "computer://notes"})),
            ("files__list", json!({})),
            ("files__glob", json!({"pattern": "**/*.rs"})),
            (
                "files__grep",
                json!({"pattern": "milk", "path": "computer://notes/"}),
            ),
        ]),
        Turn::text("done"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let outcomes = run(&session, "route").await;
    let work = json!({"path": "src/lib.rs", "content": "fn work() {}\n", "offset": 0, "lines": 1, "truncated": false});
    assert_eq!(outcomes[0].ok(), &work, "the port's own path comes back");
    assert_eq!(outcomes[1].ok(), &work);
    assert_eq!(outcomes[2].ok(), &work);
    assert_eq!(outcomes[3].ok()["content"], "- buy milk\n");
    assert_eq!(outcomes[3].ok()["path"], "todo.md");
    assert_eq!(
        outcomes[4].ok(),
        &json!({"entries": [{"path": "todo.md", "kind": "file"}], "truncated": false})
    );
    assert_eq!(
        outcomes[5].ok(),
        &json!({"entries": [{"path": "src", "kind": "dir"}], "truncated": false})
    );
    assert_eq!(
        outcomes[6].ok(),
        &json!({"entries": [{"path": "src/lib.rs", "kind": "file"}], "truncated": false})
    );
    assert_eq!(
        outcomes[7].ok(),
        &json!({"matches": [{"path": "todo.md", "line": 1, "text": "- buy milk"}], "truncated": false})
    );
}

#[tokio::test]
async fn unknown_computers_and_escapes_are_refused() {
    let world = World::new();
    world.attach(&[&world.work, &world.notes]);
    let secret = world.path("secret.txt").display().to_string();
    let turns = vec![
        calls(&[
            ("files__read", json!({"path": "computer://nowhere/x"})),
            ("files__read", json!({"path": "computer:///etc/passwd"})),
            (
                "files__read",
                json!({"path": "computer://notes/../secret.txt"}),
            ),
            (
                "files__read",
                json!({"path": "computer://home/../secret.txt"}),
            ),
            ("files__read", json!({"path": "../notes/todo.md"})),
            ("files__read", json!({"path": secret})),
            ("files__read", json!({"path": "computer://notes/"})),
            ("files__read", json!({"path": "computer://notes"})),
        ]),
        Turn::text("done"),
    ];
    let (agent, _model) = agent(&world, turns).await;
    let session = session(&agent).await;
    choose(&session, "work").await;
    let outcomes = run(&session, "escape").await;
    let kinds: Vec<&str> = outcomes.iter().map(Outcome::kind).collect();
    assert_eq!(
        kinds,
        [
            "no_such_computer",
            "no_such_computer",
            "outside_root",
            "outside_root",
            "outside_root",
            "outside_root",
            "invalid_path",
            "invalid_path",
        ]
    );
    assert_eq!(
        outcomes[0].err()["details"]["known"],
        json!(["notes", "work"])
    );
    for outcome in &outcomes {
        assert!(!outcome.err().to_string().contains("secret\\n"));
    }
}
