//! `FilesConnection` projects a port as the `files` module; every tool runs through
//! `Catalog::execute` with the schemas generated from the request types.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use knapsack::{
    EntriesOutput, Files, FilesConnection, FilesError, GlobInput, GrepInput, GrepOutput, ListInput,
    LocalFiles, ReadInput, ReadOutput, ReplaceRequest, input_schema,
};
use serde_json::{Value, json};
use shiitake_capabilities::{
    Catalog, ExecutionId, ForModelError, ForModelKind, InvocationContext, OperationPath, Replay,
    SourceId, ToolError,
};
use tokio_util::sync::CancellationToken;

fn ctx() -> InvocationContext {
    InvocationContext::new(ExecutionId::new("call-1"), CancellationToken::new())
}

async fn catalog_for(port: Arc<dyn Files>) -> Catalog {
    let connection = FilesConnection::new(port).unwrap();
    let catalog = Catalog::new();
    catalog
        .add_source(Arc::new(connection.source(SourceId::new("files")).unwrap()))
        .await
        .unwrap();
    catalog
}

fn path(text: &str) -> OperationPath {
    OperationPath::parse(text).unwrap()
}

fn local() -> (tempfile::TempDir, Arc<dyn Files>) {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    std::fs::write(root.path().join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    std::fs::write(root.path().join("notes.md"), "one\ntwo\n").unwrap();
    let port: Arc<dyn Files> = Arc::new(LocalFiles::new(root.path()).unwrap());
    (root, port)
}

#[tokio::test]
async fn the_module_advertises_every_tool_with_its_schema_and_replay() {
    let (_d, port) = local();
    let catalog = catalog_for(port).await;
    let modules = catalog.list();
    assert_eq!(modules.len(), 1);
    let names: Vec<(String, Replay)> = modules[0]
        .operations
        .iter()
        .map(|op| (op.path.to_string(), op.replay))
        .collect();
    assert_eq!(
        names,
        vec![
            ("files.read".to_owned(), Replay::Safe),
            ("files.list".to_owned(), Replay::Safe),
            ("files.glob".to_owned(), Replay::Safe),
            ("files.grep".to_owned(), Replay::Safe),
            ("files.edit".to_owned(), Replay::Unsafe),
            ("files.apply_patch".to_owned(), Replay::Unsafe),
        ]
    );
    for op in &modules[0].operations {
        assert_eq!(op.opaque_input, None, "{} schema left the subset", op.path);
    }
    let read = catalog.describe(&path("files.read")).unwrap();
    assert_eq!(read.input_schema, input_schema::<ReadInput>());
}

#[tokio::test]
async fn every_tool_runs_through_the_execute_door() {
    let (dir, port) = local();
    let catalog = catalog_for(port).await;
    let run = |op: &'static str, input: Value| {
        let catalog = &catalog;
        async move { catalog.execute(&path(op), input, &ctx()).await }
    };
    assert_eq!(
        run("files.read", json!({ "path": "notes.md", "limit": 1 }))
            .await
            .unwrap(),
        json!({ "path": "notes.md", "content": "one\n", "offset": 0, "lines": 1, "nextOffset": 1, "truncated": false })
    );
    assert_eq!(
        run("files.list", json!({})).await.unwrap(),
        json!({ "entries": [
            { "path": "notes.md", "kind": "file" },
            { "path": "src", "kind": "dir" }
        ], "truncated": false })
    );
    assert_eq!(
        run("files.glob", json!({ "pattern": "**/*.rs" }))
            .await
            .unwrap(),
        json!({ "entries": [{ "path": "src/lib.rs", "kind": "file" }], "truncated": false })
    );
    assert_eq!(
        run("files.grep", json!({ "pattern": "fn b" }))
            .await
            .unwrap(),
        json!({ "matches": [{ "path": "src/lib.rs", "line": 2, "text": "fn b() {}" }], "truncated": false })
    );
    assert_eq!(
        run(
            "files.edit",
            json!({ "path": "notes.md", "oldText": "two", "newText": "2" })
        )
        .await
        .unwrap(),
        json!({ "path": "notes.md", "replacements": 1 })
    );
    let patch = "*** Begin Patch\n*** Update File: notes.md\n@@\n-one\n+1\n*** End Patch\n";
    assert_eq!(
        run("files.apply_patch", json!({ "patch": patch }))
            .await
            .unwrap(),
        json!({ "changes": [{ "path": "notes.md", "kind": "updated" }] })
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.md")).unwrap(),
        "1\n2\n"
    );
}

