//! Computers: capture, limits, unusable advertisements, the list source with its
//! concurrency, timeouts, `on_unavailable`, invalidation and cancellation, and
//! invocation context passing through to the provider.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use knapsack::limits::COMPUTER_OPERATION_LIMIT;
use knapsack::{
    AdvertisedOperation, Computer, ComputerConnection, ComputerError, ComputersOptions, Files,
    Knapsack, LocalFiles, Unavailable,
};
use serde_json::{Value, json};
use shiitake_capabilities::{
    CapabilitySource, Catalog, ExecutionId, InvocationContext, ModulePath, OperationPath, Replay,
    SourceId, ToolError,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Ready,
    Slow(Duration),
    Hang,
    Reject,
}

struct TestComputer {
    behaviour: Behaviour,
    operations: Vec<AdvertisedOperation>,
    files: Option<Arc<dyn Files>>,
    active: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

fn op(name: &str) -> AdvertisedOperation {
    AdvertisedOperation {
        name: name.into(),
        description: format!("does {name}"),
        input_schema: json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
    }
}

fn computer(behaviour: Behaviour, operations: Vec<AdvertisedOperation>) -> TestComputer {
    TestComputer {
        behaviour,
        operations,
        files: None,
        active: Arc::new(AtomicUsize::new(0)),
        peak: Arc::new(AtomicUsize::new(0)),
    }
}

#[async_trait]
impl Computer for TestComputer {
    async fn describe(
        &self,
        _cancel: &CancellationToken,
    ) -> Result<Vec<AdvertisedOperation>, String> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let result = match self.behaviour {
            Behaviour::Ready => Ok(self.operations.clone()),
            Behaviour::Slow(delay) => {
                tokio::time::sleep(delay).await;
                Ok(self.operations.clone())
            }
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Reject => Err("no entry".to_owned()),
        };
        self.active.fetch_sub(1, Ordering::SeqCst);
        result
    }

    async fn call(
        &self,
        operation: &str,
        input: Value,
        ctx: &InvocationContext,
    ) -> Result<Value, ToolError> {
        if operation == "wait-for-cancel" {
            ctx.cancellation().cancelled().await;
            return Ok(json!("saw cancel"));
        }
        Ok(json!({
            "operation": operation,
            "input": input,
            "executionId": ctx.execution_id().as_str(),
            "hasDeadline": ctx.deadline().is_some(),
        }))
    }

    fn files(&self) -> Option<Arc<dyn Files>> {
        self.files.clone()
    }
}

fn connection(id: &str, name: &str, computer: TestComputer) -> ComputerConnection {
    ComputerConnection {
        id: id.into(),
        name: name.into(),
        computer: Arc::new(computer),
    }
}

#[tokio::test]
async fn a_computer_is_captured_with_its_files_under_one_authority() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let mut lab = computer(Behaviour::Ready, vec![op("create-note")]);
    lab.files = Some(Arc::new(LocalFiles::new(dir.path()).unwrap()));
    let source = Knapsack::computer(connection("auth-1", "lab", lab), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(source.id(), &SourceId::new("auth-1"));
    let catalog = Catalog::new();
    catalog.add_source(Arc::new(source)).await.unwrap();
    let paths: Vec<ModulePath> = catalog.list().into_iter().map(|m| m.path).collect();
    assert_eq!(
        paths,
        vec![
            ModulePath::new("env.computers.lab").unwrap(),
            ModulePath::new("env.computers.lab.files").unwrap()
        ]
    );
    let create = OperationPath::parse("env.computers.lab.create_note").unwrap();
    let described = catalog.describe(&create).unwrap();
    assert_eq!(
        (described.replay, described.foreign_name.as_deref()),
        (Replay::Unsafe, Some("create-note"))
    );
    let ctx = InvocationContext::new(ExecutionId::new("exec-7"), CancellationToken::new())
        .with_timeout(Duration::from_secs(30));
    let output = catalog
        .execute(&create, json!({ "text": "hi" }), &ctx)
        .await
        .unwrap();
    assert_eq!(
        output,
        json!({ "operation": "create-note", "input": { "text": "hi" }, "executionId": "exec-7", "hasDeadline": true })
    );
    let read = OperationPath::parse("env.computers.lab.files.read").unwrap();
    let output = catalog
        .execute(&read, json!({ "path": "a.txt" }), &ctx)
        .await
        .unwrap();
    assert_eq!(output["content"], json!("hello\n"));
}

