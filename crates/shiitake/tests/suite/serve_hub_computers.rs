//! On a real Hub (`serve --database postgres://`, `--workspace ROOT`), each tenant's
//! Computer is its own folder `ROOT/<tenant>/`: one tenant's run writes a file with
//! `files__apply_patch` and it lands there and nowhere else; another tenant's run lists,
//! reads, globs and greps, also through `..`, an absolute path and `computer://`, and
//! never sees it; the operator's default tenant has its own folder too.
//!
//! Reads `SHIITAKE_TEST_POSTGRES_URL`; without it, or when it does not answer, the
//! test prints one `SKIPPED` line, or fails when `SHIITAKE_REQUIRE_SERVICES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::hub::{
    self as hub, Served, TOKEN, create_tenant, json_of, session_with_prompt, test_database,
};
use crate::support::{processes_with, script};

/// What tenant A writes; no other file under the root may hold it, and no tool result
/// of another tenant may show it.
const SECRET: &str = "acme-only-7f3c9d2e-the-launch-code";

fn add_file(path: &str, text: &str) -> Value {
    json!({"tool_call": {"name": "files__apply_patch", "arguments": {
        "patch": format!("*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch"),
    }}})
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"tool_call": {"name": name, "arguments": arguments}})
}

/// A Hub process on `database` with `--workspace root`, the scripted model `model`,
/// edits allowed without a person, and `operator` as the default tenant.
fn start_hub(dir: &Path, root: &Path, database: &str, operator: &str, model: &str) -> Served {
    start_named(dir, "data", root, database, operator, model)
}

/// [`start_hub`] with the data directory `dir/name` (another process of the same Hub).
fn start_named(
    dir: &Path,
    name: &str,
    root: &Path,
    database: &str,
    operator: &str,
    model: &str,
) -> Served {
    let mut command = hub::command(dir, name, database, operator);
    command
        .args([
            "--model",
            model,
            "--approve",
            "allow",
            "--heartbeat",
            "200ms",
        ])
        .arg("--workspace")
        .arg(root);
    hub::spawn(command, &dir.join(format!("{name}.log")))
}

/// A new Session of `token`'s caller with one prompt, once its run has ended: every
/// tool result of the run, as JSON.
fn run_once(served: &Served, token: &str, request: &str) -> Vec<Value> {
    let session = session_with_prompt(served, token, request, "use the files");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = served.request_as(
            Some(token),
            "GET",
            &format!("/v1/sessions/{session}/snapshot"),
            "",
        );
        assert_eq!(status, 200, "{body}");
        let snapshot = json_of(&body);
        if let Some(terminal) = snapshot["terminals"].as_array().and_then(|t| t.first()) {
            assert_eq!(terminal["outcome"], "completed", "{body}");
            return snapshot["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|message| message["value"].clone())
                .filter(|value| value["role"] == "toolResult")
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the run of {request} did not end within 60 s: {body}\n{}",
            std::fs::read_to_string(&served.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text blocks of a tool result, joined.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read_to_string(&path).is_ok_and(|text| text.contains(needle)) {
            found.push(path);
        }
    }
    found
}

#[cfg(unix)]
fn assert_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o700,
        "{} is {:o}",
        dir.display(),
        mode & 0o777
    );
}

#[cfg(not(unix))]
fn assert_private(dir: &Path) {
    assert!(dir.is_dir());
}

