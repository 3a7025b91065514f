//! Discovery over a fixture tree of good and bad skills: every usable skill is listed in
//! name order, and every folder that is not one is reported with the reason, through the
//! library and through `/skills` on a real Agent.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use serde_json::json;
use shiitake_ext_skills::SkillLibrary;
use shiitake_ext_skills::contract::*;
use shiitake_protocol::extension::bind_session_extension;
use shiitake_protocol::{AgentApi, ExtensionId};

fn expected(tree: &Tree) -> SkillsList {
    let first = tree.shown("first");
    let second = tree.shown("second");
    let problem = |root: &str, folder: &str, problem: Problem| SkillProblem {
        root: root.to_owned(),
        folder: Some(folder.to_owned()),
        problem,
    };
    let summary = |name: &str, description: &str, root: &str| SkillSummary {
        name: name.into(),
        description: description.into(),
        root: root.to_owned(),
        folder: name.into(),
    };
    SkillsList {
        skills: vec![
            summary("notes", "Keeps notes.", &first),
            summary("pdf-tools", "Fills PDF forms. Use for any PDF", &first),
            summary("writer", "Writes prose.", &second),
        ],
        problems: vec![
            problem(
                &first,
                "bad-description",
                Problem::InvalidDescription {
                    name: "bad-description".into(),
                    rule: DescriptionRule::Markup,
                },
            ),
            problem(
                &first,
                "bad-name",
                Problem::InvalidName {
                    name: Some("PDF_Tools".into()),
                    rule: NameRule::Character,
                },
            ),
            problem(
                &first,
                "bad-yaml",
                Problem::FrontMatterDoesNotParse {
                    message: "mapping values are not allowed in this context at line 2 column 22"
                        .into(),
                },
            ),
            problem(
                &first,
                "escape",
                Problem::UnreadableSkillFile {
                    message: "`SKILL.md` is outside the files root".into(),
                },
            ),
            problem(&first, "no-front", Problem::NoFrontMatter),
            problem(&first, "no-skill-file", Problem::MissingSkillFile),
            problem(
                &second,
                "notes",
                Problem::DuplicateName {
                    name: "notes".into(),
                    kept: format!("{first}/notes"),
                },
            ),
            SkillProblem {
                root: tree.shown("missing"),
                folder: None,
                problem: Problem::RootUnreadable {
                    message: "No such file or directory (os error 2)".into(),
                },
            },
        ],
    }
}

#[tokio::test]
async fn good_skills_are_listed_and_bad_folders_are_reported_with_the_reason() {
    let tree = tree();
    let library = SkillLibrary::discover(&tree.roots()).await;
    assert_eq!(library.list(), expected(&tree));
}

#[tokio::test]
async fn the_first_root_keeps_a_name_in_the_hosts_order() {
    let tree = tree();
    let mut roots = tree.roots();
    roots.swap(0, 1);
    let library = SkillLibrary::discover(&roots).await;
    let notes = library.skills().find(|s| s.name == "notes").unwrap();
    assert_eq!(notes.description, "A second notes skill.");
    assert!(library.problems().contains(&SkillProblem {
        root: tree.shown("first"),
        folder: Some("notes".into()),
        problem: Problem::DuplicateName {
            name: "notes".into(),
            kept: format!("{}/notes", tree.shown("second")),
        },
    }));
}

#[tokio::test]
async fn slash_skills_lists_the_same_through_the_agent() {
    let tree = tree();
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let (agent, _model) = agent(tree.path(), library, vec![]).await;
    let session = session(&agent).await;
    let listed = bind_session_extension::<_, SkillsContract>(&session)
        .call(&ListSkills {})
        .await
        .unwrap();
    assert_eq!(listed, expected(&tree));

    let catalogs = agent.catalogs().await.unwrap();
    let catalog = &catalogs.catalogs[0].catalog;
    assert_eq!(
        catalog.extension_id,
        ExtensionId::new(EXTENSION_ID).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&catalog.commands).unwrap(),
        json!([{"name": "skills", "summary": "List the skills and why any folder is not one",
                "scope": "session", "call": "list", "arguments": [], "steps": []}])
    );
}

#[tokio::test]
async fn a_root_with_more_folders_than_its_bound_reads_the_first_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..=MAX_FOLDERS_PER_ROOT {
        let name = format!("s{i:04}");
        write(
            &dir.path().join(&name).join("SKILL.md"),
            &skill_md(&name, "A skill.", ""),
        );
    }
    let root = shiitake_ext_skills::SkillRoot::new(dir.path());
    let library = SkillLibrary::discover(std::slice::from_ref(&root)).await;
    assert_eq!(library.skills().len(), MAX_FOLDERS_PER_ROOT);
    assert_eq!(
        library.problems(),
        &[SkillProblem {
            root: dir.path().display().to_string(),
            folder: None,
            problem: Problem::RootTruncated {
                limit: MAX_FOLDERS_PER_ROOT
            },
        }]
    );
    assert_eq!(library.skills().last().unwrap().name, "s0255");

    // Exactly at the bound: every folder is read and nothing is reported.
    std::fs::remove_dir_all(dir.path().join(format!("s{MAX_FOLDERS_PER_ROOT:04}"))).unwrap();
    let library = SkillLibrary::discover(std::slice::from_ref(&root)).await;
    assert_eq!(library.skills().len(), MAX_FOLDERS_PER_ROOT);
    assert!(library.problems().is_empty());
}

#[tokio::test]
async fn slash_skills_takes_the_clients_request_id_and_refuses_other_fields() {
    let tree = tree();
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let (agent, _model) = agent(tree.path(), library, vec![]).await;
    let session = session(&agent).await;
    let id = ExtensionId::new(EXTENSION_ID).unwrap();
    let listed = shiitake_protocol::SessionApi::call_extension(
        &session,
        &id,
        "list",
        json!({"requestId": "skills-1"}),
    )
    .await
    .unwrap();
    assert_eq!(listed, serde_json::to_value(expected(&tree)).unwrap());
    let refused =
        shiitake_protocol::SessionApi::call_extension(&session, &id, "list", json!({"all": true}))
            .await
            .unwrap_err();
    assert_eq!(refused.code, shiitake_protocol::ErrorCode::Invalid);
}
