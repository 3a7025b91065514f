//! `Attachment::local`: a directory becomes an attachment whose id names the canonical
//! directory, so Home's choice survives a restart and a rename of the attachment.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::support::*;
use shiitake_ext_home::contract::*;
use shiitake_ext_home::{AttachError, Attachment, ComputerList};
use shiitake_model::Turn;

#[test]
fn a_directory_becomes_an_attachment_with_a_stable_id() {
    let dir = tempfile::tempdir().unwrap();
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    let one = Attachment::local("work", dir.path()).unwrap();
    let dotted = Attachment::local("renamed", dir.path().join(".")).unwrap();
    assert_eq!(
        one.attachment_id.as_str(),
        format!("local:{}", canonical.display())
    );
    assert_eq!(one.attachment_id, dotted.attachment_id);
    assert!(one.port.patch_engine().is_some());

    let deep = canonical.join("d".repeat(250));
    std::fs::create_dir_all(&deep).unwrap();
    let long = Attachment::local("deep", &deep).unwrap();
    assert!(long.attachment_id.as_str().starts_with("local:#"));
    assert_eq!(long.attachment_id.as_str().len(), "local:#".len() + 16);

    assert!(matches!(
        Attachment::local("home", dir.path()),
        Err(AttachError::Name(_))
    ));
    assert!(matches!(
        Attachment::local("work", dir.path().join("missing")),
        Err(AttachError::Root(_))
    ));
}

#[tokio::test]
async fn the_choice_survives_a_restart_and_a_rename() {
    let world = World::new();
    let work = Attachment::local("work", world.path("work")).unwrap();
    let notes = Attachment::local("notes", world.path("notes")).unwrap();
    world.attach(&[&work, &notes]);
    {
        let (agent, _model) = agent(&world, vec![]).await;
        let session = session(&agent).await;
        choose(&session, "work").await;
        shiitake_protocol::AgentApi::close(&agent).await.unwrap();
    }
    // A new process: the host lists the same directories under other names and order.
    let list = Arc::new(ComputerList::new(vec![
        Attachment::local("notes", world.path("notes")).unwrap(),
        Attachment::local("workspace", world.path("work")).unwrap(),
    ]));
    let (agent, _model) = agent_over(&world, list, vec![Turn::text("ok")]).await;
    let session = session(&agent).await;
    assert_eq!(
        view(&session).await.home,
        HomeState::Chosen {
            attachment_id: work.attachment_id.clone(),
            name: name("workspace")
        }
    );
}