#[tokio::test]
async fn cancellation_reaches_the_provider() {
    let lab = computer(Behaviour::Ready, vec![op("wait-for-cancel")]);
    let modules = knapsack::capture(
        &connection("a", "lab", lab),
        Duration::from_secs(1),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let token = CancellationToken::new();
    let ctx = InvocationContext::new(ExecutionId::new("e"), token.clone());
    let handler = modules[0].operations()[0].handler().clone();
    let call = tokio::spawn(async move { handler.call(json!({}), &ctx).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    token.cancel();
    assert_eq!(call.await.unwrap().unwrap(), json!("saw cancel"));
}

#[tokio::test]
async fn operation_limits_and_unusable_advertisements() {
    let cancel = CancellationToken::new();
    let timeout = Duration::from_secs(1);
    let many = |n: usize| (0..n).map(|i| op(&format!("op{i}"))).collect::<Vec<_>>();
    let exact = connection(
        "a",
        "lab",
        computer(Behaviour::Ready, many(COMPUTER_OPERATION_LIMIT)),
    );
    let modules = knapsack::capture(&exact, timeout, &cancel).await.unwrap();
    assert_eq!(modules[0].operations().len(), 256);

    let over = connection("a", "lab", computer(Behaviour::Ready, many(257)));
    assert_eq!(
        knapsack::capture(&over, timeout, &cancel)
            .await
            .unwrap_err(),
        ComputerError::TooManyOperations {
            name: "lab".into(),
            count: 257,
            limit: 256
        }
    );

    let mut bad = op("bad");
    bad.input_schema = json!({ "type": "string" });
    let bad = connection("a", "lab", computer(Behaviour::Ready, vec![bad]));
    assert_eq!(
        knapsack::capture(&bad, timeout, &cancel).await.unwrap_err(),
        ComputerError::Unusable {
            name: "lab".into(),
            operation: "bad".into(),
            reason: "the input schema does not describe an object".into()
        }
    );
    let colliding = connection(
        "a",
        "lab",
        computer(Behaviour::Ready, vec![op("create-note"), op("create_note")]),
    );
    assert!(matches!(
        knapsack::capture(&colliding, timeout, &cancel).await,
        Err(ComputerError::Unusable { .. })
    ));
    let badly_named = connection("a", "Lab!", computer(Behaviour::Ready, vec![]));
    assert!(matches!(
        knapsack::capture(&badly_named, timeout, &cancel).await,
        Err(ComputerError::InvalidName { .. })
    ));
}

fn recorder() -> (Arc<Mutex<Vec<Unavailable>>>, ComputersOptions) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let options = ComputersOptions {
        on_unavailable: Arc::new(move |u| sink.lock().unwrap().push(u)),
        ..ComputersOptions::default()
    };
    (seen, options)
}

#[tokio::test(start_paused = true)]
async fn the_list_drops_failing_computers_and_describes_eight_at_a_time() {
    let active = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let files_root = tempfile::tempdir().unwrap();
    let mut list = Vec::new();
    for i in 0..12 {
        let behaviour = match i {
            3 => Behaviour::Reject,
            5 => Behaviour::Hang,
            _ => Behaviour::Slow(Duration::from_millis(100)),
        };
        let mut c = computer(behaviour, vec![op("ping")]);
        // Computers 0 and 3 have Files; 3 fails, and its Files go with it.
        if i == 0 || i == 3 {
            c.files = Some(Arc::new(LocalFiles::new(files_root.path()).unwrap()));
        }
        if i == 7 {
            c.operations[0].input_schema = json!(true);
        }
        c.active = active.clone();
        c.peak = peak.clone();
        list.push(connection(&format!("id{i}"), &format!("c{i}"), c));
    }
    let (_tx, rx) = watch::channel(list);
    let (seen, options) = recorder();
    let source = Knapsack::computers(SourceId::new("computers"), rx, options);
    let started = tokio::time::Instant::now();
    let modules = source.modules().await.unwrap();
    let names: Vec<String> = modules.iter().map(|m| m.path().to_string()).collect();
    let mut expected: Vec<String> = [0, 1, 2, 4, 6, 8, 9, 10, 11]
        .iter()
        .map(|i| format!("env.computers.c{i}"))
        .collect();
    expected.insert(1, "env.computers.c0.files".to_owned());
    assert_eq!(names, expected);
    // The commands and the files of a Computer share its authority id.
    for path in ["env.computers.c0", "env.computers.c0.files"] {
        let path = ModulePath::new(path).unwrap();
        assert_eq!(source.authority(&path).as_deref(), Some("id0"));
    }
    let failed = ModulePath::new("env.computers.c3.files").unwrap();
    assert_eq!(source.authority(&failed), None);
    assert_eq!(peak.load(Ordering::SeqCst), 8);
    // The hanging Computer costs the default 10 s timeout, not forever.
    assert_eq!(started.elapsed().as_secs(), 10);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            Unavailable {
                id: "id3".into(),
                name: "c3".into(),
                error: ComputerError::Rejected {
                    name: "c3".into(),
                    message: "no entry".into()
                }
            },
            Unavailable {
                id: "id5".into(),
                name: "c5".into(),
                error: ComputerError::TimedOut {
                    name: "c5".into(),
                    after: Duration::from_secs(10)
                }
            },
            Unavailable {
                id: "id7".into(),
                name: "c7".into(),
                error: ComputerError::Unusable {
                    name: "c7".into(),
                    operation: "ping".into(),
                    reason: "the input schema is not a JSON object".into()
                }
            },
        ]
    );
}