#[test]
fn each_tenant_of_a_hub_works_in_its_own_folder() {
    let Some(database) = test_database() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let run = std::process::id();
    let (operator, acme, globex) = (
        format!("op-{run}"),
        format!("acme-{run}"),
        format!("globex-{run}"),
    );
    let absolute = root.join(&acme).join("secret.txt").display().to_string();
    // One script for the process, played in the order the runs come: acme's, then
    // globex's, then the operator's.
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [add_file("secret.txt", SECRET)]},
            {"steps": [{"text": "written"}]},
            {"steps": [add_file("mine.txt", "globex's own")]},
            {"steps": [
                call("files__list", json!({})),
                call("files__list", json!({"path": ".", "recursive": true})),
                call("files__read", json!({"path": "secret.txt"})),
                call("files__read", json!({"path": format!("../{acme}/secret.txt")})),
                call("files__read", json!({"path": absolute})),
                call("files__read", json!({"path": format!("computer://workspace/../{acme}/secret.txt")})),
                call("files__list", json!({"path": ".."})),
                call("files__glob", json!({"pattern": "**/*"})),
                call("files__grep", json!({"pattern": "launch-code"})),
            ]},
            {"steps": [{"text": "looked"}]},
            {"steps": [add_file("operator.txt", "the operator's")]},
            {"steps": [{"text": "written"}]},
        ]}),
    );
    let hub = start_hub(dir.path(), &root, &database, &operator, &model);
    let acme_token = create_tenant(&hub, &acme);
    let globex_token = create_tenant(&hub, &globex);

    // Tenant A writes its file: it lands in ROOT/<acme>/ and nowhere else.
    let written = run_once(&hub, &acme_token, &format!("{acme}-write"));
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0]["isError"], false, "{}", written[0]);
    assert_eq!(
        std::fs::read_to_string(root.join(&acme).join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    assert_eq!(
        files_holding(&root, SECRET),
        [root.join(&acme).join("secret.txt")]
    );
    assert!(!root.join("secret.txt").exists());
    assert_private(&root.join(&acme));

    // Tenant B writes in its own folder and finds nothing of A's by any path.
    let looked = run_once(&hub, &globex_token, &format!("{globex}-look"));
    for result in &looked {
        let shown = result.to_string();
        assert!(!shown.contains(SECRET), "globex saw acme's file: {shown}");
    }
    // What each call answered: the tool, and its output (or, refused, the error's kind).
    let answered: Vec<(String, Value)> = looked
        .iter()
        .map(|result| {
            let name = result["toolName"].as_str().unwrap_or("").to_owned();
            if result["isError"] == true {
                (
                    name,
                    json!({"refused": result["details"]["details"]["kind"]}),
                )
            } else {
                (name, json_of(&text_of(result)))
            }
        })
        .collect();
    let only_mine = json!({"entries": [{"path": "mine.txt", "kind": "file"}], "truncated": false});
    let refused = |kind: &str| json!({"refused": kind});
    let expected: Vec<(String, Value)> = [
        (
            "files__apply_patch",
            json!({"changes": [{"path": "mine.txt", "kind": "added"}]}),
        ),
        ("files__list", only_mine.clone()),
        ("files__list", only_mine.clone()),
        ("files__read", refused("not_found")),
        ("files__read", refused("outside_root")),
        ("files__read", refused("outside_root")),
        ("files__read", refused("outside_root")),
        ("files__list", refused("outside_root")),
        ("files__glob", only_mine),
        ("files__grep", json!({"matches": [], "truncated": false})),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    assert_eq!(answered, expected, "{looked:#?}");
    assert_eq!(
        std::fs::read_to_string(root.join(&globex).join("mine.txt")).unwrap(),
        "globex's own\n"
    );
    assert_private(&root.join(&globex));

    // The operator's default tenant has its own folder, where its run writes.
    assert_private(&root.join(&operator));
    let written = run_once(&hub, TOKEN, &format!("{operator}-write"));
    assert_eq!(written[0]["isError"], false, "{}", written[0]);
    assert_eq!(
        std::fs::read_to_string(root.join(&operator).join("operator.txt")).unwrap(),
        "the operator's\n"
    );
    let mut folders: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    folders.sort();
    let mut expected = vec![acme.clone(), globex.clone(), operator.clone()];
    expected.sort();
    assert_eq!(
        folders, expected,
        "the root holds only the tenants' folders"
    );
    assert_eq!(
        files_holding(&root, SECRET),
        [root.join(&acme).join("secret.txt")]
    );
}

/// Each tenant's commands run in its own folder, in the sandbox: one tenant's command
/// writes a file there, and another tenant's command finds nothing of it by any path
/// (the root shows that tenant's folder alone).
#[test]
fn each_tenants_commands_see_only_its_own_folder() {
    let Some(database) = test_database() else {
        return;
    };
    if !sandbox_here() {
        return;
    }
    // Not under /tmp, which the sandbox replaces with a private one.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("root");
    std::fs::create_dir(&root).unwrap();
    let run = std::process::id();
    let (operator, acme, globex) = (
        format!("opc-{run}"),
        format!("acmec-{run}"),
        format!("globexc-{run}"),
    );
    let look = format!(
        "cat {root}/{acme}/secret.txt; ls -A {root}; cat ../{acme}/secret.txt; \
         grep -r launch-code {root}; echo end",
        root = root.display()
    );
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [call("commands__exec", json!({"command": format!("echo {SECRET} > secret.txt")}))]},
            {"steps": [{"text": "written"}]},
            {"steps": [call("commands__exec", json!({"command": look}))]},
            {"steps": [{"text": "looked"}]},
        ]}),
    );
    let hub = start_hub(dir.path(), &root, &database, &operator, &model);
    let acme_token = create_tenant(&hub, &acme);
    let globex_token = create_tenant(&hub, &globex);

    let written = run_once(&hub, &acme_token, &format!("{acme}-exec-write"));
    assert_eq!(written[0]["isError"], false, "{}", written[0]);
    assert_eq!(
        std::fs::read_to_string(root.join(&acme).join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );

    let looked = run_once(&hub, &globex_token, &format!("{globex}-exec-look"));
    let shown = text_of(&looked[0]);
    assert!(
        !shown.contains(SECRET),
        "globex's command saw acme's file: {shown}"
    );
    let output = json_of(&shown);
    let stdout = output["stdout"]["head"].as_str().unwrap();
    assert_eq!(stdout, format!("{globex}\nend\n"), "{output}");
}

