//! A piped `shiitake chat` answers a tool call that waits for approval: the footer
//! shows the waiting call during the run (in attention, with `/approve`), `/approve`
//! walks the server's flow from the next lines (allow once), the call runs once and
//! the run completes; a second call, denied with a reason, never runs and the model
//! reads the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use shiitake_capabilities::{Module, ModulePath, Operation, OperationName, Replay};
use shiitake_core::extension::kit::{ExtensionKit, KitExtension};
use shiitake_ext_approval::policy::{Policy, Ruling};
use shiitake_model::Turn;
use shiitake_protocol::extension_contract;

use crate::support::chat;

extension_contract! {
    /// A tool with a side effect for the test: `notes.write`.
    pub NotesContract = "example-notes", projection Value
}

/// `notes.write`, counting its runs; not safe to repeat.
fn notes(writes: Arc<AtomicUsize>) -> KitExtension<NotesContract> {
    ExtensionKit::<NotesContract>::new("notes")
        .unwrap()
        .run_tools(move |_run, _tools| {
            let writes = writes.clone();
            let write = Operation::from_fn(
                OperationName::new("write").unwrap(),
                "Writes a note.",
                move |_input: Value, _ctx| {
                    let writes = writes.clone();
                    async move {
                        writes.fetch_add(1, Ordering::SeqCst);
                        Ok(Value::from("written"))
                    }
                },
            )
            .with_replay(Replay::Unsafe);
            Module::new(ModulePath::new("notes").ok()?, "Notes.")
                .with_operation(write)
                .ok()
        })
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_chat_allows_one_call_and_denies_another_with_a_reason() {
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = writes.clone();
    let (url, agent, dir) = chat::served(
        vec![
            Turn::tool_call("notes__write", json!({"text": "hello"})),
            Turn::text("Wrote hello."),
            Turn::tool_call("notes__write", json!({"text": "secret"})),
            Turn::text("Not written."),
        ],
        move |agent| {
            agent
                .kit_extension(notes(counted))
                .kit_extension(shiitake_ext_approval::extension(Policy::new(Ruling::Ask)).unwrap())
        },
    )
    .await;
    let (mut chat, mut stdin, mut wait_for) = chat::piped_chat(&url, chat::TOKEN, dir.path());
    writeln!(stdin, "/help").unwrap();
    wait_for("/approve — Allow or deny a tool call that waits for you");

    writeln!(stdin, "Write hello").unwrap();
    let row = wait_for("approve notes__write?");
    assert!(
        row.trim_start()
            .starts_with(r#"! approve notes__write? {"text":"hello"}"#)
            && row.ends_with("— /approve"),
        "the footer shows the waiting call during the run: {row}"
    );
    assert_eq!(writes.load(Ordering::SeqCst), 0, "held");
    writeln!(stdin, "/approve").unwrap();
    wait_for(r#"[?] approve notes__write? {"text":"hello"}"#);
    wait_for("1) Allow once");
    wait_for("3) Deny");
    writeln!(stdin, "1").unwrap();
    wait_for("[ok] Allow once: notes__write");
    let receipt = wait_for("[/approve] ");
    assert!(receipt.contains(r#""delivery":"in_turn""#), "{receipt}");
    wait_for("assistant: Wrote hello.");
    assert_eq!(writes.load(Ordering::SeqCst), 1, "ran once");

    writeln!(stdin, "Write the secret").unwrap();
    wait_for(r#"approve notes__write? {"text":"secret"}"#);
    writeln!(stdin, "/approve").unwrap();
    wait_for("3) Deny");
    writeln!(stdin, "3").unwrap();
    wait_for("[?] Why not?");
    writeln!(stdin, "keep it private").unwrap();
    wait_for("[ok] Deny: notes__write (keep it private)");
    wait_for(
        "[tool result] notes__write (error): not run: the person denied this call of notes__write. Their reason: keep it private",
    );
    wait_for("assistant: Not written.");
    drop(stdin);
    assert!(chat.wait().unwrap().success());
    assert_eq!(
        writes.load(Ordering::SeqCst),
        1,
        "the denied call never ran"
    );
    assert_eq!(
        shiitake_protocol::AgentApi::list_sessions(&*agent, None)
            .await
            .unwrap()
            .sessions
            .len(),
        1
    );
}