#[tokio::test]
async fn a_list_change_invalidates_the_captured_modules() {
    let (tx, rx) = watch::channel(vec![connection(
        "a",
        "first",
        computer(Behaviour::Ready, vec![op("ping")]),
    )]);
    let (_seen, options) = recorder();
    let source = Arc::new(Knapsack::computers(SourceId::new("computers"), rx, options));
    let catalog = Catalog::new();
    catalog.add_source(source.clone()).await.unwrap();
    tx.send_modify(|list| {
        list.push(connection(
            "b",
            "second",
            computer(Behaviour::Ready, vec![op("ping")]),
        ));
    });
    tokio::time::timeout(Duration::from_secs(5), catalog.changed())
        .await
        .unwrap();
    let diff = catalog.refresh().await;
    assert_eq!(
        diff.added,
        vec![ModulePath::new("env.computers.second").unwrap()]
    );
    tx.send_replace(Vec::new());
    tokio::time::timeout(Duration::from_secs(5), catalog.changed())
        .await
        .unwrap();
    let diff = catalog.refresh().await;
    assert_eq!(
        diff.removed,
        vec![
            ModulePath::new("env.computers.first").unwrap(),
            ModulePath::new("env.computers.second").unwrap()
        ]
    );
    source.close().await;
}

#[tokio::test]
async fn cancelling_acquisition_rejects_it() {
    let (_tx, rx) = watch::channel(vec![
        connection("a", "quick", computer(Behaviour::Ready, vec![op("ping")])),
        connection("b", "stuck", computer(Behaviour::Hang, vec![op("ping")])),
    ]);
    let (seen, options) = recorder();
    let source = Knapsack::computers(SourceId::new("computers"), rx, options);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        trigger.cancel();
    });
    assert_eq!(
        source.acquire(&cancel).await.unwrap_err(),
        ComputerError::Cancelled
    );
    assert_eq!(seen.lock().unwrap().len(), 0);
}
