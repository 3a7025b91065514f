//! The metadata section on a real Agent: in name order, the same on every run, within its
//! bound (so the host never cuts it), and absent when there is no skill.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use shiitake_core::extension::host::PROMPT_SECTION_LIMIT;
use shiitake_ext_skills::contract::*;
use shiitake_ext_skills::{SkillLibrary, SkillRoot};
use shiitake_model::Turn;

#[test]
fn the_contract_bound_is_cores_section_bound() {
    assert_eq!(PROMPT_SECTION_BYTES, PROMPT_SECTION_LIMIT);
}

#[tokio::test]
async fn every_run_sees_the_skills_in_name_order() {
    let tree = tree();
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let turns = vec![Turn::text("one"), Turn::text("two")];
    let (agent, model) = agent(tree.path(), library, turns).await;
    let session = session(&agent).await;
    run(&session, "first").await;
    run(&session, "second").await;
    let requests = model.requests();
    let prompt = &requests[0].system_prompt;
    let section = "Available skills:\n\
        - notes: Keeps notes.\n\
        - pdf-tools: Fills PDF forms. Use for any PDF\n\
        - writer: Writes prose.";
    assert!(prompt.ends_with(section), "{prompt}");
    assert!(!prompt.contains("bad-name") && !prompt.contains("hidden"));
    assert_eq!(requests[1].system_prompt, *prompt, "stable across runs");
    let tools: Vec<_> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["skill__load"]);
}

#[tokio::test]
async fn many_long_skills_stay_within_the_bound_and_count_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    let description = "Does one particular thing well. ".repeat(32);
    for i in 0..60 {
        let name = format!("skill-{i:02}");
        write(
            &skills.join(&name).join("SKILL.md"),
            &skill_md(&name, &description, ""),
        );
    }
    let library = Arc::new(SkillLibrary::discover(&[SkillRoot::new(&skills)]).await);
    let (agent, model) = agent(dir.path(), library, vec![Turn::text("ok")]).await;
    let session = session(&agent).await;
    run(&session, "hi").await;
    let prompt = model.requests()[0].system_prompt.clone();
    let start = prompt.find("Skills: ").unwrap();
    let section = &prompt[start..];
    assert!(section.len() <= PROMPT_SECTION_BYTES, "{}", section.len());
    assert!(
        !section.contains("[truncated]"),
        "the host did not have to cut it"
    );
    let listed = section.matches("\n- skill-").count();
    assert!(listed >= 10, "{listed}");
    assert!(
        section.ends_with(&format!(
            "\n({} more skills are not listed here for space.)",
            60 - listed
        )),
        "{section}"
    );
    for i in 0..listed {
        assert!(section.contains(&format!("\n- skill-{i:02}: Does one")));
    }
    // Each description is cut to its prompt bound.
    let line = section
        .lines()
        .find(|l| l.starts_with("- skill-00"))
        .unwrap();
    assert!(line.len() <= "- skill-00: ".len() + PROMPT_DESCRIPTION_BYTES);
    assert!(line.ends_with('…'));
}

#[tokio::test]
async fn no_skill_no_section_and_still_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let library = Arc::new(SkillLibrary::discover(&[SkillRoot::new(&empty)]).await);
    let (agent, model) = agent(dir.path(), library, vec![Turn::text("ok")]).await;
    let session = session(&agent).await;
    run(&session, "hi").await;
    assert!(!model.requests()[0].system_prompt.contains("Skills:"));
}

#[tokio::test]
async fn without_the_files_grant_there_is_no_tool_and_no_section() {
    use shiitake_core::extension::Grant;
    let tree = tree();
    let library = Arc::new(SkillLibrary::discover(&tree.roots()).await);
    let store = shiitake_store_sqlite::SqliteStore::open(
        &tree.path().join("agent.db"),
        shiitake_store_sqlite::Durability::Normal,
    )
    .await
    .unwrap();
    let model = Arc::new(shiitake_model::ScriptedModel::new(
        shiitake_model::Script::new(vec![Turn::text("ok")]),
    ));
    let config =
        shiitake_core::AgentConfig::new(Arc::new(shiitake_core::FixedModel(model.clone())));
    let agent = shiitake_core::Agent::builder(
        Arc::new(store),
        Arc::new(shiitake_capabilities::Catalog::new()),
        config,
    )
    .extension_with_files(
        shiitake_ext_skills::extension(library.clone()).unwrap(),
        shiitake_ext_skills::extension(library.clone())
            .unwrap()
            .grants()
            .without(Grant::Files),
        library,
    )
    .open()
    .await
    .unwrap();
    let session = session(&agent).await;
    run(&session, "hi").await;
    assert!(model.requests()[0].tools.is_empty());
    assert!(!model.requests()[0].system_prompt.contains("Skills:"));
}