/// Whether the sandbox can be had here: `false` after the skip line (a failure under
/// SHIITAKE_REQUIRE_SERVICES).
fn sandbox_here() -> bool {
    let found = knapsack::exec::Sandbox::detect(knapsack::exec::SandboxPolicy::default())
        .map_err(|error| shiitake_test_services::Missing::new(error.to_string()));
    shiitake_test_services::Service::Sandbox
        .check(found)
        .is_some()
}

/// Two processes of one Hub; a tenant's command runs on the process that owns its
/// Session, which is killed with SIGKILL mid-command: the command's processes die with
/// it, the other process takes the Session over, and the call settles "outcome
/// unknown", never run again.
#[test]
fn a_command_of_a_killed_hub_process_dies_with_it_and_the_new_owner_never_runs_it_again() {
    let Some(database) = test_database() else {
        return;
    };
    if !sandbox_here() {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("root");
    std::fs::create_dir(&root).unwrap();
    let run = std::process::id();
    let (operator, tenant) = (format!("opk-{run}"), format!("killc-{run}"));
    let marker = format!("{}.{run}", 300 + run % 100);
    let line = format!(
        "echo ran >> runs.txt; (setsid sleep {marker} &); sleep {marker}; echo never >> runs.txt"
    );
    let model = script(
        dir.path(),
        &json!({"model": "scripted", "turns": [
            {"steps": [call("commands__exec", json!({"command": line}))]},
            {"steps": [{"text": "I cannot tell whether it finished."}]},
        ]}),
    );
    // Each process keeps its place in its script in its own data directory: the
    // survivor's model plays on from where the Session is.
    let after = dir.path().join("after");
    std::fs::create_dir(&after).unwrap();
    let survivor_model = script(
        &after,
        &json!({"model": "scripted", "turns": [
            {"steps": [{"text": "I cannot tell whether it finished."}]},
        ]}),
    );
    let mut first = start_named(dir.path(), "a", &root, &database, &operator, &model);
    let second = start_named(
        dir.path(),
        "b",
        &root,
        &database,
        &operator,
        &survivor_model,
    );
    let token = create_tenant(&first, &tenant);
    let session = session_with_prompt(&first, &token, &format!("{tenant}-k"), "run it");
    let runs = root.join(&tenant).join("runs.txt");
    let sleeping = || {
        processes_with(&marker)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| cmdline.starts_with(b"sleep\0"))
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeping() < 2 || !runs.exists() {
        assert!(
            Instant::now() < deadline,
            "the command never started:\n{}",
            std::fs::read_to_string(&first.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_with(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind by the killed process: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The survivor takes the Session over and settles the call it cannot know.
    let deadline = Instant::now() + Duration::from_secs(60);
    let snapshot = loop {
        let (status, body) = second.request_as(
            Some(&token),
            "GET",
            &format!("/v1/sessions/{session}/snapshot"),
            "",
        );
        assert_eq!(status, 200, "{body}");
        let snapshot = json_of(&body);
        if snapshot["terminals"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
        {
            break snapshot;
        }
        assert!(
            Instant::now() < deadline,
            "the survivor never settled the run: {body}\n{}",
            std::fs::read_to_string(&second.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        snapshot["terminals"][0]["outcome"], "completed",
        "{snapshot}"
    );
    let values: Vec<&Value> = snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| &message["value"])
        .collect();
    let result = values
        .iter()
        .find(|value| value["role"] == "toolResult")
        .unwrap_or_else(|| panic!("no tool result in {snapshot}"));
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(result).contains("outcome unknown"), "{result}");
    assert!(
        values.iter().any(|value| value["role"] == "assistant"
            && value
                .to_string()
                .contains("I cannot tell whether it finished.")),
        "{snapshot}"
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "ran\n",
        "run once, never again, and never to its end"
    );
    assert!(processes_with(&marker).is_empty());
}
