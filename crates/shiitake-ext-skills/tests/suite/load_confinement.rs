//! `skill.load` on a real Agent: the body without front matter and the files beside it, a
//! supporting file, and refusals: `..`, symlinks out of the skill's folder (outside every
//! root, and into a sibling skill), absolute paths, unknown skills; the 128 KiB bound at its
//! edge.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use serde_json::json;
use shiitake_ext_skills::SkillLibrary;
use shiitake_ext_skills::contract::*;

async fn load_all(tree: &Tree, inputs: &[serde_json::Value]) -> Vec<Outcome> {
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let (agent, _model) = agent(tree.path(), library, loads(inputs)).await;
    let session = session(&agent).await;
    run(&session, "load").await
}

fn kind(outcome: &Outcome) -> &str {
    outcome.err()["details"]["kind"].as_str().unwrap()
}

#[tokio::test]
async fn the_body_and_the_files_beside_it_load_by_name() {
    let tree = tree();
    let outcomes = load_all(
        &tree,
        &[
            json!({"name": "pdf-tools"}),
            json!({"name": "pdf-tools", "path": "forms.md"}),
            json!({"name": "pdf-tools", "path": "scripts/../forms.md"}),
            json!({"name": "writer"}),
        ],
    )
    .await;
    let body: LoadOutput = serde_json::from_value(outcomes[0].ok().clone()).unwrap();
    assert_eq!(
        body,
        LoadOutput {
            name: "pdf-tools".into(),
            path: "SKILL.md".into(),
            content: "# PDF tools\nRun scripts/fill.py.\n".into(),
            truncated: false,
            files: Some(vec!["forms.md".into(), "scripts/fill.py".into()]),
        },
        "symlinks are listed by Knapsack as links, not files, and never followed"
    );
    assert_eq!(outcomes[1].ok()["content"], "# Forms\nField list.\n");
    assert_eq!(outcomes[2].ok()["content"], "# Forms\nField list.\n");
    assert_eq!(
        outcomes[3].ok()["content"],
        "# Writer\n",
        "from the second root"
    );
}

#[tokio::test]
async fn nothing_outside_the_skill_folder_loads() {
    let tree = tree();
    let outside = tree.path().join("outside.txt").display().to_string();
    let sibling = tree.first().join("notes/SKILL.md").display().to_string();
    let outcomes = load_all(
        &tree,
        &[
            json!({"name": "pdf-tools", "path": "../notes/SKILL.md"}),
            json!({"name": "pdf-tools", "path": "../../outside.txt"}),
            json!({"name": "pdf-tools", "path": "out.txt"}),
            json!({"name": "pdf-tools", "path": "sibling.md"}),
            json!({"name": "pdf-tools", "path": "notes-dir/SKILL.md"}),
            json!({"name": "pdf-tools", "path": outside}),
            json!({"name": "pdf-tools", "path": sibling}),
        ],
    )
    .await;
    assert_eq!(outcomes.len(), 7);
    for (index, outcome) in outcomes.iter().enumerate() {
        assert_eq!(kind(outcome), "outside_root", "{index}: {outcome:?}");
        let text = serde_json::to_string(outcome.err()).unwrap();
        assert!(
            !text.contains("secret") && !text.contains("Keeps notes"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn unknown_skills_bad_inputs_and_missing_files_are_told_to_the_model() {
    let tree = tree();
    let outcomes = load_all(
        &tree,
        &[
            json!({"name": "bad-name"}),
            json!({"name": "hidden"}),
            json!({"name": "pdf-tools", "path": "nope.md"}),
            json!({"name": "pdf-tools", "path": "scripts"}),
            json!({"name": "pdf-tools", "path": ""}),
            json!({"name": "pdf-tools", "extra": 1}),
            json!({"name": "x".repeat(MAX_NAME_CHARS + 1)}),
        ],
    )
    .await;
    assert_eq!(kind(&outcomes[0]), "unknown_skill");
    assert_eq!(
        outcomes[0].err()["details"]["known"],
        json!(["notes", "pdf-tools", "writer"])
    );
    assert_eq!(kind(&outcomes[1]), "unknown_skill");
    assert_eq!(kind(&outcomes[2]), "not_found");
    assert_eq!(kind(&outcomes[3]), "not_a_file");
    for outcome in &outcomes[4..] {
        assert_eq!(outcome.err()["error"], "invalid_input", "{outcome:?}");
    }
}

#[tokio::test]
async fn a_file_of_exactly_128_kib_loads_whole_and_one_byte_more_is_cut() {
    let tree = tree();
    let skill = tree.first().join("pdf-tools");
    let line = format!("{}\n", "a".repeat(1023));
    let exact = line.repeat(LOAD_LIMIT_BYTES / line.len());
    assert_eq!(exact.len(), LOAD_LIMIT_BYTES);
    write(&skill.join("exact.txt"), &exact);
    write(&skill.join("over.txt"), &format!("{exact}b"));
    let outcomes = load_all(
        &tree,
        &[
            json!({"name": "pdf-tools", "path": "exact.txt"}),
            json!({"name": "pdf-tools", "path": "over.txt"}),
        ],
    )
    .await;
    let exact_out: LoadOutput = serde_json::from_value(outcomes[0].ok().clone()).unwrap();
    assert_eq!(
        (exact_out.content.len(), exact_out.truncated),
        (LOAD_LIMIT_BYTES, false)
    );
    let over_out: LoadOutput = serde_json::from_value(outcomes[1].ok().clone()).unwrap();
    assert!(over_out.truncated);
    assert_eq!(over_out.content, exact, "cut on the last whole line");
}

#[tokio::test]
async fn the_load_schema_shows_its_bounds() {
    let tree = tree();
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let (agent, model) = agent(tree.path(), library, vec![shiitake_model::Turn::text("ok")]).await;
    let session = session(&agent).await;
    run(&session, "hi").await;
    let spec = model.requests()[0].tools[0].clone();
    assert_eq!(spec.name, "skill__load");
    assert_eq!(
        spec.parameters["properties"]["name"]["maxLength"],
        json!(MAX_NAME_CHARS)
    );
    assert_eq!(spec.parameters["required"], json!(["name"]));
}
