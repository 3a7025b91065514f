//! The web page shows a running tool's latest output (`activity.toolOutput`, a
//! command's output as it comes) under the activity line while the call runs, and
//! hides it once its result is committed; a command's row reads as its command line,
//! its ending and its output, not as JSON. In headless Chromium; without a browser the
//! test prints a note and passes (`cargo xtask test` provides one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use shiitake_capabilities::{
    Catalog, Module, ModulePath, Operation, OperationName, ProgressNote, SourceId, StaticSource,
};
use shiitake_chromium::{Chromium, eval};
use shiitake_model::{Script, ScriptedModel, Turn};

use crate::support::page::{agent_with_tools, run, served_page, shown, type_and_click};

/// `job.run`: prints three ticks, 400 ms apart, reporting its output so far after each.
async fn ticking() -> Arc<Catalog> {
    let run = Operation::from_fn(
        OperationName::new("run").unwrap(),
        "Ticks.",
        |_input, ctx| async move {
            let mut output = String::new();
            for tick in 1..=3 {
                output.push_str(&format!("tick {tick}\n"));
                ctx.progress().report(ProgressNote {
                    text: output.clone(),
                    total_bytes: output.len() as u64,
                });
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
            Ok(json!("ticked"))
        },
    );
    catalog_of("job", run).await
}

/// A catalog of the module `module` with one operation.
async fn catalog_of(module: &str, operation: Operation) -> Arc<Catalog> {
    let module = Module::new(ModulePath::new(module).unwrap(), "Tools.")
        .with_operation(operation)
        .unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(StaticSource::new(
            SourceId::new("test"),
            vec![module],
        )))
        .await
        .unwrap();
    Arc::new(catalog)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_running_tools_output_live() {
    let Some(chromium) = Chromium::launch_or_skip("web_tool_output").await.unwrap() else {
        return;
    };
    let script = Script::new(vec![
        Turn::tool_call("job__run", json!({})),
        Turn::text("Ticked three times."),
    ]);
    let model = Arc::new(ScriptedModel::new(script));
    let (agent, _dir) = agent_with_tools(model, ticking().await, |agent| agent).await;
    let (server, login) = served_page(agent.clone()).await;
    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('inbox')").await;
    run(&page, "document.getElementById('new-session').click()").await;
    shown(&page, "document.getElementById('prompt')").await;
    run(
        &page,
        "window.outputs = []; new MutationObserver(() => { \
           const o = document.getElementById('tool-output'); \
           if (o && !o.hidden && !window.outputs.includes(o.textContent)) window.outputs.push(o.textContent); \
         }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true})",
    )
    .await;
    type_and_click(&page, "Tick", "send").await;
    // While it runs: the output grows, tick by tick, under the activity line.
    shown(
        &page,
        "!document.getElementById('tool-output').hidden && \
         document.getElementById('tool-output').textContent.includes('tick 2') && \
         document.getElementById('activity').textContent.includes('running job__run')",
    )
    .await;
    // Once the result is committed, it is gone.
    shown(
        &page,
        "document.getElementById('tool-output').hidden && \
         document.querySelectorAll('.terminal.outcome-completed').length === 1",
    )
    .await;
    let seen: Vec<String> = eval(&page, "window.outputs").await.unwrap();
    assert!(
        seen.len() >= 2
            && seen
                .iter()
                .all(|text| "tick 1\ntick 2\ntick 3\n".starts_with(text.as_str())),
        "the output grew through prefixes of the command's: {seen:?}"
    );
}

/// `commands.exec` answering what Home's answers for `make test` that exited 3, and a
/// job start for anything in the background.
async fn exec_like() -> Arc<Catalog> {
    let exec = Operation::from_fn(
        OperationName::new("exec").unwrap(),
        "Runs a command.",
        |input, _ctx| async move {
            if input["background"] == json!(true) {
                return Ok(json!({"computer": "work", "job": "job-abc123-1",
                    "command": "npm run dev", "running": true, "exit": null,
                    "stopped": null, "outputBytes": 0}));
            }
            Ok(
                json!({"computer": "work", "exit": {"code": 3}, "stopped": null,
                "durationMs": 12,
                "stdout": {"head": "ran 2 tests\n", "tail": "1 failed\n", "totalBytes": 900,
                           "cutBytes": 870},
                "stderr": {"head": "error: test failed\n", "tail": "", "totalBytes": 19,
                           "cutBytes": 0}}),
            )
        },
    );
    catalog_of("commands", exec).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_row_reads_as_its_line_its_ending_and_its_output() {
    let Some(chromium) = Chromium::launch_or_skip("web_tool_output").await.unwrap() else {
        return;
    };
    let script = Script::new(vec![
        Turn::tool_call("commands__exec", json!({"command": "make test"})),
        Turn::tool_call(
            "commands__exec",
            json!({"argv": ["npm", "run", "dev"], "background": true}),
        ),
        Turn::text("It failed."),
    ]);
    let model = Arc::new(ScriptedModel::new(script));
    let (agent, _dir) = agent_with_tools(model, exec_like().await, |agent| agent).await;
    let (server, login) = served_page(agent.clone()).await;
    let page = chromium
        .open(&login.login_url(&server.url()).unwrap(), &[])
        .await
        .unwrap();
    shown(&page, "document.getElementById('inbox')").await;
    run(&page, "document.getElementById('new-session').click()").await;
    shown(&page, "document.getElementById('prompt')").await;
    type_and_click(&page, "Test it", "send").await;
    shown(
        &page,
        "document.querySelectorAll('.terminal.outcome-completed').length === 1",
    )
    .await;
    let rows: Vec<Vec<String>> = eval(
        &page,
        "[...document.querySelectorAll('details.tool')].map((row) => [\
           row.querySelector('summary').textContent, \
           [...row.querySelectorAll('.result .stream')].map((s) => s.className + '=' + s.textContent).join('|'), \
           String(row.classList.contains('error'))])",
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        rows[0][0],
        "commands__exec $ make test exit 3 in 12 ms on work"
    );
    assert_eq!(
        rows[0][1],
        "stream stdout=ran 2 tests\n\n[870 bytes cut]\n1 failed\n|stream stderr=error: test failed\n"
    );
    assert_eq!(rows[0][2], "true", "a failed command's row is marked");
    assert_eq!(
        rows[1][0],
        "commands__exec $ npm run dev job job-abc123-1 started on work: npm run dev"
    );
    assert_eq!(rows[1][2], "false");
    // No raw JSON of the result is shown anywhere in the rows.
    let raw: bool = eval(
        &page,
        "[...document.querySelectorAll('details.tool')].some((row) => row.textContent.includes('durationMs'))",
    )
    .await
    .unwrap();
    assert!(!raw, "a command's result shows as JSON");
}
