//! Creation goes through the directory's admission, and every refused call tells the
//! model what is wrong.

use std::sync::Arc;

use serde_json::{Value, json};
use shiitake_conformance::support::*;
use shiitake_model::Turn;

use crate::support::*;

#[tokio::test]
async fn tool_errors_tell_the_model_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let directory = Arc::new(TestDirectory {
        refuse: true,
        ..TestDirectory::default()
    });
    let (a, _tasks) = open(
        &dir,
        "A",
        vec![
            Turn::tool_call("agents__send", json!({"agent": "Nobody", "text": "Hi"})),
            Turn::tool_call(
                "agents__answer",
                json!({"agent": "A", "answers": [{"text": "x"}]}),
            ),
            Turn::tool_call("agents__create", json!({"name": "Helper"})),
            Turn::tool_call("agents__send", json!({"agent": "bad name", "text": "Hi"})),
            Turn::text("Done."),
        ],
        directory,
    )
    .await;
    let session = new_session(&a).await;
    let sent = send(&session, "Try things.").await;
    terminal_of(&session, &sent).await;
    let results = tool_values(&transcript(&session).await);
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    assert!(
        text(&results[0]).contains("no Agent named Nobody; the Agents here are: A"),
        "{results:?}"
    );
    assert!(
        text(&results[1]).contains("no question of A waits on you"),
        "{results:?}"
    );
    assert!(
        text(&results[2])
            .contains("creating Agent Helper is not allowed: this host creates no Agents"),
        "{results:?}"
    );
    assert!(text(&results[3]).contains("Agent name"), "{results:?}");
}