#[tokio::test]
async fn failures_reach_the_model_with_details() {
    let (_d, port) = local();
    let catalog = catalog_for(port).await;
    let edit = json!({ "path": "src/lib.rs", "oldText": "fn", "newText": "pub fn" });
    match catalog.execute(&path("files.edit"), edit, &ctx()).await {
        Err(ToolError::ForModel(error)) => assert_eq!(
            error,
            ForModelError::new(
                ForModelKind::Failed,
                "`src/lib.rs` contains the text to replace 2 times; add context or set replaceAll"
            )
            .with_details(json!({ "kind": "ambiguous_match", "path": "src/lib.rs", "count": 2 }))
        ),
        other => panic!("unexpected {other:?}"),
    }
    match catalog
        .execute(&path("files.read"), json!({ "path": "../x" }), &ctx())
        .await
    {
        Err(ToolError::ForModel(error)) => {
            assert_eq!(error.details, Some(json!({ "kind": "outside_root" })));
        }
        other => panic!("unexpected {other:?}"),
    }
    // The schema refuses unknown fields and missing paths before the port is called.
    for bad in [json!({ "path": "a", "bogus": 1 }), json!({ "offset": 1 })] {
        match catalog.execute(&path("files.read"), bad, &ctx()).await {
            Err(ToolError::ForModel(error)) => assert_eq!(error.kind, ForModelKind::InvalidInput),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A port without a patch engine: only the five text tools.
struct NoPatch(LocalFiles);

#[async_trait]
impl Files for NoPatch {
    async fn read(&self, input: ReadInput) -> Result<ReadOutput, FilesError> {
        self.0.read(input).await
    }
    async fn list(&self, input: ListInput) -> Result<EntriesOutput, FilesError> {
        self.0.list(input).await
    }
    async fn glob(&self, input: GlobInput) -> Result<EntriesOutput, FilesError> {
        self.0.glob(input).await
    }
    async fn grep(&self, input: GrepInput) -> Result<GrepOutput, FilesError> {
        self.0.grep(input).await
    }
    async fn replace(&self, request: ReplaceRequest) -> Result<(), FilesError> {
        self.0.replace(request).await
    }
}

#[tokio::test]
async fn apply_patch_only_with_a_patch_engine() {
    let dir = tempfile::tempdir().unwrap();
    let port = Arc::new(NoPatch(LocalFiles::new(dir.path()).unwrap()));
    let connection = FilesConnection::new(port).unwrap();
    let names: Vec<&str> = connection
        .operations()
        .iter()
        .map(|op| op.name().as_str())
        .collect();
    assert_eq!(names, vec!["read", "list", "glob", "grep", "edit"]);
}

/// A port that counts calls, to show Knapsack refuses bad paths before the port sees them.
struct Counting(std::sync::atomic::AtomicUsize);

impl Counting {
    fn called(&self) -> Result<(), FilesError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Err(FilesError::NotFound { path: "x".into() })
    }
}

#[async_trait]
impl Files for Counting {
    async fn read(&self, _input: ReadInput) -> Result<ReadOutput, FilesError> {
        self.called().map(|()| unreachable!())
    }
    async fn list(&self, _input: ListInput) -> Result<EntriesOutput, FilesError> {
        self.called().map(|()| unreachable!())
    }
    async fn glob(&self, _input: GlobInput) -> Result<EntriesOutput, FilesError> {
        self.called().map(|()| unreachable!())
    }
    async fn grep(&self, _input: GrepInput) -> Result<GrepOutput, FilesError> {
        self.called().map(|()| unreachable!())
    }
    async fn replace(&self, _request: ReplaceRequest) -> Result<(), FilesError> {
        self.called()
    }
}

#[tokio::test]
async fn knapsack_validates_paths_before_the_port() {
    let port = Arc::new(Counting(std::sync::atomic::AtomicUsize::new(0)));
    let catalog = catalog_for(port.clone()).await;
    let calls = [
        ("files.read", json!({ "path": "a\0b" })),
        ("files.list", json!({ "path": "" })),
        ("files.glob", json!({ "pattern": "*", "path": "a\0" })),
        ("files.grep", json!({ "pattern": "x", "path": "a\0" })),
        (
            "files.edit",
            json!({ "path": "\0", "oldText": "a", "newText": "b" }),
        ),
    ];
    for (op, input) in calls {
        match catalog.execute(&path(op), input, &ctx()).await {
            Err(ToolError::ForModel(error)) => {
                assert_eq!(
                    error.details,
                    Some(json!({ "kind": "invalid_path" })),
                    "{op}"
                );
            }
            other => panic!("{op}: unexpected {other:?}"),
        }
    }
    assert_eq!(port.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A valid path reaches the port.
    let reached = catalog
        .execute(&path("files.read"), json!({ "path": "ok" }), &ctx())
        .await;
    assert!(reached.is_err());
    assert_eq!(port.0.load(std::sync::atomic::Ordering::SeqCst), 1);
}
